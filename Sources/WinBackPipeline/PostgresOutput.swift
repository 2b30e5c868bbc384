/// `output.postgres` (docs/rules.md §14.2): where the audience table is kept.
public struct PostgresOutput: Sendable, Equatable {
    /// A libpq connection string, without a password.
    public var connection: String
    /// The schema of `audience` and `runs`, made when missing.
    public var schema: String
}
