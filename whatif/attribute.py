"""`scprof compare BASE CAND --attribute`: how much of the gain each user-set change made.

For two emulated runs whose configs differ in several keys, each change is simulated alone
on the baseline and left out of the candidate. Its contribution is the mean of the two
effects (for two changes that is exactly their Shapley value; for more, an approximation
that the interaction term shows). What the emulator derives (resolved limits, stacks) is
grouped under the key the user set."""

from __future__ import annotations

import json
from typing import Any

from analyzers.compare import config_diff, read_verdict, step_time_change
from profiler import sqltree
from sim_backend.config_load import config_paths
from whatif.configs import flatten, origin_config, unreplayable_changes, user_changes
from whatif.engine import Change, Measured, Session, counted_step_ps
from whatif.paths import localize

# Labels of an attribute session's rows in whatif_trials: the candidate itself against the
# baseline (its trial_run_id names the candidate, so a session is found by its pair), and per
# changed key its trial alone on the baseline and the candidate without it.
CANDIDATE_LABEL = "candidate"
ALONE, LEFT_OUT = "alone: ", "left out: "
LIMIT_KEYS = (
    "max_ids_per_partition",
    "max_unique_ids_per_partition",
    "max_ids_per_table",
    "max_unique_ids_per_table",
    "xla_sparse_core_max_ids_file",
)
# resolved.<part> follows from the user keys matching these words
DERIVED_FROM = {
    "limits": LIMIT_KEYS,
    "limits_file": ("xla_sparse_core_max_ids_file",),  # what the limits file said (record.named_files_json)
    "fdo_stats": ("fdo_stats_dir",),
    "table_groups": ("stacking", "max_tables_per_stack", "width", "dtype", "optimizer") + LIMIT_KEYS,
    "hardware": ("hardware.",),
    # the static memory model follows the limits (SPMEM buffers), stacking, serialization and prefetch
    "memory": LIMIT_KEYS + ("stacking", "max_tables_per_stack", "serialized", "maximum_parallel_iterations"),
}


