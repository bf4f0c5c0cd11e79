"""Docs that cannot rot: schema, trace format and CLI are all documented."""

from __future__ import annotations

import re

import pytest

from profiler import schema
from profiler import scprof_trace_pb2 as pb
from scprof.cli import build_parser
from tests.tracekit import REPO


def test_schema_doc_is_generated():
    doc = REPO / "docs" / "schema.md"
    assert doc.exists(), "docs/schema.md is missing: run `python -m profiler.schema > docs/schema.md`"
    assert doc.read_text() == schema.markdown(), (
        "docs/schema.md is stale: run `python -m profiler.schema > docs/schema.md`"
    )


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
    missing = [f"{what} {name}" for what, name in _proto_names() if not re.search(rf"\b{re.escape(name)}\b", text)]
    assert not missing, f"docs/trace-format.md does not mention: {', '.join(missing)}"


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

    from profiler import sql_guard, xplane_checks
    from sim_backend import config, config_checks, stream
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
        "lines per capture": f"At most {xplane_checks.MAX_LINES:,} lines",
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
