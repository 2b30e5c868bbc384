import Testing

extension Tag {
    /// Suites that start processes, generate worlds or fuzz: they live in the WinBackSlowTests
    /// target, so `swift test --filter WinBackTests` is the quick run (CI runs everything).
    @Tag static var slow: Self
}
