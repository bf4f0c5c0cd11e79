"""Inputs for fuzzing the two decoders (the `.sctrace` reader and the XSpace import): valid seeds
and deterministic mutations of them, and the property every input must satisfy.

A mutation is (kind, a, b): two integers that pick where and what, so hypothesis can shrink
them and the campaign (benchmarks/fuzz_decoders.py) can draw them from a seeded RNG:

- flip / insert / delete: bytes changed, added or removed at one place;
- value: one varint or fixed-width value anywhere in the protobuf tree set to a hostile number
  (2^31, 2^62, 2^63 - 1, 2^64 - 1, -1, ...), enclosing lengths (and .sctrace chunk CRCs) fixed
  up, so the file stays well-formed and only the value is wrong;
- text: one string/bytes field set to a hostile text (bad UTF-8, "²", "{", stat names such as
  "group_id", a plane name with a huge chip id, ...), lengths and CRCs fixed up as well;
- truncate / concat / splice: the file cut short, appended to itself or to another seed.

`check_ingest` runs one input through `ingest_traces` and checks the property: it imports (and
the run is complete, its values in range) or it is refused with a ScprofError, leaving the
store as it was; a hang raises `Hang` (a per-input alarm, not a timing assertion).
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

from profiler.errors import ScprofError
from profiler.trace_file import PAYLOAD_FIELDS, frame_chunk
from tests.tracekit import chunk_spans, record_small

MUTATIONS = ("flip", "insert", "delete", "value", "text", "truncate", "concat", "splice")
HOSTILE_INTS = (
    0,
    1,
    127,
    128,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    (1 << 53) + 1,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    (1 << 64) - 1,
    (1 << 64) - 5,
    1_000_000_007,
)
HOSTILE_TEXT = (
    b"",
    b"\xff\xfe\xfd",
    "²".encode(),
    b"9" * 30,
    b"{",
    b"[1, 2]",
    b'{"num_chips": 1e999}',
    b"NaN",
    b"x" * 10_000,
    b"\x00",
    b"../../x",
    b"/device:TPU:99999999999",
    b"/device:TPU:0 SparseCore 4294967296",
    b"Steps",
    b"Sparse Core Steps",
    b"_counters_",
    b"MemoryAllocation",
    b"group_id",
    b"step_num",
    b"ids",
    b"flops",
    b"sc",
    b"bytes_allocated",
    b"hardware_json",
    b"scprof_step_marker",
    b"/host:scprof",
    b"\x08\x01",
)


class Hang(Exception):
    """An input that ran past its time limit."""


class Env:
    """What a property test shares between examples (a short repr for hypothesis' reports)."""

    def __init__(self, d: Path, inputs: list[bytes], store):
        self.d, self.inputs, self.store = d, inputs, store

    def __repr__(self) -> str:
        return f"Env({self.d})"


# ------------------------------------------------------------------ protobuf tree (independent of profiler/)


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int] | None:
    value, shift = 0, 0
    while pos < end and shift < 70:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value & ((1 << 64) - 1), pos
        shift += 7
    return None


def enc_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def parse(buf: bytes, depth: int = 0) -> list | None:
    """A message as a list of [number, wire, value] (value: int, bytes, or a parsed sub-message
    list when the bytes parse cleanly as one); None if `buf` is not a clean message."""
    fields, pos, end = [], 0, len(buf)
    while pos < end:
        got = _varint(buf, pos, end)
        if got is None or got[0] >> 3 == 0 or got[0] >> 3 > 1 << 20:
            return None
        key, pos = got
        number, wire = key >> 3, key & 7
        if wire == 0:
            got = _varint(buf, pos, end)
            if got is None:
                return None
            value, pos = got
        elif wire in (1, 5):
            w = 8 if wire == 1 else 4
            if pos + w > end:
                return None
            value, pos = int.from_bytes(buf[pos : pos + w], "little"), pos + w
        elif wire == 2:
            got = _varint(buf, pos, end)
            if got is None or got[1] + got[0] > end:
                return None
            raw = buf[got[1] : got[1] + got[0]]
            pos = got[1] + got[0]
            sub = parse(raw, depth + 1) if raw and depth < 8 else None
            value = sub if sub else raw
        else:
            return None
        fields.append([number, wire, value])
    return fields


