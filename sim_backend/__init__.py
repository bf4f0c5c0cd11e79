"""SparseCore/TensorCore emulator: workloads, real host preprocessing, task-graph execution.

Entry points: `sim_backend.recording.record.record_run` (behind `scprof record`) and
`sim_backend.emulator.simulate`. Instrumented only through `profiler.recorder`.
"""

__version__ = "0.1.0"
