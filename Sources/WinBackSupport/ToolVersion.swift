/// winback's version, as `--version` prints it and as the manifest, the work folder's markers
/// and an incremental state's ledger record it (a state another version wrote is rebuilt,
/// docs/rules.md §12).
public enum ToolVersion {
    public static let current = "0.1.0"
}
