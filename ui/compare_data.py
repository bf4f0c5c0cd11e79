"""The Compare page's data apart from `scprof compare` itself: which two runs a URL names (or a
sensible pair when it names fewer), why a run has no steps, the parts of a comparison that
still make sense without steps (findings, config diff), the config diff split into the keys a
user set and what the emulator derived, and how many cores a per-op time per step is summed over.

Every figure comes from analyzers.compare (the findings delta, the config diff, CompareError's
words); this module only picks and groups."""

from __future__ import annotations

import json
from typing import Any

from analyzers.compare import config_diff, findings_delta
from profiler import sqltree
from profiler.store import Store
from ui import data

# A stored config's keys the emulator derived or that name the run (whatif.configs' DERIVED_KEYS and
# LABEL_KEYS, which the UI reads when the engine is installed).
try:
    from whatif.configs import DERIVED_KEYS, LABEL_KEYS
except ImportError:  # a build without the what-if engine
    DERIVED_KEYS, LABEL_KEYS = ("resolved", "run_name"), ("name", "description")

# An op track's kind as people name its cores, for "summed over N ...".
CORE_WORDS = {
    "sparsecore": "SparseCores",
    "sc_tile": "SparseCore tiles",
    "tensorcore": "TensorCores",
    "host": "host threads",
    "gpu": "GPU streams",
    "cpu": "CPU threads",
    "device": "device lines",
}


# ---- which two runs ---------------------------------------------------------------------------


def run_list(store: Store) -> list[dict[str, Any]]:
    """The store's runs listing (profiler/sql/stdlib/runs.sql: run_list), tags parsed."""
    rows = sqltree.query(store.con, "stdlib.runs.runs_oldest_first").to_pylist()
    for r in rows:
        try:
            r["tags"] = json.loads(r["tags"]) if r["tags"] else {}
        except ValueError:
            r["tags"] = {}
        if not isinstance(r["tags"], dict):
            r["tags"] = {}
    return rows


def comparable(r: dict[str, Any]) -> bool:
    """A run a default pair may hold: ok, with counted steps, not a what-if trial (a trial is
    compared when a user picks it)."""
    return r["status"] == "ok" and bool(r["counted_steps"]) and r.get("whatif_origin") is None


def default_candidate(rows: list[dict[str, Any]]) -> int | None:
    """The newest run that is ok, has counted steps and is not a trial, else the newest run (one
    that is not a trial when there is one)."""
    good = [r["run_id"] for r in rows if comparable(r)]
    if good:
        return max(good)
    plain = [r["run_id"] for r in rows if r.get("whatif_origin") is None]
    return max(plain or [r["run_id"] for r in rows]) if rows else None


def default_baseline(rows: list[dict[str, Any]], cand: int | None) -> int | None:
    """A baseline for `cand`: its what-if origin when it is a trial (tag `whatif_origin`), else the
    newest ok run with counted steps before it, else after it, else any other run; never a trial
    (a trial is a baseline when a user picks it)."""
    others = [r for r in rows if r["run_id"] != cand]
    me = next((r for r in rows if r["run_id"] == cand), None)
    origin = (me or {}).get("tags", {}).get("whatif_origin")
    if origin is not None:
        named = [r["run_id"] for r in others if r["name"] == str(origin)]
        if named:
            return max(named)
    plain = [r for r in others if r.get("whatif_origin") is None]
    if not plain:
        return None
    good = [r["run_id"] for r in plain if comparable(r)]
    before = [i for i in good if cand is None or i < cand]
    return max(before or good or [r["run_id"] for r in plain])


def unknown_text(ref: str) -> str:
    """'run 42 is not in this store' (a name quoted)."""
    return f"run {ref if str(ref).isdigit() else repr(ref)} is not in this store"


def compare_pair(store: Store, st: dict[str, str]) -> dict[str, Any]:
    """The pair a Compare URL names: `base` and `cand` (run ids or names), or `run` as the candidate
    (the top bar's link) against default_baseline; a side the URL does not name gets its default.
    {"base", "cand": run ids or None, "unknown": ["baseline: run 42 is not in this store", ...]};
    a run the URL names and the store lacks is never replaced by another."""
    rows = run_list(store)
    out: dict[str, Any] = {"base": None, "cand": None, "unknown": []}
    for role, keys in (("cand", ("cand", "run")), ("base", ("base",))):
        ref = next((st[k] for k in keys if st.get(k) not in (None, "")), None)
        if ref is None:
            continue
        run = data.resolve(store, ref)
        if run is None:
            out["unknown"].append(f"{'candidate' if role == 'cand' else 'baseline'}: {unknown_text(ref)}")
        out[role] = run
    named_cand = any(st.get(k) not in (None, "") for k in ("cand", "run"))
    if out["cand"] is None and not named_cand:
        out["cand"] = default_candidate(rows)
    if out["base"] is None and st.get("base") in (None, "") and out["cand"] is not None:
        out["base"] = default_baseline(rows, out["cand"])
    return out


# ---- parts of a comparison ---------------------------------------------------------------------


def findings_of_pair(store: Store, base: int, cand: int) -> dict[str, list[dict[str, Any]]]:
    """Findings resolved / new / persisting (both sides) as `scprof compare` matches them, for any
    pair, steps or not."""
    return findings_delta(data.analysis(store, base), data.analysis(store, cand))


def config_diff_of_pair(store: Store, base: int, cand: int) -> list[dict[str, Any]]:
    """`scprof compare`'s config diff of two runs (runs without a config compare as {})."""
    cfg = [data.run_info(store, r).get("config") or {} for r in (base, cand)]
    return config_diff(*cfg)


def split_config_diff(diff: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The config diff as {"user": keys the user wrote, "labels": name/description, "derived":
    what the emulator resolved from them (resolved.*, run_name)}."""
    out: dict[str, list[dict[str, Any]]] = {"user": [], "labels": [], "derived": []}
    for r in diff:
        top = str(r["key"]).split(".")[0]
        out["derived" if top in DERIVED_KEYS else "labels" if top in LABEL_KEYS else "user"].append(r)
    return out


def has_config(store: Store, run: int) -> bool:
    return bool(data.run_info(store, run).get("config"))


def op_cores(store: Store, run: int) -> dict[str, int]:
    """track kind -> how many cores carry its ops (what a per-op time per step is summed over)."""
    return {
        r["track_kind"]: int(r["cores"]) for r in sqltree.query(store.con, "ui.compare.op_cores", run=run).to_pylist()
    }


def cores_text(cores: dict[str, int]) -> str:
    """'16 SparseCores, 8 TensorCores, 9 host threads'."""
    order = list(CORE_WORDS)
    kinds = sorted(cores, key=lambda k: order.index(k) if k in order else len(order))
    return ", ".join(f"{cores[k]} {CORE_WORDS.get(k, k + ' cores')}" for k in kinds)


def no_steps_text(info: dict[str, Any], role: str) -> str:
    """ "baseline 'x' (run_id 3) has no counted steps: the run failed: spmem_overflow" for a run_info."""
    tags = info.get("tags") if isinstance(info.get("tags"), dict) else {}
    text = f"{role} {info['name']!r} (run_id {info['run_id']}) has no counted steps"
    if info.get("status") != "ok":
        failure = tags.get("failure") or tags.get("error")
        text += f": the run {info.get('status')}" + (f": {failure}" if failure else "")
    return text
