"""User-facing errors of the emulator: one line each, naming the key or table at fault."""

from __future__ import annotations

from profiler.errors import ScprofError


class ConfigError(ScprofError, ValueError):
    """A workload config (file, key or --set override) that cannot be run."""


class PreprocessError(ScprofError, ValueError):
    """Host preprocessing stopped: observed IDs exceed the compiled limits and nothing may give."""


class RunFailure(ScprofError, ValueError):
    """The simulated program failed (compile error or HBM out of memory).

    `message` is the failure as the emulator's "compiler"/runtime words it (also the
    `message` argument of the failure event in the trace); `trace_path` is the trace
    recorded with the failure, when one was written.
    """

    kind = "failure"

    def __init__(self, message: str, trace_path: str | None = None, where: str = ""):
        self.message = message
        self.trace_path = trace_path
        self.where = where
        text = f"{where}: {message}" if where else message
        if trace_path:
            text += f" (the failed run is recorded in {trace_path})"
        super().__init__(text)


class CompileError(RunFailure):
    """The program does not compile: SPMEM buffers sized by the limits do not fit a tile."""

    kind = "compile_error"


class HbmOomError(RunFailure):
    """HBM heap + stack exceed the chip's capacity."""

    kind = "hbm_oom"


class NanDetectedError(RunFailure):
    """`xla_sc_detect_nan` found NaN input values and stopped the run."""

    kind = "nan_detected"


class RecordInterrupted(KeyboardInterrupt):
    """`scprof record` was interrupted (Ctrl-C): the partial trace is kept at `partial_path`
    (its complete chunks recover with `scprof ingest --allow-truncated`)."""

    def __init__(self, partial_path: str):
        self.partial_path = partial_path
        super().__init__(partial_path)
