// libFuzzer entry point: one input = one NDJSON line through TransactionDecoder.
nonisolated(unsafe) private let decoder = TransactionDecoder(table: StringTable())

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLine(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let line = UnsafeRawBufferPointer(start: data, count: size)
    switch decoder.decode(line) {
    case .row(let t):
        precondition(t.expiresDate >= t.purchaseDate)
        precondition(t.transactionId.withBytes(in: decoder.table) { Identifier.isValid($0) })
    case .nonSubscription:
        break
    case .rejected(let why):
        precondition(!why.isEmpty)
    }
    return 0
}
