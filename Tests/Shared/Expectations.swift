import Testing
import WinBackSupport

/// The ``WinBackError`` that `body` throws, once checked to exit with `exitCode`. When it throws
/// none, `issue` is recorded and nil returned; any other error is thrown on.
@discardableResult
package func expectWinBackError(
    exit exitCode: Int32, _ issue: String = "no failure", sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) throws -> WinBackError? {
    do {
        try body()
    } catch let e as WinBackError {
        #expect(e.code.exitCode == exitCode, "\(e)", sourceLocation: sourceLocation)
        return e
    }
    Issue.record(Comment(rawValue: issue), sourceLocation: sourceLocation)
    return nil
}
