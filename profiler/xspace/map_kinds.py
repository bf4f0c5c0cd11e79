"""What a real capture's tracks and events are: device kinds, hosts, chips and op categories.

An XProf capture from a TPU, a GPU or a CPU (not one scprof exported: its events carry their
categories) says what each plane is by its name and what each event is only by its name and
stats. After decoding (profiler/xspace/decode.py), before the steps are derived, this module:

- numbers the hosts of a multi-host capture (the plane name's prefix, one per file) and
  renumbers their device chips so chips are distinct across hosts (host 0's first, then host 1's);
- makes the XLA executor threads of a capture without device planes (JAX on the CPU: ops with
  `hlo_op` / `hlo_module` stats on host threads) the host's CPU device, kind `cpu`, one chip
  per host;
- gives every event without a recorded category one by its track and name (CATEGORY_RULES):
  device compute, collective, memcpy (host_to_device for host-to-device copies), host input
  work (host_preprocess), launches and dispatch of device work (host_launch), else the track's
  default (profiler/sql/stdlib/ops.sql: op_tracks).

Python runs per track and per distinct event name, never per event.
"""

from __future__ import annotations

import re

import numpy as np

from profiler.xspace.check import NULL

DEVICE_KINDS = ("tensorcore", "sparsecore", "gpu", "device")  # planes XProf names /device:...
XLA_OP_STATS = ("hlo_op", "hlo_module")  # stats of an XLA op event (a kernel, a thunk, a CPU op)
XLA_THREAD_RE = re.compile(r"XLA|xla")  # XLA runtime thread pools (tf_XLAEigen, tf_XLAPjRtCpuClient ...)

# (category, pattern over the event name), first match wins; per track kind group.
_COLLECTIVE = r"nccl|all-?reduce|all-?gather|reduce-?scatter|all-?to-?all|collective|permute|\bsend\b|\brecv\b"
CATEGORY_RULES = {
    "device": (
        ("host_to_device", r"(?i)memcpy.*(htod|h2d)|htod|h2d"),
        ("device_memcpy", r"(?i)memcpy|memset|copy-start|copy-done|dtoh|d2h|dtod|d2d"),
        ("device_collective", rf"(?i){_COLLECTIVE}"),
        ("device_compute", r""),
    ),
    "tensorcore": (("tc_collective", rf"(?i){_COLLECTIVE}"),),
    "host": (
        (
            "host_preprocess",
            r"(?i)preprocess|input_?pipeline|iterator|data_?loader|prefetch|"
            r"\b(get|load|make|next|read)_batch\b|tf\.data|\bgrain\b",
        ),
        ("host_launch", r"(?i)launch|PjitFunction|ExecuteHelper|ExecutePrepare"),  # dispatching device work
    ),
}


def host_index(d, plane: str) -> int:
    """The host (its file's index) of a stored plane name: the file whose host prefix it carries."""
    for i, prefix in enumerate(d.host_prefixes):
        if prefix and plane.startswith(prefix):
            return i
    return 0


def classify(d, ev: dict[str, np.ndarray]) -> None:
    """Set host chips, track kinds and event categories of a real capture (`d`: a Decoded, `ev`:
    its event columns, concatenated); a capture scprof exported is left as it is."""
    if d.scprof:
        return
    rows = d.tracks.rows
    host_of = {r["track_id"]: host_index(d, r["plane"]) for r in rows}
    _number_chips(rows, host_of, len(d.host_prefixes))
    xla_op = _xla_op_events(d, len(ev["start_ps"]))
    if not any(r["kind"] in DEVICE_KINDS for r in rows):
        _cpu_devices(rows, host_of, ev, xla_op)
    _categories(d, ev, xla_op)


def _number_chips(rows: list[dict], host_of: dict[int, int], n_hosts: int) -> None:
    """Device chips numbered across hosts: host h's chip c becomes h * chips_per_host + c."""
    if n_hosts < 2:
        return
    per_host = 1 + max((r["chip"] for r in rows if r["kind"] in DEVICE_KINDS), default=0)
    for r in rows:
        if r["kind"] in DEVICE_KINDS and r["chip"] >= 0:
            r["chip"] += host_of[r["track_id"]] * per_host


def _xla_op_events(d, n: int) -> np.ndarray:
    """Per event: it carries an XLA op stat (its own or its metadata's)."""
    out = np.zeros(n, bool)
    keys = [d.strings.ids[s] for s in XLA_OP_STATS if s in d.strings.ids]
    if keys and d.args:
        key = np.concatenate(d.args["key"])
        out[np.concatenate(d.args["event_id"])[np.isin(key, keys)]] = True
    return out


def _cpu_devices(rows: list[dict], host_of: dict[int, int], ev: dict[str, np.ndarray], xla_op: np.ndarray) -> None:
    """A capture without device planes: each host's threads that run XLA ops are its CPU device."""
    runs_ops = set(np.unique(ev["track"][xla_op]).tolist())
    for r in rows:
        if r["kind"] == "host" and (r["track_id"] in runs_ops or XLA_THREAD_RE.search(r["line"])):
            r.update(kind="cpu", chip=host_of[r["track_id"]], core=0)


def _categories(d, ev: dict[str, np.ndarray], xla_op: np.ndarray) -> None:
    """Fill ev['category'] where NULL, by track kind and event name (CATEGORY_RULES)."""
    cat = ev["category"]
    kind_of = {r["track_id"]: r["kind"] for r in d.tracks.rows}
    groups = list(CATEGORY_RULES)  # per event its rule group's index, -1 for none (int8: 1 byte per event)
    code = np.array(
        [-1]
        + [
            groups.index(g) if (g := _rule_group(kind_of.get(t, ""))) in groups else -1
            for t in range(1, len(d.tracks.rows) + 1)
        ],
        np.int8,
    )
    ev_group = code[ev["track"]]
    on_cpu = np.isin(ev["track"], [t for t, k in kind_of.items() if k == "cpu"])
    ev_group[on_cpu & ~xla_op] = groups.index("host")  # the executor's own runtime work on a CPU device's threads
    todo = cat == NULL
    for g, rules in enumerate(CATEGORY_RULES.values()):
        sel = np.flatnonzero(todo & (ev_group == g))
        if not sel.size:
            continue
        names, inv = np.unique(ev["name"][sel], return_inverse=True)
        ids = np.array([_category_id(d, d.strings.values[i], rules) for i in names.tolist()], np.int64)
        cat[sel] = ids[inv.ravel()]
    if on_cpu.any():  # the CPU device's runtime work that is no input work is the host's (host_other)
        rest = np.flatnonzero((cat == NULL) & on_cpu)
        cat[rest] = d.strings("host_other")


def _rule_group(kind: str) -> str:
    return {"gpu": "device", "device": "device", "cpu": "device", "tensorcore": "tensorcore", "host": "host"}.get(
        kind, ""
    )


def _category_id(d, name: str, rules: tuple[tuple[str, str], ...]) -> int:
    for category, pattern in rules:
        if re.search(pattern, name):
            return d.strings(category)
    return NULL
