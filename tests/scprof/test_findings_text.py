"""Findings read the same, and readably, on every surface: every finding of the bundled configs'
runs and of real captures, as `scprof analyze` prints it and as the UI's Findings page shows it.

- Each numeric evidence leaf is formatted by the unit its key's suffix names (a reference table
  of suffixes here, not the formatter's), or is a plain count.
- `analyze`'s evidence line of a finding is the UI's evidence table, item for item.
- No evidence text holds a raw float (more than 4 significant digits, an exponent) or a `{`.
- `analyze` prints one block per group of the Findings page (a rule's repeated findings are its
  most severe one plus "N more like this").
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from analyzers.registry import analyze_run
from profiler.store import Store
from profiler.units import format_value, unit_of
from scprof.cli import main
from tests.ui.dashkit import walk, with_class
from tests.ui.test_data import text_of
from ui import data, render
from ui import figures as ui_figures
from ui.pages.findings import render_findings
from ui.pages.overview import card as overview_card

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
CAPTURES = {
    "jax_train": ROOT / "tests/data/jax_cpu_train",
    "host_bound_capture": ROOT / "tests/data/input_pipeline/host_bound",
    "two_hosts": ROOT / "tests/data/input_pipeline/two_hosts",
    "dataloader_bound": ROOT / "tests/data/torch_dataloader/dataloader_bound.pt.trace.json.gz",
    "tpu_v6e": ROOT / "tests/data/wild/tpu_v6e_inference",
    "tf2_gpu": ROOT / "tests/data/wild/tf2_gpu_multi_worker",
}
STEPS = 4
ALL = ["critical", "warning", "info"]
# the unit each suffix names (docs/analyzers.md), checked in this order
SUFFIXES = [
    (re.compile(r".*_(ts|at)_ps$"), "ts"),
    (re.compile(r"^share_of_.*|.*_share_of_.*|.*_share$"), "share"),
    (re.compile(r".*_ratio$|.*_over_.*"), "ratio"),
    (re.compile(r".*_ps$|.*_ps_per_.*"), "ps"),
    (re.compile(r".*_bytes$|.*_bytes_per_.*"), "bytes"),
]
# plain numbers that are not whole counts: means and medians of counts, a quantizer's settings
PLAIN = re.compile(r".*(mean|median|_per_).*|rms_error|quantization_config_(low|high)")
RAW_FLOAT = re.compile(r"\d[\d,]*\.\d+(?:e[+-]?\d+)?|\d+e[+-]?\d+")


def cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0, args
    return out.getvalue()


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("findings_text")
    db = str(tmp / "store.duckdb")
    for config in CONFIGS:  # configs that fail to compile are stored as failed runs
        with (
            contextlib.suppress(SystemExit),
            contextlib.redirect_stderr(io.StringIO()),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            main(["record", str(config), "--steps", str(STEPS), "--out", str(tmp / config.stem), "--db", db])
    for name, path in CAPTURES.items():
        cli("ingest", str(path), "--name", name, "--db", db)
    return db


@pytest.fixture(scope="module")
def runs(db) -> dict[str, tuple[int, list]]:
    """{run name: (run_id, its findings)} for every run of the store."""
    with Store.open(db, read_only=True) as store:
        return {
            r["name"]: (r["run_id"], analyze_run(store, r["run_id"]).findings)
            for r in store.rows("SELECT run_id, name FROM runs ORDER BY run_id")
        }


def leaves(key: str, value):
    """(key, value) of every scalar in an evidence value; a list's scalars under the list's key."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(k, v)
    elif isinstance(value, list):
        for v in value:
            yield from leaves(key, v)
    else:
        yield key, value


def significant_digits(number: str) -> int:
    mantissa = re.split(r"e", number)[0].replace(",", "").replace(".", "").lstrip("0")
    return len(mantissa.rstrip("0")) if "e" in number else len(mantissa)


def test_the_store_covers_the_evidence_shapes(runs):
    findings = [f for _, fs in runs.values() for f in fs]
    rules = {f.rule for f in findings}
    assert {"host_bound", "sc_load_skew", "hbm_heap_pressure", "oversized_limits", "exposed_async"} <= rules
    nested = [k for f in findings for k, v in f.evidence.items() if isinstance(v, dict | list)]
    assert {"wait_share", "host_input_events", "top_contributors"} <= set(nested)


def test_every_numeric_evidence_leaf_has_the_unit_of_its_suffix_or_is_a_count(runs):
    seen = 0
    for name, (_, findings) in runs.items():
        for f in findings:
            for key, value in (kv for k, v in f.evidence.items() for kv in leaves(k, v)):
                if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
                    continue
                seen += 1
                expected = next((unit for pattern, unit in SUFFIXES if pattern.fullmatch(key)), "count")
                assert unit_of(key) == expected, (name, f.rule, key)
                if expected == "count":  # a count is whole, or a mean/median of counts
                    assert float(value).is_integer() or PLAIN.fullmatch(key), (name, f.rule, key, value)
    assert seen > 500


def evidence_rows(card) -> list[str]:
    """The UI card's evidence table as "label: value" items."""
    tables = with_class(card, "evidence")
    if not tables:
        return []
    return [
        f"{text_of(tr.children[0])}: {text_of(tr.children[1])}" for tr in walk(tables[0]) if type(tr).__name__ == "Tr"
    ]


