"""The SQL tree: scprof's SQL as Perfetto-style modules under profiler/sql/ (package data).

A module is a file of valid DuckDB whose tags are SQL comments. Its name is its path:
profiler/sql/stdlib/steps.sql is `stdlib.steps` and starts with `-- @module stdlib.steps`, then
its doc (comment lines) and the modules it reads (`-- @include stdlib.steps, ...`), then a
blank line and its blocks. A block is a tag line, its doc, its columns, then one statement:

    -- @view step_times                      a view: CREATE VIEW step_times AS <select>;
    -- The view's doc (may wrap over lines).
    -- @column run_id INTEGER Run.            name, DuckDB type, doc (continued on lines "--   ...")
    -- @materialized                          stored: a table that ingest fills from the SELECT
    CREATE VIEW step_times AS SELECT ...;

    -- @query runs_oldest_first              a read run by query(), $name parameters bound
    -- @param run INTEGER The run.            by DuckDB: the kwargs must equal the @params
    -- @input gaps(track_id BIGINT, ...) doc  an Arrow table the caller gives (query's inputs=)
    SELECT ... WHERE run_id = $run;

    -- @query shown_evidence                 a blank line after the tags lets the statement itself
    -- @param run INTEGER The run.            start with comments (kept by show())

    -- the run's op rows
    SELECT ... WHERE run_id = $run;

    -- @statement delete_run                 a write (INSERT, DELETE, CREATE TABLE AS), run like a query
    DELETE FROM ... WHERE run_id = $run;

    -- @macro op_events(run)                  a DuckDB macro: CREATE MACRO op_events(run) AS TABLE ...;
    -- @param run INTEGER The run.            its @params are its arguments, named in its body
    CREATE MACRO op_events(run) AS TABLE SELECT ... WHERE run_id = run;

Names starting with `_` are private to their module. Modules are parsed once per process;
`closure` orders a module's includes depth-first (a cycle is an error) and `install` creates
their views and macros in that order. No SQL text that runs is ever edited: a view's SELECT is
what follows `CREATE VIEW <name> AS`, parameters are bound, never spliced, and Arrow inputs are
registered under their declared names. `show` is the one place values become SQL text: for
display only (a finding's evidence), never run by the product.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa


class SqlTreeError(ValueError):
    """A module that breaks the tree's rules (its path, tags, includes or parameters)."""


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str


@dataclass(frozen=True)
class Input:
    """An Arrow table a query reads under `name`, given by its caller."""

    name: str
    columns: tuple[Column, ...]  # name, DuckDB type ("" doc): what the caller's table holds
    doc: str


@dataclass(frozen=True)
class Block:
    """One object of a module: a view, a macro, a query (a read) or a statement (a write)."""

    kind: str  # view, macro, query or statement
    name: str
    module: str
    doc: str
    columns: tuple[Column, ...]
    sql: str  # a view's SELECT (after CREATE VIEW <name> AS); a macro's body (after CREATE MACRO <name>(args) AS); else the statement
    params: tuple[Column, ...] = ()  # a macro's arguments, in order; a query's $parameters
    materialized: bool = False
    generated: str = ""  # what writes the statement (a test regenerates it and compares)
    inputs: tuple[Input, ...] = ()

    @property
    def signature(self) -> str:
        """A macro's `name(arg, ...)`."""
        return f"{self.name}({', '.join(p.name for p in self.params)})"

    @property
    def private(self) -> bool:
        return self.name.startswith("_")


@dataclass(frozen=True)
class Module:
    name: str
    path: str  # relative to the repository, e.g. profiler/sql/stdlib/steps.sql
    doc: str
    includes: tuple[str, ...]
    blocks: tuple[Block, ...]


