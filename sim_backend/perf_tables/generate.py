"""Write the bundled tables: `python -m sim_backend.perf_tables.generate [--check]`.

One directory per hardware preset (sim_backend/hardware.py PRESETS), each from the
roofline of that preset with the default cost constants (tc_efficiency, ici_efficiency,
ici_latency_ps). These are roofline-derived, not measured: we have no TPU. A test fails
when the committed files differ from what this script writes.
"""

from __future__ import annotations

import argparse
import os
import sys

from sim_backend.costmodel import CostConstants, roofline_inputs
from sim_backend.hardware import PRESETS, resolve_hardware
from sim_backend.perf_tables import bundled_dir
from sim_backend.perf_tables.roofline import roofline_tables


def expected_files() -> dict[str, str]:
    """Path -> text of every bundled table file, as this generator writes it."""
    out = {}
    for gen in PRESETS:
        inp = roofline_inputs(resolve_hardware(gen, 1, {}), CostConstants())
        for name, text in roofline_tables(inp, f"bundled:{gen}").to_json().items():
            out[os.path.join(bundled_dir(gen), name)] = text
    return out


def stale_files() -> list[str]:
    """Bundled files that are missing or differ from what the generator writes."""
    stale = []
    for path, text in expected_files().items():
        try:
            with open(path) as fh:
                if fh.read() == text:
                    continue
        except FileNotFoundError:
            pass
        stale.append(path)
    return stale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only report stale files (exit 1 if any)")
    args = p.parse_args(argv)
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"stale: {path}")
        return 1 if stale else 0
    for path, text in expected_files().items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
