import Testing
import WinBackTestSupport

/// The difference a golden-file mismatch prints, computed in this process (no `diff` is run).
@Suite struct GoldenDiffTests {
    @Test("one changed line: its context, the line removed and the line added, numbered as diff -U2 numbers them")
    func oneLine() {
        let old = "a\nb\nc\nd\ne\nf\ng\n"
        let new = "a\nb\nc\nD\ne\nf\ng\n"
        #expect(
            unifiedDiff(old, new, from: "golden", to: "actual", context: 2)
                == "--- golden\n+++ actual\n@@ -2,5 +2,5 @@\n b\n c\n-d\n+D\n e\n f")
    }

    @Test("lines added at the end, and a long run of changes cut at the limit with a count of the rest")
    func addedAndLimited() {
        #expect(
            unifiedDiff("x\n", "x\ny\nz\n", from: "g", to: "a", context: 1)
                == "--- g\n+++ a\n@@ -1,2 +1,4 @@\n x\n+y\n+z\n ")
        let many = (0..<10).map(String.init).joined(separator: "\n")
        let diff = unifiedDiff(many, "", from: "g", to: "a", context: 0, limit: 3)
        #expect(diff.contains("-0\n-1\n-2\n… 7 more lines removed"))
    }
}