KINDS = ("view", "macro", "query", "statement")
_TAG = re.compile(r"^-- @(\w+)\b ?(.*)$")
_BLOCK = re.compile(r"^-- @(" + "|".join(KINDS) + r") (\w+)(?:\(([\w, ]*)\))?\s*$")
_CREATE_VIEW = re.compile(r"^CREATE VIEW (\w+) AS\b\s*(.*)$", re.S)
_CREATE_MACRO = re.compile(r"^CREATE MACRO (\w+)\(([\w, ]*)\) AS\b\s*(.*)$", re.S)
_INPUT = re.compile(r"^(\w+)\((.*)\)\s+(\S.*)$")
_READ = re.compile(r"^\(*\s*(SELECT|WITH|FROM|VALUES|DESCRIBE|SUMMARIZE)\b", re.I)
_PARAM = re.compile(r"\$([A-Za-z_]\w*)")
_STRING_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*")
_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*")


def _code(sql: str) -> str:
    """`sql` with its string literals, quoted names and comments blanked (what the checks read)."""
    return _LITERAL_OR_COMMENT.sub(" ", sql)


def _doc_text(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines if line.strip())


def _column(spec: str, where: str) -> Column:
    parts = spec.split(None, 2)
    if len(parts) < 3:
        raise SqlTreeError(f"{where}: expected '@column|@param NAME TYPE doc', got {spec!r}")
    return Column(*parts)


def _input(spec: str, where: str) -> Input:
    m = _INPUT.match(spec)
    if not m:
        raise SqlTreeError(f"{where}: expected '@input NAME(col TYPE, ...) doc', got {spec!r}")
    parts = [c.split(None, 1) for c in m[2].split(",") if c.strip()]
    if not parts or any(len(p) != 2 for p in parts):
        raise SqlTreeError(f"{where}: @input {m[1]} declares its columns as (name TYPE, ...)")
    return Input(m[1], tuple(Column(name, type_.strip(), "") for name, type_ in parts), m[3].strip())


def _block(module: str, path: str, lines: list[str]) -> Block:
    kind, name, args = _BLOCK.match(lines[0]).groups()  # type: ignore[union-attr]
    where = f"{path}: {kind} {name}"
    if (args is not None) != (kind == "macro"):
        raise SqlTreeError(f"{where}: a macro's tag names its arguments, '@macro {name}(arg, ...)'; nothing else does")
    doc: list[str] = []
    cols: list[list[str]] = []
    params: list[list[str]] = []
    inputs: list[Input] = []
    current: list[str] | None = None  # the column or param a "--   ..." line continues
    materialized, generated = False, ""
    i = 1
    while i < len(lines) and lines[i].startswith("--"):
        line = lines[i]
        tag = _TAG.match(line)
        if tag and tag[1] in ("column", "param"):
            current = [tag[2]]
            (cols if tag[1] == "column" else params).append(current)
        elif tag and tag[1] == "input" and kind in ("query", "statement"):
            inputs.append(_input(tag[2], where))
            current = None
        elif tag and tag[1] == "materialized" and kind == "view":
            materialized, current = True, None
        elif tag and tag[1] == "generated":
            generated, current = tag[2].strip(), None
        elif tag:
            raise SqlTreeError(f"{where}: unknown tag @{tag[1]}")
        elif current is not None and line.startswith("--   "):
            current.append(line[2:].strip())
        elif not cols and not params and not inputs and current is None:
            doc.append(line[2:])
        else:
            raise SqlTreeError(f"{where}: doc text after the columns: {line!r}")
        i += 1
    statement = "\n".join(lines[i:]).strip()
    if not statement.endswith(";"):
        raise SqlTreeError(f"{where}: its statement must end with ';'")
    sql = statement[:-1].rstrip()
    if ";" in _code(sql):
        raise SqlTreeError(f"{where}: one statement per block")
    declared = tuple(_column(" ".join(p), where) for p in params)
    used = set(_PARAM.findall(_code(sql)))
    if kind == "view":
        m = _CREATE_VIEW.match(sql)
        if not m or m[1] != name:
            raise SqlTreeError(f"{where}: a view's statement is 'CREATE VIEW {name} AS <select>;'")
        sql = m[2]
        if declared:
            raise SqlTreeError(f"{where}: a view takes no @param (views cannot bind parameters)")
    elif kind == "macro":
        m = _CREATE_MACRO.match(sql)
        names = [a.strip() for a in (args or "").split(",") if a.strip()]
        if not m or m[1] != name or [a.strip() for a in m[2].split(",") if a.strip()] != names:
            raise SqlTreeError(f"{where}: a macro's statement is 'CREATE MACRO {name}({', '.join(names)}) AS ...;'")
        if [p.name for p in declared] != names:
            raise SqlTreeError(f"{where}: its @params {[p.name for p in declared]} differ from its arguments {names}")
        if used:
            raise SqlTreeError(f"{where}: a macro names its arguments, not $parameters {sorted(used)}")
        sql = m[3]
    elif used != {p.name for p in declared}:
        raise SqlTreeError(f"{where}: $parameters {sorted(used)} differ from its @params {[p.name for p in declared]}")
    if kind == "query" and not _READ.match(_code(sql).lstrip()):
        raise SqlTreeError(f"{where}: a query reads (SELECT, WITH, FROM ...); a write is a @statement")
    if kind == "statement" and _READ.match(_code(sql).lstrip()) and " INSERT " not in f" {_code(sql).upper()} ":
        raise SqlTreeError(f"{where}: a statement writes; a read is a @query")
    if materialized and not cols:
        raise SqlTreeError(f"{where}: a materialized view declares its columns (its table's)")
    return Block(
        kind,
        name,
        module,
        _doc_text(doc),
        tuple(_column(" ".join(c), where) for c in cols),
        sql,
        declared,
        materialized,
        generated,
        tuple(inputs),
    )


