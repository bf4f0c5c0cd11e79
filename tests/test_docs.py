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
