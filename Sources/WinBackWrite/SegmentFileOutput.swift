import Dispatch
import Synchronization

/// One segment file written from pieces formatted on several threads (``SegmentWriter``): a
/// piece is written once every piece before it is, so the file's bytes and SHA-256 are those
/// one writer would make, whatever the thread count.
///
/// One thread at a time writes: the one that hands over the next piece when nobody is writing
/// writes it and every piece waiting after it. The others hand theirs over and go on formatting,
/// rather than wait for the writes; only a piece more than ``ahead`` past the next one to write
/// waits for room, so the bytes a file holds waiting stay bounded.
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
        /// The piece to write next.
        var next = 0
        /// Pieces formatted before their turn.
        var waiting: [Int: [UInt8]] = [:]
        /// Whether a thread is writing the pieces in order.
        var writing = false
        /// Threads waiting for room, each by a semaphore of its own, signalled once: with one
        /// semaphore for all, a thread about to wait could take a signal meant for another,
        /// which then slept uncounted, and could sleep for ever.
        var sleepers: [DispatchSemaphore] = []
        /// A write failed: the run fails with its error, and later pieces are dropped.
        var failed = false
    }

    let place: Place
    /// Pieces the file is written in: at least one, so an empty list still gets its file.
    let pieces: Int
    /// How far past the next piece to write a piece may be handed over without waiting.
    let ahead: Int
    private let state = Mutex(State())
    /// The open file, used only by the thread writing (``State/writing``).
    private let sink = Mutex<Sink?>(nil)

    init(path: String, pieces: Int, sync: DiskSync?, ahead: Int = 8, buffers: PieceBuffers? = nil) {
        place = Place(path: path, sync: sync)
        self.pieces = pieces
        self.ahead = Swift.max(1, ahead)
        self.buffers = buffers
    }

    /// Buffers of pieces written, handed back to be formatted into again (nil: none kept).
    let buffers: PieceBuffers?

    /// What the writing thread does next.
    private enum Step {
        /// Piece ``State/next`` is waiting (taken out of the state).
        case write
        /// No piece is waiting its turn: writing stops until the next one comes.
        case idle
        /// Every piece is written: the file is ended.
        case finished
    }

    /// Hands over piece `piece`'s bytes. Once the pieces before it are written, writes it and
    /// every waiting piece after it, the file opened by `open` (which writes its head) before
    /// piece 0; after the last, ends the file (an XML's root element closed) and returns its
    /// size and SHA-256. Nil until then, and for a piece another thread writes.
    func put(_ piece: Int, _ bytes: consuming [UInt8], open: (Place) throws -> sending Sink) throws -> (Int, String)? {
        while true {
            let sleep = state.withLock { s -> DispatchSemaphore? in
                if s.failed || piece < s.next + ahead { return nil }
                let room = DispatchSemaphore(value: 0)
                s.sleepers.append(room)
                return room
            }
            guard let sleep else { break }
            sleep.wait()
        }
        // Moved into the state, so that the buffer's one reference is there (handed back
        // emptied once written, it is kept only if nothing else holds it).
        var handed: [UInt8]? = consume bytes
        let writes = state.withLock { s in
            if s.failed { return false }
            s.waiting[piece] = handed.take()
            guard !s.writing, s.waiting[s.next] != nil else { return false }
            s.writing = true
            return true
        }
        guard writes else { return nil }
        do {
            while true {
                var taken: [UInt8]?
                let step = state.withLock { s -> Step in
                    if let b = s.waiting.removeValue(forKey: s.next) {
                        taken = b
                        return .write
                    }
                    s.writing = false
                    return s.next == pieces ? .finished : .idle
                }
                switch step {
                case .idle:
                    return nil
                case .finished:
                    return try sink.withLock { sink in
                        switch sink {
                        case .csv(let file): return try file.finish()
                        case .xml(let x):
                            try x.end()
                            return try x.finish()
                        case nil: return nil
                        }
                    }
                case .write:
                    let b = taken.take()!
                    try sink.withLock { sink in
                        if sink == nil { sink = try open(place) }
                        switch sink {
                        case .csv(let file): try file.write(b)
                        case .xml(let x): try x.raw(b)
                        case nil: break
                        }
                    }
                    wake { $0.next += 1 }
                    buffers?.give(consume b)
                }
            }
        } catch {
            wake { s in
                s.failed = true
                s.waiting = [:]
                s.writing = false
            }
            throw error
        }
    }

    /// Changes the state, then wakes every thread waiting for room (to look again).
    private func wake(_ change: (inout State) -> Void) {
        let sleepers = state.withLock { s in
            change(&s)
            defer { s.sleepers = [] }
            return s.sleepers
        }
        for room in sleepers { room.signal() }
    }

    /// Whether a write of this file failed: its pieces left need no formatting.
    var failed: Bool { state.withLock { $0.failed } }
}

/// Byte buffers of segment pieces: one written goes back here, emptied, and the next piece is
/// formatted into it. A piece's buffer (2 MB) taken from the allocator anew each time was
/// often fresh pages from the system, each faulted in as the piece was written: at two threads
/// 13,000 faults a run on the 200k world, where one thread had few.
final class PieceBuffers: Sendable {
    private let free = Mutex<[[UInt8]]>([])
    /// The most buffers kept; one more handed back is let go.
    let most: Int

    init(most: Int) { self.most = most }

    /// A buffer with room for `capacity` bytes, empty: one handed back if any.
    func take(capacity: Int) -> [UInt8] {
        var b = free.withLock { $0.popLast() } ?? []
        b.reserveCapacity(capacity)
        return b
    }

    /// Keeps `b`'s memory for the next ``take(capacity:)``.
    func give(_ b: consuming [UInt8]) {
        b.removeAll(keepingCapacity: true)
        let kept = b
        free.withLock { if $0.count < most { $0.append(kept) } }
    }
}