def parse(text: str, name: str, path: str = "") -> Module:
    """The module `name` from its text (`path` names it in errors)."""
    path = path or name
    lines = text.splitlines()
    if not lines or lines[0] != f"-- @module {name}":
        raise SqlTreeError(f"{path}: must start with '-- @module {name}' (a module's name is its path)")
    doc: list[str] = []
    includes: list[str] = []
    i = 1
    while i < len(lines) and lines[i].startswith("--"):
        tag = _TAG.match(lines[i])
        if tag and tag[1] == "include":
            includes += [n.strip() for n in tag[2].split(",") if n.strip()]
        elif tag:
            raise SqlTreeError(f"{path}: unknown module tag @{tag[1]}")
        else:
            doc.append(lines[i][2:])
        i += 1
    starts = [j for j in range(i, len(lines)) if _BLOCK.match(lines[j])]
    if any(line.strip() and not line.startswith("--") for line in lines[i : (starts or [len(lines)])[0]]):
        raise SqlTreeError(f"{path}: SQL before the first block tag (-- @view, -- @macro, -- @query, -- @statement)")
    blocks = tuple(_block(name, path, lines[a:b]) for a, b in zip(starts, [*starts[1:], len(lines)], strict=True))
    seen = [b.name for b in blocks]
    if len(set(seen)) != len(seen):
        raise SqlTreeError(f"{path}: a name declared twice")
    return Module(name, path, _doc_text(doc), tuple(includes), blocks)


