"""Range checks of an imported XSpace's values, before they reach the store.

A capture is untrusted input (a file a colleague sends). Every value the import turns
into a store column is checked here against what the column can hold faithfully; one
that does not fit is refused with a `CaptureError`, one line naming the file, plane,
line, event (its index in the line) and field. Nothing is clamped. Limits:

- times: line `timestamp_ns` >= 0; event `offset_ps` and `duration_ps` >= 0; every event's
  start and end (relative to the run's origin) < 2^62 ps (~53 days), so a run spans less
  than 2^63 ps and `start + dur` never overflows int64;
- the sums the store computes (`dur_ps` per timeline bin, `ids`, `unique_ids`, `dropped_ids`
  per step cell): each column's total over the run fits int64, so no subset overflows;
- `group_id`/`step_num`, `sc`, `minibatch` and chip/SparseCore ids of plane names: int32;
- `ids`, `unique_ids`, `dropped_ids`, `bytes*`, `flops`: 0 .. 2^63 - 1 (a uint64 above is refused);
- counter and memory samples: int, uint or double stats (a string is refused);
- step numbers taken from `Steps` event names: ASCII digits within int32 (other names are
  numbered by position, as before);
- at most MAX_LINES lines holding events per run (each line has a fixed cost).

All checks are numpy comparisons over a line's columns: no Python step per event.
"""

from __future__ import annotations

import numpy as np

from profiler.errors import TraceFormatError
from profiler.reader import SUM_LIMIT, abs_total
from profiler.trace_fields import COUNT, INT32, TYPED_FIELDS
from profiler.xspace.wire import KIND_DOUBLE, KIND_INT, KIND_UINT

MAX_TIME_PS = 1 << 62  # exclusive bound of event starts and ends, in ps after the run's origin
# Lines holding events, per run: each is decoded and mapped with a fixed Python cost (~0.5-1 ms),
# so a small hostile file of a million one-event lines would run for a quarter of an hour.
# Real captures hold tens to a few thousand (one per thread, stream or TPU line).
MAX_LINES = 100_000
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
I64_MAX = (1 << 63) - 1
NULL = np.iinfo(np.int64).min  # "no value" in an integer column while decoding (NULL in the store)

# Typed integer events column -> (lowest, highest) value it takes.
_RANGE = {INT32: (I32_MIN, I32_MAX), COUNT: (0, I64_MAX)}
COLUMN_RANGE = {f.name: _RANGE[f.holds] for f in TYPED_FIELDS if f.holds in _RANGE}
SUMMED_COLUMNS = ("dur_ps", "ids", "unique_ids", "dropped_ids")  # summed by profiler/summaries.py


class CaptureError(TraceFormatError):
    """A capture holding a value the store cannot hold faithfully (names file, plane, line, event, field)."""


def _show(value) -> str:
    s = str(value)
    return s if len(s) <= 40 else f"{s[:20]}...{s[-8:]} ({len(s)} characters)"


def check_timestamp(where: str, timestamp_ns: int) -> None:
    """A line's origin (ns since the epoch) is not negative."""
    if timestamp_ns < 0:
        raise CaptureError(f"{where}: timestamp_ns = {timestamp_ns}: negative")


def line_base_ps(where: str, timestamp_ns: int, origin_ns: int) -> int:
    """ps from the run's origin to a line's origin; refuses a negative or far-off timestamp."""
    check_timestamp(where, timestamp_ns)
    base = (timestamp_ns - origin_ns) * 1000
    if base >= MAX_TIME_PS:
        raise CaptureError(
            f"{where}: timestamp_ns = {timestamp_ns}: {base} ps after the capture's first line "
            f"(at {origin_ns} ns), beyond the {MAX_TIME_PS} ps a run may span"
        )
    return base


