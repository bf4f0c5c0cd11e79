"""`scprof analyze`'s device memory section: on the TF2 GPU capture (allocator events on two hosts)
the text's peak is the JSON's `allocations.device_peak_bytes` to the byte, with the allocator that
holds it, the time of the peak from the run's start, every allocator's peak, allocations and
fragmentation, and the largest allocation live at the peak; each figure is checked against the
JSON's allocator rows and formatted here, independently of profiler/units.py. Runs without
allocator events (a CPU capture, an emulated run) print no such section."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from profiler.store import Store
from scprof.cli import main
from tests.ui.alloc_store import build_alloc_store


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    return build_alloc_store(tmp_path_factory.mktemp("alloc_text"))


def cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args)) == 0, args
    return out.getvalue()


def gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB"


def test_the_text_peak_is_the_json_peak(db):
    text = cli("analyze", "tf2", "--db", db)
    doc = json.loads(cli("analyze", "tf2", "--json", "--db", db))
    alloc = doc["figures"]["allocations"]
    rows = alloc["allocators"]
    with Store.open(db, read_only=True) as store:
        first_ps = store.rows("SELECT first_ps FROM runs WHERE run_id = ?", [doc["run"]["run_id"]])[0]["first_ps"]
    lines = text.split("\n")
    head = lines.index("device memory (allocators' events; the Memory page):")
    m = re.fullmatch(
        r"  peak  (\S+ \S+) \(([\d,]+) B\) allocated by (\S+) on (\S+), (\S+ \S+) from the run's start; .*",
        lines[head + 1],
    )
    assert m, lines[head + 1]
    peak = int(m[2].replace(",", ""))
    assert peak == alloc["device_peak_bytes"] == 6_210_111_488
    assert m[1] == gib(peak) == "5.78 GiB"
    (top,) = [a for a in rows if (a["allocator"], a["host"]) == (m[3], m[4])]
    assert top["device_kind"] == "device" and top["peak_bytes"] == peak
    assert m[5] == f"{(top['peak_ts_ps'] - first_ps) / 1e12:.3g} s"
    # the table: one row per allocator, each with its own figures
    table = lines[head + 4 : head + 4 + len(rows)]
    for a in rows:
        (row,) = [r for r in table if r.split()[:3] == [a["allocator"], "on", a["host"]]]
        cells = re.split(r"\s{2,}", row.strip())
        assert cells[1] == a["device_kind"]
        assert cells[4] == f"{a['allocations']:,}" and cells[5] == f"{a['deallocations']:,}", row
        frag = a["fragmentation_at_peak_ratio"]
        assert cells[6] == (f"{frag * 100:.3f}%" if 0 < frag < 0.01 else f"{frag * 100:.1f}%"), row
    assert f"{top['live_at_peak']:,} allocations live then" in lines[head + 1]
    largest = max(top["largest_live"], key=lambda x: x["bytes"])
    assert largest["tf_op"] in lines[head + 5 + len(rows)] and "MiB" in lines[head + 5 + len(rows)]


@pytest.mark.parametrize("name", ["cpu", "emulated"])
def test_runs_without_allocator_events_print_no_memory_profile(db, name):
    assert "allocators' events" not in cli("analyze", name, "--db", db)


def test_compare_gives_both_runs_memory_peaks_as_the_overview_does(db):
    """`scprof compare` (text and JSON) and the Compare page give each run's device memory peak, the
    Overview's card's figure (RunReport.memory_peak): the allocators' peak on the GPU capture, the
    HBM counters' peak on the emulated run; a change only between peaks of one source."""
    from ui import data
    from ui.pages.compare_sides import side_by_side_memory

    doc = {n: json.loads(cli("analyze", n, "--json", "--db", db))["figures"] for n in ("tf2", "emulated")}
    gpu, tpu = doc["tf2"]["allocations"]["device_peak_bytes"], doc["emulated"]["memory"]["hbm_peak_bytes"]
    same = json.loads(cli("compare", "tf2", "tf2", "--json", "--db", db))["memory"]
    assert (same["base"]["bytes"], same["cand"]["bytes"], same["delta_bytes"]) == (gpu, gpu, 0)
    assert same["base"]["figure"] == "allocations.device_peak_bytes" and same["base"]["word"] == "device memory"
    assert f"device memory peak (allocators): {gib(gpu)} -> {gib(gpu)}, ±0 B" in cli(
        "compare", "tf2", "tf2", "--db", db
    )
    hbm = json.loads(cli("compare", "emulated", "emulated", "--json", "--db", db))["memory"]
    assert (hbm["base"]["figure"], hbm["base"]["bytes"], hbm["base"]["word"]) == ("memory.hbm_peak_bytes", tpu, "HBM")
    mixed = cli("compare", "tf2", "emulated", "--db", db)
    assert "memory peak: 5.78 GiB (allocators) -> " in mixed and "(not one quantity: no change given)" in mixed
    with Store.open(db, read_only=True) as store:
        ids = {r["name"]: r["run_id"] for r in store.rows("SELECT run_id, name FROM runs")}
        kpi = {k.label: k for k in data.overview_kpis(store, ids["tf2"], (0, 0))}
        section = str(side_by_side_memory(store, ids["tf2"], ids["tf2"], *[data.run_info(store, ids["tf2"])] * 2))
    assert kpi["device memory peak"].value == gpu
    assert f'"device memory peak (allocators)", "{gib(gpu)}", "{gib(gpu)}"' in section
