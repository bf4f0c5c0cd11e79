"""Docs that cannot rot: the schema, the trace format, the analyzers, the CLI and the
benchmarks are all documented, and no doc points outside the repository."""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
from pathlib import Path

import pytest

from analyzers.registry import ANALYZERS
from profiler import schema
from profiler import scprof_trace_pb2 as pb
from profiler.store import Store
from profiler.trace_fields import TYPED_FIELDS
from scprof.cli import build_parser
from tests.tracekit import REPO

DOCS = sorted((REPO / "docs").glob("*.md"))


def test_schema_doc_is_generated():
    doc = REPO / "docs" / "schema.md"
    assert doc.exists(), "docs/schema.md is missing: run `python -m profiler.schema > docs/schema.md`"
    assert doc.read_text() == schema.markdown(), (
        "docs/schema.md is stale: run `python -m profiler.schema > docs/schema.md`"
    )


_TYPED = {("field of EventBatch", f.name) for f in TYPED_FIELDS}


def _proto_names():
    """Every message, enum and field name of the trace format (map entries excluded)."""
    names = []

    def visit(msg):
        if msg.GetOptions().map_entry:
            return
        names.append(("message", msg.name))
        names.extend((f"field of {msg.name}", f.name) for f in msg.fields)
        for nested in msg.nested_types:
            visit(nested)

    for msg in pb.DESCRIPTOR.message_types_by_name.values():
        visit(msg)
    names += [("enum", e.name) for e in pb.DESCRIPTOR.enum_types_by_name.values()]
    return names


def test_trace_format_doc_mentions_every_message_and_field():
    doc = REPO / "docs" / "trace-format.md"
    assert doc.exists(), "docs/trace-format.md is missing"
    text = doc.read_text()
    # typed event fields have their reference table in docs/schema.md, generated from their list
    typed = (REPO / "docs" / "schema.md").read_text()
    missing = [
        f"{what} {name}"
        for what, name in _proto_names()
        if not re.search(rf"\b{re.escape(name)}\b", typed if (what, name) in _TYPED else text)
    ]
    assert not missing, f"docs/trace-format.md (typed fields: docs/schema.md) does not mention: {', '.join(missing)}"


def _subcommands():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sorted(sub.choices)


def test_cli_has_the_documented_subcommands():
    assert {"ingest", "runs", "sql"} <= set(_subcommands())


@pytest.mark.parametrize("command", _subcommands())
def test_readme_mentions_every_subcommand(command):
    readme = (REPO / "README.md").read_text()
    assert re.search(rf"scprof {command}\b", readme), f"README.md does not show `scprof {command}`"


def test_security_doc_states_the_limits_the_code_enforces():
    """docs/security.md quotes each limit as the code sets it (a changed limit fails here)."""
    import dataclasses

    from profiler import sql_guard
    from profiler.xspace import check as xspace_check
    from sim_backend import config, config_checks
    from sim_backend.recording import stream
    from ui import downloads, inputs

    def bound(section: type, key: str) -> str:
        return f"{next(f for f in dataclasses.fields(section) if f.name == key).metadata['max']:,}"

    text = " ".join((REPO / "docs" / "security.md").read_text().split())  # wrapping does not matter
    figures = {
        "--max-rows at most": f"1..{sql_guard.MAX_ROWS:,}",
        "--max-rows default": f"{sql_guard.DEFAULT_MAX_ROWS:,}",
        "--timeout at most": f"<= {sql_guard.MAX_TIMEOUT_S:g}",
        "--timeout default": f"{sql_guard.DEFAULT_TIMEOUT_S:g} s",
        "UI console timeout": f"UI console: {downloads.SQL_TIMEOUT_S:g} s",
        "query text": f"over {sql_guard.MAX_QUERY_CHARS:,} characters",
        "result bytes": f"{sql_guard.DEFAULT_MAX_BYTES // 2**20} MiB for the CLI",
        "UI page bytes": f"{downloads.SQL_PAGE_MAX_BYTES // 2**20} MiB",
        "workers": f"At most {sql_guard.MAX_CONCURRENT_QUERIES} workers",
        "lines per capture": f"At most {xspace_check.MAX_LINES:,} lines",
        "steps": f"1..{config_checks.MAX_STEPS:,}",
        "config files": f"at most {config_checks.MAX_CONFIG_FILE_BYTES // 2**20} MiB",
        "callback bodies": f"bodies over {inputs.MAX_BODY_BYTES // 2**20} MiB",
        "flush": f"at least every {stream.FLUSH_STEPS} steps",
        "num_chips": f"`num_chips` 1..{bound(config.HardwareConfig, 'num_chips')}",
        "num_threads": f"`host.num_threads` 1..{bound(config.HostConfig, 'num_threads')}",
        "time bound": "2^62 ps" if stream.MAX_SIM_TIME_PS == 1 << 62 else "?",
    }
    missing = {what: figure for what, figure in figures.items() if figure not in text}
    assert not missing, f"docs/security.md does not state: {missing}"


