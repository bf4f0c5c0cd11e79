"""A one-line progress bar for long work on a terminal (record, ingest, export).

Callers pass it as a `progress(done, total)` callback only when stdout is a
terminal, so pipes and files stay quiet.
"""

from __future__ import annotations

import sys
from typing import TextIO


class TerminalProgress:
    """`label [#####.....] done/total unit`, redrawn in place and erased when done."""

    def __init__(self, label: str, unit: str = "", stream: TextIO | None = None, width: int = 30):
        self.label, self.unit, self.width = label, unit, width
        self.stream = stream or sys.stdout
        self._last = -1

    def __call__(self, done: int, total: int) -> None:
        filled = self.width * min(done, total) // max(total, 1)
        if filled == self._last and done < total:
            return  # nothing visible changed: keep terminal writes rare on hot paths
        self._last = filled
        bar = "#" * filled + "." * (self.width - filled)
        amount = f"{done:,}/{total:,} {self.unit}".rstrip() if self.unit else f"{100 * done // max(total, 1)}%"
        self.stream.write(f"\r{self.label} [{bar}] {amount}")
        if done >= total:
            self.stream.write("\r" + " " * (len(self.label) + self.width + 40) + "\r")
        self.stream.flush()