def event_starts(
    where: str, timestamp_ns: int, origin_ns: int, offset_ps: np.ndarray, duration_ps: np.ndarray
) -> np.ndarray:
    """Start of each event of a line in ps after the run's origin, once every start and end fits."""
    base = line_base_ps(where, timestamp_ns, origin_ns)
    room = MAX_TIME_PS - base  # > 0
    for name, col in (("offset_ps", offset_ps), ("duration_ps", duration_ps)):
        if len(col) and int(col.min()) < 0:
            i = int(np.argmax(col < 0))
            raise CaptureError(f"{where} event {i}: {name} = {int(col[i])}: negative")
    if len(offset_ps) and int(offset_ps.max()) >= room:
        i = int(np.argmax(offset_ps >= room))
        raise CaptureError(
            f"{where} event {i}: offset_ps = {int(offset_ps[i])}: starts beyond {MAX_TIME_PS} ps "
            "after the capture's first line"
        )
    start = offset_ps + base
    late = duration_ps >= MAX_TIME_PS - start
    if late.any():
        i = int(np.argmax(late))
        raise CaptureError(
            f"{where} event {i}: duration_ps = {int(duration_ps[i])}: ends beyond {MAX_TIME_PS} ps "
            "after the capture's first line"
        )
    return start


def check_stat_values(
    where: str, name: str, column: str, events: np.ndarray | slice, kinds: np.ndarray | int, ints: np.ndarray
) -> None:
    """Integer stats (`kinds` KIND_INT/KIND_UINT, values as int64 bits) filling `column`: within its range
    (`events`: their events, indices or a slice)."""
    if column not in COLUMN_RANGE or not len(ints):
        return
    lo, hi = COLUMN_RANGE[column]
    if int(ints.min()) >= max(lo, 0) and int(ints.max()) <= hi:  # the common case, in two reductions
        return
    big = (np.asarray(kinds) == KIND_UINT) & (ints < 0)  # a uint64 above int64's range
    bad = big | (ints < lo) | (ints > hi)
    if bad.any():
        i = int(np.argmax(bad))
        kinds_i = kinds if np.isscalar(kinds) else kinds[i]
        v = int(ints[i]) + (1 << 64 if kinds_i == KIND_UINT and ints[i] < 0 else 0)
        event = events.start + i if isinstance(events, slice) else int(events[i])
        raise CaptureError(f"{where} event {event}: {name} = {_show(v)}: outside {lo}..{hi} (events.{column})")


def check_meta_value(where: str, name: str, column: str, value: int) -> None:
    """An event metadata's integer stat filling `column` (one value, for every event of it)."""
    if column in COLUMN_RANGE:
        lo, hi = COLUMN_RANGE[column]
        if not lo <= value <= hi:
            raise CaptureError(f"{where}: {name} = {_show(value)}: outside {lo}..{hi} (events.{column})")


def numeric_values(
    where: str, name: str, events: np.ndarray, kinds: np.ndarray, ints: np.ndarray, doubles: np.ndarray
) -> np.ndarray:
    """Float values of stats read as numbers (counter and memory samples); other kinds are refused."""
    ok = (kinds == KIND_INT) | (kinds == KIND_UINT) | (kinds == KIND_DOUBLE)
    if not ok.all():
        i = int(np.argmax(~ok))
        raise CaptureError(
            f"{where} event {int(events[i])}: {name}: a number is expected, the stat holds "
            f"a {'string' if kinds[i] > KIND_DOUBLE else 'no value'}"
        )
    as_uint = ints.view(np.uint64).astype(np.float64)
    return np.where(kinds == KIND_DOUBLE, doubles, np.where(kinds == KIND_UINT, as_uint, ints.astype(np.float64)))


def check_plane_ids(where: str, chip: int, core: int) -> None:
    """Chip and SparseCore numbers of a plane name fit the store's int32 columns (with room for a count)."""
    for what, v in (("chip", chip), ("SparseCore", core)):
        if v >= I32_MAX:
            raise CaptureError(f"{where}: {what} id {_show(v)} in the plane name is beyond int32")


