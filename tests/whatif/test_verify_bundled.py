"""`analyze --verify` on bundled pathologies: each fix's simulation decides whether it is
recommended, and the recommendation agrees with the measured step times."""

from __future__ import annotations

from pathlib import Path

from analyzers.registry import analyze_run
from profiler.store import Store
from tests.whatif.conftest import record_into
from whatif.engine import Session, counted_step_ps
from whatif.executor import Executor
from whatif.verify import verify_report


def test_skew_fix_is_simulated_faster_and_every_verdict_matches_the_step_times(tmp_path: Path) -> None:
    with Store.open(str(tmp_path / "s.duckdb")) as store, Executor() as ex:
        run = record_into(store, "skewed_ids.toml", tmp_path / "skewed")
        session = Session(store, run, "verify", ex, root=str(tmp_path / "trials"))
        report = verify_report(session, analyze_run(store, run))
        base_ps = counted_step_ps(store, run).mean()
        verified = [
            (f, f.verified, counted_step_ps(store, store.resolve_run(f.verified["run"])).mean())
            for f in report.findings
            if f.verified
        ]
    skew = [v for f, v, _ in verified if f.rule == "sc_load_skew"]
    assert skew and all(v["recommended"] and v["change"] < -0.01 for v in skew)
    for _f, v, trial_ps in verified:
        # a recommended fix is at least 1% faster by the step times themselves; none is slower
        assert not v["recommended"] or trial_ps <= 0.99 * base_ps
        assert not (v["recommended"] and trial_ps > base_ps)
