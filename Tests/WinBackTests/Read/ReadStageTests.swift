import Testing

/// Groups the read-stage suites, so `swift test --filter Read` runs them all.
@Suite struct ReadStageTests {}
