"""Figures in human units, and store text made safe to print: one definition for every view.

The CLI, the UI, the emulator's messages and the exporters all format through here, so a
figure reads the same wherever it is shown (1.5 ms, 3.2 GiB, 42.0%). It sits in the lowest
layer so that every package may use it.

Everything printed for people passes store-derived text (run, table and op names, finding
text, error messages quoting them) through `escape_control`, so a name holding a newline or
a terminal escape sequence can neither forge output lines nor drive the terminal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

MISSING = "-"  # how an absent figure reads


def _control_escapes() -> dict[int, str]:
    """Code point -> visible escape, for every character a terminal would act on."""
    table = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))}  # C0, DEL, C1
    table |= {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
    # line and paragraph separators, and the bidirectional overrides that reorder what is shown
    table |= {c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}
    return table


_CONTROL_ESCAPES = _control_escapes()


def escape_control(text: object) -> str:
    """`str(text)` with control characters shown as escapes (`\\n`, `\\x1b`), so it prints on one line."""
    return str(text).translate(_CONTROL_ESCAPES)


def escape_lines(text: str) -> str:
    """Multi-line output made safe: each line's control characters escaped, line breaks kept.

    A backstop for whole outputs; values that may hold a newline must go through
    `escape_control` before they are joined into lines.
    """
    return "\n".join(escape_control(line) for line in text.split("\n"))


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def format_ps(ps: float | int | None) -> str:
    """Picoseconds in the largest unit that keeps a number >= 1: 1.50 ms, 320 ns."""
    if _is_missing(ps):
        return MISSING
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("µs", 1e6), ("ns", 1e3)):
        if abs(ps) >= scale:
            return f"{ps / scale:.3g} {unit}"
    return f"{ps:.0f} ps"


def format_bytes(n: float | int | None) -> str:
    """Bytes with binary prefixes: 1.5 GiB."""
    if _is_missing(n):
        return MISSING
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def format_si(n: float | int | None, unit: str) -> str:
    """A large count with an SI prefix and its unit: 65.7 GFLOP (not 65,660,780,544)."""
    if _is_missing(n):
        return MISSING
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {prefix}{unit}"
    return f"{n:.3g} {unit}"


def format_fine_share(value: float | int | None) -> str:
    """A share that may be tiny (an allocator's fragmentation) as a percentage with the digits a small
    one needs: 0.096%, 12.5%, 0.0%; the Memory page and `scprof analyze` write fragmentation with it."""
    if _is_missing(value):
        return MISSING
    return f"{value:.3%}" if 0 < value < 0.01 else f"{value:.1%}"


TPU_KINDS = frozenset({"tensorcore", "sparsecore", "sc_tile"})  # tracks.kind of a TPU's cores


def memory_word(kinds: Iterable[str]) -> str:
    """What a run's device memory is called for people, from its device tracks' kinds (tracks.kind):
    "HBM" on a TPU (TensorCore or SparseCore tracks, or no device track at all: an emulated run's
    counters, a failed compile), "device memory" on a GPU or CPU run. Every surface words memory by
    it (the Overview's cards, the Memory and Compare pages, the analyzers' notes, `scprof analyze`);
    stored names keep theirs (hbm_peak_bytes, the "HBM heap" counters)."""
    device = set(kinds) - {"counter", "host"}
    return "HBM" if not device or device & TPU_KINDS else "device memory"


def format_ratio(value: float | int | None) -> str:
    """A ratio of two like quantities (a max over a mean, a limit over what was observed): three
    significant digits and a times sign, 7.89×; whole from 1000 on, 1,234×. Every surface (finding
    titles, their headline figure, evidence, the Overview's cards) writes a ratio with it."""
    if _is_missing(value):
        return MISSING
    return f"{value:,.0f}×" if abs(value) >= 1000 else f"{value:.3g}×"


_STAT = r"(mean|median|p\d+|min|max|total)"  # a statistic after the unit: step_ps_p50 is in ps


def unit_of(name: str) -> str:
    """The unit a figure's or an evidence key's name says (units in names: the suffix, or the unit
    then a statistic, `step_ps_p50`), the one reading for every surface: 'ts' (a time from the run's
    start: `_ts_ps`, `_at_ps`), 'flop_per_byte', 'flop_per_s', 'bytes_per_s', 'flop', 'share' (`_share`,
    `share_of_`, `_share_<what of>`), 'ratio' (`_ratio`, `_over_`: ×), 'ps', 'bytes' (also
    `bytes_accessed`), else 'count'."""
    k = name.lower()
    if k.endswith("_ts_ps") or k.endswith("_at_ps") or k == "ts_ps":
        return "ts"
    for unit in ("flop_per_byte", "flop_per_s", "bytes_per_s"):
        if k == unit or k.endswith("_" + unit):
            return unit
    if k == "flops" or k.endswith("_flops"):
        return "flop"
    if k == "share" or k.endswith("_share") or k.startswith("share_of_") or "_share_" in k:
        return "share"
    if k.endswith("_ratio") or "_over_" in k:
        return "ratio"
    if k == "ps" or k.endswith("_ps") or "_ps_per_" in k or re.search(rf"_ps_{_STAT}$", k):
        return "ps"
    if k == "bytes" or k.endswith("_bytes") or "_bytes_per_" in k or re.search(rf"(^|_)bytes_(accessed|{_STAT})$", k):
        return "bytes"
    return "count"


def format_value(value: Any, unit: str) -> str:
    """A figure with its unit for people: 1.5 ms, 3.2 GiB, 42.0%, 1,234."""
    if _is_missing(value):
        return MISSING
    if unit == "ps" or unit.endswith("_ps"):
        return format_ps(value)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "flop":
        return format_si(value, "FLOP")
    if unit == "flop_per_s":
        return format_si(value, "FLOP/s")
    if unit == "flop_per_byte":
        return f"{value:.3g} FLOP/byte"
    if unit == "bytes_per_s":
        return format_bytes(value) + "/s"
    if "share" in unit:
        return f"{value:.1%}"
    if unit == "ratio" or unit == "x" or unit.startswith("x "):  # "x mean partition load": 7.89× mean ...
        return format_ratio(value) + ("" if unit == "ratio" else unit[1:])
    if unit in ("index", "text"):  # a step, core or minibatch number, or a name: as it is
        return str(value)
    if unit in ("count", "") and isinstance(value, int | float):
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"
    if isinstance(value, float):
        return f"{value:.4g} {unit}".strip()
    if isinstance(value, int):
        return f"{value:,} {unit}".strip()
    return f"{value} {unit}".strip()


def format_delta(base: Any, cand: Any, unit: str) -> str:
    """Change from base to cand: signed, with the relative change (shares in percentage points)."""
    if _is_missing(base) or _is_missing(cand):
        return MISSING
    d = cand - base
    sign = "+" if d > 0 else "−" if d < 0 else "±"
    rel = f" ({signed_pct(d / base)})" if base else ""
    if unit == "share":
        return f"{sign}{abs(d) * 100:.1f} pp"
    return f"{sign}{format_value(abs(d), unit)}{rel}"


def format_cell(v: object) -> str:
    """One value of a SQL result as text: NULL, 6 significant digits for floats."""
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table (cells' control characters escaped: one row, one line)."""
    header = [escape_control(h) for h in header]
    rows = [[escape_control(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def signed_pct(x: float) -> str:
    """A relative change for people, signed, one decimal, with a true minus: '−4.3%', '+1.2%'.
    Every surface words a change with it, so '-4.3%' and '−4.3%' never sit side by side."""
    return f"{x:+.1%}".replace("-", "\u2212")


def ci_text(low: float | None, high: float | None) -> str:
    """A 95% interval of a relative change for people: '−45.8% .. −40.5%', '-' when none."""
    if _is_missing(low) or _is_missing(high):
        return MISSING
    return f"{signed_pct(low)} .. {signed_pct(high)}"


# Findings' evidence: one label and one formatting per key, for every surface (CLI, UI, MCP).
# A key names its unit in a suffix: `*_ts_ps` / `*_at_ps` are timestamps (shown from the run's
# start, labelled "at"), `*_ps` (and `*_ps_per_*`) durations, `*_bytes` (and `*_bytes_per_*`)
# bytes, `*_share` and `share_of_*` shares, `*_ratio` and `*_over_*` ratios (×); any other
# number is a plain count. Nested dicts and lists are formatted leaf by leaf, by the leaf's key.

_WORDS = {
    "hbm": "HBM",
    "ids": "IDs",
    "id": "ID",
    "sc": "SC",
    "scs": "SCs",
    "tc": "TC",
    "spmem": "SPMEM",
    "oov": "OOV",
    "nan": "NaN",
    "rms": "RMS",
    "cv": "CV",
    "sparsecore": "SparseCore",
    "sparsecores": "SparseCores",
    "tensorcore": "TensorCore",
    "ici": "ICI",
    "vocab": "vocabulary",
}  # words shown in their usual spelling
_LABELS = {
    "cv_ratio": "coefficient of variation (CV)",
    "persistence_share": "steps with the same partition hottest",
    "worst_max_over_mean": "worst step's max / mean",
    "largest_limit_over_observed": "largest limit / observed",
    "fixed_ps_per_op": "fixed cost per op",
    "driver_bytes": "driver's size",
    "driver_growth_bytes": "driver's growth",
}  # keys whose words alone do not say what they are
_NAME_KEYS = ("name", "table", "table_name", "stack", "op")  # an entry's name, shown first


def _words(stem: str) -> str:
    return " ".join(_WORDS.get(w, w) for w in stem.split("_") if w)


def evidence_label(key: str) -> str:
    """A key as words: `peak_ts_ps` -> 'peak at', `hbm_peak_bytes` -> 'HBM peak',
    `estimated_overhead_ps_per_step` -> 'estimated overhead per step'."""
    k = key.lower()
    if k in _LABELS:
        return _LABELS[k]
    for suffix in ("_ts_ps", "_at_ps"):
        if k.endswith(suffix):
            return _words(k[: -len(suffix)]) + " at"
    for suffix in ("_flop_per_byte", "_flop_per_s", "_bytes_per_s"):  # a rate or intensity: its value says the unit
        if k.endswith(suffix):
            return _words(k[: -len(suffix)])
    stat = re.fullmatch(rf"(.+)_(?:ps|bytes)_{_STAT}", k)  # step_ps_p50 -> 'step p50'
    if stat:
        return f"{_words(stat.group(1))} {stat.group(2)}"
    for unit in ("ps", "bytes"):
        head, sep, tail = k.partition(f"_{unit}_per_")
        if sep:
            return f"{_words(head)} per {_words(tail)}"
    if k.endswith("_ps"):
        return _words(k[:-3]) + " time"
    if k.endswith("_bytes"):
        return _words(k[:-6])
    if k.endswith("_ratio"):
        return _words(k[:-6])
    return _words(k)


def _plain_number(value: float) -> str:
    """A count or plain number: separators for whole and large numbers, else 3 significant digits."""
    if float(value).is_integer() or abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def format_evidence(key: str, value: Any, start_ps: int | float = 0) -> str:
    """One evidence value for people, by its key's unit; timestamps as the time from `start_ps`
    (the run's first timestamp); a dict as its items, a list as its entries, each by its own key."""
    if _is_missing(value):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        unit = unit_of(key)
        if unit == "ts":
            return f"{format_ps(value - (start_ps or 0))} from the run's start"
        if unit in ("ps", "bytes", "share", "flop", "flop_per_byte", "flop_per_s", "bytes_per_s"):
            return format_value(value, unit)
        if unit == "ratio":
            return format_ratio(value)
        return _plain_number(value)
    if isinstance(value, dict):
        return ", ".join(f"{evidence_label(k)} {format_evidence(k, v, start_ps)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ("; " if any(isinstance(v, dict) for v in value) else ", ").join(
            _entry_text(key, v, start_ps) for v in value
        )
    return str(value)


def _entry_text(key: str, entry: Any, start_ps: int | float) -> str:
    """A list's entry: a dict as its name then its other items in parentheses; else by the list's key."""
    if not isinstance(entry, dict):
        return entry if isinstance(entry, str) else format_evidence(key, entry, start_ps)
    name = next((str(entry[k]) for k in _NAME_KEYS if isinstance(entry.get(k), str)), None)
    rest = format_evidence(key, {k: v for k, v in entry.items() if name is None or k not in _NAME_KEYS}, start_ps)
    return f"{name} ({rest})" if name is not None else rest


def evidence_items(evidence: dict[str, Any], start_ps: int | float = 0) -> list[tuple[str, str, str]]:
    """A finding's evidence as (key, label, value text) rows, absent values left out: what every
    surface shows of it."""
    return [(k, evidence_label(k), format_evidence(k, v, start_ps)) for k, v in evidence.items() if not _is_missing(v)]
