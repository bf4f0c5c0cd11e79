"""`scprof tune` on the bundled baseline: does it find at least the bundled tuned config's gain,
and how long does it take?

Records configs/baseline.toml and configs/tuned.toml into a fresh store, then times
`scprof tune baseline` (the CLI in this process: a Dask LocalCluster of --workers processes,
its start included) and compares the tuned step time with the bundled tuned run's.
Last line: {"benchmark": "tune_bundled", "baseline_ps", "bundled_tuned_ps", "tune_ps",
"tune_change", "bundled_change", "simulations", "tune_wall_s", "at_least_bundled_gain"}.

Usage: python benchmarks/tune_bundled.py [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from profiler.store import Store  # noqa: E402
from scprof.cli import main as scprof  # noqa: E402
from whatif.engine import counted_step_ps  # noqa: E402


def run(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = scprof(argv)
    if code:
        raise SystemExit(f"scprof {' '.join(argv)} exited {code}")
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="2")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tune-bundled-") as work:
        db = os.path.join(work, "s.duckdb")
        for name in ("baseline", "tuned"):
            run(["record", str(REPO / "configs" / f"{name}.toml"), "--db", db, "--out", os.path.join(work, name)])
        t0 = time.perf_counter()
        result = json.loads(
            run(
                [
                    "tune",
                    "baseline",
                    "--db",
                    db,
                    "--workers",
                    args.workers,
                    "--json",
                    "--out",
                    os.path.join(work, "tune"),
                ]
            )
        )
        wall_s = time.perf_counter() - t0
        with Store.open(db, read_only=True) as store:
            base_ps = float(counted_step_ps(store, store.resolve_run("baseline")).mean())
            tuned_ps = float(counted_step_ps(store, store.resolve_run("tuned")).mean())
    tune_ps = result["best"]["step_time_ps"]
    for t in result["trials"]:
        mark = "accepted" if t["accepted"] else "        "
        print(
            f"{mark} {t['step_time_ps'] and t['step_time_ps'] / 1e6:>9.1f} us  {json.dumps(t['overrides'])} "
            f"derive_limits={t['derive_limits']}  [{t['reason']}]"
        )
    print(
        f"baseline {base_ps / 1e6:.1f} us; bundled tuned {tuned_ps / 1e6:.1f} us; tune {tune_ps / 1e6:.1f} us "
        f"with {json.dumps(result['best']['overrides'])} derive_limits={result['best']['derive_limits']}; "
        f"{result['simulations']} simulations in {wall_s:.1f} s"
    )
    print(
        json.dumps(
            {
                "benchmark": "tune_bundled",
                "baseline_ps": base_ps,
                "bundled_tuned_ps": tuned_ps,
                "tune_ps": tune_ps,
                "tune_change": tune_ps / base_ps - 1,
                "bundled_change": tuned_ps / base_ps - 1,
                "simulations": result["simulations"],
                "tune_wall_s": round(wall_s, 1),
                "at_least_bundled_gain": tune_ps <= tuned_ps * 1.001,
                "workers": int(args.workers),
                "load": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
