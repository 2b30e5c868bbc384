import Foundation

// libFuzzer entry point: one input = one `.gz` file, read line by line and decoded, once with
// every inflater the machine has. Each must read or fail with a bad-data WinBackError, and they
// must agree: the same lines, or all failing. Anything else stops the fuzzer.
nonisolated(unsafe) private let path = NSTemporaryDirectory() + "/winback-fuzz-\(getpid()).jsonl.gz"
nonisolated(unsafe) private let decoder = TransactionDecoder(table: StringTable())

/// The file's lines as one inflater reads them (each followed by LF), or nil when it fails.
private func lines(_ inflater: Inflater) -> [UInt8]? {
    do {
        var out: [UInt8] = []
        let reader = LineCursor(source: try openSource(path: path, inflater: inflater), chunkSize: 1024)
        try reader.forEachLine { line, _ in
            out.append(contentsOf: line)
            out.append(0x0A)
            if !Whitespace.isBlank(line) { _ = decoder.decode(line) }
        }
        return out
    } catch let e as WinBackError {
        precondition(e.code == .badData, "\(inflater): \(e)")
        return nil
    } catch {
        preconditionFailure("\(inflater): \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGzip(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    precondition(fd >= 0)
    if let data, size > 0 { precondition(write(fd, data, size) == size) }
    close(fd)
    let results = Inflater.available.map(lines)
    for (inflater, r) in zip(Inflater.available, results) where r != results[0] {
        preconditionFailure(
            "zlib and \(inflater) disagree: \(results[0].map { "\($0.count) bytes" } ?? "failed") vs "
                + "\(r.map { "\($0.count) bytes" } ?? "failed")")
    }
    return 0
}
