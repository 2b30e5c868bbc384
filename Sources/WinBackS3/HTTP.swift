import CCurl
import Foundation
import WinBackSupport

/// One HTTP exchange, synchronously on the calling thread, over libcurl's easy interface; the
/// handles are pooled, so a connection to a host stays open for the next request.
///
/// No exchange waits for ever and none is buffered past what was asked for (docs/rules.md
/// §6.2): the answer's bytes come through callbacks on this thread that refuse it the moment
/// it announces or reaches more than its limit (curl then stops reading and drops the
/// connection), that note when a byte last moved either way, and that watch the clock and the
/// run's network budget (see ``Limits``). Redirects are never followed, so credentials go to
/// one host only; the caller decides what a redirect means.
enum HTTP {
    /// What is sent: a method, a URL, headers in the order set, and a body.
    struct Request: Sendable {
        var url: URL
        var method: String
        /// The headers, each name once (set again: replaced; names compared ignoring case).
        private(set) var headers: [(name: String, value: String)] = []
        var body: Data?

        init(url: URL, method: String = "GET") {
            self.url = url
            self.method = method
        }

        /// Sets header `name` to `value`, replacing a value set before.
        mutating func setHeader(_ name: String, _ value: String) {
            if let i = headers.firstIndex(where: { $0.name.lowercased() == name.lowercased() }) {
                headers[i] = (name, value)
            } else {
                headers.append((name, value))
            }
        }

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

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

    /// A request that cannot be sent as asked (not an http(s) URL, a header holding a line
    /// break or NUL): no try would go otherwise, so none is retried.
    struct BadRequest: Error, CustomStringConvertible {
        var description: String
    }

