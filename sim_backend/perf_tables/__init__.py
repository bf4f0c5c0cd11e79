"""Bundled performance tables, one directory per TPU generation, generated from a roofline.

We have no TPU to measure: `roofline.py` derives the tables from each preset's spec-sheet
figures and stated efficiencies, and `generate.py` (`python -m sim_backend.perf_tables.generate`)
writes them here. Measured tables replace them with `scprof record --perf-tables DIR`.
"""

from __future__ import annotations

import os

BUNDLED_DIR = os.path.dirname(os.path.abspath(__file__))


def bundled_dir(generation: str) -> str:
    """Directory of the bundled tables of a hardware generation (may not exist: custom)."""
    return os.path.join(BUNDLED_DIR, generation)
