"""The SQL tree (profiler/sql/, profiler/sqltree.py): every module stands on its declared
includes, documents the columns DuckDB gives, binds the parameters it declares; the loader
refuses a module that breaks the rules (its name, its includes, its tags, its parameters)."""

from __future__ import annotations

import importlib.util

import duckdb
import pytest

from profiler import sqltree
from profiler.schema import TABLES, table_ddl
from profiler.sqltree import SqlTreeError, Tree
from profiler.stdlib import STDLIB, STDLIB_MODULES
from tests.tracekit import REPO

TREE = sqltree.tree()
MODULES = TREE.names()


def raw_store() -> duckdb.DuckDBPyConnection:
    """A fresh in-memory store of the tables only (no view of the tree)."""
    con = duckdb.connect()
    for t in TABLES:
        for stmt in table_ddl(t):
            con.execute(stmt)
    return con


def write(root, files: dict[str, str]) -> Tree:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Tree(root)


def test_the_tree_holds_the_schema_views_and_the_stdlib():
    assert set(MODULES) >= {"schema.views", *STDLIB_MODULES}
    assert [b.name for b in STDLIB] == [
        "step_spans",
        "chip_steps",
        "step_windows",
        "step_times",
        "step_minibatches",
        "hbm_usage",
        "hbm_peaks",
        "op_tracks",
        "device_busy",
        "device_idle",
        "async_spans",
        "op_stats",
        "op_self_times",
        "sc_table_stats",
        "run_list",
    ]
    assert {b.name for b in STDLIB if b.materialized} == {"chip_steps", "step_times", "hbm_peaks"}


@pytest.mark.parametrize("name", MODULES)
def test_module_name_is_its_path(name):
    m = TREE.module(name)
    assert m.name == name and m.path == "profiler/sql/" + name.replace(".", "/") + ".sql"
    assert (REPO / m.path).is_file()


@pytest.mark.parametrize("name", MODULES)
def test_module_installs_with_only_its_include_closure(name):
    con = raw_store()
    TREE.install(con, [name])  # an undeclared dependency fails here: DuckDB binds a view when created
    for b in TREE.module(name).blocks:
        if b.kind in ("query", "statement"):  # prepares and runs on the empty tables, its parameters bound
            empty_inputs(con, b)
            try:
                con.execute(b.sql, {p.name: None for p in b.params}).fetchall()
            except duckdb.ConstraintException:  # a write of its NULL parameters into a NOT NULL column: it ran
                assert b.kind == "statement", b.name
        elif b.kind == "macro" and b.columns:  # a table macro runs on the empty tables
            con.execute(f"SELECT * FROM {b.name}({', '.join('NULL' for _ in b.params)})").fetchall()


def empty_inputs(con: duckdb.DuckDBPyConnection, b: sqltree.Block) -> None:
    """Empty tables under a block's @input names, of their declared columns."""
    for i in b.inputs:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {i.name} ({', '.join(f'{c.name} {c.type}' for c in i.columns)})")


@pytest.mark.parametrize("name", MODULES)
def test_every_column_list_equals_describe(name):
    con = raw_store()
    TREE.install(con, [name])
    for b in TREE.module(name).blocks:
        if b.kind == "view":
            # the schema's views document their columns in their tables (TABLES), not here
            assert b.columns or name == "schema.views", f"{b.name}: no @column"
            if not b.columns:
                continue
            want = [(c.name, c.type) for c in b.columns]
            assert [r[:2] for r in con.execute(f"DESCRIBE {b.name}").fetchall()] == want, b.name
            # a materialized view is a table of its columns: its SELECT must give them too (ingest inserts BY NAME)
            assert [r[:2] for r in con.execute(f"DESCRIBE SELECT * FROM ({b.sql})").fetchall()] == want, b.name
        elif b.kind == "macro" and b.columns:
            args = ", ".join("NULL" for _ in b.params)
            got = con.execute(f"SELECT * FROM {b.name}({args})").description
            assert [d[0] for d in got] == [c.name for c in b.columns], b.name
        elif b.kind in ("query", "statement") and b.columns:
            empty_inputs(con, b)
            got = con.execute(b.sql, {p.name: None for p in b.params}).description
            assert [d[0] for d in got] == [c.name for c in b.columns], b.name


