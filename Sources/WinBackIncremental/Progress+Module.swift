import WinBackPipeline

/// A run's progress (``WinBackPipeline/Progress``), not Foundation's class of the same name.
package typealias Progress = WinBackPipeline.Progress
