import Dispatch
import Synchronization

/// Runs async work to completion for a caller on a plain thread (the readers run on Dispatch
/// threads, not in tasks). The work runs on a queue of its own rather than on Swift's shared
/// pool, so a caller that itself blocks a thread of that pool (a test, say) cannot starve it.
enum BlockingBridge {
    static func wait<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let done = DispatchSemaphore(value: 0)
        let box = Box<T>()
        if #available(macOS 15.0, *) {
            Task.detached(executorPreference: QueueTaskExecutor.shared) {
                box.put(await body())
                done.signal()
            }
        } else {
            Task.detached {
                box.put(await body())
                done.signal()
            }
        }
        done.wait()
        return box.take()
    }

    /// Written once by the task before it signals, read once by the waiter after: the
    /// semaphore orders the two.
    private final class Box<T: Sendable>: Sendable {
        private let value = Mutex<T?>(nil)

        func put(_ v: T) { value.withLock { $0 = v } }

        func take() -> T { value.withLock { $0.take()! } }
    }
}

/// A task executor that runs jobs one after another on a Dispatch queue.
@available(macOS 15.0, *)
final class QueueTaskExecutor: TaskExecutor {
    static let shared = QueueTaskExecutor()
    private let queue = DispatchQueue(label: "winback.signed.verify")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
