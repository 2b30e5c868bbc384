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

    static let session: URLSession = {
        let c = URLSessionConfiguration.ephemeral
        c.timeoutIntervalForRequest = 60
        c.timeoutIntervalForResource = 3600
        c.httpMaximumConnectionsPerHost = 16
        c.requestCachePolicy = .reloadIgnoringLocalCacheData
        c.urlCache = nil
        c.httpCookieStorage = nil
        return URLSession(configuration: c)
    }()

    /// Sends `request` and waits for the whole answer.
    static func send(_ request: URLRequest, timeout: TimeInterval? = nil) throws -> Response {
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