# --- analyzers -------------------------------------------------------------------------


def _rule_patterns(module) -> list[str]:
    """Regexes of the finding rules an analyzer module can emit: each `rule=` literal, and
    each `rule=f"..."` with its formatted parts as a word or a `<placeholder>`."""
    out = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        for kw in getattr(node, "keywords", ()):
            if kw.arg != "rule":
                continue
            if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                out.append(re.escape(kw.value.value))
            elif isinstance(kw.value, ast.JoinedStr):
                parts = [
                    re.escape(v.value) if isinstance(v, ast.Constant) else r"(?:<\w+>|\w+)" for v in kw.value.values
                ]
                out.append("".join(parts))
    return out


@pytest.mark.parametrize("module", ANALYZERS, ids=lambda m: m.NAME)
def test_analyzers_doc_documents_every_analyzer_and_its_rules(module):
    """Each registered analyzer has its `### NAME` section in docs/analyzers.md, and every
    finding rule it can emit is named there."""
    text = (REPO / "docs" / "analyzers.md").read_text()
    assert re.search(rf"^### `?{re.escape(module.NAME)}`?\b", text, re.M), (
        f"docs/analyzers.md has no '### {module.NAME}' section for analyzer {module.__name__}"
    )
    rules = _rule_patterns(module)
    missing = [r for r in rules if not re.search(rf"(?<![\w<]){r}(?![\w>])", text)]
    assert not missing, f"docs/analyzers.md does not name the rules {missing} of {module.__name__}"


def test_rule_patterns_reads_literals_and_fstrings():
    """The rule scan above sees plain and formatted rules (so the test cannot pass empty)."""
    from analyzers.rules import failures, memory, stacking

    assert "too_few_stacked_tables" in _rule_patterns(stacking)
    assert re.fullmatch(_rule_patterns(failures)[0], "failure_<kind>")
    assert re.fullmatch(_rule_patterns(memory)[0], "hbm_stack_pressure")


# --- store schema ----------------------------------------------------------------------


def _store_objects(tmp_path: Path) -> set[str]:
    """Every table, view and macro a fresh store holds, as DuckDB lists them."""
    with Store.open(str(tmp_path / "fresh.duckdb")) as store:
        db = "database_name = current_database() AND schema_name = 'main'"
        names = {r["n"] for r in store.rows(f"SELECT table_name AS n FROM duckdb_tables() WHERE {db}")}
        names |= {r["n"] for r in store.rows(f"SELECT view_name AS n FROM duckdb_views() WHERE {db} AND NOT internal")}
        names |= {
            r["n"]
            for r in store.rows(
                f"SELECT function_name AS n FROM duckdb_functions() WHERE {db} AND NOT internal "
                "AND function_type IN ('macro', 'table_macro')"
            )
        }
    return names


