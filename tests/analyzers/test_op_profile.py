"""The op profile (analyzers/rules/op_profile.py): self time, count, share, FLOPs per op, against
hand-computed values, the store's op_self_times view (a range join, written apart) and plain SQL."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzers.context import RunContext
from analyzers.rules import op_profile
from profiler.store import Store
from scprof.cli import main
from tests.analyzers.runkit import HOST, TC_OPS, Ev, RunSpec, store_with
from tests.tracekit import PROPERTY
from tests.xplane.helpers import DATA


def test_nested_host_scopes_get_their_self_time(tmp_path):
    # host: outer [0, 100) holds a [10, 40) (which holds b [20, 30)) and c [50, 60); device ops do not nest
    events = [
        Ev(HOST, 0, 0, "outer", 0, 100),
        Ev(HOST, 0, 0, "a", 10, 30),
        Ev(HOST, 0, 0, "b", 20, 10),
        Ev(HOST, 0, 0, "c", 50, 10),
        Ev(TC_OPS, 0, 0, "fusion", 0, 40),
        Ev(TC_OPS, 0, 0, "fusion", 50, 20),
        Ev(TC_OPS, 0, 0, "dot", 80, 20),
    ]
    with store_with(tmp_path, RunSpec(events=events)) as store:
        rows = {(r["track_kind"], r["name"]): r for r in op_profile.profile(RunContext(store, 1)).to_pylist()}
    self_ps = {k[1]: r["self_ps"] for k, r in rows.items()}
    assert self_ps == {"outer": 100 - 30 - 10, "a": 30 - 10, "b": 10, "c": 10, "fusion": 60, "dot": 20}
    fusion = rows[("tensorcore", "fusion")]
    assert (fusion["events"], fusion["total_ps"], fusion["flops"]) == (2, 60, None)  # no FLOPs recorded
    assert fusion["share"] == pytest.approx(60 / 80)
    assert list(rows)[:2] == [("tensorcore", "fusion"), ("tensorcore", "dot")]  # device work first


def _against_self_times_view(store: Store, run_id: int) -> None:
    got = op_profile.profile(RunContext(store, run_id)).to_pylist()
    want = store.rows(
        """SELECT t.track_kind, s.name, sum(s.self_ps)::BIGINT AS self_ps, count(*) AS events
           FROM op_self_times s JOIN op_tracks t USING (run_id, track_id) WHERE s.run_id = ? GROUP BY ALL""",
        [run_id],
    )
    per_op: dict = {}
    for r in got:  # the profile splits an op by category too
        k = (r["track_kind"], r["name"])
        per_op[k] = per_op.get(k, 0) + r["self_ps"]
    assert per_op == {(r["track_kind"], r["name"]): r["self_ps"] for r in want}


@pytest.mark.parametrize("capture", ["input_pipeline/host_bound", "jax_cpu_train"])
def test_self_times_match_the_store_view_on_real_captures(tmp_path, capture):
    db = str(tmp_path / "s.duckdb")
    assert main(["ingest", f"{DATA}/{capture}", "--db", db, "--name", "x"]) == 0
    with Store.open(db, read_only=True) as store:
        _against_self_times_view(store, 1)


span = st.tuples(st.integers(0, 50), st.integers(1, 30))


@PROPERTY
@given(spans=st.lists(span, min_size=1, max_size=25, unique=True))
def test_self_times_match_the_store_view_on_random_nestings(tmp_path_factory, spans):
    # random host scopes; nested properly or not (overlapping ones count as nested, self time >= 0)
    events = [Ev(HOST, 0, 0, f"op{i % 4}", s, d) for i, (s, d) in enumerate(spans)]
    with store_with(tmp_path_factory.mktemp("ops"), RunSpec(events=events)) as store:
        _against_self_times_view(store, 1)


def test_flops_and_bytes_are_the_events_sums(tmp_path):
    from profiler.synthetic import write_synthetic_trace
    from profiler.trace_to_store import ingest_traces

    trace = str(tmp_path / "syn.sctrace")
    write_synthetic_trace(trace, 20_000)
    with Store.open(str(tmp_path / "s.duckdb")) as store:
        ingest_traces(store, [trace])
        got = {
            (r["track_kind"], r["name"]): (r["flops"], r["bytes"], r["events"])
            for r in op_profile.profile(RunContext(store, 1)).to_pylist()
        }
        want = {
            (r["track_kind"], r["name"]): (r["f"], r["b"], r["n"])
            for r in store.rows(
                """SELECT track_kind, name, sum(flops) AS f, sum(bytes) AS b, count(*) AS n FROM slices
               WHERE run_id = 1 AND dur_ps > 0 AND line NOT IN ('Steps', 'XLA Modules', 'Sparse Core Steps',
               'Sparse Core Modules') AND track_kind <> 'counter' GROUP BY ALL"""
            )
        }
    assert got == want and any(f for f, _, _ in got.values()) and any(b for _, b, _ in got.values())
