import Foundation
import Synchronization

/// A run's network time, bounded (docs/rules.md §6.2, `limits.networkSeconds`): the wall time
/// during which at least one S3 request is under way (sent, answered, or waiting to be tried
/// again) counts, once however many run at the same time; time spent on anything else does
/// not. Every wait of the client checks ``remaining``; none goes past it.
public final class NetworkBudget: Sendable {
    /// The budget, in seconds.
    public let seconds: Double
    private struct State {
        /// Network time spent before the requests now under way began.
        var spent: TimeInterval = 0
        var inFlight = 0
        /// When the requests now under way began (the first of them).
        var busySince: Date?
    }
    private let state = Mutex(State())
    private let clock: @Sendable () -> Date

    public init(seconds: Double, clock: @escaping @Sendable () -> Date = Date.init) {
        self.seconds = seconds
        self.clock = clock
    }

    /// A request begins (or a wait before it is tried again).
    func begin() {
        state.withLock { s in
            if s.inFlight == 0 { s.busySince = clock() }
            s.inFlight += 1
        }
    }

    /// A request ended, whatever its outcome.
    func end() {
        state.withLock { s in
            s.inFlight -= 1
            if s.inFlight == 0, let since = s.busySince {
                s.spent += clock().timeIntervalSince(since)
                s.busySince = nil
            }
        }
    }

    /// Seconds left; 0 or less once the budget is spent.
    public var remaining: TimeInterval {
        state.withLock { s in
            seconds - s.spent - (s.busySince.map { clock().timeIntervalSince($0) } ?? 0)
        }
    }
}
