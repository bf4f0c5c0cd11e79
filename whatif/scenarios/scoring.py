"""Scoring scenario results against their labels: per rule precision, recall and F1, micro
averages, the confusion between injected causes and reported rules, false findings on healthy
controls, and whether each true finding's fix is the injected cause's and verified faster.

A finding counts as a report of its rule at severity warning or critical; info findings are
facts, not diagnoses: they are counted apart (`info_hits`: an expected rule reported only at
info), never as a true or false report."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from whatif.scenarios.causes import BY_NAME, DERIVE

COUNTED = ("warning", "critical")


def reported(result: dict[str, Any]) -> set[str]:
    """The rules a scenario's analysis reported at warning or critical."""
    return {f["rule"] for f in result.get("findings", []) if f["severity"] in COUNTED}


def ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def f1(p: float | None, r: float | None) -> float | None:
    return round(2 * p * r / (p + r), 4) if p and r else (0.0 if p is not None and r is not None else None)


def fix_keys(fix: dict[str, Any] | None) -> set[str]:
    """A fix's keys with table names generalised (tables.t3.width -> tables.*.width), plus DERIVE."""
    if not fix:
        return set()
    keys = {re.sub(r"^tables\.[^.]+\.", "tables.*.", k) for k in fix.get("set") or {}}
    return keys | ({DERIVE} if fix.get("derive_limits") else set())


def faster(verified: dict[str, Any] | None) -> bool:
    """The fix's simulation was significantly faster (the interval below zero)."""
    return bool(verified) and verified.get("ci_high") is not None and verified["ci_high"] < 0


def score(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Every figure of the accuracy table from scored scenario results (status ok only)."""
    ok = [r for r in results if r.get("status") == "ok"]
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    positives: Counter[str] = Counter()
    info_hits: Counter[str] = Counter()
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    cause_n: Counter[str] = Counter()
    fixes = {"true_findings_with_fix_expected": 0, "fix_matches": 0, "fix_matches_and_faster": 0, "verified": 0}
    fix_by_cause: dict[str, Counter[str]] = defaultdict(Counter)
    healthy = [r for r in ok if not r["causes"]]
    for r in ok:
        expected, got = set(r["expected"]), reported(r)
        info = {f["rule"] for f in r.get("findings", []) if f["severity"] == "info"}
        for rule in expected:
            positives[rule] += 1
            if rule in got:
                tp[rule] += 1
            else:
                fn[rule] += 1
                if rule in info:
                    info_hits[rule] += 1
        for rule in got - expected:
            fp[rule] += 1
        key = "+".join(r["causes"]) if r["causes"] else "healthy"
        if len(r["causes"]) <= 1:
            cause_n[key] += 1
            confusion[key].update(got or {"(none)"})
        for cause_name in r["causes"]:
            cause = BY_NAME.get(cause_name)
            if cause is None or not cause.fix_keys:
                continue
            for f in r.get("findings", []):
                if f["severity"] not in COUNTED or f["rule"] not in cause.rules or not f.get("fix"):
                    continue
                fixes["true_findings_with_fix_expected"] += 1
                fix_by_cause[cause_name]["n"] += 1
                match = bool(fix_keys(f["fix"]) & cause.fix_keys)
                quick = faster(f.get("verified"))
                fixes["verified"] += bool(f.get("verified"))
                fixes["fix_matches"] += match
                fixes["fix_matches_and_faster"] += match and quick
                fix_by_cause[cause_name]["match"] += match
                fix_by_cause[cause_name]["match_faster"] += match and quick
    rules = sorted(set(positives) | set(fp))
    per_rule = {}
    for rule in rules:
        p, rc = ratio(tp[rule], tp[rule] + fp[rule]), ratio(tp[rule], tp[rule] + fn[rule])
        per_rule[rule] = {
            "positives": positives[rule],
            "tp": tp[rule],
            "fp": fp[rule],
            "fn": fn[rule],
            "precision": p,
            "recall": rc,
            "f1": f1(p, rc),
            "info_only": info_hits[rule],
        }
    stp, sfp, sfn = sum(tp.values()), sum(fp.values()), sum(fn.values())
    mp, mr = ratio(stp, stp + sfp), ratio(stp, stp + sfn)
    alarms = [r for r in healthy if reported(r)]
    n_fix = fixes["true_findings_with_fix_expected"]
    return {
        "scenarios": len(results),
        "verified": len(ok),
        "discarded": len(results) - len(ok),
        "discarded_by_cause": dict(Counter(c for r in results if r.get("status") != "ok" for c in r["causes"])),
        "micro": {"tp": stp, "fp": sfp, "fn": sfn, "precision": mp, "recall": mr, "f1": f1(mp, mr)},
        "per_rule": per_rule,
        "healthy": {
            "controls": len(healthy),
            "with_false_finding": len(alarms),
            "clean_share": ratio(len(healthy) - len(alarms), len(healthy)),
            "false_rules": dict(Counter(rule for r in alarms for rule in reported(r))),
        },
        "confusion": {k: {"n": cause_n[k], **dict(confusion[k].most_common())} for k in sorted(confusion)},
        "fix": {
            **fixes,
            "match_share": ratio(fixes["fix_matches"], n_fix),
            "match_and_faster_share": ratio(fixes["fix_matches_and_faster"], n_fix),
            "by_cause": {k: dict(v) for k, v in sorted(fix_by_cause.items())},
        },
    }