    /// An answer longer than its limit: refused as it streamed, never held whole.
    struct Oversized: Error, CustomStringConvertible {
        var limit: Int
        /// The length the answer announced (Content-Length), when it did.
        var announced: Int?
        /// Whether it was the answer's head (its status line and headers) that went on.
        var head = false
        var description: String {
            if head { return "the answer's head went on past \(limit) bytes" }
            return announced.map { "the answer announced \($0) bytes, more than the \(limit) asked for" }
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
    /// The most bytes of an answer's head (status lines and headers, every 1xx answer's
    /// included): S3's are a few hundred.
    static let headLimit = 64 << 10

    /// libcurl could not be loaded: the run cannot speak to S3 on this machine.
    struct Unavailable: Error, CustomStringConvertible {
        var reason: String
        var description: String {
            "s3:// needs libcurl (libcurl.so.4), which could not be loaded (\(reason)): install libcurl4 "
                + "(Debian, Ubuntu) or libcurl (Fedora)"
        }
    }

    /// libcurl's entry points, loaded on the first exchange (Sources/CCurl/shim.h), then
    /// curl_global_init, before any thread uses curl: a static `let` is initialised once,
    /// thread-safely, on first use. A run that never speaks to S3 never loads libcurl.
    private static let library: Result<Library, Unavailable> = {
        let api = UnsafeMutablePointer<winback_curl_api>.allocate(capacity: 1)
        api.initialize(to: winback_curl_api())
        var why = [CChar](repeating: 0, count: 512)
        guard winback_curl_load(api, &why, why.count) == 1 else {
            let reason = why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            return .failure(Unavailable(reason: String(decoding: reason, as: UTF8.self)))
        }
        guard api.pointee.global_init!(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK else {
            return .failure(Unavailable(reason: "curl_global_init failed"))
        }
        return .success(Library(api: api))
    }()

    /// Throws ``Unavailable`` when libcurl cannot be loaded on this machine.
    static func ready() throws { _ = try library.get() }

    /// The loaded library: its entry points live as long as the process, and none is nil
    /// (winback_curl_load found each).
    private final class Library: @unchecked Sendable {
        let api: UnsafePointer<winback_curl_api>
        init(api: UnsafeMutablePointer<winback_curl_api>) { self.api = UnsafePointer(api) }
        var curl: winback_curl_api { api.pointee }

        /// What curl says `code` means.
        func message(_ code: CURLcode) -> String {
            curl.easy_strerror!(code).map { String(cString: $0) } ?? "curl error \(code.rawValue)"
        }
    }

    // MARK: The pool

    /// One easy handle and the buffer its errors are written to. It carries one exchange at a
    /// time and keeps its connections for the next (curl_easy_reset does not close them).
    private final class Easy: @unchecked Sendable {
        let library: Library
        let handle: UnsafeMutableRawPointer
        let errors = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

        init?(_ library: Library) {
            guard let h = library.curl.easy_init!() else { return nil }
            self.library = library
            handle = h
        }

        deinit {
            library.curl.easy_cleanup!(handle)
            errors.deallocate()
        }

        func set(_ option: CURLoption, _ value: Int) throws {
            try check(option, winback_curl_setopt_long(library.api, handle, option, value))
        }

        func set(_ option: CURLoption, offset value: Int) throws {
            try check(option, winback_curl_setopt_off(library.api, handle, option, curl_off_t(value)))
        }

        func set(_ option: CURLoption, _ value: UnsafeRawPointer?) throws {
            try check(option, winback_curl_setopt_ptr(library.api, handle, option, value))
        }

        /// A string option; curl keeps a copy of it.
        func set(_ option: CURLoption, _ value: String) throws {
            try value.withCString { try set(option, UnsafeRawPointer($0)) }
        }

        func check(_ option: CURLoption, _ code: CURLcode) throws {
            guard code == CURLE_OK else {
                throw TransportError(
                    description:
                        "libcurl refused option \(option.rawValue): \(library.message(code))")
            }
        }
    }

    /// Handles not in use.
    nonisolated(unsafe) private static var idle: [Easy] = []
    private static let lock = NSLock()

    private static func take() throws -> Easy {
        let library = try HTTP.library.get()
        lock.lock()
        let e = idle.popLast()
        lock.unlock()
        if let e { return e }
        guard let made = Easy(library) else {
            throw TransportError(description: "libcurl gave no handle (curl_easy_init)")
        }
        return made
    }

    private static func put(_ e: Easy) {
        lock.lock()
        idle.append(e)
        lock.unlock()
    }

    // MARK: One exchange

    /// What one exchange has received so far, and the bounds it is held to. Used only on the
    /// thread that sends it (curl calls back on that thread, inside curl_easy_perform).
    private final class Exchange {
        let limit: Int
        /// Whether the announced length is the body's (not so for HEAD: the object's).
        let bodyAnnounced: Bool
        let limits: Limits
        let deadline: () -> TimeInterval
        let started = ProcessInfo.processInfo.systemUptime
        var status = 0
        var headers: [String: String] = [:]
        var body = Data()
        var failure: Error?
        private var headBytes = 0
        private var lastMoved = ProcessInfo.processInfo.systemUptime
        private var moved: (down: Int64, up: Int64) = (0, 0)

        init(limit: Int, bodyAnnounced: Bool, limits: Limits, deadline: @escaping () -> TimeInterval) {
            self.limit = limit
            self.bodyAnnounced = bodyAnnounced
            self.limits = limits
            self.deadline = deadline
        }

        /// The most bytes of the body now: the limit for a success, ``errorLimit`` else.
        var cap: Int { (200..<300).contains(status) || status == 0 ? limit : HTTP.errorLimit }

        /// One line of the answer's head: false (abort) when it announces more than its cap.
        func headerLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
            lastMoved = ProcessInfo.processInfo.systemUptime
            headBytes += bytes.count
            if headBytes > HTTP.headLimit {
                failure = failure ?? Oversized(limit: HTTP.headLimit, announced: nil, head: true)
                return false
            }
            let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if line.hasPrefix("HTTP/") {
                // A new answer (after a 1xx): its own status and headers.
                let parts = line.split(separator: " ", maxSplits: 2)
                status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
                headers = [:]
                return true
            }
            guard let colon = line.firstIndex(of: ":") else { return true }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
            if name == "content-length", bodyAnnounced, let n = Int(value) {
                if n > cap {
                    failure = failure ?? Oversized(limit: cap, announced: n)
                    return false
                }
                // Room for the body at once, not grown by doubling.
                if n > 0 { body.reserveCapacity(n) }
            }
            return true
        }

        /// More of the body: false (abort) once it would be longer than its cap; what came is
        /// let go at once.
        func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
            lastMoved = ProcessInfo.processInfo.systemUptime
            if body.count + bytes.count > cap {
                failure = failure ?? Oversized(limit: cap, announced: nil)
                body = Data()
                return false
            }
            body.append(contentsOf: bytes)
            return true
        }

        /// Called as bytes move and about once a second when none do: false (abort) when no
        /// byte moved for ``Limits/idle``, the exchange took longer than ``Limits/whole``, or
        /// the run's network time is spent.
        func progress(down: Int64, up: Int64) -> Bool {
            let now = ProcessInfo.processInfo.systemUptime
            if (down, up) != moved {
                moved = (down, up)
                lastMoved = now
            }
            let problem: Error?
            if deadline() <= 0 {
                problem = OutOfTime()
            } else if now - lastMoved > limits.idle {
                problem = TransportError(description: "no byte came for \(Int(limits.idle)) s")
            } else if now - started > limits.whole {
                problem = TransportError(description: "the exchange took longer than \(Int(limits.whole)) s")
            } else {
                problem = nil
            }
            guard let problem else { return true }
            failure = failure ?? problem
            return false
        }

        /// Why curl stopped with `code`, when no callback said why already.
        func transportFailure(_ code: CURLcode, detail: String, strerror: (CURLcode) -> String) -> Error {
            if code == CURLE_OPERATION_TIMEDOUT {
                // curl's own clocks are backstops for those of ``progress``: the connect
                // timeout is the idle limit, the whole timeout the whole one.
                let whole = ProcessInfo.processInfo.systemUptime - started >= limits.whole - 0.5
                return TransportError(
                    description: whole
                        ? "the exchange took longer than \(Int(limits.whole)) s"
                        : "no byte came for \(Int(limits.idle)) s")
            }
            let what = strerror(code)
            return TransportError(description: detail.isEmpty ? what : "\(what): \(detail)")
        }
    }

