"""The `runs` row of an imported capture: run facts from the `/host:scprof` plane (written by
scprof's exporter) or inferred from XProf's device plane stats, each checked before it is stored.

The facts plane is as untrusted as the rest of the file: a fact of the wrong type, JSON that
does not parse (or parses to something else than the object it must be), a number outside its
column or not finite is refused with a `CaptureError` naming the file, the plane and the fact.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import uuid as uuidlib

from profiler.json_text import check_json
from profiler.xplane_checks import I32_MAX, I64_MAX, CaptureError

SCPROF_PLANE = "/host:scprof"  # run facts written by scprof's exporter
_STRING_FACTS = ("run_uuid", "run_name", "producer", "config_json", "tags_json", "hardware_json")
# hardware_json key -> kind: int32 / int64 counts, finite non-negative doubles, a string.
_HW = {
    "num_chips": "i32", "sparsecores_per_chip": "i32", "tiles_per_sparsecore": "i32", "simd_width": "i32",
    "hbm_bytes": "i64", "spmem_bytes_per_tile": "i64", "hbm_bandwidth_bytes_per_s": "f",
    "tc_peak_flops": "f", "ici_bandwidth_bytes_per_s": "f", "generation": "s",
}  # fmt: skip
# Device plane stats read as hardware facts -> kind.
_DEVICE_STATS = {"peak_teraflops_per_second": "f", "peak_hbm_bw_gigabytes_per_second": "f", "memory_size": "i64"}


def _ok(value, kind: str) -> bool:
    if value is None:
        return True
    if kind == "s":
        return isinstance(value, str)
    if isinstance(value, bool):
        return False
    if kind == "f":
        return isinstance(value, int | float) and math.isfinite(value) and 0 <= value < 1e250
    return isinstance(value, int) and 0 <= value <= (I32_MAX if kind == "i32" else I64_MAX)


def _json(where: str, fact: str, text: str):
    return check_json(where, fact, text, dict, CaptureError)


def _checked_facts(path: str, s: dict) -> tuple[dict, dict]:
    """The facts plane's stats, type-checked; and its hardware object."""
    where = f"{path}: plane {SCPROF_PLANE!r}"
    for k in _STRING_FACTS:
        if k in s and not isinstance(s[k], str):
            raise CaptureError(f"{where}: {k} must be a string stat, got {type(s[k]).__name__}")
    t = s.get("start_time_unix_ns")
    if t is not None and (isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= I64_MAX):
        raise CaptureError(f"{where}: start_time_unix_ns = {str(t)[:40]}: an integer 0..{I64_MAX} is expected")
    for k in ("config_json", "tags_json"):
        if s.get(k):
            v = _json(where, k, s[k])
            if k == "tags_json" and not all(isinstance(x, str) for x in v.values()):
                raise CaptureError(f"{where}: tags_json must map names to strings")
    hw = _json(where, "hardware_json", s["hardware_json"]) if s.get("hardware_json") else {}
    for k, kind in _HW.items():
        if not _ok(hw.get(k), kind):
            raise CaptureError(f"{where}: hardware_json {k} = {str(hw[k])[:40]}: not a valid {k}")
    return s, hw


def _device_stats(path: str, plane_stats: dict, plane_kinds: dict) -> dict:
    """The first TensorCore plane's stats, with the ones read as hardware facts checked."""
    name, dev = next(((k, v) for k, v in plane_stats.items() if plane_kinds.get(k) == "tensorcore"), ("", {}))
    for k, kind in _DEVICE_STATS.items():
        if not _ok(dev.get(k), kind):
            raise CaptureError(f"{path}: plane {name!r}: {k} = {str(dev[k])[:40]}: not a valid {k}")
    return dev


def _jsonable(v):
    """Plane stat values for hardware_extra: non-finite doubles as text (JSON has no NaN)."""
    return v if not isinstance(v, float) or math.isfinite(v) else str(v)


def run_facts(d, files: list[str], name: str, digests: list[bytes]) -> dict:
    """The runs row of a decoded capture `d` (xplane_to_store.Decoded); `digests`: the files' SHA-1."""
    s, hw = _checked_facts(files[0], d.scprof)
    h = hashlib.sha1()
    for dg in digests:
        h.update(dg)
    run_uuid = s.get("run_uuid") or str(uuidlib.UUID(bytes=h.digest()[:16], version=5))
    chips = {r["chip"] for r in d.tracks.rows if r["kind"] in ("tensorcore", "sparsecore")}
    scs = {r["core"] for r in d.tracks.rows if r["kind"] == "sparsecore"}
    dev = _device_stats(files[0], d.plane_stats, d.plane_kinds)
    dtype = str(dev.get("device_type_string") or "")
    gen = hw.get("generation") or (m[1].lower() if (m := re.search(r"(v\d+[a-z]*)", dtype, re.I)) else None)
    tflops = dev.get("peak_teraflops_per_second")
    hbm_bw = dev.get("peak_hbm_bw_gigabytes_per_second")
    extra = {k: {sk: _jsonable(sv) for sk, sv in v.items()} for k, v in d.plane_stats.items() if k != SCPROF_PLANE}
    if s.get("hardware_json"):  # written by scprof: the run's own hardware facts, nothing inferred
        chips, scs, dev, gen, tflops, hbm_bw = set(), set(), {}, hw.get("generation"), None, None
    return {
        "uuid": run_uuid,
        "name": s.get("run_name") or name,
        "producer": s.get("producer") or "xplane",
        "start_time_unix_ns": int(s["start_time_unix_ns"]) if "start_time_unix_ns" in s else d.origin_ns,
        "generation": gen or None,
        "num_chips": hw.get("num_chips") or (len(chips) if chips else None),
        "sparsecores_per_chip": hw.get("sparsecores_per_chip") or (max(scs) + 1 if scs else None),
        "tiles_per_sparsecore": hw.get("tiles_per_sparsecore"),
        "simd_width": hw.get("simd_width"),
        "hbm_bytes": hw.get("hbm_bytes") or dev.get("memory_size") or None,
        "hbm_bandwidth_bytes_per_s": hw.get("hbm_bandwidth_bytes_per_s") or (hbm_bw * 1e9 if hbm_bw else None),
        "tc_peak_flops": hw.get("tc_peak_flops") or (tflops * 1e12 if tflops else None),
        "ici_bandwidth_bytes_per_s": hw.get("ici_bandwidth_bytes_per_s"),
        "spmem_bytes_per_tile": hw.get("spmem_bytes_per_tile"),
        "hardware_extra": json.dumps(
            hw.get("extra") or {"xplane_plane_stats": extra, "hostnames": d.hostnames}, default=str, sort_keys=True
        ),  # fmt: skip
        "config": s.get("config_json") or "{}",
        "tags": s.get("tags_json") or json.dumps({"source_files": ", ".join(os.path.basename(f) for f in files)}),
    }
