import Foundation

// libFuzzer entry point: one input = one `.gz` file, read line by line and decoded.
// It must read or fail with a bad-data WinBackError; anything else stops the fuzzer.
nonisolated(unsafe) private let path = NSTemporaryDirectory() + "/winback-fuzz-\(getpid()).jsonl.gz"
nonisolated(unsafe) private let decoder = TransactionDecoder(table: StringTable())

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGzip(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    precondition(fd >= 0)
    if let data, size > 0 { precondition(write(fd, data, size) == size) }
    close(fd)
    do {
        let reader = LineReader(source: try openSource(path: path), chunkSize: 1024)
        try reader.forEachLine { line, _ in
            if !LineReader.isBlank(line) { _ = decoder.decode(line) }
        }
    } catch let e as WinBackError {
        precondition(e.code == .badData, "\(e)")
    } catch {
        preconditionFailure("\(error)")
    }
    return 0
}