def candidate_changes(session: Session, cand: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The candidate run's stored config and the changes that replay it over the baseline: a
    changed path (the candidate's limits file, ID file, ...) as whatif/paths.py allows it (the
    limits the header holds, written for the trials; another path refused without --trust-paths)."""
    cand_raw = origin_config(cand)
    changes = user_changes(session.stored_raw, cand_raw)
    paths = {key for key, _, _ in config_paths(cand_raw)} & set(changes)
    if paths:
        local = localize(cand, cand_raw, "cand", session.trust_paths, keys=paths)
        session.add_files(local.files)
        flat = flatten(local.raw)
        changes.update({key: flat[key] for key in paths})
    return cand_raw, changes


def attribute(session: Session, cand_run_id: int) -> dict[str, Any]:
    """Each change's effect alone, left out, and share of the gain from base to cand."""
    store, base_id = session.store, session.origin_run_id
    cand = sqltree.query(store.con, "cli.runs.run", run=cand_run_id).to_pylist()[0]
    cand_raw, changes = candidate_changes(session, cand)
    base_ps, cand_ps = counted_step_ps(store, base_id), counted_step_ps(store, cand_run_id)
    total = step_time_change(store, base_id, cand_run_id)
    out: dict[str, Any] = {
        "base": session.origin["name"],
        "cand": cand["name"],
        "total_change": total.change,
        "ci_low": total.ci_low,
        "ci_high": total.ci_high,
        "gain_ps": base_ps.mean() - cand_ps.mean(),
        "changes": [],
        "interaction_ps": None,
        "unreplayable": unreplayable_changes(session.stored_raw, cand_raw),
        "simulations": 0,
    }
    if not changes:
        return out
    keys = list(changes)
    whole = Measured(
        Change(changes),
        cand_run_id,
        cand["name"],
        total.cand_mean_ps,
        total.base_mean_ps,
        total.change,
        total.ci_low,
        total.ci_high,
        total.verdict,
        None,
        0,
        False,
    )
    session.record(whole, CANDIDATE_LABEL, base_id, None, "the candidate against the baseline")
    if len(keys) == 1:  # the change alone on the baseline is the candidate
        session.record(whole, ALONE + keys[0], base_id, None, "this change alone on the baseline")
    else:
        alone = session.measure([Change({k: changes[k]}) for k in keys], base_id)
        left_out = session.measure([Change({j: changes[j] for j in keys if j != k}) for k in keys], base_id)
        for k, a, lo in zip(keys, alone, left_out, strict=True):
            session.record(a, ALONE + k, base_id, None, "this change alone on the baseline")
            session.record(lo, LEFT_OUT + k, base_id, None, "the candidate without this change")
    shares = shares_from_rows(
        sqltree.query(store.con, "whatif.trials.session_rows", session=session.session).to_pylist()
    )
    derived = _derived(json.loads(session.origin["config"]), json.loads(cand["config"]), keys)
    flat_base, flat_cand = flatten(session.stored_raw), flatten(cand_raw)  # user_changes' keys are in both
    for r in shares["changes"]:
        r.update(base=flat_base[r["key"]], cand=flat_cand[r["key"]], derived=derived.get(r["key"], []))
    out["changes"], out["interaction_ps"] = shares["changes"], shares["interaction_ps"]
    out["simulations"] = session.simulations
    return out


def shares_from_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each changed key's share of the gain from one attribute session's stored rows (whatif_trials:
    label, overrides, step_time_ps, ref_step_time_ps, change, ci_low, ci_high), the one definition
    the CLI's text and the UI read.

    gain = baseline mean - candidate mean (the `candidate` row); a key's effect alone = baseline
    mean - its alone trial's mean; left out = its left-out trial's mean - candidate mean (for a
    single key: the gain); its contribution is the mean of the two it has and its share the
    contribution over the gain. The interaction is the gain the effects alone do not explain."""
    whole = next((r for r in rows if r["label"] == CANDIDATE_LABEL), None)
    if whole is None or whole["step_time_ps"] is None or whole["ref_step_time_ps"] is None:
        return {"gain_ps": None, "changes": [], "interaction_ps": None}
    base_ps, cand_ps = float(whole["ref_step_time_ps"]), float(whole["step_time_ps"])
    gain = base_ps - cand_ps
    alone = {r["label"][len(ALONE) :]: r for r in rows if r["label"].startswith(ALONE)}
    left_out = {r["label"][len(LEFT_OUT) :]: r for r in rows if r["label"].startswith(LEFT_OUT)}
    out = []
    for k, a in alone.items():
        alone_ps = float(a["ref_step_time_ps"]) - float(a["step_time_ps"]) if a["step_time_ps"] is not None else None
        if len(alone) == 1:
            loo_ps: float | None = gain
        else:
            lo = left_out.get(k)
            loo_ps = float(lo["step_time_ps"]) - cand_ps if lo is not None and lo["step_time_ps"] is not None else None
        effects = [e for e in (alone_ps, loo_ps) if e is not None]
        contribution = sum(effects) / len(effects) if effects else None
        overrides = a["overrides"]
        value = (json.loads(overrides) if isinstance(overrides, str) else overrides or {}).get(k)
        out.append(
            {
                "key": k,
                "value": value,
                "alone_gain_ps": alone_ps,
                "alone_change": a["change"],
                "alone_ci_low": a["ci_low"],
                "alone_ci_high": a["ci_high"],
                "alone_verdict": read_verdict(a["verdict"]),
                "left_out_gain_ps": loo_ps,
                "contribution_ps": contribution,
                "share": contribution / gain if contribution is not None and gain else None,
            }
        )
    out.sort(key=lambda r: -(r["contribution_ps"] or 0))
    known = [r["alone_gain_ps"] for r in out if r["alone_gain_ps"] is not None]
    interaction = gain - sum(known) if len(known) == len(out) and out else None
    return {
        "gain_ps": gain,
        "base_step_time_ps": base_ps,
        "cand_step_time_ps": cand_ps,
        "change": whole["change"],
        "ci_low": whole["ci_low"],
        "ci_high": whole["ci_high"],
        "changes": out,
        "interaction_ps": interaction,
    }


def _derived(base_cfg: dict[str, Any], cand_cfg: dict[str, Any], keys: list[str]) -> dict[str, list[str]]:
    """The derived (resolved.*) keys that differ, grouped under the first user key they follow from."""
    out: dict[str, list[str]] = {}
    for d in config_diff(base_cfg.get("resolved", {}), cand_cfg.get("resolved", {}), "resolved"):
        part = d["key"].split(".")[1] if "." in d["key"] else ""
        words = DERIVED_FROM.get(part, ("",))
        owner = next((k for w in words for k in keys if w in k), None)  # the words in order of precedence
        if owner is not None:
            out.setdefault(owner, []).append(d["key"])
    return out
