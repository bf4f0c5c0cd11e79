"""The config's shardings resolved and checked (Shardy; docs/emulator.md "Sharded dense
part"): the mesh, every dense parameter's sharding, sharding groups and manual computations.

From `sharding.mesh`, `sharding.weights` (by parameter-name pattern), `sharding.groups`
(tensors that share one sharding) and `sharding.manual` this module derives the closed
sharding of every dense parameter and the manual regions covering them; sharding.py plans
the per-device work from them.

Manual computations (`sharding.manual`, Shardy `sdy.manual_computation`) cover some dense
parameters; inside one, tensors have local shapes along its manual axes (and its
enclosing regions'), free axes still shard automatically. `resolve_manual` checks the
seed's invariants (one mesh, manual axes in mesh order and used explicitly in every in/out
sharding, free axes minor to manual ones, nested regions on disjoint axes).

Inconsistent shardings raise ConfigError naming the `sharding.*` key. docs/emulator.md
"Sharded dense part" lists every rule and model choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from sim_backend.dense import GEMM_SUFFIXES
from sim_backend.errors import ConfigError
from sim_backend.shardy import DimSharding, Mesh, Sharding, parse_mesh, parse_sharding, replicated

if TYPE_CHECKING:
    from sim_backend.config import RunConfig

DEFAULT_AXIS = "data"  # model choice: the axis of the default mesh (pure data parallelism)


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


def local_shape(
    shape: tuple[int, ...],
    sharding: Sharding,
    mesh: Mesh,
    manual_axes: set[str] | tuple[str, ...],
    key: str = "sharding.manual",
    tensor: str = "a tensor",
) -> tuple[int, ...]:
    """A tensor's shape inside a manual computation over `manual_axes` (sdy.manual_computation).

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
                name=m.name,
                axes=own,
                parent=m.parent,
                scope_axes=mesh.ordered(set(scope)),
                params=covered[i],
                in_sharding=act[0].closed(),
                out_sharding=act[1].closed(),
                in_local_shape=local[0],
                out_local_shape=local[1],
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
