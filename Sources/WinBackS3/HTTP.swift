import Foundation
import WinBackSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP exchange, synchronously, over a pooled URLSession (FoundationNetworking: libcurl
/// underneath, which keeps connections to a host open between requests).
///
/// No exchange waits for ever and none is buffered past what was asked for (docs/rules.md
/// §6.2): the answer streams through a delegate that counts its bytes and cancels the exchange
/// once it is longer than its limit (or announces so), that notes when a byte last moved, and
/// that refuses every redirect, so credentials go to one host only. The waiting thread watches
/// the clock: see ``Limits``.
enum HTTP {
    struct Response: Sendable {
        var status: Int
        /// Header names lowercased.
        var headers: [String: String]
        var body: Data
    }

    /// A transport failure: no HTTP answer at all (refused, reset, timed out).
    struct TransportError: Error, CustomStringConvertible {
        var description: String
    }

    /// An answer longer than its limit: refused as it streamed, never held whole.
    struct Oversized: Error, CustomStringConvertible {
        var limit: Int
        /// The length the answer announced (Content-Length), when it did.
        var announced: Int?
        var description: String {
            announced.map { "the answer announced \($0) bytes, more than the \(limit) asked for" }
                ?? "the answer went on past the \(limit) bytes asked for"
        }
    }

    /// The run's network budget ran out while this exchange waited.
    struct OutOfTime: Error, CustomStringConvertible {
        var description: String { "the run's network time ran out" }
    }

    /// How long one exchange may take (docs/rules.md §6.2).
    struct Limits: Sendable {
        /// The longest time without a byte moving either way: to connect and have the first
        /// byte of the answer, and between any two bytes after it (a drip ends here).
        var idle: TimeInterval = 15
        /// The whole exchange, request and answer.
        var whole: TimeInterval = 60

        /// A floor of 60 s, and one more second for every 256 KiB the exchange moves: a link
        /// slower than 256 KiB/s is taken for a stalled one.
        static func forBytes(_ bytes: Int) -> Limits {
            Limits(whole: 60 + Double(max(0, bytes)) / Double(256 << 10))
        }
    }

    /// The most bytes of an answer that is not a success (an S3 error document is small).
    static let errorLimit = 1 << 20

    /// A session of the pool with its delegate and the serial queue its answers are handed
    /// over on, held here: an OperationQueue does not own its `underlyingQueue`.
    private final class Pooled: @unchecked Sendable {
        let session: URLSession
        let delegate: Delegate
        let queue: DispatchQueue

        init() {
            let c = URLSessionConfiguration.ephemeral
            // Backstops only: ``send`` watches the clock itself.
            c.timeoutIntervalForRequest = 3600
            c.timeoutIntervalForResource = 3600
            c.httpMaximumConnectionsPerHost = 1
            c.requestCachePolicy = .reloadIgnoringLocalCacheData
            c.urlCache = nil
            c.httpCookieStorage = nil
            // Answers are handed over on a serial queue of the session's own (a thread of its
            // own when needed), not on Dispatch's shared pool, which the pipeline's workers may
            // fill while they wait for these very answers.
            queue = DispatchQueue(label: "winback.s3.http")
            let delegates = OperationQueue()
            delegates.maxConcurrentOperationCount = 1
            delegates.underlyingQueue = queue
            delegate = Delegate()
            session = URLSession(configuration: c, delegate: delegate, delegateQueue: delegates)
        }
    }

    /// Sessions not in use. Each carries one request at a time and keeps its connection for the
    /// next: on Linux, a session with several transfers at once can stall them by whole seconds
    /// (its transfers share one libcurl multi handle and its timer), so requests made at the same
    /// time go through sessions of their own.
    nonisolated(unsafe) private static var idle: [Pooled] = []
    private static let lock = NSLock()

    private static func take() -> Pooled {
        lock.lock()
        defer { lock.unlock() }
        return idle.popLast() ?? Pooled()
    }

    private static func put(_ s: Pooled) {
        lock.lock()
        idle.append(s)
        lock.unlock()
    }

    /// What one exchange has received so far; shared by the delegate (on the session's queue)
    /// and the waiting thread, under its lock.
    final class Exchange: @unchecked Sendable {
        let limit: Int
        /// Whether the announced length is the body's (not so for HEAD: the object's).
        let bodyAnnounced: Bool
        private let lock = NSLock()
        private var status = 0
        private var headers: [String: String] = [:]
        private var body = Data()
        private var failure: Error?
        private var lastMoved = Date()
        let done = DispatchSemaphore(value: 0)

        init(limit: Int, bodyAnnounced: Bool) {
            self.limit = limit
            self.bodyAnnounced = bodyAnnounced
        }

        func moved() {
            lock.lock()
            lastMoved = Date()
            lock.unlock()
        }

        var sinceMoved: TimeInterval {
            lock.lock()
            defer { lock.unlock() }
            return Date().timeIntervalSince(lastMoved)
        }

        /// The answer's head: false (cancel) when it announces more than its limit.
        func head(_ http: HTTPURLResponse) -> Bool {
            var h: [String: String] = [:]
            for (k, v) in http.allHeaderFields {
                if let k = k as? String, let v = v as? String { h[k.lowercased()] = v }
            }
            let cap = (200..<300).contains(http.statusCode) ? limit : HTTP.errorLimit
            lock.lock()
            defer { lock.unlock() }
            lastMoved = Date()
            status = http.statusCode
            headers = h
            if bodyAnnounced, let n = h["content-length"].flatMap(Int.init), n > cap {
                failure = failure ?? Oversized(limit: cap, announced: n)
                return false
            }
            return true
        }

        /// More of the body: false (cancel) once it is longer than its limit.
        func append(_ data: Data) -> Bool {
            lock.lock()
            defer { lock.unlock() }
            lastMoved = Date()
            let cap = (200..<300).contains(status) || status == 0 ? limit : HTTP.errorLimit
            if body.count + data.count > cap {
                failure = failure ?? Oversized(limit: cap, announced: nil)
                body = Data()
                return false
            }
            body.append(data)
            return true
        }

        /// Why the exchange is being cancelled, when the waiting side cancels it: kept over
        /// the "cancelled" the task then reports.
        func fail(_ error: Error) {
            lock.lock()
            failure = failure ?? error
            lock.unlock()
        }

        func finish(_ error: Error?) {
            lock.lock()
            if let error, failure == nil { failure = TransportError(description: error.localizedDescription) }
            lock.unlock()
            done.signal()
        }

        func result() -> Result<Response, Error> {
            lock.lock()
            defer { lock.unlock() }
            if let failure { return .failure(failure) }
            if status == 0 { return .failure(TransportError(description: "no HTTP answer")) }
            return .success(Response(status: status, headers: headers, body: body))
        }
    }

    /// The delegate of one pooled session, which carries one exchange at a time; a late word
    /// about an earlier task (one cancelled) is ignored.
    private final class Delegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        private let lock = NSLock()
        private var current: (task: Int, exchange: Exchange)?

        func carry(_ x: Exchange?, task: Int) {
            lock.lock()
            current = x.map { (task, $0) }
            lock.unlock()
        }

        func exchange(_ task: URLSessionTask) -> Exchange? {
            lock.lock()
            defer { lock.unlock() }
            return current.flatMap { $0.task == task.taskIdentifier ? $0.exchange : nil }
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
        ) {
            guard let x = exchange(dataTask), let http = response as? HTTPURLResponse else {
                completionHandler(.cancel)
                return
            }
            // FoundationNetworking ignores the disposition: a refused answer is cancelled here.
            let allowed = x.head(http)
            completionHandler(allowed ? .allow : .cancel)
            if !allowed { dataTask.cancel() }
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            guard let x = exchange(dataTask) else { return }
            if !x.append(data) { dataTask.cancel() }
        }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
            totalBytesExpectedToSend: Int64
        ) {
            exchange(task)?.moved()
        }

        /// Never followed: the redirect's own answer is the exchange's answer, and the caller
        /// decides (docs/rules.md §6.2: credentials go to one host).
        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
        ) {
            completionHandler(nil)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
            exchange(task)?.finish(error)
        }
    }

    /// An exchange with a small answer (credentials), within `timeout` altogether.
    static func send(_ request: URLRequest, timeout: TimeInterval) throws -> Response {
        try send(request, limit: errorLimit, limits: Limits(idle: timeout, whole: timeout))
    }

    /// Sends `request` and waits for the whole answer, at most `limit` bytes of a success
    /// (``errorLimit`` of anything else), within `limits`, and never past `deadline`.
    ///
    /// Throws ``TransportError`` (no answer, or too slow), ``Oversized`` or ``OutOfTime``.
    static func send(
        _ request: URLRequest, limit: Int, limits: Limits = Limits(), deadline: () -> TimeInterval = { .infinity }
    ) throws -> Response {
        let pooled = take()
        let x = Exchange(limit: limit, bodyAnnounced: request.httpMethod != "HEAD")
        let task = pooled.session.dataTask(with: request)
        pooled.delegate.carry(x, task: task.taskIdentifier)
        let started = Date()
        task.resume()
        var stopped = false
        while x.done.wait(timeout: .now() + 0.25) == .timedOut {
            let problem: Error?
            if deadline() <= 0 {
                problem = OutOfTime()
            } else if x.sinceMoved > limits.idle {
                problem = TransportError(description: "no byte came for \(Int(limits.idle)) s")
            } else if Date().timeIntervalSince(started) > limits.whole {
                problem = TransportError(description: "the exchange took longer than \(Int(limits.whole)) s")
            } else {
                problem = nil
            }
            guard let problem else { continue }
            x.fail(problem)
            task.cancel()
            stopped = true
            break
        }
        if stopped && x.done.wait(timeout: .now() + 5) == .timedOut {
            // The session would not say it stopped: it is dropped, not reused.
            pooled.delegate.carry(nil, task: 0)
            pooled.session.invalidateAndCancel()
            return try x.result().get()
        }
        pooled.delegate.carry(nil, task: 0)
        put(pooled)
        return try x.result().get()
    }
}
