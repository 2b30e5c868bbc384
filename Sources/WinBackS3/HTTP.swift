import Foundation
import WinBackSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP exchange, synchronously, over a shared URLSession (FoundationNetworking: libcurl
/// underneath, which keeps connections to a host open between requests).
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

    /// Sessions not in use. Each carries one request at a time and keeps its connection for the
    /// next: on Linux, a session with several transfers at once can stall them by whole seconds
    /// (its transfers share one libcurl multi handle and its timer), so requests made at the same
    /// time go through sessions of their own.
    nonisolated(unsafe) private static var idle: [URLSession] = []
    private static let lock = NSLock()

    private static func take() -> URLSession {
        lock.lock()
        defer { lock.unlock() }
        if let s = idle.popLast() { return s }
        let c = URLSessionConfiguration.ephemeral
        c.timeoutIntervalForRequest = 60
        c.timeoutIntervalForResource = 3600
        c.httpMaximumConnectionsPerHost = 1
        c.requestCachePolicy = .reloadIgnoringLocalCacheData
        c.urlCache = nil
        c.httpCookieStorage = nil
        // Answers are handed over on a serial queue of the session's own (a thread of its own
        // when needed), not on Dispatch's shared pool, which the pipeline's workers may fill
        // while they wait for these very answers.
        let delegates = OperationQueue()
        delegates.maxConcurrentOperationCount = 1
        delegates.underlyingQueue = DispatchQueue(label: "winback.s3.http")
        return URLSession(configuration: c, delegate: nil, delegateQueue: delegates)
    }

    private static func put(_ s: URLSession) {
        lock.lock()
        idle.append(s)
        lock.unlock()
    }

    /// Sends `request` and waits for the whole answer.
    static func send(_ request: URLRequest, timeout: TimeInterval? = nil) throws -> Response {
        let session = take()
        defer { put(session) }
        var request = request
        if let timeout { request.timeoutInterval = timeout }
        final class Box: @unchecked Sendable {
            var result: Result<Response, Error> = .failure(TransportError(description: "no answer"))
        }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let task = session.dataTask(with: request) { data, response, error in
            if let error {
                box.result = .failure(TransportError(description: error.localizedDescription))
            } else if let http = response as? HTTPURLResponse {
                var headers: [String: String] = [:]
                for (k, v) in http.allHeaderFields {
                    if let k = k as? String, let v = v as? String { headers[k.lowercased()] = v }
                }
                box.result = .success(Response(status: http.statusCode, headers: headers, body: data ?? Data()))
            } else {
                box.result = .failure(TransportError(description: "not an HTTP answer"))
            }
            done.signal()
        }
        task.resume()
        done.wait()
        return try box.result.get()
    }
}