    /// The callbacks, C functions: `userdata` is the ``Exchange`` under way.
    private static let onHeader: winback_curl_data_callback = { bytes, size, count, userdata in
        let x = Unmanaged<Exchange>.fromOpaque(userdata!).takeUnretainedValue()
        return x.headerLine(UnsafeRawBufferPointer(start: bytes, count: size * count)) ? size * count : 0
    }

    private static let onBody: winback_curl_data_callback = { bytes, size, count, userdata in
        let x = Unmanaged<Exchange>.fromOpaque(userdata!).takeUnretainedValue()
        return x.append(UnsafeRawBufferPointer(start: bytes, count: size * count)) ? size * count : 0
    }

    private static let onProgress: winback_curl_xferinfo_callback = { userdata, _, down, _, up in
        let x = Unmanaged<Exchange>.fromOpaque(userdata!).takeUnretainedValue()
        return x.progress(down: Int64(down), up: Int64(up)) ? 0 : 1
    }

    /// An exchange with a small answer (credentials), within `timeout` altogether.
    static func send(_ request: Request, timeout: TimeInterval) throws -> Response {
        try send(request, limit: errorLimit, limits: Limits(idle: timeout, whole: timeout))
    }

    /// Sends `request` and waits for the whole answer, at most `limit` bytes of a success
    /// (``errorLimit`` of anything else), within `limits`, and never past `deadline`.
    ///
    /// Throws ``BadRequest`` (never sent), ``TransportError`` (no answer, or too slow),
    /// ``Oversized`` or ``OutOfTime``.
    static func send(
        _ request: Request, limit: Int, limits: Limits = Limits(), deadline: () -> TimeInterval = { .infinity }
    ) throws -> Response {
        guard request.url.scheme == "http" || request.url.scheme == "https" else {
            throw BadRequest(description: "not an http(s) URL: \(request.url.absoluteString)")
        }
        // A CR or LF would end the header line early (and NUL the C string): another header, or a
        // request smuggled in. Looked for as bytes: "\r\n" is one Character.
        for (name, value) in request.headers where (name + value).utf8.contains(where: { [0, 10, 13].contains($0) }) {
            throw BadRequest(description: "the header \(name) holds a line break or NUL")
        }
        let easy = try take()
        defer { put(easy) }
        return try withoutActuallyEscaping(deadline) { deadline in
            let x = Exchange(
                limit: limit, bodyAnnounced: request.method != "HEAD", limits: limits, deadline: deadline)
            return try withExtendedLifetime(x) {
                try perform(request, on: easy, exchange: x)
            }
        }
    }

