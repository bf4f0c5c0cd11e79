"""SparseCore ops of one table group in one step: their durations and the HBM bytes they move.

The task-graph builder (stepgraph.py) places the ops; this module asks the cost model how
long each (minibatch, partition) op takes, with the debug checks' cost added
(debug_checks.py), for the group's compiled limits (the limits size the
buffers the SparseCore works on).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_backend.config import RunConfig
from sim_backend.costmodel import CostModel
from sim_backend.debug_checks import check_ps
from sim_backend.hardware import HardwareSpec
from sim_backend.preprocess import GroupResult


@dataclass(frozen=True)
class ScOps:
    """Per (minibatch, partition) of one group: duration (int64 ps) and the HBM bytes it moves
    (padded rows: the cost model's memory term, so bytes / duration <= the SC's bandwidth)."""

    ps: np.ndarray  # int64 [M, num_sc]
    bytes: np.ndarray  # int64 [M, num_sc]


def _limits(gr: GroupResult) -> tuple[int, int]:
    return gr.group.max_ids_per_partition, gr.group.max_unique_ids_per_partition


def sc_forward_ops(cfg: RunConfig, hw: HardwareSpec, cost: CostModel, gr: GroupResult) -> ScOps:
    """The group's forward lookups (SparseDenseMatmulOp)."""
    grp = gr.group
    ps = cost.sc_forward_ps(gr.ids_mp, gr.unique_mp, grp.width, grp.dtype_bytes, _limits(gr))
    ps = ps + check_ps(cfg, hw, cost.c, gr.ids_mp, grp.width, backward=False)
    nbytes = cost.sc_forward_bytes(gr.ids_mp, gr.unique_mp, grp.width, grp.dtype_bytes)
    return ScOps(ps, nbytes)


def sc_backward_ops(cfg: RunConfig, hw: HardwareSpec, cost: CostModel, gr: GroupResult) -> ScOps:
    """The group's embedding updates (SparseDenseMatmulGradOp)."""
    grp = gr.group
    ps = cost.sc_backward_ps(gr.ids_mp, gr.unique_mp, grp.width, grp.dtype_bytes, grp.optimizer_slots, _limits(gr))
    ps = ps + check_ps(cfg, hw, cost.c, gr.ids_mp, grp.width, backward=True)
    nbytes = cost.sc_backward_bytes(gr.ids_mp, gr.unique_mp, grp.width, grp.dtype_bytes, grp.optimizer_slots)
    return ScOps(ps, nbytes)