def test_schema_doc_has_a_section_for_every_table_view_and_macro(tmp_path):
    """docs/schema.md has a `## \\`name\\`` section for each table and view profiler/schema.py
    declares and for each table, view or macro a fresh store holds (whatever creates it)."""
    declared = {
        item.name
        for value in vars(schema).values()
        if isinstance(value, tuple)
        for item in value
        if hasattr(item, "name") and hasattr(item, "doc") and not isinstance(item, schema.Col)
    }
    in_store = _store_objects(tmp_path)
    assert {t.name for t in schema.TABLES} | {v.name for v in schema.VIEWS} <= declared
    assert {"events", "slices"} <= in_store
    text = (REPO / "docs" / "schema.md").read_text()
    missing = sorted(n for n in declared | in_store if f"## `{n}`" not in text)
    assert not missing, f"docs/schema.md has no section for {missing}: document them in profiler/schema.py"


# --- CLI -------------------------------------------------------------------------------


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, long options) of the parser and every subparser, depth first."""
    yield path, [o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(build_parser()))


def _readme_and_linked_docs() -> dict[str, str]:
    """README.md and every doc of the repository it links to, by path."""
    readme = REPO / "README.md"
    texts = {"README.md": readme.read_text()}
    for target in re.findall(r"\]\(([^)#\s]+)", texts["README.md"]):
        path = (REPO / target).resolve()
        if path.suffix == ".md" and path.is_file() and REPO in path.parents:
            texts[str(path.relative_to(REPO))] = path.read_text()
    return texts


def _names_command(line: str, path: tuple[str, ...]) -> bool:
    """Whether a doc line shows `scprof <path>` (alternatives as in `export perfetto|xspace`)."""
    alt = r"(?:[\w-]+\|)*{}(?:\|[\w-]+)*(?![\w-])"
    return bool(re.search(r"scprof" + "".join(r"\s+" + alt.format(re.escape(p)) for p in path), line))


def _has_option(line: str, option: str) -> bool:
    return bool(re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", line))


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS if p], ids=" ".join)
def test_readme_documents_every_command_and_its_flags(path):
    """README.md (or a doc it links to) shows `scprof <command>` for every command and
    subcommand, and each of its long options on a line that names the command; options that
    every command takes (`--db`) are documented once, anywhere in README.md."""
    docs = _readme_and_linked_docs()
    lines = [line for text in docs.values() for line in text.splitlines()]
    own = [line for line in lines if _names_command(line, path)]
    assert own, f"no line of README.md or the docs it links shows `scprof {' '.join(path)}`"
    leaves = [opts for p, opts in COMMANDS if p and not any(q[: len(p)] == p and q != p for q, _ in COMMANDS)]
    shared = set.intersection(*(set(opts) for opts in leaves))
    options = dict(COMMANDS)[path]
    missing = [
        o
        for o in options
        if not any(_has_option(line, o) for line in own) and not (o in shared and _has_option(docs["README.md"], o))
    ]
    assert not missing, (
        f"`scprof {' '.join(path)}` takes {missing}, which no line showing the command documents "
        "in README.md or a doc it links to"
    )


def test_readme_documents_the_top_level_options():
    readme = (REPO / "README.md").read_text()
    missing = [o for o in dict(COMMANDS)[()] if not _has_option(readme, o)]
    assert not missing, f"README.md does not document {missing}"


def test_command_walk_sees_subcommands_and_options():
    """The CLI walk above sees nested subcommands and their options (so the test cannot pass empty)."""
    table = dict(COMMANDS)
    assert {("export", "perfetto"), ("export", "xspace"), ("record",)} <= set(table)
    assert "--output" in table[("export", "xspace")] and "--perf-tables" in table[("record",)]
    assert _names_command("scprof export perfetto|xspace RUN", ("export", "xspace"))
    assert not _names_command("scprof export xspaces RUN", ("export", "xspace"))


# --- pointers out of the repository ----------------------------------------------------

DOC_FILES = [*DOCS, REPO / "README.md"]

# Places only the machine the docs were written on has: the shared brief and its sources,
# workspaces and home folders. Device files (/dev/zero) and XProf plane names (/host:CPU)
# are not paths to read and stay allowed.
OUTSIDE = re.compile(
    r"\.\./\.\./"
    r"|(?<![\w.])\.\./shared\b"
    r"|\bshared/(?:seeds|tools|hooks)\b"
    r"|\bseeds/\d"
    r"|\b(?:DOMAIN|CONVENTIONS|STYLE)\.md\b"
    r"|(?<![\w.:/-])/(?:work|home|Users|root|tmp|mnt|opt|srv|var|usr)/"
)


def _outside_pointers(doc: Path, text: str) -> list[str]:
    """What in one doc points out of the repository: a pattern above, a relative path
    (`../x`) that resolves outside it, or a relative link whose target is not in it."""
    found = [f"{m.group(0)!r} (line {text.count(chr(10), 0, m.start()) + 1})" for m in OUTSIDE.finditer(text)]
    for m in re.finditer(r"(?<![\w./])\.\./[\w./<>-]*", text):
        target = (doc.parent / m.group(0)).resolve()
        if target != REPO and REPO not in target.parents:
            found.append(f"{m.group(0)!r} resolves outside the repository")
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        link = m.group(1).split("#")[0]
        if not link or re.match(r"[a-z]+:", link):
            continue  # an anchor in the same doc, or a URL
        target = (doc.parent / link).resolve()
        if REPO not in target.parents or not target.exists():
            found.append(f"link {m.group(1)!r} is not a file of the repository")
    return found


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: p.name)
def test_docs_point_only_inside_the_repository(doc):
    """A reader of the repository has only the repository: no doc names a file outside it."""
    found = _outside_pointers(doc, doc.read_text())
    assert not found, f"{doc.relative_to(REPO)} points outside the repository: {found}"


def test_outside_pointer_check_catches_each_kind():
    doc = REPO / "docs" / "x.md"
    for text in [
        "see `../shared/DOMAIN.md` §1",
        "(seeds/000 §12)",
        "DOMAIN.md §5",
        "[brief](../../shared/CONVENTIONS.md)",
        "in /work/shared/seeds/",
        "[gone](../sim_backend/no_such_module.py)",
        "`../../x`",
    ]:
        assert _outside_pointers(doc, text), text
    for text in [
        "[ok](../sim_backend/recording/record.py)",
        "`../x` → `_x-<10 hex>`",
        "plane `/host:CPU`, `/dev/zero`",
    ]:
        assert not _outside_pointers(doc, text), text


# Comments and docstrings of the code state facts or cite docs/: no brief, source document or
# work item a reader of the repository cannot open.
SOURCE_OUTSIDE = re.compile(
    r"\bshared/(?:seeds|tools|hooks)\b|\bseeds/\d|\b(?:DOMAIN|CONVENTIONS|STYLE)(?:\.md)?\b|\b[Ii]ssues? \d+\b"
)
SOURCE_DIRS = ("analyzers", "benchmarks", "configs", "exporters", "profiler", "proto", "scprof", "sim_backend", "tests")
SOURCE_DIRS += ("tools", "ui", "whatif")
SOURCE_SUFFIXES = {".py", ".sql", ".js", ".c", ".h", ".css", ".toml", ".proto"}


def _source_files() -> list[Path]:
    files = [REPO / "Makefile", REPO / "pyproject.toml"]
    for d in SOURCE_DIRS:
        files += [
            f
            for f in (REPO / d).rglob("*")
            if f.suffix in SOURCE_SUFFIXES
            and not {"vendor", "node_modules", "__pycache__"} & set(f.parts)
            and not f.name.endswith("_pb2.py")
        ]
    here = Path(__file__).resolve()
    return [f for f in files if f.resolve() != here]


def test_code_points_only_inside_the_repository():
    """No comment or docstring cites a document or work item outside the repository."""
    found = [
        f"{f.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for f in _source_files()
        for text in [f.read_text(errors="replace")]
        for m in SOURCE_OUTSIDE.finditer(text)
    ]
    assert not found, f"code points outside the repository (state the fact or cite docs/): {found}"


def test_code_pointer_check_catches_each_kind():
    for text in ["(DOMAIN.md §1)", "seeds/003", "(CONVENTIONS)", "issue 19: first views", "Issue 4: peak"]:
        assert SOURCE_OUTSIDE.search(text), text
    for text in ["the domain of", "fuzz seeds (tests/fuzzkit.py)", "_runtime_version.Domain.PUBLIC"]:
        assert not SOURCE_OUTSIDE.search(text), text


REPO_PATH = re.compile(
    r"(?<![\w/.-])(?:analyzers|profiler|sim_backend|exporters|ui|scprof|benchmarks|tests|tools|whatif|configs|proto|docs)"
    r"/[\w./-]*?\.(?:py|c|h|sql|toml|proto|md)\b"
)


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: p.name)
def test_docs_name_only_files_that_exist(doc):
    """Every repository file a doc names by its path (`exporters/perfetto.py`) exists."""
    text = doc.read_text()
    missing = sorted({m.group(0) for m in REPO_PATH.finditer(text) if not (REPO / m.group(0)).exists()})
    assert not missing, f"{doc.relative_to(REPO)} names files that do not exist: {missing}"


# --- benchmarks ------------------------------------------------------------------------

BENCH_SCRIPTS = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if not p.name.startswith("_"))
BENCH_HEADING = re.compile(r"^## .*\(`benchmarks/([\w-]+)\.py`\)\s*$", re.M)


def _benchmark_sections() -> dict[str, str]:
    """docs/benchmarks.md's `## ... (\\`benchmarks/x.py\\`)` sections by script name."""
    text = (REPO / "docs" / "benchmarks.md").read_text()
    sections: dict[str, str] = {}
    for part in re.split(r"^(?=## )", text, flags=re.M):
        m = BENCH_HEADING.match(part)
        if m:
            assert m.group(1) not in sections, f"docs/benchmarks.md has two sections for benchmarks/{m.group(1)}.py"
            sections[m.group(1)] = part
    return sections


