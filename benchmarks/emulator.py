"""Emulator throughput on the bundled baseline, and preprocessing cost vs a bare sort.

Figures:
- steps_per_s: simulated steps per wall second for `record_run` of the baseline (all of
  it: generation, preprocessing, task graph, scheduling, trace writing);
- ids_preprocessed_per_s: raw IDs through host preprocessing per wall second;
- preprocess_to_sort_ratio: host preprocessing of a step over a bare `np.sort` of the
  same step's raw IDs (int64), both timed in this process on the same batches,
  alternately, best of several repetitions each (target <= 3);
- preprocess_to_library_ratio (with the `reference` extra): scprof's preprocessing of a
  step over jax-tpu-embedding's own C++ preprocessing of the same IDs with the same stacks
  (timed inside its child process, its thread pool on every core), alternately, best of
  several repetitions each.

Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from sim_backend.config_load import load_config  # noqa: E402
from sim_backend.emulator import setup  # noqa: E402
from sim_backend.generate import generate_step  # noqa: E402
from sim_backend.preprocess import preprocess_step  # noqa: E402
from sim_backend.recording.record import record_run  # noqa: E402


def paired_min_times(a, b, repeat: int) -> tuple[float, float]:
    """Best-of-`repeat` wall time of a() and of b(), timed alternately (same machine state)."""
    ta, tb = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        a()
        t1 = time.perf_counter()
        b()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return min(ta), min(tb)


def library_side_by_side(cfg, groups, lay, repeat: int) -> dict:
    """Native preprocessing vs the library's, per step, alternately; {} without the library."""
    from sim_backend.reference_preprocess import ReferenceSession, library_available, session_setup

    if not library_available():
        return {}
    native = library = 0.0
    ids = 0
    with ReferenceSession(session_setup(cfg, groups, lay)) as session:
        for step in range(cfg.steps):
            batches = generate_step(cfg, step)
            ids += sum(len(fb.ids) for fb in batches)
            ours, theirs = [], []
            for _ in range(repeat):
                t0 = time.perf_counter()
                preprocess_step(step, batches, groups, lay, cfg.sparsecore)
                ours.append(time.perf_counter() - t0)
                theirs.append(session.step(step, batches)["library_s"])
            native += min(ours)
            library += min(theirs)
    return {
        "native_s_per_step": round(native / cfg.steps, 5),
        "library_s_per_step": round(library / cfg.steps, 5),
        "library_ids_per_s": round(ids / library),
        "preprocess_to_library_ratio": round(native / library, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "baseline.toml"))
    ap.add_argument("--repeat", type=int, default=5, help="repetitions per timed step")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        res = record_run(args.config, [], "bench", None, out)
        record_s = time.perf_counter() - t0

    cfg = load_config(args.config)
    hw, _, groups, lay = setup(cfg)
    prep_s = sort_s = 0.0
    ids = 0
    for step in range(cfg.steps):
        batches = generate_step(cfg, step)
        raw = np.concatenate([fb.ids for fb in batches])
        ids += len(raw)
        p, q = paired_min_times(
            lambda b=batches, s=step: preprocess_step(s, b, groups, lay, cfg.sparsecore),
            lambda r=raw: np.sort(r),
            args.repeat,
        )
        prep_s += p
        sort_s += q

    library = library_side_by_side(cfg, groups, lay, args.repeat)

    figures = {
        "benchmark": "emulator",
        "config": os.path.relpath(args.config, REPO),
        "steps": cfg.steps,
        "record_wall_s": round(record_s, 3),
        "steps_per_s": round(cfg.steps / record_s, 2),
        "ids_per_step": ids // cfg.steps,
        "ids_preprocessed_per_s": round(ids / prep_s),
        "preprocess_s_per_step": round(prep_s / cfg.steps, 5),
        "np_sort_s_per_step": round(sort_s / cfg.steps, 5),
        "preprocess_to_sort_ratio": round(prep_s / sort_s, 2),
        "target_ratio": 3.0,
        "simulated_step_time_us": round(res.mean_step_time_ps / 1e6, 2),
        **library,
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, numpy {np.__version__}",
    }
    print(f"recorded {cfg.steps} steps of {figures['config']} in {record_s:.2f} s ({figures['steps_per_s']} steps/s)")
    print(
        f"preprocessing: {figures['ids_preprocessed_per_s']:,} IDs/s, "
        f"{figures['preprocess_to_sort_ratio']}x a bare np.sort of the same IDs"
    )
    if library:
        print(
            f"side by side with jax-tpu-embedding on the same IDs: scprof {library['native_s_per_step']:.4f} s, "
            f"library {library['library_s_per_step']:.4f} s per step ({library['preprocess_to_library_ratio']}x)"
        )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
