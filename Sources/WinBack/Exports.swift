@_exported import WinBackDelivery
@_exported import WinBackExplain
@_exported import WinBackHistory
@_exported import WinBackIncremental
// `import WinBack` gives a user of the library the whole pipeline: its types come from the
// layers below, each a target of its own (docs/architecture.md, "Targets").
@_exported import WinBackModel
@_exported import WinBackPipeline
@_exported import WinBackRead
@_exported import WinBackRules
@_exported import WinBackS3
@_exported import WinBackSupport
@_exported import WinBackWrite

/// A run's progress (``WinBackPipeline/Progress``), not Foundation's class of the same name.
public typealias Progress = WinBackPipeline.Progress
