/// Apple's signed data, `format: appstore-signed` (docs/rules.md §2.6): each non-blank line one
/// of the forms ``SignedLine`` reads. Transactions become rows, renewal info is kept beside
/// them, and a line that fails is rejected once, with the reason of its first failure.
package struct SignedFormat: RowFormat {
    let settings: SignedReading
    /// False for renewal-info files: their transactions are not rows of the run.
    var keepTransactions = true

    package func read(
        input: Input, inflater: Inflater, into out: FileRows, progress: @escaping @Sendable (Int) -> Void
    ) throws {
        let path = input.path
        let source = try openSource(input: input, inflater: inflater)
        let line = SignedLine(settings: settings, into: out)
        line.keepTransactions = keepTransactions
        try LineCursor(source: source, maxLineBytes: out.limits.maxLineBytes).forEachLine(
            { bytes, number in
                if Whitespace.isBlank(bytes) { return }
                out.stats.rows += 1
                if let reason = try line.read(bytes) {
                    out.rejects.add(
                        line.failureExcerpt.map { e in
                            Reject(file: path, line: number, reason: reason, bytes: e)
                        } ?? Reject(file: path, line: number, reason: reason, bytes: bytes))
                }
            }, tooLong: out.tooLong, afterChunk: progressTap(source, progress))
        out.finish(source)
    }
}