def test_analyze_prints_the_ui_evidence_text_and_one_block_per_ui_group(db, runs):
    with Store.open(db, read_only=True) as store:
        for name, (run, findings) in runs.items():
            start_ps = data.run_info(store, run).get("first_ps") or 0
            printed = cli("analyze", name, "--db", db)
            blocks = [b for b in printed.split("\n\n") if re.match(r"\[(CRITICAL|WARNING|info)\] ", b)]
            page = render_findings(store, {"run": run, "sev": ALL})
            groups = with_class(page, "finding")
            assert len(blocks) == len(groups), name  # one block per card of the Findings page
            for block, group in zip(blocks, groups, strict=True):
                (title,) = with_class(group, "finding-title")
                assert block.startswith(
                    f"[{group.children[0].children[0].children.upper()}]".replace("[INFO]", "[info]")
                )
                assert block.split("\n")[0].endswith(text_of(title)), name
            for f in findings:
                ui_items = evidence_rows(render.finding_card(f, run, start_ps=start_ps))
                for item in ui_items:
                    assert "{" not in item and "}" not in item, (name, f.rule, item)
                    for number in RAW_FLOAT.findall(item.split(": ", 1)[1]):
                        assert significant_digits(number) <= 4 and "e" not in number, (name, f.rule, item)
                block = next((b for b in blocks if b.split("\n")[0].endswith(f.title)), None)
                if block is None:  # not its group's lead: counted on its lead's "N more like this" line
                    continue
                line = next((ln for ln in block.split("\n") if ln.startswith("  evidence ")), "  evidence ")
                assert line.removeprefix("  evidence ").split(" · ") == (ui_items or [""]), (name, f.rule)


def test_analyze_groups_the_skewed_runs_repeated_findings(db, runs):
    run, findings = runs["skewed_ids"]
    printed = cli("analyze", "skewed_ids", "--db", db)
    skew = [f for f in findings if f.rule == "sc_load_skew"]
    assert len(skew) > 10
    blocks = [b for b in printed.split("\n\n") if re.match(r"\[(CRITICAL|WARNING|info)\] ", b)]
    assert len(blocks) == len({f.rule for f in findings})
    more = [ln for ln in printed.split("\n") if "more like this" in ln]
    assert len(more) == 1 and more[0].strip().startswith(f"{len(skew) - 1} more like this: tables ")
    lead = min(skew, key=lambda f: (ALL.index(f.severity), -f.value))  # the most severe, then the largest
    (block,) = [b for b in blocks if "the hottest SparseCore partition" in b]
    assert block.split("\n")[0].endswith(lead.title)
    for f in skew:
        if f is not lead:
            assert re.search(rf"[ ,]{f.entities['tables'][0]}[,;]", more[0]) or more[0].count(",") >= 12
    assert f"{len(findings)} findings of {len(blocks)} kinds" in printed


def test_a_title_quotes_its_share_as_the_finding_card_shows_it(runs):
    """A title that prints its headline share prints it as format_value does on the finding's card
    (one decimal: 35.4%, not 35%)."""
    quoted = 0
    for name, (_, findings) in runs.items():
        for f in findings:
            if "share" in f.unit and "%" in f.title and f.value == f.value:
                shown = f"{f.value * 100:.1f}%"  # the card's figure, computed here
                assert format_value(f.value, f.unit) == shown
                assert shown in f.title, (name, f.rule, f.title)
                quoted += 1
    assert quoted >= 8


def test_a_ratio_reads_the_same_in_the_title_on_the_cards_and_in_analyze(db, runs):
    """A skew's max / mean is one quantity: the finding's title, its headline figure (on `analyze`'s
    figure line and the UI's finding card, the Overview's too) and the Overview's figure card of the
    same table (skew.tables.<t>.max_over_mean) all print it as three significant digits and a times
    sign (7.89×, as ratios in evidence read), computed here, not "7.9x" in one place and "7.886 x" in another."""
    with Store.open(db, read_only=True) as store:
        for name in ("skewed_ids",):
            run, findings = runs[name]
            printed = cli("analyze", name, "--db", db)
            cards = {
                k.source: overview_card(k)["value"]
                for k in sum(ui_figures.analysis_kpis(data.analysis(store, run)), [])
            }
            skew = [f for f in findings if f.rule == "sc_load_skew"]
            assert skew, name
            for f in skew:
                shown = f"{f.value:.3g}×"  # the reference, computed here
                assert f"gets {shown} the mean load" in f.title, (name, f.title)
                assert format_value(f.value, f.unit) == f"{shown} mean partition load"
                assert f"{f.metric} = {shown} mean partition load" in text_of(render.finding_card(f, run)), name
                (table,) = f.entities["tables"]
                assert cards[f"skew.tables.{table}.max_over_mean"] == shown, (name, table)
            lead = skew[0] if len(skew) == 1 else min(skew, key=lambda f: (ALL.index(f.severity), -f.value))
            assert f"  {lead.metric}: {lead.value:.3g}× mean partition load  (confidence" in printed, name
            for line in printed.split("\n"):  # no other spelling of a ratio anywhere in the text
                assert not re.search(r"\d(x| x)\b", line), (name, line)
