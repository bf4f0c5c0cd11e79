"""Sharded dense part (DOMAIN.md §2, seeds/001 Shardy): mesh, shardings, per-device work.

A mesh names axes with sizes (`<["data"=2, "model"=2]>`); a tensor sharding lists, per
dimension, the mesh axes that split it (`[{"data"}, {}]`, `{?}` = open dimension).
Sharding groups make tensors share one sharding. From the config's mesh, the dense
weights' shardings (by parameter-name pattern) and the activations' sharding this module
derives, per device: the shapes each chip stores and computes with, the GEMM FLOPs, and
the collectives the shardings imply for one training step:

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

Manual computations (`sharding.manual`, Shardy `sdy.manual_computation`) cover some dense
parameters; inside one, tensors have local shapes along its manual axes (and its
enclosing regions'), free axes still shard automatically. `resolve_manual` checks the
seed's invariants (one mesh, manual axes in mesh order and used explicitly in every in/out
sharding, free axes minor to manual ones, nested regions on disjoint axes). A covered
weight computes with its local shard: no automatic FSDP gather over manual axes; every
other collective keeps its bytes (the user's explicit collectives are taken to be those).

Bytes of a collective are what one device sends on a ring: all-reduce 2 (n-1)/n x
buffer, all-gather and reduce-scatter (n-1)/n x the full (gathered) buffer. Inconsistent
shardings raise ConfigError naming the `sharding.*` key. docs/emulator.md "Sharded dense
part" lists every rule and model choice.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from sim_backend.dense import Gemm, dense_param_shapes
from sim_backend.errors import ConfigError

if TYPE_CHECKING:
    from sim_backend.config import RunConfig

DEFAULT_AXIS = "data"  # model choice: the axis of the default mesh (pure data parallelism)
ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER = "all-reduce", "all-gather", "reduce-scatter"
DENSE_WEIGHTS, DENSE_GRADIENTS = "dense_weights", "dense_gradients"
DENSE_ACTIVATIONS, ACTIVATION_GRADIENTS = "dense_activations", "activation_gradients"
FORWARD, BACKWARD, UPDATE = "forward", "backward", "update"
GEMM_SUFFIXES = ("/kernel", "/u", "/v")  # dense_param_shapes names of matmul operands


# -- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mesh:
    """Named mesh axes with sizes, in mesh order (major to minor)."""

    axes: tuple[tuple[str, int], ...]
    name: str = ""  # the `@name` of `@name = <[...]>`, "" when anonymous

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a for a, _ in self.axes)

    @property
    def num_devices(self) -> int:
        return math.prod(s for _, s in self.axes)

    def size(self, axes: tuple[str, ...]) -> int:
        """Devices along `axes` (1 for none)."""
        sizes = dict(self.axes)
        return math.prod(sizes[a] for a in axes)

    def ordered(self, axes: set[str] | tuple[str, ...]) -> tuple[str, ...]:
        """`axes` in mesh order."""
        return tuple(a for a in self.names if a in axes)

    def __str__(self) -> str:
        body = ", ".join(f'"{a}"={s}' for a, s in self.axes)
        return (f"@{self.name} = " if self.name else "") + f"<[{body}]>"


@dataclass(frozen=True)
class DimSharding:
    """The mesh axes splitting one dimension (major to minor); open: more may be added."""

    axes: tuple[str, ...] = ()
    is_open: bool = False

    def __str__(self) -> str:
        items = [f'"{a}"' for a in self.axes] + (["?"] if self.is_open else [])
        return "{" + ", ".join(items) + "}"


@dataclass(frozen=True)
class Sharding:
    """A tensor sharding: one DimSharding per dimension, plus explicitly replicated axes."""

    dims: tuple[DimSharding, ...]
    mesh_name: str = ""  # the `@name` of `<@name, [...]>`, "" when not given
    replicated: tuple[str, ...] = ()  # `replicated={"x"}`: axes explicitly not sharding it

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(a for d in self.dims for a in d.axes)

    def closed(self) -> Sharding:
        """Open dimensions keep their listed axes and are closed (no propagation modelled)."""
        return Sharding(tuple(DimSharding(d.axes) for d in self.dims), self.mesh_name, self.replicated)

    def __str__(self) -> str:
        rep = (", replicated=" + str(DimSharding(self.replicated))) if self.replicated else ""
        return "[" + ", ".join(str(d) for d in self.dims) + "]" + rep


def replicated(rank: int) -> Sharding:
    """Every dimension closed and unsharded (`[{}, {}]`)."""
    return Sharding(tuple(DimSharding() for _ in range(rank)))


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


@dataclass(frozen=True)
class ManualRegion:
    """A manual computation (`sdy.manual_computation`) over some dense parameters.

    Inside it the tensors have local shapes along `scope_axes` (its manual axes and its
    ancestors'); the other (free) axes still shard automatically.
    """

    name: str
    axes: tuple[str, ...]  # its manual axes, in mesh order
    parent: str  # the enclosing region, "" at top level
    scope_axes: tuple[str, ...]  # manual inside its body: its axes and its ancestors'
    params: tuple[str, ...]  # dense parameters it covers (nested ones included)
    in_sharding: Sharding  # its input activation [batch, features]
    out_sharding: Sharding  # its output activation [batch, features]
    in_local_shape: tuple[int, ...]
    out_local_shape: tuple[int, ...]


def ring_bytes(kind: str, buffer_bytes: int, n: int) -> int:
    """Bytes one of n devices sends: all-reduce 2(n-1)/n x buffer; gather/scatter (n-1)/n."""
    if n <= 1:
        return 0
    if kind == ALL_REDUCE:
        return int(2 * (n - 1) / n * buffer_bytes)
    return (n - 1) * buffer_bytes // n


# -- parsing (Shardy syntax) -----------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:"([^"]*)"|(\d+)|@([A-Za-z_][\w.]*)|([\[\]{}<>=,?])|([A-Za-z_]\w*))')


def _tokens(text: str, key: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ConfigError(f"{key}: cannot read {text[pos : pos + 12]!r} in {text!r}")
        pos = m.end()
        for kind, value in zip(("name", "int", "ref", "punct", "word"), m.groups(), strict=True):
            if value is not None:
                out.append((kind, value))
    return out


class _Reader:
    def __init__(self, text: str, key: str, what: str):
        self.toks, self.i, self.key, self.text, self.what = _tokens(text, key), 0, key, text, what

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "")

    def take(self, kind: str, value: str | None = None) -> str:
        k, v = self.peek()
        if k != kind or (value is not None and v != value):
            want = repr(value) if value is not None else kind
            raise ConfigError(f"{self.key}: expected {want} at {v or 'the end'!r} in {self.text!r} (a {self.what})")
        self.i += 1
        return v

    def accept(self, value: str) -> bool:
        if self.peek() == ("punct", value):
            self.i += 1
            return True
        return False

    def done(self) -> None:
        if self.i != len(self.toks):
            self.take("end")


def parse_mesh(text: str, key: str = "sharding.mesh") -> Mesh:
    """`<["x"=2, "y"=2]>`, `["x"=2]` or `@mesh_xy = <["x"=2, "y"=2]>` -> Mesh."""
    r = _Reader(text, key, 'mesh such as <["data"=4]>')
    name = ""
    if r.peek()[0] == "ref":
        name = r.take("ref")
        r.take("punct", "=")
    angled = r.accept("<")
    r.take("punct", "[")
    axes: list[tuple[str, int]] = []
    while not r.accept("]"):
        if axes:
            r.take("punct", ",")
        axis = r.take("name")
        r.take("punct", "=")
        axes.append((axis, int(r.take("int"))))
    if angled:
        r.take("punct", ">")
    r.done()
    if not axes:
        raise ConfigError(f"{key}: the mesh {text!r} has no axes")
    seen: set[str] = set()
    for axis, size in axes:
        if not axis:
            raise ConfigError(f"{key}: an axis name is empty in {text!r}")
        if axis in seen:
            raise ConfigError(f"{key}: axis {axis!r} appears twice in {text!r}")
        if size < 1:
            raise ConfigError(f"{key}: axis {axis!r} has size {size}; sizes are >= 1")
        seen.add(axis)
    return Mesh(tuple(axes), name)


def parse_sharding(text: str, key: str) -> Sharding:
    """`[{"x"}, {}]`, `[{"x", ?}, {?}]` or `<@mesh, [{"x"}, {}], replicated={"y"}>`."""
    r = _Reader(text, key, 'sharding such as [{"data"}, {}]')
    mesh_name = ""
    angled = r.accept("<")
    if angled:
        mesh_name = r.take("ref")
        r.take("punct", ",")
    r.take("punct", "[")
    dims: list[DimSharding] = []
    while not r.accept("]"):
        if dims:
            r.take("punct", ",")
        r.take("punct", "{")
        axes: list[str] = []
        is_open = False
        while not r.accept("}"):
            if axes or is_open:
                r.take("punct", ",")
            if is_open:
                raise ConfigError(f"{key}: '?' must end its dimension in {text!r}")
            if r.accept("?"):
                is_open = True
            else:
                axes.append(r.take("name"))
        dims.append(DimSharding(tuple(axes), is_open))
    replicated: list[str] = []
    if r.accept(","):
        r.take("word", "replicated")
        r.take("punct", "=")
        r.take("punct", "{")
        while not r.accept("}"):
            if replicated:
                r.take("punct", ",")
            replicated.append(r.take("name"))
    if angled:
        r.take("punct", ">")
    r.done()
    return Sharding(tuple(dims), mesh_name, tuple(replicated))


# -- invariants ------------------------------------------------------------------------------


def check_sharding(sharding: Sharding, shape: tuple[int, ...], mesh: Mesh, key: str, tensor: str) -> None:
    """One mesh, one dimension spec per dimension, known axes, each axis at most once."""
    if sharding.mesh_name and mesh.name and sharding.mesh_name != mesh.name:
        raise ConfigError(
            f"{key}: {tensor} refers to mesh @{sharding.mesh_name} but the "
            f"program has one mesh, @{mesh.name} (sharding.mesh)"
        )
    if len(sharding.dims) != len(shape):
        raise ConfigError(
            f"{key}: {tensor} has rank {len(shape)} (shape {list(shape)}) but "
            f"the sharding {sharding} lists {len(sharding.dims)} dimensions"
        )
    seen: set[str] = set()
    for axis in sharding.axes + sharding.replicated:
        if axis not in mesh.names:
            raise ConfigError(
                f"{key}: {tensor}: axis {axis!r} is not in the mesh {mesh} (axes: {', '.join(mesh.names)})"
            )
        if axis in seen:
            raise ConfigError(
                f"{key}: {tensor}: axis {axis!r} is used twice in {sharding}; "
                "a mesh axis shards at most one dimension of a tensor, once"
            )
        seen.add(axis)


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


def local_shape(
    shape: tuple[int, ...],
    sharding: Sharding,
    mesh: Mesh,
    manual_axes: set[str] | tuple[str, ...],
    key: str = "sharding.manual",
    tensor: str = "a tensor",
) -> tuple[int, ...]:
    """A tensor's shape inside a manual computation over `manual_axes` (seeds/001).

    Each dimension is divided by the sizes of the manual axes that shard it; free axes
    are left to the automatic partitioner (`per_device_shape` splits them afterwards).
    The body's types are static, so a manual split must divide the dimension exactly
    (ConfigError naming `key` otherwise; model choice: no padding inside the region).
    """
    out = []
    for d, spec in zip(shape, sharding.dims, strict=True):
        n = mesh.size(tuple(a for a in spec.axes if a in manual_axes))
        if d % n:
            raise ConfigError(
                f"{key}: {tensor}: dimension of size {d} does not split over "
                f"the {n} devices of its manual axes in {sharding}; local "
                "shapes inside a manual computation are exact"
            )
        out.append(d // n)
    return tuple(out)


def check_manual_sharding(
    sharding: Sharding, manual: tuple[str, ...], key: str, tensor: str, implicit_replication: bool = False
) -> None:
    """Every manual axis used explicitly (a dimension or `replicated=`); free axes minor.

    `implicit_replication`: a manual axis that shards no dimension counts as replicated
    (dense weights, whose shardings come from sharding.weights, model choice).
    """
    if not implicit_replication:
        missing = [a for a in manual if a not in sharding.axes + sharding.replicated]
        if missing:
            raise ConfigError(
                f"{key}: {tensor}: {sharding} does not use manual axis {missing[0]!r}; every "
                "in/out sharding must shard a dimension over each manual axis or list it "
                "in replicated={...}"
            )
    for d, spec in enumerate(sharding.dims):
        free = [a for a in spec.axes if a not in manual]
        if free and any(a in manual for a in spec.axes[spec.axes.index(free[0]) :]):
            late = next(a for a in spec.axes[spec.axes.index(free[0]) :] if a in manual)
            raise ConfigError(
                f"{key}: {tensor}: dimension {d} lists free axis {free[0]!r} before manual "
                f"axis {late!r} in {spec}; free axes must be minor to (after) manual ones"
            )


def resolve_manual(
    cfg: RunConfig, mesh: Mesh, shapes: list[tuple[str, tuple[int, ...]]], shardings: dict[str, Sharding]
) -> tuple[list[ManualRegion], dict[str, str]]:
    """Check every `sharding.manual` region against the seed's invariants.

    Returns the regions and, per covered parameter, its innermost region's name.
    """
    entries = cfg.sharding.manual
    names = [n for n, _ in shapes]
    shape_of = dict(shapes)
    index: dict[str, int] = {}
    covered: list[tuple[str, ...]] = []
    for i, m in enumerate(entries):
        k = f"sharding.manual[{i}]"
        if not m.name:
            raise ConfigError(f"{k}.name: a manual computation needs a name")
        if m.name in index:
            raise ConfigError(
                f"{k}.name: duplicate manual computation {m.name!r} (also sharding.manual[{index[m.name]}])"
            )
        index[m.name] = i
        if not m.axes:
            raise ConfigError(f"{k}.axes: a manual computation needs at least one manual axis")
        for a in m.axes:
            if a not in mesh.names:
                raise ConfigError(f"{k}.axes: axis {a!r} is not in the mesh {mesh} (axes: {', '.join(mesh.names)})")
        if len(set(m.axes)) != len(m.axes):
            raise ConfigError(f"{k}.axes: an axis is listed twice in {m.axes}")
        if tuple(m.axes) != mesh.ordered(set(m.axes)):
            raise ConfigError(
                f"{k}.axes: manual axes {m.axes} are not in mesh order "
                f"({', '.join(mesh.names)}); list them as "
                f"{list(mesh.ordered(set(m.axes)))}"
            )
        if not m.params:
            raise ConfigError(f"{k}.params: a manual computation covers at least one dense parameter (name patterns)")
        hits: list[str] = []
        for pattern in m.params:
            found = [n for n in names if fnmatchcase(n, pattern)]
            if not found:
                raise ConfigError(f"{k}.params: pattern {pattern!r} matches no dense parameter")
            hits += [n for n in found if n not in hits]
        covered.append(tuple(n for n in names if n in hits))
    regions: list[ManualRegion] = []
    for i, m in enumerate(entries):
        k = f"sharding.manual[{i}]"
        scope = list(m.axes)
        seen, cur = {m.name}, m
        while cur.parent:  # walk to the top: parent exists, no cycle, disjoint manual axes
            pk = f"{k}.parent" if cur is m else f"sharding.manual[{index[cur.name]}].parent"
            if cur.parent not in index:
                raise ConfigError(f"{pk}: no manual computation named {cur.parent!r}")
            if cur.parent in seen:
                raise ConfigError(
                    f"{pk}: nesting of {m.name!r} loops back to {cur.parent!r}; manual computations nest as a tree"
                )
            seen.add(cur.parent)
            cur = entries[index[cur.parent]]
            shared = [a for a in m.axes if a in cur.axes]
            if shared:
                raise ConfigError(
                    f"{k}.axes: manual axis {shared[0]!r} is also manual in the "
                    f"enclosing region {cur.name!r}; nested manual computations "
                    "use disjoint manual axes"
                )
            scope += cur.axes
        if m.parent:
            outside = [n for n in covered[i] if n not in covered[index[m.parent]]]
            if outside:
                raise ConfigError(
                    f"{k}.params: {outside[0]} is not covered by the enclosing "
                    f"region {m.parent!r}; a nested region lies inside it"
                )
        own = tuple(m.axes)
        for n in covered[i]:
            check_manual_sharding(shardings[n], own, f"{k}.params", n, True)
        kernels = [n for n in covered[i] if n.endswith(GEMM_SUFFIXES)]
        width_in = shape_of[kernels[0]][0] if kernels else shape_of[covered[i][0]][-1]
        width_out = shape_of[kernels[-1]][1] if kernels else shape_of[covered[i][0]][-1]
        act: list[Sharding] = []
        local: list[tuple[int, ...]] = []
        for field, width, what in (("in_shardings", width_in, "input"), ("out_shardings", width_out, "output")):
            texts = getattr(m, field)
            if len(texts) != 1:
                raise ConfigError(
                    f"{k}.{field}: expected one sharding, of the region's {what} "
                    f"activation [batch, features], got {len(texts)}"
                )
            fk = f"{k}.{field}[0]"
            sh = parse_sharding(texts[0], fk)
            tensor = f"the region's {what} [batch, features]"
            check_sharding(sh, (cfg.global_batch, width), mesh, fk, tensor)
            check_manual_sharding(sh, own, fk, tensor)
            act.append(sh)
            local.append(local_shape((cfg.global_batch, width), sh, mesh, set(scope), fk, tensor))
        meshes = {x.mesh_name for x in act if x.mesh_name}
        if len(meshes) > 1:
            raise ConfigError(
                f"{k}.out_shardings[0]: refers to mesh @{act[1].mesh_name} but "
                f"in_shardings to @{act[0].mesh_name}; a manual computation "
                "uses one mesh"
            )
        regions.append(
            ManualRegion(
                m.name,
                own,
                m.parent,
                mesh.ordered(set(scope)),
                covered[i],
                act[0].closed(),
                act[1].closed(),
                local[0],
                local[1],
            )
        )
    region_of: dict[str, str] = {}
    depth = {r.name: len(r.scope_axes) for r in regions}
    for r, cov in zip(regions, covered, strict=True):
        for n in cov:
            other = region_of.get(n)
            if other is not None and not (_encloses(regions, other, r.name) or _encloses(regions, r.name, other)):
                raise ConfigError(
                    f"sharding.manual[{index[r.name]}].params: {n} is also in "
                    f"region {other!r} and neither encloses the other; a tensor "
                    "lies in one chain of nested regions"
                )
            if other is None or depth[r.name] > depth[other]:
                region_of[n] = r.name  # the innermost region wins
    return regions, region_of


def _encloses(regions: list[ManualRegion], outer: str, inner: str) -> bool:
    parent = {r.name: r.parent for r in regions}
    cur = parent[inner]
    while cur:
        if cur == outer:
            return True
        cur = parent[cur]
    return False


# -- from the config -------------------------------------------------------------------------


def config_mesh(cfg: RunConfig) -> Mesh:
    """The configured mesh, or one axis `data` over every chip; axes must cover the chips."""
    sc = cfg.sharding
    mesh = parse_mesh(sc.mesh) if sc.mesh else Mesh(((DEFAULT_AXIS, cfg.hardware.num_chips),))
    if mesh.num_devices != cfg.hardware.num_chips:
        raise ConfigError(
            f"sharding.mesh: the axes of {mesh} multiply to {mesh.num_devices} "
            f"devices but hardware.num_chips is {cfg.hardware.num_chips}"
        )
    return mesh


def resolve_weight_shardings(
    cfg: RunConfig, mesh: Mesh, shapes: list[tuple[str, tuple[int, ...]]]
) -> dict[str, Sharding]:
    """Every dense parameter's closed sharding: its pattern's, its group's, or replicated."""
    sc = cfg.sharding
    names = [n for n, _ in shapes]
    shape_of = dict(shapes)
    explicit: dict[str, tuple[Sharding, str]] = {}
    for pattern, text in sc.weights.items():
        key = f"sharding.weights.{pattern}"
        s = parse_sharding(text, key)
        hits = [n for n in names if fnmatchcase(n, pattern)]
        if not hits:
            raise ConfigError(
                f"{key}: matches no dense parameter (names: {', '.join(names[:6])}{', ...' if len(names) > 6 else ''})"
            )
        for n in hits:
            if n not in explicit:  # the first matching pattern wins
                check_sharding(s, shape_of[n], mesh, key, n)
                explicit[n] = (s, key)
    out = {n: explicit[n][0].closed() if n in explicit else replicated(len(shape_of[n])) for n in names}
    group_of: dict[str, str] = {}
    for gid, patterns in sc.groups.items():
        key = f"sharding.groups.{gid}"
        members: list[str] = []
        for pattern in patterns:
            hits = [n for n in names if fnmatchcase(n, pattern)]
            if not hits:
                raise ConfigError(f"{key}: pattern {pattern!r} matches no dense parameter")
            for n in hits:
                if n in group_of and group_of[n] != gid:
                    raise ConfigError(
                        f"{key}: {n} is already in sharding group {group_of[n]!r}; a tensor belongs to one group"
                    )
                if n not in members:
                    members.append(n)
                group_of[n] = gid
        shared = _group_sharding(key, members, shape_of, explicit)
        for n in members:
            check_sharding(shared, shape_of[n], mesh, key, n)
            out[n] = shared
    return out


def _group_sharding(
    key: str, members: list[str], shape_of: dict[str, tuple[int, ...]], explicit: dict[str, tuple[Sharding, str]]
) -> Sharding:
    """The one sharding of a group: closed dimensions must agree; open ones take the group's."""
    rank = len(shape_of[members[0]])
    for n in members[1:]:
        if len(shape_of[n]) != rank:
            raise ConfigError(
                f"{key}: {members[0]} has rank {rank} but {n} has rank "
                f"{len(shape_of[n])}; tensors of one group share one sharding"
            )
    given = [(n, explicit[n][0]) for n in members if n in explicit]
    dims = []
    for d in range(rank):
        closed = [(n, s.dims[d].axes) for n, s in given if not s.dims[d].is_open]
        opened = [(n, s.dims[d].axes) for n, s in given if s.dims[d].is_open]
        for n, axes in closed[1:]:
            if axes != closed[0][1]:
                raise ConfigError(
                    f"{key}: {closed[0][0]} shards dimension {d} over {_fmt(closed[0][1])} but "
                    f"{n} over {_fmt(axes)}; tensors of one sharding group must share one "
                    "sharding"
                )
        axes = closed[0][1] if closed else max((a for _, a in opened), key=len, default=())
        for n, a in opened:  # an open dimension may only be extended, not changed
            if a != axes[: len(a)]:
                raise ConfigError(
                    f"{key}: {n} opens dimension {d} as {_fmt(a, True)}, which the group's "
                    f"{_fmt(axes)} does not extend; tensors of one sharding group must share "
                    "one sharding"
                )
        dims.append(DimSharding(axes))
    return Sharding(tuple(dims))


def _fmt(axes: tuple[str, ...], is_open: bool = False) -> str:
    return str(DimSharding(axes, is_open))


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
            f"{n_batch} devices of the batch axes {_fmt(batch_axes)}"
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
                name,
                shape,
                s,
                per_device_shape(shape, s, mesh),
                per_device_shape(local, s, mesh, model - manual),
                mesh.ordered({a for a in s.axes if a in batch - manual}),
                region,
                local,
            )
        )
    gemms, act_collectives = _tensor_parallel(cfg, mesh, act, params, samples, model, activation_bytes)
    collectives = _weight_collectives(mesh, params, batch_axes, param_bytes) + act_collectives
    return DensePlan(
        mesh, act, batch_axes, samples, tuple(params), tuple(gemms), tuple(_combine(collectives)), tuple(regions)
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