def check_totals(where: str, ev: dict[str, np.ndarray]) -> None:
    """Each summed column's total over the run fits int64 (so every sum the store takes does)."""
    for col in SUMMED_COLUMNS:
        v = ev.get(col)
        if v is not None and len(v) and (total := abs_total(v)) >= SUM_LIMIT:
            field = "duration_ps" if col == "dur_ps" else col  # named as in the XSpace
            raise CaptureError(
                f"{where}: the {field} of the run's events sum to {total:.4g}, beyond int64 "
                "(the store sums them per step and timeline bin)"
            )


def step_numbers(names: list[str], where_of) -> np.ndarray:
    """Step number named by each of `names` (distinct event names of step markers), -1 when the
    name is not a number; a number beyond int32 is refused (`where_of(i)` names the i-th's event)."""
    out = np.full(len(names), -1, np.int64)
    for i, nm in enumerate(names):
        if nm.isascii() and nm.isdigit():
            if len(nm) > 10 or int(nm) > I32_MAX:
                raise CaptureError(f"{where_of(i)}: step number {_show(nm)} (the event's name) is beyond int32")
            out[i] = int(nm)
    return out


def check_line_count(where: str, lines: int) -> None:
    """At most MAX_LINES lines with events in a run (a bound on the import's time)."""
    if lines > MAX_LINES:
        raise CaptureError(
            f"{where}: {lines:,} lines hold events; scprof imports at most {MAX_LINES:,} "
            "per capture (each costs a fixed time to map)"
        )


def check_repeats(path: str, data: bytes, plane_names: list[str]) -> None:
    """A plane named twice: the file is a capture appended to itself, or two captures concatenated
    (protobuf merges them into one XSpace whose planes repeat, so every event would import twice)."""
    seen: dict[str, int] = {}
    for i, name in enumerate(plane_names):
        if name in seen:
            half = len(data) // 2
            if len(data) % 2 == 0 and data[:half] == data[half:]:
                raise CaptureError(
                    f"{path}: the file is the same XSpace twice (appended to itself); "
                    "refused rather than import every event twice"
                )
            raise CaptureError(
                f"{path}: plane {name!r} appears twice (planes {seen[name]} and {i}): two "
                "captures concatenated into one file? refused rather than merge them"
            )
        seen[name] = i


def check_files(files: list[str], prefixed_planes: list[list[str]]) -> None:
    """Files of one run: no plane of one host given by two files. Two files of the same bytes are
    two hosts (a multi-worker logdir holds such files; XProf merges them as two hosts): the same
    file given twice is refused before, by its inode (trace_to_store._refuse_repeats)."""
    by_plane: dict[str, str] = {}
    for f, planes in zip(files, prefixed_planes, strict=True):
        for p in planes:
            if p in by_plane:
                raise CaptureError(f"{f}: plane {p!r} is also in {by_plane[p]}: two files of one run for the same host")
            by_plane[p] = f


def wide_ints(kinds: np.ndarray | int, ints: np.ndarray) -> np.ndarray:
    """Integer stats (int64 bits) the int64 argument column cannot hold: a uint64 above int64's
    range, or int64's minimum (the null sentinel). These arguments are stored exactly, as text."""
    return ((np.asarray(kinds) == KIND_UINT) & (ints < 0)) | (ints == NULL)


def int_text(intern, kinds: np.ndarray | int, ints: np.ndarray) -> np.ndarray:
    """String ids (through `intern`) of integers as decimal text; one Python step per distinct value."""
    out = np.zeros(len(ints), np.int64)
    is_uint = np.broadcast_to(np.asarray(kinds) == KIND_UINT, ints.shape)
    for mask, as_uint in ((is_uint, True), (~is_uint, False)):
        if mask.any():
            uniq, inv = np.unique(ints[mask], return_inverse=True)
            vals = uniq.view(np.uint64) if as_uint else uniq
            out[mask] = np.array([intern(str(v)) for v in vals.tolist()], np.int64)[inv.ravel()]
    return out