class Tree:
    """The modules under one folder (the product's: profiler/sql/, `TREE`)."""

    def __init__(self, root: Traversable | Path, prefix: str = "") -> None:
        self.root = root
        self.prefix = prefix  # how paths are shown, e.g. profiler/sql/
        self._modules: dict[str, Module] = {}

    def names(self) -> tuple[str, ...]:
        """Every module's name, sorted."""

        def walk(folder: Traversable, parts: tuple[str, ...]) -> list[str]:
            out = []
            for entry in folder.iterdir():
                if entry.is_dir():
                    out += walk(entry, (*parts, entry.name))
                elif entry.name.endswith(".sql"):
                    out.append(".".join((*parts, entry.name[: -len(".sql")])))
            return out

        return tuple(sorted(walk(self.root, ())))

    def module(self, name: str) -> Module:
        if name not in self._modules:
            *folders, leaf = name.split(".")
            entry = self.root
            for part in [*folders, f"{leaf}.sql"]:
                entry = entry.joinpath(part)
            if not entry.is_file():
                raise SqlTreeError(f"no module {name} ({self.prefix}{'/'.join(folders + [leaf])}.sql)")
            rel = "/".join([*folders, f"{leaf}.sql"])
            self._modules[name] = parse(entry.read_text(), name, self.prefix + rel)
        return self._modules[name]

    def closure(self, names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        """`names` and every module they include, each after its includes (depth-first, in
        the order given); a cycle is an error."""
        done: list[str] = []

        def visit(name: str, stack: tuple[str, ...]) -> None:
            if name in stack:
                raise SqlTreeError(f"include cycle: {' -> '.join([*stack, name])}")
            if name in done:
                return
            for inc in self.module(name).includes:
                visit(inc, (*stack, name))
            done.append(name)

        for n in names:
            visit(n, ())
        return tuple(done)

    def blocks(self, names: tuple[str, ...] | list[str], kind: str = "view") -> tuple[Block, ...]:
        """The public blocks of `kind` of `names` and their includes, in install order."""
        return tuple(b for m in self.closure(names) for b in self.module(m).blocks if b.kind == kind and not b.private)

    def get(self, qualified: str) -> Block:
        """A public block by `module.name`, e.g. stdlib.runs.runs_oldest_first."""
        module, _, name = qualified.rpartition(".")
        found = [b for b in self.module(module).blocks if b.name == name]
        if not found or found[0].private:
            raise SqlTreeError(f"no public block {name} in module {module}")
        return found[0]

    def ddl(
        self, names: tuple[str, ...] | list[str], temp: bool = False, kinds: tuple[str, ...] = ("view", "macro")
    ) -> list[str]:
        """The statements that create the views and macros of `names` and their includes, in
        include order, with COMMENT ON each and its columns; a materialized view is a table of its
        columns (ingest fills it). With `temp`: TEMP views (materialized ones too) and TEMP macros,
        no comments. `kinds` picks which: ("macro",) gives a connection the macros alone, where the
        store already holds the views."""
        out = []
        for m in self.closure(names):
            for b in (b for b in self.module(m).blocks if b.kind in kinds):
                if b.kind == "macro":
                    out.append(f"CREATE OR REPLACE {'TEMP ' if temp else ''}MACRO {b.signature} AS {b.sql}")
                    if not temp:
                        table = " TABLE" if b.columns else ""
                        out.append(f"COMMENT ON MACRO{table} {b.name} IS {quote(b.doc)}")
                    continue
                if b.materialized and not temp:
                    cols = ", ".join(f"{c.name} {c.type}" for c in b.columns)
                    out += [
                        f"CREATE TABLE IF NOT EXISTS {b.name} ({cols})",
                        f"COMMENT ON TABLE {b.name} IS {quote(b.doc)}",
                    ]
                else:
                    out.append(f"CREATE OR REPLACE {'TEMP ' if temp else ''}VIEW {b.name} AS\n{b.sql}")
                    if temp:
                        continue
                    out.append(f"COMMENT ON VIEW {b.name} IS {quote(b.doc)}")
                out += [f"COMMENT ON COLUMN {b.name}.{c.name} IS {quote(c.doc)}" for c in b.columns]
        return out

    def install(
        self,
        con: duckdb.DuckDBPyConnection,
        names: tuple[str, ...] | list[str],
        temp: bool = False,
        kinds: tuple[str, ...] = ("view", "macro"),
    ) -> None:
        for stmt in self.ddl(names, temp, kinds):
            con.execute(stmt)

    def _checked(self, qualified: str, params: dict[str, object], inputs: dict[str, Any]) -> Block:
        b = self.get(qualified)
        if b.kind not in ("query", "statement"):
            raise SqlTreeError(f"{qualified} is a {b.kind}, not a query or statement")
        for what, declared, given in (
            ("parameters", {p.name for p in b.params}, set(params)),
            ("inputs", {i.name for i in b.inputs}, set(inputs)),
        ):
            if given != declared:
                missing, extra = sorted(declared - given), sorted(given - declared)
                raise SqlTreeError(f"{qualified}: {what} missing {missing}, not declared {extra}")
        return b

    def execute(self, con: duckdb.DuckDBPyConnection, qualified: str, **params: object) -> duckdb.DuckDBPyConnection:
        """Run the @query or @statement `module.name` with its parameters bound by DuckDB ($name):
        the kwargs must be exactly its @params. Returns `con`, to fetchall()/fetchone() from."""
        b = self._checked(qualified, params, {})
        return con.execute(b.sql, params) if params else con.execute(b.sql)

    def query(
        self, con: duckdb.DuckDBPyConnection, qualified: str, inputs: dict[str, Any] | None = None, **params: object
    ) -> pa.Table:
        """The result of the @query `module.name` as an Arrow table: its parameters bound as in
        `execute`, and its @inputs, Arrow tables given in `inputs`, registered under their
        declared names while it runs (`inputs` must name exactly its @inputs)."""
        b = self._checked(qualified, params, inputs or {})
        for name, table in (inputs or {}).items():
            con.register(name, table)
        try:
            return con.sql(b.sql, params=params or None).to_arrow_table()
        finally:
            for name in inputs or {}:
                con.unregister(name)

    def show(self, qualified: str, **params: object) -> str:
        """The text of a @query with its parameters written in as SQL literals: for display (a
        finding's evidence a user can paste), never executed by the product. The kwargs must be
        exactly its @params."""
        b = self.get(qualified)
        declared = {p.name for p in b.params}
        if b.kind != "query" or set(params) != declared:
            raise SqlTreeError(f"{qualified}: show() takes a query and exactly its @params {sorted(declared)}")

        def literal(value: object) -> str:
            if value is None:
                return "NULL"
            if isinstance(value, bool):
                return "true" if value else "false"
            if isinstance(value, int):
                return str(int(value))
            if isinstance(value, float):
                return repr(float(value))
            if isinstance(value, str):
                return quote(value)
            if isinstance(value, list | tuple):
                return "[" + ", ".join(literal(v) for v in value) + "]"
            raise SqlTreeError(f"{qualified}: show() cannot write a {type(value).__name__} as SQL")

        def sub(code: str) -> str:
            return _PARAM.sub(lambda m: literal(params[m[1]]) if m[1] in params else m[0], code)

        out, last = [], 0
        for m in _STRING_OR_COMMENT.finditer(b.sql):  # string literals stay as written; code and comments get values
            if m[0].startswith("--"):  # a comment's apostrophe starts no string
                continue
            out += [sub(b.sql[last : m.start()]), m[0]]
            last = m.end()
        return "".join([*out, sub(b.sql[last:])])


def quote(s: str) -> str:
    """A SQL string literal (for COMMENT ON: DuckDB binds no parameters there)."""
    return "'" + s.replace("'", "''") + "'"


@cache
def tree() -> Tree:
    """The product's tree, profiler/sql/ (parsed once per process, module by module)."""
    return Tree(resources.files("profiler").joinpath("sql"), "profiler/sql/")


def blocks(names: tuple[str, ...] | list[str], kind: str = "view") -> tuple[Block, ...]:
    return tree().blocks(names, kind)


def ddl(
    names: tuple[str, ...] | list[str], temp: bool = False, kinds: tuple[str, ...] = ("view", "macro")
) -> list[str]:
    return tree().ddl(names, temp, kinds)


def install(
    con: duckdb.DuckDBPyConnection,
    names: tuple[str, ...] | list[str],
    temp: bool = False,
    kinds: tuple[str, ...] = ("view", "macro"),
) -> None:
    tree().install(con, names, temp, kinds)


def execute(con: duckdb.DuckDBPyConnection, qualified: str, **params: object) -> duckdb.DuckDBPyConnection:
    return tree().execute(con, qualified, **params)


def query(
    con: duckdb.DuckDBPyConnection, qualified: str, inputs: dict[str, Any] | None = None, **params: object
) -> pa.Table:
    return tree().query(con, qualified, inputs, **params)


def show(qualified: str, **params: object) -> str:
    return tree().show(qualified, **params)


def get(qualified: str) -> Block:
    return tree().get(qualified)
