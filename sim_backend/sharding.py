"""Sharded dense part (Shardy syntax; docs/emulator.md): per-device work and
collectives.

From the mesh, the dense parameters' shardings and the activations' sharding (parsed by
shardy.py, resolved and checked by sharding_resolve.py) this module derives, per device:
the shapes each chip stores and computes with, the GEMM FLOPs, and the collectives the
shardings imply for one training step:

- weight dimensions sharded over a *batch* axis (an axis of the activations' batch
  dimension: FSDP / ZeRO-3) -> `all-gather.dense_weights` before the forward pass and
  `reduce-scatter.dense_gradients` of the gradient over those axes;
- gradients of weights replicated along (some) batch axes -> `all-reduce.dense_gradients`
  over those axes (pure data parallelism: one all-reduce of every dense parameter);
- weight dimensions sharded over other axes (tensor parallelism): a GEMM contracting a
  sharded dimension -> `all-reduce.dense_activations` of its output; an input whose
  feature sharding differs from the kernel's -> `all-gather.dense_activations`; the
  backward pass runs the transposed collectives with the same bytes
  (`all-reduce.activation_gradients`, `reduce-scatter.activation_gradients`).

A weight covered by a manual computation (`sharding.manual`) computes with its local
shard: no automatic FSDP gather over manual axes; every other collective keeps its bytes
(the user's explicit collectives are taken to be those).

Bytes of a collective are what one device sends on a ring: all-reduce 2 (n-1)/n x
buffer, all-gather and reduce-scatter (n-1)/n x the full (gathered) buffer. Inconsistent
shardings raise ConfigError naming the `sharding.*` key. docs/emulator.md "Sharded dense
part" lists every rule and model choice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sim_backend.dense import GEMM_SUFFIXES, Gemm, dense_param_shapes
from sim_backend.errors import ConfigError
from sim_backend.sharding_resolve import (
    ManualRegion,
    check_sharding,
    config_mesh,
    local_shape,
    resolve_manual,
    resolve_weight_shardings,
)
from sim_backend.shardy import DimSharding, Mesh, Sharding, parse_sharding

if TYPE_CHECKING:
    from sim_backend.config import RunConfig

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER = "all-reduce", "all-gather", "reduce-scatter"
DENSE_WEIGHTS, DENSE_GRADIENTS = "dense_weights", "dense_gradients"
DENSE_ACTIVATIONS, ACTIVATION_GRADIENTS = "dense_activations", "activation_gradients"
FORWARD, BACKWARD, UPDATE = "forward", "backward", "update"


# -- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardedParam:
    """A dense parameter: its global shape, resolved sharding and per-device shapes."""

    name: str
    shape: tuple[int, ...]
    sharding: Sharding
    stored_shape: tuple[int, ...]  # what one device keeps in HBM (every axis divides)
    compute_shape: tuple[int, ...]  # what one device computes with (after the all-gather)
    gather_axes: tuple[str, ...]  # batch axes the weight is sharded over (FSDP)
    region: str = ""  # innermost manual computation covering it ("": none)
    local_shape: tuple[int, ...] = ()  # inside `region`: manual axes divided (else = shape)


@dataclass(frozen=True)
class Collective:
    """One collective of a training step, all tensors of that kind and axes combined."""

    kind: str  # all-reduce, all-gather or reduce-scatter
    operand: str  # dense_weights, dense_gradients, dense_activations, activation_gradients
    phase: str  # forward (before/inside the forward pass), backward, update
    axes: tuple[str, ...]
    num_devices: int
    buffer_bytes: int  # the full buffer per device (gathered / reduced size)

    @property
    def name(self) -> str:
        return f"{self.kind}.{self.operand}"

    @property
    def nbytes(self) -> int:
        """Bytes one device sends on a ring."""
        return ring_bytes(self.kind, self.buffer_bytes, self.num_devices)


@dataclass(frozen=True)
class DensePlan:
    """The dense part on the mesh: per-device shapes, GEMMs and implied collectives."""

    mesh: Mesh
    activations: Sharding
    batch_axes: tuple[str, ...]
    samples_per_device: int
    params: tuple[ShardedParam, ...]
    gemms: tuple[Gemm, ...]  # forward GEMMs on one device (dense.Gemm records)
    collectives: tuple[Collective, ...]
    regions: tuple[ManualRegion, ...] = ()  # sharding.manual, in config order

    @property
    def forward_flops(self) -> int:
        return sum(g.flops for g in self.gemms)

    @property
    def backward_gemms(self) -> tuple[Gemm, ...]:
        """Each forward GEMM's two gradient GEMMs (w.r.t. its input and its weights)."""
        return tuple(h for g in self.gemms for h in g.gradients())

    @property
    def backward_flops(self) -> int:
        """Gradients w.r.t. activations and weights: twice the forward matmuls."""
        return sum(g.flops for g in self.backward_gemms)

    @property
    def compute_param_elements(self) -> int:
        return sum(math.prod(p.compute_shape) for p in self.params)

    @property
    def stored_param_elements(self) -> int:
        return sum(math.prod(p.stored_shape) for p in self.params)

    def of(self, phase: str) -> list[Collective]:
        return [c for c in self.collectives if c.phase == phase]


