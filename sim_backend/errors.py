"""User-facing errors of the emulator: one line each, naming the key or table at fault."""

from __future__ import annotations

from profiler.errors import ScprofError


class ConfigError(ScprofError, ValueError):
    """A workload config (file, key or --set override) that cannot be run."""


class PreprocessError(ScprofError, ValueError):
    """Host preprocessing stopped: observed IDs exceed the compiled limits and nothing may give."""
