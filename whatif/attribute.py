"""`scprof compare BASE CAND --attribute`: how much of the gain each user-set change made.

For two emulated runs whose configs differ in several keys, each change is simulated alone
on the baseline and left out of the candidate. Its contribution is the mean of the two
effects (for two changes that is exactly their Shapley value; for more, an approximation
that the interaction term shows). What the emulator derives (resolved limits, stacks) is
grouped under the key the user set."""

from __future__ import annotations

import json
from typing import Any

from analyzers.compare import bootstrap_change, config_diff
from whatif.configs import origin_config, unreplayable_changes, user_changes
from whatif.engine import Change, Session, counted_step_ps

CAND_LIMITS_FILE = "cand_limits.toml"
LIMIT_KEYS = ("max_ids_per_partition", "max_unique_ids_per_partition", "max_ids_per_table", "max_unique_ids_per_table",
              "xla_sparse_core_max_ids_file")  # fmt: skip
# resolved.<part> follows from the user keys matching these words
DERIVED_FROM = {
    "limits": LIMIT_KEYS,
    "table_groups": ("stacking", "max_tables_per_stack", "width", "dtype", "optimizer") + LIMIT_KEYS,
    "hardware": ("hardware.",),
    "memory": ("",),
}


def attribute(session: Session, cand_run_id: int) -> dict[str, Any]:
    """Each change's effect alone, left out, and share of the gain from base to cand."""
    store, base_id = session.store, session.origin_run_id
    cand = store.rows("SELECT * FROM runs WHERE run_id = ?", [cand_run_id])[0]
    cand_raw = origin_config(cand)
    changes = user_changes(session.origin_raw, cand_raw)
    limits = changes.get("flags.xla_sparse_core_max_ids_file")
    if limits:  # the candidate's limits file travels with the trials
        with open(limits, "rb") as fh:
            session._files[CAND_LIMITS_FILE] = fh.read()
        changes["flags.xla_sparse_core_max_ids_file"] = CAND_LIMITS_FILE
    base_ps, cand_ps = counted_step_ps(store, base_id), counted_step_ps(store, cand_run_id)
    total = bootstrap_change(base_ps, cand_ps)
    out: dict[str, Any] = {
        "base": session.origin["name"], "cand": cand["name"], "total_change": total.change,
        "ci_low": total.ci_low, "ci_high": total.ci_high, "gain_ps": base_ps.mean() - cand_ps.mean(),
        "changes": [], "interaction_ps": None, "unreplayable": unreplayable_changes(session.origin_raw, cand_raw),
        "simulations": 0,
    }  # fmt: skip
    if not changes:
        return out
    keys = list(changes)
    alone = session.measure([Change({k: changes[k]}) for k in keys], base_id) if len(keys) > 1 else []
    left_out = (
        session.measure([Change({j: changes[j] for j in keys if j != k}) for k in keys], base_id)
        if len(keys) > 1
        else []
    )
    derived = _derived(json.loads(session.origin["config"]), json.loads(cand["config"]), keys)
    gain = out["gain_ps"]
    rows = []
    for i, k in enumerate(keys):
        if len(keys) == 1:
            alone_ps = loo_ps = gain
            a = None
        else:
            a = alone[i]
            alone_ps = (a.ref_step_time_ps - a.step_time_ps) if a.step_time_ps is not None else None
            lo = left_out[i]
            loo_ps = (lo.step_time_ps - cand_ps.mean()) if lo.step_time_ps is not None else None
            session.record(a, f"alone: {k}", base_id, None, "this change alone on the baseline")
            session.record(lo, f"left out: {k}", base_id, None, "the candidate without this change")
        effects = [e for e in (alone_ps, loo_ps) if e is not None]
        contribution = sum(effects) / len(effects) if effects else None
        rows.append({
            "key": k, "base": _flat(session.origin_raw, k), "cand": _flat(cand_raw, k) if k in _keys(cand_raw) else changes[k],
            "alone_gain_ps": alone_ps, "alone_change": a.rel_change if a else total.change,
            "alone_ci_low": a.ci_low if a else total.ci_low, "alone_ci_high": a.ci_high if a else total.ci_high,
            "left_out_gain_ps": loo_ps, "contribution_ps": contribution,
            "share": contribution / gain if contribution is not None and gain else None,
            "derived": derived.get(k, []),
        })  # fmt: skip
    out["changes"] = sorted(rows, key=lambda r: -(r["contribution_ps"] or 0))
    known = [r["alone_gain_ps"] for r in rows if r["alone_gain_ps"] is not None]
    out["interaction_ps"] = gain - sum(known) if len(known) == len(rows) else None
    out["simulations"] = session.simulations
    return out


def _keys(raw: dict[str, Any]) -> set[str]:
    from whatif.configs import flatten

    return set(flatten(raw))


def _flat(raw: dict[str, Any], key: str) -> Any:
    from whatif.configs import flatten

    return flatten(raw).get(key)


def _derived(base_cfg: dict[str, Any], cand_cfg: dict[str, Any], keys: list[str]) -> dict[str, list[str]]:
    """The derived (resolved.*) keys that differ, grouped under the first user key they follow from."""
    out: dict[str, list[str]] = {}
    for d in config_diff(base_cfg.get("resolved", {}), cand_cfg.get("resolved", {}), "resolved"):
        part = d["key"].split(".")[1] if "." in d["key"] else ""
        words = DERIVED_FROM.get(part, ("",))
        owner = next((k for k in keys if any(w in k for w in words)), None)
        if owner is not None:
            out.setdefault(owner, []).append(d["key"])
    return out
