import Synchronization

/// One segment file written from pieces formatted on several threads (``SegmentWriter``): a
/// piece is written once every piece before it is, so the file's bytes and SHA-256 are those
/// one writer would make, whatever the thread count.
final class SegmentFileOutput: Sendable {
    /// Where the file goes, as its opener needs it.
    struct Place: Sendable {
        let path: String
        let sync: DiskSync?
    }
    /// The open file: a CSV's, or libxml2's writer of an XML whose root element is open.
    enum Sink {
        case csv(OutputFile)
        case xml(XMLWriter)
    }
    private struct State {
        var sink: Sink?
        /// The piece to write next.
        var next = 0
        /// Pieces formatted before their turn.
        var waiting: [Int: [UInt8]] = [:]
        /// A write failed: the run fails with its error, and later pieces are dropped.
        var failed = false
    }

    let place: Place
    /// Pieces the file is written in: at least one, so an empty list still gets its file.
    let pieces: Int
    private let state = Mutex(State())

    init(path: String, pieces: Int, sync: DiskSync?) {
        place = Place(path: path, sync: sync)
        self.pieces = pieces
    }

    /// Hands over piece `piece`'s bytes. Once the pieces before it are written, writes it and
    /// every waiting piece after it, the file opened by `open` (which writes its head) before
    /// piece 0; after the last, ends the file (an XML's root element closed) and returns its
    /// size and SHA-256. Nil until then.
    func put(_ piece: Int, _ bytes: consuming [UInt8], open: (Place) throws -> sending Sink) throws -> (Int, String)? {
        try state.withLock { s in
            if s.failed { return nil }
            guard piece == s.next else {
                s.waiting[piece] = bytes
                return nil
            }
            do {
                var current: [UInt8]? = bytes
                while let b = current {
                    if s.sink == nil { s.sink = try open(place) }
                    guard let sink = s.sink else { return nil }
                    switch sink {
                    case .csv(let file): try file.write(b)
                    case .xml(let x): try x.raw(b)
                    }
                    s.next += 1
                    current = s.waiting.removeValue(forKey: s.next)
                }
                guard s.next == pieces, let sink = s.sink else { return nil }
                switch sink {
                case .csv(let file): return try file.finish()
                case .xml(let x):
                    try x.end()
                    return try x.finish()
                }
            } catch {
                s.failed = true
                s.waiting = [:]
                throw error
            }
        }
    }

    /// Whether a write of this file failed: its pieces left need no formatting.
    var failed: Bool { state.withLock { $0.failed } }
}