def test_benchmarks_doc_has_one_section_per_script():
    scripts = set(BENCH_SCRIPTS)
    sections = set(_benchmark_sections())
    assert scripts, "no benchmark scripts found"
    assert not scripts - sections, f"docs/benchmarks.md has no section for {sorted(scripts - sections)}"
    assert not sections - scripts, f"docs/benchmarks.md has sections for missing scripts {sorted(sections - scripts)}"


@pytest.mark.parametrize("script", BENCH_SCRIPTS)
def test_benchmark_section_holds_one_json_line_of_its_script(script):
    """Each section holds exactly one JSON line, the script's own (its "benchmark" name),
    and the date of its figures."""
    section = _benchmark_sections().get(script)
    assert section is not None, f"docs/benchmarks.md has no section for benchmarks/{script}.py"
    lines = [line.strip() for line in section.splitlines() if line.strip().startswith("{")]
    assert len(lines) == 1, f"benchmarks/{script}.py's section holds {len(lines)} JSON lines, not one"
    record = json.loads(lines[0])
    names = re.findall(r"\"benchmark\":\s*\"([^\"]+)\"", (REPO / "benchmarks" / f"{script}.py").read_text())
    assert names, f'benchmarks/{script}.py prints no "benchmark" key'
    assert record.get("benchmark") in names, (
        f"the JSON line of benchmarks/{script}.py's section is {record.get('benchmark')!r}'s, not {names[0]!r}"
    )
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", section), f"benchmarks/{script}.py's section gives no date"


def test_benchmarks_doc_is_no_work_log():
    text = (REPO / "docs" / "benchmarks.md").read_text()
    log = re.findall(
        r"(?i)\b(?:first|second|third|fourth|fifth|this|previous|last) session\b|tried and not kept|before this change",
        text,
    )
    assert not log, f"docs/benchmarks.md reads as a work log: {log}"