def serialize(fields: list) -> bytes:
    out = bytearray()
    for number, wire, value in fields:
        out += enc_varint(number << 3 | wire)
        if wire == 0:
            out += enc_varint(value)
        elif wire in (1, 5):
            out += (value & ((1 << (64 if wire == 1 else 32)) - 1)).to_bytes(8 if wire == 1 else 4, "little")
        else:
            raw = serialize(value) if isinstance(value, list) else value
            out += enc_varint(len(raw)) + raw
    return bytes(out)


def _leaves(fields: list, want_text: bool, out: list) -> list:
    for f in fields:
        if isinstance(f[2], list):
            _leaves(f[2], want_text, out)
        elif (f[1] == 2) == want_text:
            out.append(f)
    return out


def _set_leaf(fields: list, text: bool, a: int, b: int) -> bool:
    """Set leaf `a` (mod the leaves) to hostile value `b`; packed fixed-width columns count per element."""
    leaves = _leaves(fields, text, [])
    if not leaves:
        return False
    f = leaves[a % len(leaves)]
    if text:
        raw = f[2]
        width = 8 if len(raw) % 8 == 0 else 4 if len(raw) % 4 == 0 else 0
        if width and len(raw) and b % 2:  # a packed column: one element set to a hostile number
            i = (a // len(leaves)) % (len(raw) // width) * width
            v = HOSTILE_INTS[b // 2 % len(HOSTILE_INTS)] & ((1 << (8 * width)) - 1)
            f[2] = raw[:i] + v.to_bytes(width, "little") + raw[i + width :]
        else:
            f[2] = HOSTILE_TEXT[b % len(HOSTILE_TEXT)]
    else:
        f[2] = HOSTILE_INTS[b % len(HOSTILE_INTS)] if b < 1 << 20 else b
    return True


# ------------------------------------------------------------------ mutations


def _structured(data: bytes, text: bool, a: int, b: int, sctrace: bool) -> bytes:
    if not sctrace:
        tree = parse(data)
        return serialize(tree) if tree and _set_leaf(tree, text, a, b) else data
    try:
        spans = chunk_spans(data)
    except AssertionError:  # damaged framing (an earlier mutation): no chunk to rewrite
        return data
    if not spans:
        return data
    s, e = spans[a % len(spans)]
    chunk = parse(data[s:e])  # TraceFile.chunk: [2, 2, Chunk]
    if not chunk or not isinstance(chunk[0][2], list):
        return data
    payload = [f for f in chunk[0][2] if f[0] != 1]  # all but the crc
    if len(payload) != 1 or payload[0][0] not in PAYLOAD_FIELDS:
        return data
    number, _, body = payload[0]
    tree = body if isinstance(body, list) else parse(body) or [[1, 2, body]]
    if not _set_leaf(tree, text, a // len(spans), b):
        return data
    return data[:s] + frame_chunk(PAYLOAD_FIELDS[number], serialize(tree)) + data[e:]


def mutate(data: bytes, kind: str, a: int, b: int, other: bytes, sctrace: bool) -> bytes:
    """One mutation of `data` (`other`: a second seed, for concatenations and splices)."""
    n = max(len(data), 1)
    i = a % n
    if kind == "flip":
        return data[:i] + bytes([data[i] ^ (b % 255 + 1)]) + data[i + 1 :] if data else data
    if kind == "insert":
        return data[:i] + bytes((b >> (8 * k)) & 0xFF for k in range(b % 4 + 1)) + data[i:]
    if kind == "delete":
        return data[:i] + data[i + b % 64 + 1 :]
    if kind in ("value", "text"):
        return _structured(data, kind == "text", a, b, sctrace)
    if kind == "truncate":
        return data[:i]
    if kind == "concat":
        return data + (data, other, data[:i])[b % 3]
    if kind == "splice":
        return data[:i] + other[b % max(len(other), 1) :]
    raise ValueError(kind)


def apply(data: bytes, mutations, other: bytes, sctrace: bool) -> bytes:
    for kind, a, b in mutations:
        data = mutate(data, kind, a, b, other, sctrace)
    return data


# ------------------------------------------------------------------ the property


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise Hang in the main thread when the block runs past `seconds` (a hang guard)."""

    def on_alarm(signum, frame):
        raise Hang(f"ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


RANGE_SQL = """
SELECT count(*) AS n, coalesce(min(dur_ps), 0) AS min_dur,
       coalesce(max(start_ps::HUGEINT + dur_ps), 0) AS max_end, coalesce(min(start_ps), 0) AS min_start,
       coalesce(min(least(ids, unique_ids, dropped_ids, bytes, flops)), 0) AS min_count
FROM events WHERE run_id = ?"""


def check_ingest(store, paths: list, xspace: bool, allow_truncated: bool = False, seconds: int = 60) -> str:
    """Ingest one input (its paths); 'ok' or 'refused', or raise AssertionError (property broken) / Hang."""
    from profiler.trace_to_store import ingest_traces

    before = snapshot_con(store.con)
    try:
        with time_limit(seconds):
            results = ingest_traces(store, [str(p) for p in paths], replace=True, allow_truncated=allow_truncated)
    except ScprofError as e:
        msg = str(e)
        assert "\n" not in msg and msg, f"error is not one line: {msg!r}"
        assert snapshot_con(store.con) == before, "a refused ingest changed the store"
        return "refused"
    for r in results:
        run = store.con.execute("SELECT events, status FROM runs WHERE run_id = ?", [r.run_id]).fetchall()
        assert run and run[0][0] == r.events, f"run {r.run_id} incomplete: {run}"
        n, min_dur, max_end, min_start, min_count = store.con.execute(RANGE_SQL, [r.run_id]).fetchall()[0]
        assert n == r.events and min_dur >= 0 and max_end <= (1 << 63) - 1, (n, min_dur, max_end)
        if xspace:  # the import's documented limits
            assert min_start >= 0 and max_end < 1 << 62 and min_count >= 0, (min_start, max_end, min_count)
        assert store.con.execute("SELECT count(*) FROM run_summaries WHERE run_id = ?", [r.run_id]).fetchall()[0][0]
    return "ok"


def snapshot_con(con) -> dict:
    """Row counts of every table and the runs (tracekit.snapshot, on an open connection)."""
    from profiler.schema import TABLES

    counts = {t.name: con.execute(f"SELECT count(*) FROM {t.name}").fetchall()[0][0] for t in TABLES}
    return {"counts": counts, "runs": con.execute("SELECT run_id, uuid, name, events FROM runs ORDER BY 1").fetchall()}


def seeds(d: Path) -> dict[str, list[bytes]]:
    """Valid inputs of each decoder, written under `d`: small, so many mutants run per minute."""
    from exporters.xspace import export_run
    from profiler.store import Store
    from profiler.synthetic import write_synthetic_trace
    from profiler.trace_to_store import ingest_traces
    from tests.xplane.helpers import JAX_SMALL
    from tests.xplane.synth import tpu_space

    small = record_small(d / "seed-small.sctrace")
    synth = d / "seed-synth.sctrace"
    write_synthetic_trace(str(synth), 3000)
    with Store.open(str(d / "seed.duckdb")) as st:
        runs = ingest_traces(st, [str(small), str(synth)])
        for r in runs:
            export_run(st, r.run_id, str(d / f"seed-{r.run_id}.xplane.pb"), None, False)
    xspace = [tpu_space(steps=2).SerializeToString()] + [(d / f"seed-{r.run_id}.xplane.pb").read_bytes() for r in runs]
    return {"sctrace": [small.read_bytes(), synth.read_bytes()], "xspace": xspace + [Path(JAX_SMALL).read_bytes()]}
