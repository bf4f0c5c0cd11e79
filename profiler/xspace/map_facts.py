"""Run facts in an XSpace: the `runs` row of an imported capture, from the `/host:scprof` plane
(written by scprof's exporter, `written_facts`) or inferred from XProf's device plane stats,
each checked before it is stored.

The facts plane is as untrusted as the rest of the file: a fact of the wrong type, JSON that
does not parse (or parses to something else than the object it must be), a number outside its
column or not finite is refused with a `CaptureError` naming the file, the plane and the fact.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import uuid as uuidlib

from profiler.json_text import check_json
from profiler.xspace.check import I32_MAX, I64_MAX, CaptureError
from profiler.xspace.map_names import (
    CONFIG_JSON,
    DEVICE_TYPE_STAT,
    GENERATION_RE,
    HARDWARE_EXTRA,
    HARDWARE_FACTS,
    HARDWARE_JSON,
    MEMORY_SIZE_STAT,
    PEAK_HBM_BW_STAT,
    PEAK_TFLOPS_STAT,
    PRODUCER,
    RUN_NAME,
    RUN_UUID,
    SCPROF_PLANE,
    START_TIME_FACT,
    STRING_FACTS,
    TAGS_JSON,
)

# Device plane stats read as hardware facts -> kind (as in HARDWARE_FACTS).
_DEVICE_STATS = {PEAK_TFLOPS_STAT: "f", PEAK_HBM_BW_STAT: "f", MEMORY_SIZE_STAT: "i64"}


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
    for k in STRING_FACTS:
        if k in s and not isinstance(s[k], str):
            raise CaptureError(f"{where}: {k} must be a string stat, got {type(s[k]).__name__}")
    t = s.get(START_TIME_FACT)
    if t is not None and (isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= I64_MAX):
        raise CaptureError(f"{where}: {START_TIME_FACT} = {str(t)[:40]}: an integer 0..{I64_MAX} is expected")
    for k in (CONFIG_JSON, TAGS_JSON):
        if s.get(k):
            v = _json(where, k, s[k])
            if k == TAGS_JSON and not all(isinstance(x, str) for x in v.values()):
                raise CaptureError(f"{where}: {TAGS_JSON} must map names to strings")
    hw = _json(where, HARDWARE_JSON, s[HARDWARE_JSON]) if s.get(HARDWARE_JSON) else {}
    for k, kind in HARDWARE_FACTS.items():
        if not _ok(hw.get(k), kind):
            raise CaptureError(f"{where}: {HARDWARE_JSON} {k} = {str(hw[k])[:40]}: not a valid {k}")
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


def written_facts(run: dict) -> list[tuple[str, str | int]]:
    """The `/host:scprof` plane's stats for a runs row (the export's half of this mapping):
    the string facts in STRING_FACTS order, then the start time."""
    hw = {k: run[k] for k in HARDWARE_FACTS if run[k] is not None}
    hw[HARDWARE_EXTRA] = json.loads(run["hardware_extra"] or "{}")
    value = {
        RUN_UUID: run["uuid"],
        RUN_NAME: run["name"],
        PRODUCER: run["producer"] or "",
        CONFIG_JSON: run["config"] or "{}",
        TAGS_JSON: run["tags"] or "{}",
        HARDWARE_JSON: json.dumps(hw, sort_keys=True),
    }
    return [(k, str(value[k])) for k in STRING_FACTS] + [(START_TIME_FACT, int(run["start_time_unix_ns"] or 0))]


def run_facts(d, files: list[str], name: str, digests: list[bytes]) -> dict:
    """The runs row of a decoded capture `d` (decode.Decoded); `digests`: the files' SHA-1."""
    s, hw = _checked_facts(files[0], d.scprof)
    h = hashlib.sha1()
    for dg in digests:
        h.update(dg)
    run_uuid = s.get(RUN_UUID) or str(uuidlib.UUID(bytes=h.digest()[:16], version=5))
    chips = {r["chip"] for r in d.tracks.rows if r["kind"] in ("tensorcore", "sparsecore", "gpu", "cpu", "device")}
    scs = {r["core"] for r in d.tracks.rows if r["kind"] == "sparsecore"}
    dev = _device_stats(files[0], d.plane_stats, d.plane_kinds)
    dtype = str(dev.get(DEVICE_TYPE_STAT) or "")
    gen = hw.get("generation") or (m[1].lower() if (m := GENERATION_RE.search(dtype)) else None)
    tflops = dev.get(PEAK_TFLOPS_STAT)
    hbm_bw = dev.get(PEAK_HBM_BW_STAT)
    extra = {k: {sk: _jsonable(sv) for sk, sv in v.items()} for k, v in d.plane_stats.items() if k != SCPROF_PLANE}
    if s.get(HARDWARE_JSON):  # written by scprof: the run's own hardware facts, nothing inferred
        chips, scs, dev, gen, tflops, hbm_bw = set(), set(), {}, hw.get("generation"), None, None
    return {
        "uuid": run_uuid,
        "name": s.get(RUN_NAME) or name,
        "producer": s.get(PRODUCER) or "xplane",
        "start_time_unix_ns": int(s[START_TIME_FACT]) if START_TIME_FACT in s else d.origin_ns,
        "generation": gen or None,
        "num_chips": hw.get("num_chips") or (len(chips) if chips else None),
        "sparsecores_per_chip": hw.get("sparsecores_per_chip") or (max(scs) + 1 if scs else None),
        "tiles_per_sparsecore": hw.get("tiles_per_sparsecore"),
        "simd_width": hw.get("simd_width"),
        "hbm_bytes": hw.get("hbm_bytes") or dev.get(MEMORY_SIZE_STAT) or None,
        "hbm_bandwidth_bytes_per_s": hw.get("hbm_bandwidth_bytes_per_s") or (hbm_bw * 1e9 if hbm_bw else None),
        "tc_peak_flops": hw.get("tc_peak_flops") or (tflops * 1e12 if tflops else None),
        "ici_bandwidth_bytes_per_s": hw.get("ici_bandwidth_bytes_per_s"),
        "spmem_bytes_per_tile": hw.get("spmem_bytes_per_tile"),
        "hardware_extra": json.dumps(
            hw.get(HARDWARE_EXTRA) or {"xplane_plane_stats": extra, "hostnames": d.hostnames},
            default=str,
            sort_keys=True,
        ),
        "config": s.get(CONFIG_JSON) or "{}",
        "tags": s.get(TAGS_JSON) or json.dumps({"source_files": ", ".join(os.path.basename(f) for f in files)}),
    }
