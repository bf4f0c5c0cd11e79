"""Shardy sharding syntax (docs/emulator.md "Sharded dense part"): the mesh and
tensor-sharding records and the parser of their text form.

A mesh names axes with sizes (`<["data"=2, "model"=2]>`, or `@name = <[...]>`); a tensor
sharding lists, per dimension, the mesh axes that split it (`[{"data"}, {}]`, `{?}` = open
dimension), optionally with its mesh and explicitly replicated axes
(`<@mesh, [{"x"}, {}], replicated={"y"}>`). Parsing checks the syntax only (a malformed
text raises ConfigError naming the `sharding.*` key); what a sharding means for a tensor
on a mesh is sharding_resolve.py's job, the per-device work it implies sharding.py's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sim_backend.errors import ConfigError


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
