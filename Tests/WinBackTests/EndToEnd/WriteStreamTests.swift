import Testing
import WinBackTestSupport

/// The strace log the slow target's WriteStreamTests reads, as strace writes it: here without
/// strace, on a log written by hand.
@Suite("A run reads back no file it wrote: the trace it is seen in")
struct WriteStreamTests {
    @Test(
        "the trace is read as strace writes it: flags, failed calls, a call cut in two by another thread, its result padded"
    )
    func parse() {
        let log = """
            101 openat(AT_FDCWD, "/o/.staging-1/segments/best-offer.csv", O_WRONLY|O_CREAT|O_TRUNC|O_NOFOLLOW|O_CLOEXEC, 0640) = 7
            101 openat(AT_FDCWD, "/o/missing", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
            102 openat(AT_FDCWD, "/o/.staging-1/segments/best-offer.csv", O_RDONLY|O_NONBLOCK|O_CLOEXEC <unfinished ...>
            101 openat(AT_FDCWD, "/o/.staging-1", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY) = 8
            102 <... openat resumed>) = 9
            103 openat(AT_FDCWD, "/o/.staging-1/segments/holdout.csv", O_WRONLY|O_CREAT|O_TRUNC|O_NOFOLLOW|O_CLOEXEC, 0640 <unfinished ...>
            101 openat(AT_FDCWD, "/o/base/segments/holdout.csv", O_RDONLY|O_CLOEXEC) = 10
            103 <... openat resumed>)             = 11
            """
        let opens = StraceLog.opens(log)
        #expect(
            opens.map(\.path) == [
                "/o/.staging-1/segments/best-offer.csv", "/o/.staging-1", "/o/.staging-1/segments/best-offer.csv",
                "/o/base/segments/holdout.csv", "/o/.staging-1/segments/holdout.csv",
            ])
        #expect(opens.map { $0.flags.hasPrefix("O_RDONLY") } == [false, true, true, true, false])
        #expect(opens[0].flags.contains("O_WRONLY") && opens[1].flags.contains("O_DIRECTORY"))
    }
}