def ring_bytes(kind: str, buffer_bytes: int, n: int) -> int:
    """Bytes one of n devices sends: all-reduce 2(n-1)/n x buffer; gather/scatter (n-1)/n."""
    if n <= 1:
        return 0
    if kind == ALL_REDUCE:
        return int(2 * (n - 1) / n * buffer_bytes)
    return (n - 1) * buffer_bytes // n


# -- planning ------------------------------------------------------------------------------


def per_device_shape(
    shape: tuple[int, ...], sharding: Sharding, mesh: Mesh, axes: set[str] | None = None
) -> tuple[int, ...]:
    """Each dimension divided by its axes' sizes, rounded up (padded, as Shardy/GSPMD do).

    `axes` limits the split to those mesh axes (e.g. the non-batch ones after an all-gather).
    """
    out = []
    for d, spec in zip(shape, sharding.dims, strict=True):
        used = tuple(a for a in spec.axes if axes is None or a in axes)
        out.append(-(-d // mesh.size(used)))
    return tuple(out)


def plan_dense(cfg: RunConfig, param_bytes: int = 4, activation_bytes: int = 4) -> DensePlan:
    """Resolve and check every sharding of the dense part; derive per-device work."""
    mesh = config_mesh(cfg)
    key = "sharding.activations"
    act = parse_sharding(cfg.sharding.activations, key)
    check_sharding(act, (cfg.global_batch, 0), mesh, key, "the activations [batch, features]")
    batch_axes = act.dims[0].axes
    n_batch = mesh.size(batch_axes)
    if cfg.global_batch % n_batch:
        raise ConfigError(
            f"{key}: global_batch {cfg.global_batch} does not split over the "
            f"{n_batch} devices of the batch axes {DimSharding(batch_axes)}"
        )
    samples = cfg.global_batch // n_batch
    shapes = dense_param_shapes(cfg)
    shardings = resolve_weight_shardings(cfg, mesh, shapes)
    batch = set(batch_axes)
    model = set(mesh.names) - batch
    regions, region_of = resolve_manual(cfg, mesh, shapes, shardings)
    scope_of = {r.name: set(r.scope_axes) for r in regions}
    params = []
    for name, shape in shapes:
        s = shardings[name]
        region = region_of.get(name, "")
        manual = scope_of.get(region, set())
        local = local_shape(
            shape,
            s,
            mesh,
            manual,
            f"sharding.manual[{[r.name for r in regions].index(region)}].params" if region else "sharding.manual",
            name,
        )
        params.append(
            ShardedParam(
                name=name,
                shape=shape,
                sharding=s,
                stored_shape=per_device_shape(shape, s, mesh),
                compute_shape=per_device_shape(local, s, mesh, model - manual),
                gather_axes=mesh.ordered({a for a in s.axes if a in batch - manual}),
                region=region,
                local_shape=local,
            )
        )
    gemms, act_collectives = _tensor_parallel(cfg, mesh, act, params, samples, model, activation_bytes)
    collectives = _weight_collectives(mesh, params, batch_axes, param_bytes) + act_collectives
    return DensePlan(
        mesh=mesh,
        activations=act,
        batch_axes=batch_axes,
        samples_per_device=samples,
        params=tuple(params),
        gemms=tuple(gemms),
        collectives=tuple(_combine(collectives)),
        regions=tuple(regions),
    )


def _weight_collectives(
    mesh: Mesh, params: list[ShardedParam], batch_axes: tuple[str, ...], param_bytes: int
) -> list[Collective]:
    """FSDP all-gather and reduce-scatter over a weight's batch axes; all-reduce over the rest.

    "The rest" = the batch axes the weight is not sharded over. A weight sharded over a
    manual batch axis is not gathered (the region's body computes with its local shard)
    and its gradient is not all-reduced over that axis; the all-reduce over the axes it is
    replicated on is kept (model choice: the user's explicit gradient collective in the
    body is taken to be that all-reduce, so no manual region = the previous bytes).
    """
    out = []
    for p in params:
        stored = math.prod(p.stored_shape) * param_bytes
        rest = tuple(a for a in batch_axes if a not in p.sharding.axes)
        if p.gather_axes:
            n = mesh.size(p.gather_axes)
            out.append(Collective(ALL_GATHER, DENSE_WEIGHTS, FORWARD, p.gather_axes, n, n * stored))
            out.append(Collective(REDUCE_SCATTER, DENSE_GRADIENTS, UPDATE, p.gather_axes, n, n * stored))
        out.append(Collective(ALL_REDUCE, DENSE_GRADIENTS, UPDATE, mesh.ordered(rest), mesh.size(rest), stored))
    return out


def _tensor_parallel(
    cfg: RunConfig,
    mesh: Mesh,
    act: Sharding,
    params: list[ShardedParam],
    samples: int,
    model: set[str],
    activation_bytes: int,
) -> tuple[list[Gemm], list[Collective]]:
    """Walk the GEMM chain: per-device GEMM shapes and the activation collectives they imply.

    Per kernel [in, out] with model (non-batch) axes T_in, T_out and input feature axes F:
    F != T_in and F sharded -> all-gather the input over F (then slice to T_in, free);
    T_in sharded -> the output is a partial sum: all-reduce it over T_in; the output's
    feature axes become T_out, then, when the activations' feature dimension is closed,
    an output sharded differently is all-gathered over T_out (open: kept as produced).
    The interaction input (bottom MLP output next to the embeddings) is laid out as the
    activations' feature dimension says. Backward: the transposed collectives, same bytes.
    """
    feat = act.dims[1]
    want = tuple(a for a in feat.axes if a in model)
    gemms, fwd = [], []
    cur = want
    prev_block = ""
    for p in params:
        if not p.name.endswith(GEMM_SUFFIXES):
            continue
        block = p.name.split("_")[0]
        k_in, n_out = p.shape
        t_in = tuple(a for a in p.sharding.dims[0].axes if a in model)
        t_out = tuple(a for a in p.sharding.dims[1].axes if a in model)
        if prev_block == "bottom" and block != "bottom" and cur != want:
            fwd += _gather_to(mesh, cur, samples, p.shape[0], activation_bytes)
            cur = want
        prev_block = block
        if cur != t_in and cur:
            fwd += _gather_to(mesh, cur, samples, k_in, activation_bytes)
        gemms.append(Gemm(1, samples, p.compute_shape[1], p.compute_shape[0]))
        if t_in:
            out_bytes = samples * p.compute_shape[1] * activation_bytes
            fwd.append(Collective(ALL_REDUCE, DENSE_ACTIVATIONS, FORWARD, t_in, mesh.size(t_in), out_bytes))
        cur = t_out
        if not feat.is_open and cur != want and cur:
            fwd += _gather_to(mesh, cur, samples, n_out, activation_bytes)
            cur = want
    bwd = [
        Collective(
            REDUCE_SCATTER if c.kind == ALL_GATHER else ALL_REDUCE,
            ACTIVATION_GRADIENTS,
            BACKWARD,
            c.axes,
            c.num_devices,
            c.buffer_bytes,
        )
        for c in fwd
    ]
    return gemms, fwd + bwd


def _gather_to(mesh: Mesh, axes: tuple[str, ...], samples: int, width: int, activation_bytes: int) -> list[Collective]:
    """All-gather of a [samples, width] activation sharded over `axes` in its features."""
    n = mesh.size(axes)
    if n <= 1:
        return []
    full = samples * -(-width // n) * n * activation_bytes
    return [Collective(ALL_GATHER, DENSE_ACTIVATIONS, FORWARD, axes, n, full)]


def _combine(collectives: list[Collective]) -> list[Collective]:
    """One collective per (phase, kind, operand, axes), as XLA combines them; none over 1 device."""
    sums: dict[tuple, int] = {}
    first: dict[tuple, Collective] = {}
    for c in collectives:
        if c.num_devices <= 1:
            continue
        k = (c.phase, c.kind, c.operand, c.axes)
        sums[k] = sums.get(k, 0) + c.buffer_bytes
        first.setdefault(k, c)
    return [Collective(c.kind, c.operand, c.phase, c.axes, c.num_devices, sums[k]) for k, c in first.items()]