def test_ddl_installs_comments_from_the_tags():
    con = raw_store()
    TREE.install(con, ["stdlib.runs"])
    step_times = TREE.get("stdlib.steps.step_times")
    assert con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'step_times'").fetchall() == [
        (step_times.doc,)
    ]
    comments = con.execute(
        "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = 'run_list' ORDER BY column_index"
    ).fetchall()
    assert comments == [(c.name, c.doc) for c in TREE.get("stdlib.runs.run_list").columns]
    temp = TREE.ddl(["stdlib.steps"], temp=True)
    assert all(s.startswith("CREATE OR REPLACE TEMP VIEW ") for s in temp) and len(temp) == 5


def test_generated_statements_are_current():
    spec = importlib.util.spec_from_file_location("gen_sql", REPO / "tools" / "gen_sql.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for rel, view, render in gen.GENERATED:
        block = TREE.get(rel.removesuffix(".sql").replace("/", ".") + "." + view)
        assert block.generated.startswith("tools/gen_sql.py")
        assert block.sql == render(), f"profiler/sql/{rel}: {view} is stale: run python tools/gen_sql.py"


def test_generated_modules_are_current():
    spec = importlib.util.spec_from_file_location("gen_sql", REPO / "tools" / "gen_sql.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for rel, render in gen.MODULES:
        path = REPO / "profiler" / "sql" / rel
        assert path.read_text() == render(), f"profiler/sql/{rel} is stale: run python tools/gen_sql.py"
        module = TREE.module(rel.removesuffix(".sql").replace("/", "."))
        assert module.blocks and all(b.generated.startswith("tools/gen_sql.py") for b in module.blocks)


def test_query_binds_exactly_its_declared_params(tmp_path):
    tree = write(
        tmp_path,
        {
            "q.sql": "-- @module q\n-- Queries.\n\n"
            "-- @query pick\n-- One run's value.\n-- @param run INTEGER The run.\n-- @column v INTEGER Value.\n"
            "SELECT $run + 1 AS v, '$not_a_param' AS s;\n"
        },
    )
    con = duckdb.connect()
    assert tree.execute(con, "q.pick", run=41).fetchall() == [(42, "$not_a_param")]
    assert tree.query(con, "q.pick", run=41).to_pylist() == [{"v": 42, "s": "$not_a_param"}]
    with pytest.raises(SqlTreeError, match="missing \\['run'\\]"):
        tree.query(con, "q.pick")
    with pytest.raises(SqlTreeError, match="not declared \\['chip'\\]"):
        tree.execute(con, "q.pick", run=1, chip=0)


def test_inputs_are_registered_under_their_declared_names_while_the_query_runs(tmp_path):
    import pyarrow as pa

    tree = write(
        tmp_path,
        {
            "q.sql": "-- @module q\n\n-- @query total\n-- Sum of the given rows over a floor.\n"
            "-- @param floor INTEGER Floor.\n-- @input rows(v BIGINT) The values.\n-- @column t BIGINT Sum.\n"
            "SELECT sum(v)::BIGINT AS t FROM rows WHERE v > $floor;\n"
        },
    )
    con = duckdb.connect()
    rows = pa.table({"v": pa.array([1, 5, 7], pa.int64())})
    assert tree.query(con, "q.total", {"rows": rows}, floor=2).to_pylist() == [{"t": 12}]
    assert "rows" not in {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
    with pytest.raises(SqlTreeError, match="inputs missing \\['rows'\\]"):
        tree.query(con, "q.total", floor=2)
    with pytest.raises(SqlTreeError, match="inputs missing \\[\\], not declared \\['other'\\]"):
        tree.query(con, "q.total", {"rows": rows, "other": rows}, floor=2)


def test_macros_install_with_their_arguments_and_docs(tmp_path):
    tree = write(
        tmp_path,
        {
            "m.sql": "-- @module m\n\n-- @macro below(n)\n-- The numbers below n.\n-- @param n INTEGER Bound.\n"
            "-- @column x BIGINT A number.\nCREATE MACRO below(n) AS TABLE SELECT range AS x FROM range(n);\n"
        },
    )
    con = duckdb.connect()
    tree.install(con, ["m"])
    assert con.execute("SELECT count(*) FROM below(4)").fetchall() == [(4,)]
    assert con.execute("SELECT comment FROM duckdb_functions() WHERE function_name = 'below'").fetchall() == [
        ("The numbers below n.",)
    ]
    assert tree.ddl(["m"], temp=True) == [
        "CREATE OR REPLACE TEMP MACRO below(n) AS TABLE SELECT range AS x FROM range(n)"
    ]
    assert tree.ddl(["m"], kinds=("view",)) == []


def test_show_writes_values_in_for_display_only(tmp_path):
    tree = write(
        tmp_path,
        {
            "q.sql": "-- @module q\n\n-- @query pick\n-- Doc.\n-- @param run INTEGER Run.\n-- @param name VARCHAR Name.\n\n"
            "-- run $run: the rows named $name\nSELECT '$run' AS s FROM t WHERE run_id = $run AND name = $name;\n",
            "c.sql": "-- @module c\n\n-- @query pick\n-- Doc.\n-- @param run INTEGER Run.\n\n"
            "-- the run's rows\nSELECT * FROM t WHERE run_id = $run AND name = 'x';\n",
        },
    )
    shown = tree.show("q.pick", run=3, name="it's")
    assert shown == "-- run 3: the rows named 'it''s'\nSELECT '$run' AS s FROM t WHERE run_id = 3 AND name = 'it''s'"
    with pytest.raises(SqlTreeError, match="exactly its @params"):
        tree.show("q.pick", run=3)
    # an apostrophe in a comment starts no string literal
    assert tree.show("c.pick", run=3) == "-- the run's rows\nSELECT * FROM t WHERE run_id = 3 AND name = 'x'"


@pytest.mark.parametrize(
    "header, sql",
    [
        ("-- @param run INTEGER The run.\n-- @param chip INTEGER Unused.\n", "SELECT $run;"),  # extra @param
        ("-- @param run INTEGER The run.\n", "SELECT $run, $chip;"),  # missing @param
    ],
)
def test_params_must_match_the_sql(tmp_path, header, sql):
    tree = write(tmp_path, {"q.sql": f"-- @module q\n\n-- @query pick\n-- Doc.\n{header}{sql}\n"})
    with pytest.raises(SqlTreeError, match="differ from its @params"):
        tree.module("q")


def test_include_cycle_is_an_error(tmp_path):
    tree = write(
        tmp_path,
        {
            "a.sql": "-- @module a\n-- @include b\n\n-- @view va\n-- A.\nCREATE VIEW va AS SELECT 1 AS x;\n",
            "b.sql": "-- @module b\n-- @include a\n\n-- @view vb\n-- B.\nCREATE VIEW vb AS SELECT * FROM va;\n",
        },
    )
    with pytest.raises(SqlTreeError, match="include cycle: a -> b -> a"):
        tree.closure(["a"])


def test_undeclared_dependency_fails_to_install(tmp_path):
    tree = write(
        tmp_path,
        {
            "lib/a.sql": "-- @module lib.a\n\n-- @view va\n-- A.\n-- @column x INTEGER X.\nCREATE VIEW va AS SELECT 1 AS x;\n",
            "lib/b.sql": "-- @module lib.b\n\n-- @view vb\n-- B.\nCREATE VIEW vb AS SELECT x FROM va;\n",
            "lib/c.sql": "-- @module lib.c\n-- @include lib.a\n\n-- @view vc\n-- C.\nCREATE VIEW vc AS SELECT x FROM va;\n",
        },
    )
    assert tree.names() == ("lib.a", "lib.b", "lib.c")
    with pytest.raises(duckdb.CatalogException, match="va"):
        tree.install(duckdb.connect(), ["lib.b"])
    con = duckdb.connect()
    tree.install(con, ["lib.c"])
    assert con.execute("SELECT * FROM vc").fetchall() == [(1,)]


@pytest.mark.parametrize(
    "text, error",
    [
        ("-- @module other\n", "must start with '-- @module m'"),  # name is not the path
        ("-- @module m\n\n-- @view v\n-- V.\nCREATE VIEW w AS SELECT 1;\n", "CREATE VIEW v AS"),
        ("-- @module m\n\n-- @view v\n-- V.\nCREATE VIEW v AS SELECT 1\n", "must end with ';'"),
        ("-- @module m\n\n-- @view v\n-- @colum x INTEGER X.\nCREATE VIEW v AS SELECT 1;\n", "unknown tag @colum"),
        ("-- @module m\n\n-- @view v\n-- @column x INTEGER\nCREATE VIEW v AS SELECT 1;\n", "NAME TYPE doc"),
        ("-- @module m\n\n-- @query q\nSELECT 1; SELECT 2;\n", "one statement per block"),
        ("-- @module m\nSELECT 1;\n", "SQL before the first block tag"),
        ("-- @module m\n\n-- @view v\n-- V.\n-- @materialized\nCREATE VIEW v AS SELECT 1;\n", "declares its columns"),
        ("-- @module m\n\n-- @query q\nSELECT 1;\n-- @query q\nSELECT 2;\n", "declared twice"),
        ("-- @module m\n\n-- @query q\nDELETE FROM t;\n", "a write is a @statement"),
        ("-- @module m\n\n-- @statement s\nSELECT 1;\n", "a read is a @query"),
        ("-- @module m\n\n-- @macro f(a)\n-- F.\nCREATE MACRO f(a) AS a + 1;\n", "differ from its arguments"),
        (
            "-- @module m\n\n-- @macro f(a)\n-- @param a INTEGER A.\nCREATE MACRO f(b) AS b + 1;\n",
            "CREATE MACRO f\\(a\\)",
        ),
        ("-- @module m\n\n-- @macro f(a)\n-- @param a INTEGER A.\nCREATE MACRO f(a) AS $a + 1;\n", "not \\$parameters"),
        ("-- @module m\n\n-- @query q(a)\nSELECT 1;\n", "nothing else does"),
        ("-- @module m\n\n-- @query q\n-- @input rows(v) Rows.\nSELECT * FROM rows;\n", "declares its columns"),
    ],
)
def test_broken_modules_are_refused(tmp_path, text, error):
    tree = write(tmp_path, {"m.sql": text})
    with pytest.raises(SqlTreeError, match=error):
        tree.module("m")


def test_private_blocks_stay_in_their_module(tmp_path):
    tree = write(
        tmp_path,
        {
            "m.sql": "-- @module m\n\n-- @view _base\n-- Private.\nCREATE VIEW _base AS SELECT 1 AS x;\n\n"
            "-- @view v\n-- Public.\n-- @column x INTEGER X.\nCREATE VIEW v AS SELECT x FROM _base;\n"
        },
    )
    assert [b.name for b in tree.blocks(["m"])] == ["v"]
    with pytest.raises(SqlTreeError, match="no public block _base"):
        tree.get("m._base")
    con = duckdb.connect()
    tree.install(con, ["m"])  # installed all the same: the public view reads it
    assert con.execute("SELECT * FROM v").fetchall() == [(1,)]
