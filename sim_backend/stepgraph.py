"""Training steps as one task graph: which tasks exist, on which resource, after what.

Per step i (docs/emulator.md "Execution: task graph and scheduler"). Each SparseCore
gathers the unique rows its partition holds for every source sub-batch; the all-to-all
carries those rows to the source SparseCores on other chips (and their gradients back).

    host preprocess (per source SparseCore, host thread pool) -> host->HBM transfer (per chip)
    -> SC forward (per group x minibatch x SparseCore) -> all-to-all (per group x mb x chip)
    -> TC forward -> TC backward (per chip) -> gradient all-to-all (per group x chip)
    -> SC backward / embedding update (per group x minibatch x SparseCore)
    TC backward (all chips) -> dense gradient all-reduce (per chip) -> TC forward of i+1
    Sharded dense part (sharding.py): FSDP weight all-gather before TC forward, the
    activation collectives of tensor parallelism after TC forward / backward, and the
    gradient reduce-scatter before the all-reduce, one ICI task per chip each.

Prefetch: preprocessing of step i waits until the input buffer of step
i - maximum_parallel_iterations is released (its SC forward is done).
Pipelining is a dependency: SC forward of step i waits for the embedding
update of step i-1 when pipelining is off (strict SC/F -> TC/F -> TC/B -> SC/B order),
and of step i-2 when on (gradients visible two steps later); and, on, an ICI order:
step i's embedding gradients queue behind its dense gradient sync when the TensorCore's
step is the longer chain (the sync gates step i+1, the gradients step i+2).
`xla_sc_num_serialized_tables_to_optimize_hbm = k`: the first k groups run one after
another on the whole slice, then the other groups together (memory.py: each serialized
group's HBM stack is live alone, the others' at once). A serialized group is a phase
with a barrier after it: forward, its lookups on every SparseCore and its activation
all-to-all (its rows leave its stack region); backward, its gradient all-to-all and its
update. The next group's phase starts after the barrier, so serialization loses what
the groups would overlap: one group's all-to-all under the next group's SparseCore
work (the latency hiding of stacking) and the SparseCores' differing loads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_backend.config import RunConfig
from sim_backend.costmodel import CostModel
from sim_backend.dense import DenseWork
from sim_backend.hardware import HardwareSpec
from sim_backend.preprocess import StepResult
from sim_backend.scops import sc_backward_ops, sc_forward_ops
from sim_backend.sharding import BACKWARD, FORWARD, UPDATE, plan_dense
from sim_backend.stacking import StackGroup
from sim_backend.taskgraph import TaskGraph

# Task kinds (also the phase order used for priorities).
INIT, HOST, INFEED, SC_FWD, A2A_FWD, TC_FWD, TC_BWD, A2A_BWD, ALLREDUCE, SC_BWD = range(10)
KIND_NAMES = {
    INIT: "table_initialization",
    HOST: "preprocess_input",
    INFEED: "host_to_hbm_transfer",
    SC_FWD: "SparseDenseMatmulOp",
    A2A_FWD: "all-to-all.activations",
    TC_FWD: "dense_forward",
    TC_BWD: "dense_backward",
    A2A_BWD: "all-to-all.gradients",
    ALLREDUCE: "all-reduce.dense_gradients",
    SC_BWD: "SparseDenseMatmulGradOp",
}
# Collectives of the sharded dense part (sharding.py), named "<kind>.<operand>".
AG_WEIGHTS, RS_GRADS, AR_ACT, AG_ACT, AR_ACT_GRADS, RS_ACT_GRADS = range(10, 16)
KIND_NAMES.update(
    {
        AG_WEIGHTS: "all-gather.dense_weights",
        RS_GRADS: "reduce-scatter.dense_gradients",
        AR_ACT: "all-reduce.dense_activations",
        AG_ACT: "all-gather.dense_activations",
        AR_ACT_GRADS: "all-reduce.activation_gradients",
        RS_ACT_GRADS: "reduce-scatter.activation_gradients",
    }
)
TC_COLLECTIVES = (ALLREDUCE, AG_WEIGHTS, RS_GRADS, AR_ACT, AG_ACT, AR_ACT_GRADS, RS_ACT_GRADS)
KIND_OF_COLLECTIVE = {KIND_NAMES[k]: k for k in TC_COLLECTIVES}
MAX_KINDS = 32
MAX_GROUPS = 1 << 12
MAX_MINIBATCHES = 1 << 10


def priority(step: int, kind: int, group: int = 0, minibatch: int = 0) -> int:
    """Lower runs first: earlier step, then earlier phase, group, minibatch."""
    return (((step + 1) * MAX_KINDS + kind) * MAX_GROUPS + group) * MAX_MINIBATCHES + minibatch


@dataclass(frozen=True)
class Resources:
    """Resource ids of the slice: one host thread pool, then per-chip devices and links."""

    num_chips: int
    sparsecores_per_chip: int
    host_threads: int

    HOST = 0

    def infeed(self, chip: int) -> int:
        return 1 + chip * self._per_chip

    def tc(self, chip: int) -> int:
        return 2 + chip * self._per_chip

    def ici(self, chip: int) -> int:
        return 3 + chip * self._per_chip

    def sc(self, chip: int, core: int) -> int:
        return 4 + chip * self._per_chip + core

    @property
    def _per_chip(self) -> int:
        return 3 + self.sparsecores_per_chip

    def units(self) -> list[int]:
        return [self.host_threads] + [1] * (self.num_chips * self._per_chip)

    def describe(self, r: int) -> tuple[str, int, int]:
        """(what, chip, core) of resource r; what in host|infeed|tc|ici|sc."""
        if r == 0:
            return "host", -1, -1
        chip, off = divmod(r - 1, self._per_chip)
        if off < 3:
            return ("infeed", "tc", "ici")[off], chip, 0 if off == 1 else -1
        return "sc", chip, off - 3


def build_graph(
    cfg: RunConfig,
    hw: HardwareSpec,
    groups: list[StackGroup],
    steps: list[StepResult],
    cost: CostModel,
    dense: DenseWork,
) -> tuple[TaskGraph, Resources]:
    """The task graph of the whole run."""
    builder = GraphBuilder(cfg, hw, groups, cost, dense)
    for sr in steps:
        builder.add_step(sr)
    return builder.graph, builder.res


class GraphBuilder:
    """Adds a run's steps to one TaskGraph, one at a time and in step order.

    Structure the streaming scheduler relies on (sim_backend/recording/stream.py, docs/emulator.md
    "Streaming"): every event is created by one step (`init`: the table initialisation,
    step -1) and signalled only by tasks of that step; a task of step i waits only on
    events of steps i, i-1, i-lag and i-depth (and on `init`). So once a task of step m
    has completed, no task of a step past m + `lookahead_steps` can be ready; and only
    tasks of the first `free_steps` steps (and the initialisation) wait on nothing.
    """

    def __init__(self, cfg: RunConfig, hw: HardwareSpec, groups: list[StackGroup], cost: CostModel, dense: DenseWork):
        activation_bytes = cost.c.activation_bytes
        if len(groups) >= MAX_GROUPS:
            raise ValueError(f"at most {MAX_GROUPS - 1} table groups")
        self.cfg, self.hw, self.cost, self.dense = cfg, hw, cost, dense
        chips, spc = hw.num_chips, hw.sparsecores_per_chip
        self.res = res = Resources(chips, spc, cfg.host.num_threads)
        self.graph = g = TaskGraph()
        self.depth = cfg.flags.maximum_parallel_iterations
        self.lag = 1 if cfg.flags.tf_xla_disable_full_embedding_pipelining else 2
        self.lookahead_steps = max(self.depth, self.lag)
        self.free_steps = self.depth
        self.n_serial = min(cfg.flags.xla_sc_num_serialized_tables_to_optimize_hbm, len(groups))
        self.sc_res = np.array([res.sc(p // spc, p % spc) for p in range(chips * spc)])
        self.init_ev = _add_initialization(g, cfg, hw, groups, cost, res) if cfg.include_initialization else None
        # events of recent steps that later steps wait on (older ones are dropped)
        self.slot_free: dict[int, int] = {}
        self.emb_done: dict[int, int] = {}
        self.dense_done: dict[int, int] = {}
        # the dense part on the mesh (sharding.py): per-device FLOPs/bytes and the collectives
        # its shardings imply (default: replicated weights, one gradient all-reduce)
        self.plan = plan = plan_dense(cfg, cost.c.dense_param_bytes, activation_bytes)
        self.tc_bytes = (
            plan.compute_param_elements * cost.c.dense_param_bytes
            + plan.samples_per_device * dense.activation_bytes_per_sample
        )
        self.chains = chains = {
            ph: [
                (KIND_OF_COLLECTIVE[c.name], c.nbytes, int(cost.collective_ps(c.kind, c.nbytes, c.num_devices)))
                for c in plan.of(ph)
            ]
            for ph in (FORWARD, BACKWARD, UPDATE)
        }
        self.weight_gathers = [x for x in chains[FORWARD] if x[0] == AG_WEIGHTS]
        self.act_forward = [x for x in chains[FORWARD] if x[0] != AG_WEIGHTS]
        self.grad_sync = sorted(chains[UPDATE], key=lambda x: x[0] != RS_GRADS) or [
            (ALLREDUCE, 0, int(cost.collective_ps("all-reduce", 0, 1)))
        ]  # 1 device: a marker

    def add_step(self, sr: StepResult) -> None:
        """Add the tasks and events of step sr.step (steps come in order, from 0)."""
        g, res, cfg, hw, cost = self.graph, self.res, self.cfg, self.hw, self.cost
        activation_bytes = cost.c.activation_bytes
        chips, spc = hw.num_chips, hw.sparsecores_per_chip
        n_sc = chips * spc
        depth, lag, n_serial, sc_res = self.depth, self.lag, self.n_serial, self.sc_res
        init_ev, slot_free, emb_done, dense_done = self.init_ev, self.slot_free, self.emb_done, self.dense_done
        plan, tc_bytes, chains = self.plan, self.tc_bytes, self.chains
        weight_gathers, act_forward, grad_sync = self.weight_gathers, self.act_forward, self.grad_sync
        i = sr.step
        ev_slot, ev_inputs, ev_act = g.event(f"slot_free[{i}]"), g.event(f"inputs[{i}]"), g.event(f"activations[{i}]")
        ev_tcb_all, ev_emb = g.event(f"tc_backward[{i}]"), g.event(f"embeddings_updated[{i}]")
        ev_dense = g.event(f"dense_updated[{i}]")
        slot_free[i], emb_done[i], dense_done[i] = ev_slot, ev_emb, ev_dense
        for held in (slot_free, emb_done, dense_done):
            held.pop(i - self.lookahead_steps - 1, None)  # no later step waits on it
        # host preprocessing (one task per source SparseCore's sub-batch), transfer per chip
        host_wait = (slot_free[i - depth],) if i - depth >= 0 else ()
        host_dur = cost.host_preprocess_ps(sr.raw_ids_per_sc)
        infeed_bytes = sr.per_chip(sr.kept_ids_per_sc, chips) * cost.c.infeed_bytes_per_id
        infeed_dur = cost.host_to_device_ps(infeed_bytes)
        for c in range(chips):
            ev_pre = g.event(f"preprocessed[{i},{c}]")
            for k in range(spc):
                p = c * spc + k
                g.add(
                    HOST,
                    res.HOST,
                    host_dur[p],
                    i,
                    priority(i, HOST, 0, p),
                    host_wait,
                    (ev_pre,),
                    chip=c,
                    sc=k,
                    ids=sr.raw_ids_per_sc[p],
                    unique_ids=sr.kept_ids_per_sc[p],
                    dropped_ids=sr.dropped_ids_per_sc[p],
                )
            g.add(
                INFEED,
                res.infeed(c),
                infeed_dur[c],
                i,
                priority(i, INFEED),
                (ev_pre,),
                (ev_inputs,),
                chip=c,
                bytes=infeed_bytes[c],
            )
        # SparseCore forward + activation all-to-all
        # SC programs launch in step order: step i's forward after step i-1's forward
        base_wait = [ev_inputs] + ([slot_free[i - 1]] if i > 0 else [])
        if i - lag >= 0:
            base_wait.append(emb_done[i - lag])
        if init_ev is not None:
            base_wait.append(init_ev)
        prev_barrier = None
        sc_step_ps = np.zeros(n_sc, np.int64)  # per SparseCore: its forward and backward work
        for gr in sr.groups:
            grp = gr.group
            fwd = sc_forward_ops(cfg, hw, cost, gr)
            dur = fwd.ps
            barrier = g.event(f"sc_forward_group[{i},{grp.index}]") if grp.index < n_serial else None
            wait = tuple(base_wait) + ((prev_barrier,) if prev_barrier is not None else ())
            sc_step_ps += dur.sum(axis=0)
            dropped = gr.dropped_sp.sum(axis=0)
            a2a_bytes = gr.cross_chip_mc * grp.width * activation_bytes
            a2a_dur = cost.collective_ps("all-to-all", a2a_bytes, chips)
            for m in range(gr.minibatches):
                chip_ev = [g.event(f"sc_forward[{i},{grp.index},{m},{c}]") for c in range(chips)]
                for p in range(n_sc):
                    sig = (ev_slot, chip_ev[p // spc]) + ((barrier,) if barrier is not None else ())
                    g.add(
                        SC_FWD,
                        int(sc_res[p]),
                        dur[m, p],
                        i,
                        priority(i, SC_FWD, grp.index, m),
                        wait,
                        sig,
                        group=grp.index,
                        chip=p // spc,
                        sc=p % spc,
                        minibatch=m,
                        ids=gr.ids_mp[m, p],
                        unique_ids=gr.unique_mp[m, p],
                        dropped_ids=dropped[p] if m == gr.minibatches - 1 else 0,
                        bytes=fwd.bytes[m, p],
                    )
                for c in range(chips):
                    g.add(
                        A2A_FWD,
                        res.ici(c),
                        a2a_dur[m, c],
                        i,
                        priority(i, A2A_FWD, grp.index, m),
                        (chip_ev[c],),
                        (ev_act,) + ((barrier,) if barrier is not None else ()),
                        group=grp.index,
                        chip=c,
                        minibatch=m,
                        bytes=a2a_bytes[m, c],
                    )
            if barrier is not None:  # the groups after the k serialized ones wait for the k-th
                prev_barrier = barrier
        # TensorCore forward/backward (per-device GEMMs), gradient exchange, dense collectives
        fwd_flops, bwd_flops = plan.forward_flops, plan.backward_flops
        tcf_dur = cost.tc_pass_ps(plan.gemms, tc_bytes)
        tcb_dur = cost.tc_pass_ps(plan.backward_gemms, 2 * tc_bytes)
        prev_dense = ((dense_done[i - 1],) if i > 0 else ()) + ((init_ev,) if init_ev is not None else ())
        gathered = _add_chain(g, res, i, weight_gathers, prev_dense)  # FSDP: before forward
        ev_tcf_all = g.event(f"tc_forward[{i}]")
        fwd_done = _add_chain(g, res, i, act_forward, (ev_tcf_all,)) if act_forward else None
        bwd_done = _add_chain(g, res, i, chains[BACKWARD], (ev_tcb_all,)) if chains[BACKWARD] else None
        _add_chain(g, res, i, grad_sync, (ev_tcb_all,), last=ev_dense)
        # gradients go back per table group, so group g's update can start while the
        # gradients of group g+1 are still on ICI (the latency hiding stacking trades off)
        grad_bytes = [gr.cross_chip_mc.sum(axis=0) * gr.group.width * activation_bytes for gr in sr.groups]
        grad_dur = [cost.collective_ps("all-to-all", b, chips) for b in grad_bytes]
        bwd_ops = [sc_backward_ops(cfg, hw, cost, gr) for gr in sr.groups]
        sc_step_ps += sum(b.ps.sum(axis=0) for b in bwd_ops)
        # ICI order of step i's dense gradient sync and embedding gradients (docs/emulator.md
        # "Pipelining"): the sync gates the TensorCore's step i+1, the gradients step i+lag's
        # lookups. Pipelined, the longer of the two per-step chains goes first: the sync when
        # the TensorCore's step (passes + sync) is at least the busiest SparseCore's.
        tc_step_ps = tcf_dur + tcb_dur + sum(d for _, _, d in grad_sync)
        last = i == cfg.steps - 1  # no TensorCore step i+1 waits for the sync
        grads_step = i + 1 if lag > 1 and not last and tc_step_ps >= int(sc_step_ps.max()) else i
        ev_grads_g = [g.event(f"grads[{i},{gr.group.index}]") for gr in sr.groups]
        # serialized groups (the first n_serial): a barrier after each group's update; a
        # group's gradients land in its stack region, so they travel after the barrier
        # of the serialized group before it (the other groups: after the last one)
        bwd_barriers = [g.event(f"sc_backward_group[{i},{k}]") for k in range(n_serial)]
        grads_after = [
            (bwd_barriers[min(gr.group.index, n_serial) - 1],) if gr.group.index > 0 and n_serial else ()
            for gr in sr.groups
        ]
        for c in range(chips):
            ev_tcf, ev_tcb = g.event(f"tc_forward[{i},{c}]"), g.event(f"tc_backward[{i},{c}]")
            g.add(
                TC_FWD,
                res.tc(c),
                tcf_dur,
                i,
                priority(i, TC_FWD),
                (ev_act, *gathered),
                (ev_tcf, ev_tcf_all),
                chip=c,
                flops=fwd_flops,
                bytes=tc_bytes,
            )
            g.add(
                TC_BWD,
                res.tc(c),
                tcb_dur,
                i,
                priority(i, TC_BWD),
                fwd_done or (ev_tcf,),
                (ev_tcb, ev_tcb_all),
                chip=c,
                flops=bwd_flops,
                bytes=2 * tc_bytes,
            )
            for gi, gr in enumerate(sr.groups):
                g.add(
                    A2A_BWD,
                    res.ici(c),
                    grad_dur[gi][c],
                    i,
                    priority(grads_step, A2A_BWD, gr.group.index),
                    (bwd_done or (ev_tcb,)) + grads_after[gi],
                    (ev_grads_g[gi],),
                    group=gr.group.index,
                    chip=c,
                    bytes=grad_bytes[gi][c],
                )
        # SparseCore backward: embedding update (a serialized group's after the barrier
        # before it, through its gradients)
        for gr, ev_grads, bwd in zip(sr.groups, ev_grads_g, bwd_ops, strict=True):
            grp = gr.group
            dur = bwd.ps
            barrier = bwd_barriers[grp.index] if grp.index < n_serial else None
            wait = (ev_grads,)
            for m in range(gr.minibatches):
                for p in range(n_sc):
                    sig = (ev_emb,) + ((barrier,) if barrier is not None else ())
                    g.add(
                        SC_BWD,
                        int(sc_res[p]),
                        dur[m, p],
                        i,
                        priority(i, SC_BWD, grp.index, m),
                        wait,
                        sig,
                        group=grp.index,
                        chip=p // spc,
                        sc=p % spc,
                        minibatch=m,
                        ids=gr.ids_mp[m, p],
                        unique_ids=gr.unique_mp[m, p],
                        bytes=bwd.bytes[m, p],
                    )


def _add_chain(
    g: TaskGraph,
    res: Resources,
    step: int,
    chain: list[tuple[int, int, int]],
    wait: tuple[int, ...],
    last: int | None = None,
) -> tuple[int, ...]:
    """Collectives (kind, bytes, dur) one after another on every chip's ICI link.

    Each waits for the previous one on every chip (a collective needs all its peers);
    returns what the next task waits for (`wait` itself when the chain is empty).
    """
    for j, (kind, nbytes, dur) in enumerate(chain):
        ev = last if last is not None and j == len(chain) - 1 else g.event(f"{KIND_NAMES[kind]}[{step},{j}]")
        for c in range(res.num_chips):
            g.add(kind, res.ici(c), dur, step, priority(step, kind), wait, (ev,), chip=c, bytes=nbytes)
        wait = (ev,)
    return wait


def table_bytes_per_chip(groups: list[StackGroup], chips: int, padded_row_bytes) -> int:
    """HBM bytes of every table shard and its optimizer slots on one chip."""
    total = 0
    for grp in groups:
        rows = int(grp.padded_vocab.sum())
        total += rows * padded_row_bytes(grp.width, grp.dtype_bytes) * (1 + grp.optimizer_slots)
    return -(-total // chips)


def _add_initialization(
    g: TaskGraph, cfg: RunConfig, hw: HardwareSpec, groups: list[StackGroup], cost: CostModel, res: Resources
) -> int:
    """Table initialisation before step 0: over the host link, or on the device (fast)."""
    ev = g.event("tables_initialized")
    on_host = cfg.sparsecore.initialize_tables_on_host and not cfg.sparsecore.enable_fast_table_initialization
    nbytes = table_bytes_per_chip(groups, hw.num_chips, cost.padded_row_bytes)
    dur = int(cost.table_init_ps(nbytes, on_host))
    for c in range(hw.num_chips):
        r = res.infeed(c) if on_host else res.tc(c)
        g.add(INIT, r, dur, -1, priority(-1, INIT), (), (ev,), chip=c, bytes=nbytes)
    return ev
