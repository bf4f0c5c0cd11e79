"""Record every bundled config and print the figures table of docs/emulator.md.

For each `configs/*.toml`: steady step time on chip 0, minibatches per step (every stack),
dropped IDs, chip 0's time shares (host / SparseCore / TensorCore / idle), events
written and the recording wall time; a config that fails to compile or runs out of HBM
shows its failure kind instead. Prints a markdown table (to paste into docs/emulator.md
"Bundled configs"), then one JSON line.

Usage: python benchmarks/bundled_configs.py [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sim_backend.errors import RunFailure  # noqa: E402
from sim_backend.recording.record import record_run  # noqa: E402


def record_one(config: Path, steps: int | None, out: str) -> dict:
    """The table row of one config as a dict (failure kind instead of figures if it fails)."""
    t0 = time.perf_counter()
    try:
        r = record_run(str(config), [], config.stem, steps, out)
    except RunFailure as exc:
        return {
            "config": config.name,
            "failed": type(exc).__name__,
            # paths of this machine out: the repository's relative, the scratch folder as $TMPDIR
            "error": str(exc).splitlines()[0].replace(str(REPO) + os.sep, "").replace(os.path.dirname(out), "$TMPDIR"),
            "record_s": round(time.perf_counter() - t0, 2),
        }
    return {
        "config": config.name,
        "step_time_us": round(r.mean_step_time_ps / 1e6, 1),
        "minibatches_per_step": round(r.minibatches_per_step, 1),
        "dropped_ids": r.dropped_ids,
        "shares": [round(s, 2) for s in (r.share_host, r.share_sc, r.share_tc, r.share_idle)],
        "events": r.events,
        "record_s": round(r.wall_time_s, 2),
    }


def markdown_row(row: dict) -> str:
    if "failed" in row:
        return f"| `{row['config']}` | fails: {row['failed']} | | | | | {row['record_s']:.1f} s |"
    shares = " / ".join(f"{s:.0%}" for s in row["shares"])
    return (
        f"| `{row['config']}` | {row['step_time_us']:,.0f} µs | {row['minibatches_per_step']:.1f} | "
        f"{row['dropped_ids']:,} | {shares} | {row['events']:,} | {row['record_s']:.1f} s |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=None, help="override each config's steps")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for config in sorted((REPO / "configs").glob("*.toml")):
            rows.append(record_one(config, args.steps, os.path.join(tmp, config.stem)))
    print("| config | step time | minibatches per step | dropped IDs | host / SC / TC / idle | events | record |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(markdown_row(row))
    print(json.dumps({"benchmark": "bundled_configs", "configs": rows, "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
