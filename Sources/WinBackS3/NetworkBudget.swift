import Foundation

/// A run's network time, bounded (docs/rules.md §6.2, `limits.networkSeconds`): the wall time
/// during which at least one S3 request is under way (sent, answered, or waiting to be tried
/// again) counts, once however many run at the same time; time spent on anything else does
/// not. Every wait of the client checks ``remaining``; none goes past it.
public final class NetworkBudget: @unchecked Sendable {
    /// The budget, in seconds.
    public let seconds: Double
    private let lock = NSLock()
    /// Network time spent before the requests now under way began.
    private var spent: TimeInterval = 0
    private var inFlight = 0
    /// When the requests now under way began (the first of them).
    private var busySince: Date?
    private let clock: () -> Date

    public init(seconds: Double, clock: @escaping () -> Date = Date.init) {
        self.seconds = seconds
        self.clock = clock
    }

    /// A request begins (or a wait before it is tried again).
    func begin() {
        lock.lock()
        if inFlight == 0 { busySince = clock() }
        inFlight += 1
        lock.unlock()
    }

    /// A request ended, whatever its outcome.
    func end() {
        lock.lock()
        inFlight -= 1
        if inFlight == 0, let since = busySince {
            spent += clock().timeIntervalSince(since)
            busySince = nil
        }
        lock.unlock()
    }

    /// Seconds left; 0 or less once the budget is spent.
    public var remaining: TimeInterval {
        lock.lock()
        defer { lock.unlock() }
        return seconds - spent - (busySince.map { clock().timeIntervalSince($0) } ?? 0)
    }
}
