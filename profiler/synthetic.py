"""A synthetic SparseCore/TensorCore trace of any size, for benchmarks and demos.

Shaped like the emulator's output: per step and chip, SparseCore ops per table,
minibatch and SparseCore (with IDs and bytes), then TensorCore ops with FLOPs, plus
HBM counters and step markers. Generated with numpy, written through the Recorder.
"""

from __future__ import annotations

import numpy as np

from profiler.recorder import Recorder

TABLES = [f"table_{i}" for i in range(26)]
TC_OPS = ["fusion.1", "convolution.2", "dot.3", "all-reduce.4", "fusion.5", "copy.6"]


def write_synthetic_trace(
    path: str,
    events: int,
    chips: int = 4,
    scs: int = 4,
    seed: int = 0,
    run_name: str = "synthetic",
    batch: int = 1_000_000,
) -> int:
    """Write about `events` events; returns the exact number written."""
    rng = np.random.default_rng(seed)
    with Recorder(
        path,
        run_name=run_name,
        producer="scprof profiler.synthetic",
        hardware=dict(
            generation="v5p",
            num_chips=chips,
            sparsecores_per_chip=scs,
            tiles_per_sparsecore=16,
            simd_width=8,
            hbm_bytes=96 << 30,
        ),
        config={"synthetic": True, "events": events, "seed": seed},
        start_time_unix_ns=0,
    ) as rec:
        sc_tracks = np.array(
            [
                [
                    rec.track(f"/device:TPU:{c} SparseCore {s}", "Sparse Core Ops", "sparsecore", c, s)
                    for s in range(scs)
                ]
                for c in range(chips)
            ],
            dtype=np.uint32,
        )
        tc_tracks = np.array(
            [rec.track(f"/device:TPU:{c}", "XLA Ops", "tensorcore", c, 0) for c in range(chips)], dtype=np.uint32
        )
        heap = [rec.track(f"/device:TPU:{c}", "HBM heap", "counter", c, unit="bytes") for c in range(chips)]
        step_tracks = [rec.track(f"/device:TPU:{c}", "Steps", "tensorcore", c, 0) for c in range(chips)]
        table_ids = rec.intern_array(TABLES)
        tc_names = rec.intern_array(TC_OPS)
        sc_name = rec.intern("SparseDenseMatmulOp")
        # One step: every table x 2 minibatches x every SC of every chip, then 6 TC ops per chip.
        sc_per_step = len(TABLES) * 2 * chips * scs
        per_step = sc_per_step + len(TC_OPS) * chips
        steps = max(1, events // per_step)
        step_ps = 5_000_000_000
        written = 0
        step0 = 0
        while step0 < steps:
            n_steps = max(1, min(steps - step0, batch // per_step))
            s = np.arange(step0, step0 + n_steps)
            # SparseCore ops
            t_i, m_i, c_i, k_i = (
                a.ravel()
                for a in np.meshgrid(
                    np.arange(len(TABLES)), np.arange(2), np.arange(chips), np.arange(scs), indexing="ij"
                )
            )
            rep = np.repeat(s, sc_per_step)
            ids = rng.integers(500, 4000, len(rep))
            dur = 20_000 + ids * 300
            order = np.tile(np.arange(len(TABLES) * 2).repeat(chips * scs), n_steps)
            start = rep * step_ps + order * 9_000_000
            rec.emit(
                track=np.tile(sc_tracks[c_i, k_i], n_steps),
                name=np.full(len(rep), sc_name, np.uint32),
                start_ps=start,
                dur_ps=dur,
                step=rep,
                table=np.tile(table_ids[t_i], n_steps),
                sc=np.tile(k_i, n_steps),
                minibatch=np.tile(m_i, n_steps),
                ids=ids,
                unique_ids=ids * 3 // 4,
                dropped_ids=np.zeros(len(rep), np.int64),
                bytes=ids * 512,
            )
            # TensorCore ops
            rep_tc = np.repeat(s, len(TC_OPS) * chips)
            op = np.tile(np.arange(len(TC_OPS)).repeat(chips), n_steps)
            chip = np.tile(np.tile(np.arange(chips), len(TC_OPS)), n_steps)
            rec.emit(
                track=tc_tracks[chip],
                name=tc_names[op],
                start_ps=rep_tc * step_ps + 2_500_000_000 + op * 300_000_000,
                dur_ps=np.full(len(rep_tc), 250_000_000),
                step=rep_tc,
                flops=rng.integers(1 << 30, 1 << 34, len(rep_tc)),
                bytes=rng.integers(1 << 20, 1 << 28, len(rep_tc)),
            )
            for c in range(chips):
                rec.counters(
                    track=np.full(n_steps, heap[c], np.uint32),
                    ts_ps=s * step_ps,
                    value=(40 << 30) + rng.random(n_steps) * (1 << 30),
                )
                rec.steps(
                    track=np.full(n_steps, step_tracks[c], np.uint32),
                    step=s,
                    start_ps=s * step_ps,
                    dur_ps=np.full(n_steps, step_ps),
                )
            written += n_steps * per_step
            step0 += n_steps
    return written