    /// Sets `easy` up for `request` and carries it out; `x` collects the answer.
    private static func perform(_ request: Request, on easy: Easy, exchange x: Exchange) throws -> Response {
        let h = easy.handle
        let curl = easy.library.curl
        let api = easy.library.api
        curl.easy_reset!(h)
        try easy.set(CURLOPT_URL, request.url.absoluteString)
        // Threads: no SIGALRM for timeouts (the threaded resolver needs none).
        try easy.set(CURLOPT_NOSIGNAL, 1)
        try easy.set(CURLOPT_FOLLOWLOCATION, 0)
        try easy.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        // Backstops of the clocks ``Exchange/progress`` watches.
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(x.limits.idle * 1000)))
        try easy.set(CURLOPT_TIMEOUT_MS, max(1, Int(x.limits.whole * 1000) + 1000))
        easy.errors[0] = 0
        try easy.set(CURLOPT_ERRORBUFFER, UnsafeRawPointer(easy.errors))
        let me = Unmanaged.passUnretained(x).toOpaque()
        try easy.check(CURLOPT_HEADERFUNCTION, winback_curl_setopt_header(api, h, onHeader, me))
        try easy.check(CURLOPT_WRITEFUNCTION, winback_curl_setopt_write(api, h, onBody, me))
        try easy.check(CURLOPT_XFERINFOFUNCTION, winback_curl_setopt_xferinfo(api, h, onProgress, me))

        // A body for PUT and POST, even an empty one (Content-Length: 0); sent as set, with no
        // form content type of curl's own and no `Expect: 100-continue` wait.
        let body = request.body ?? (["PUT", "POST"].contains(request.method) ? Data() : nil)
        var lines = request.headers.map { $0.value.isEmpty ? "\($0.name);" : "\($0.name): \($0.value)" }
        lines.append("Expect:")
        if body != nil && request.header("content-type") == nil { lines.append("Content-Type:") }
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl.slist_free_all!(list) }
        for line in lines {
            guard let next = curl.slist_append!(list, line) else {
                throw TransportError(description: "libcurl could not hold the request's headers")
            }
            list = next
        }
        try easy.set(CURLOPT_HTTPHEADER, UnsafeRawPointer(list))

        switch request.method {
        case "GET": try easy.set(CURLOPT_HTTPGET, 1)
        case "HEAD": try easy.set(CURLOPT_NOBODY, 1)
        case "POST" where body != nil: break
        default: try easy.set(CURLOPT_CUSTOMREQUEST, request.method)
        }
        let code: CURLcode
        if let body {
            // curl reads the body in place, while curl_easy_perform runs.
            code = try body.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws -> CURLcode in
                try easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: bytes.count)
                if let base = bytes.baseAddress, bytes.count > 0 {
                    try easy.set(CURLOPT_POSTFIELDS, base)
                } else {
                    try easy.set(CURLOPT_COPYPOSTFIELDS, "")
                }
                return curl.easy_perform!(h)
            }
        } else {
            code = curl.easy_perform!(h)
        }
        if let failure = x.failure { throw failure }
        guard code == CURLE_OK else {
            throw x.transportFailure(code, detail: String(cString: easy.errors), strerror: easy.library.message)
        }
        var status = 0
        if winback_curl_getinfo_long(api, h, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK, status > 0 {
            x.status = status
        }
        if x.status == 0 { throw TransportError(description: "no HTTP answer") }
        return Response(status: x.status, headers: x.headers, body: x.body)
    }

}
