"""Chrome trace JSON, streamed: the `traceEvents` array cut into newline-delimited JSON blocks.

    file (.json or .json.gz) -> bytes in chunks (gzip inflated as they come)
    -> numpy scan of each chunk (strings, nesting depth) -> each event object on a line of its own
    -> blocks of whole lines (NDJSON), which DuckDB's JSON reader parses (profiler/chrome_json_to_store.py)

A Chrome trace is `{"traceEvents": [...], ...}` (the JSON Object Format: PyTorch Kineto, XProf,
JAX) or a bare array of events (the JSON Array Format, whose closing `]` may be missing). The
scan never builds Python objects for events: per chunk it finds the quotes that open and close
strings (a quote after an odd run of backslashes is escaped), the brackets and commas outside
strings and the depth after each (a cumulative sum), all with numpy; the array's own commas
become newlines, newlines inside an event become spaces. The `ts` and `dur` numbers of each
event are turned into strings (`"ts":"1712195495519695.834"`) so their digits reach the
store exactly (DuckDB's reader would round a number to a double: 0.125 us at epoch times).

Everything outside the events array (metadata such as `baseTimeNanoseconds`,
`deviceProperties`) is kept, up to MAX_META_BYTES, and parsed with `json` at the end.

Untrusted input: memory stays bounded by the chunk size and the longest event (at most
MAX_EVENT_BYTES, else refused); gzip that inflates more than MAX_INFLATION times its size
past the first 64 MiB is refused (a zip bomb); bad JSON inside an event is DuckDB's to refuse.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from profiler.errors import TraceFormatError
from profiler.trace_file import READABLE_FORMATS, open_trace

CHUNK_BYTES = 16 << 20  # bytes of JSON text scanned at a time
BLOCK_BYTES = 32 << 20  # NDJSON handed to DuckDB at a time (whole lines)
MAX_EVENT_BYTES = 64 << 20  # one event's text (DuckDB's maximum_object_size is set to this)
MAX_META_BYTES = 8 << 20  # text outside the events array kept for the run's metadata
MAX_INFLATION = 200  # inflated / compressed bytes of a .gz (real traces: 8-25)
GZIP_MAGIC = b"\x1f\x8b"

_QUOTE, _BACKSLASH, _COMMA = 34, 92, 44
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("{"), ord("[")]] = 1
_OPEN[[ord("}"), ord("]")]] = -1
_STRUCT = np.zeros(256, bool)
_STRUCT[[ord(c) for c in "{}[],"]] = True
_WS = np.zeros(256, bool)
_WS[[9, 10, 13, 32]] = True


def sniff(path: str) -> bool:
    """Whether a file looks like JSON text (plain or gzip'd): its first non-blank byte is `{` or `[`."""
    try:
        with open_trace(path) as f:
            head = f.read(4096)
            if head[:2] == GZIP_MAGIC:
                try:
                    head = zlib.decompressobj(wbits=47).decompress(head, 4096)
                except zlib.error:
                    return False
    except (OSError, TraceFormatError):
        return False
    text = head.lstrip(b" \t\r\n\xef\xbb\xbf")  # a UTF-8 byte order mark, whitespace
    return text[:1] in (b"{", b"[")


def _chunks(path: str, digest) -> Iterator[bytes]:
    """The file's JSON text in chunks (inflated when it is gzip'd); `digest` sees the raw bytes."""
    with open_trace(path) as f:
        first = f.read(CHUNK_BYTES)
        digest.update(first)
        if first[:2] != GZIP_MAGIC:
            raw = first
            while raw:
                yield raw
                raw = f.read(CHUNK_BYTES)
                digest.update(raw)
            return
        z, fed = zlib.decompressobj(wbits=47), False
        raw, read, out = first, len(first), 0
        while raw:
            while raw:
                try:
                    text = z.decompress(raw, CHUNK_BYTES)
                except zlib.error as e:
                    raise TraceFormatError(f"{path}: corrupt gzip data ({e})") from None
                fed = True
                out += len(text)
                if out > 64 << 20 and out > MAX_INFLATION * read:
                    raise TraceFormatError(
                        f"{path}: gzip inflates more than {MAX_INFLATION} times its size (a zip bomb?); not read"
                    )
                if text:
                    yield text
                if z.eof:  # a second gzip member may follow (concatenated .gz files)
                    raw, z, fed = z.unused_data, zlib.decompressobj(wbits=47), False
                else:
                    raw = z.unconsumed_tail
            raw = f.read(CHUNK_BYTES)
            read += len(raw)
            digest.update(raw)
        if fed and not z.eof:
            raise TraceFormatError(f"{path}: gzip stream cut short")


@dataclass
class _State:
    """The scan's state between chunks."""

    in_str: bool = False
    backslashes: int = 0  # backslashes ending the previous chunk (inside a string)
    depth: int = 0
    mode: str = "before"  # before the events array, inside it ("in"), after it
    events_depth: int = 0  # depth inside the events array
    bare_array: bool = False  # the file is a bare array of events
    tail: bytes = b""  # the last bytes before this chunk (a key split across chunks)
    meta: list[bytes] = field(default_factory=list)  # text outside the events array
    meta_bytes: int = 0


def _scan(b: np.ndarray, st: _State, quotes: bool = False) -> tuple:
    """Brackets and commas of chunk `b` outside strings: positions, bytes, depth after each (and
    with `quotes`, the positions of the quotes that open or close strings); `st` updated."""
    q = np.flatnonzero(b == _QUOTE)
    bp = np.zeros(0, np.int64)
    if q.size:  # a quote after an odd run of backslashes is escaped (a run may go on from the last chunk)
        esc = np.zeros(q.size, bool)
        cand = np.flatnonzero((q > 0) & (b[np.maximum(q - 1, 0)] == _BACKSLASH))
        if cand.size:
            bp = np.flatnonzero(b == _BACKSLASH)
            run_start = bp[np.concatenate([[True], np.diff(bp) != 1])]
            starts = run_start[np.searchsorted(run_start, q[cand] - 1, side="right") - 1]
            esc[cand] = (q[cand] - starts + np.where(starts == 0, st.backslashes, 0)) % 2 == 1
        if st.backslashes and q[0] == 0:
            esc[0] = st.backslashes % 2 == 1
        q = q[~esc]
    s = np.flatnonzero(_STRUCT[b])
    if s.size:
        before = np.searchsorted(q, s)
        s = s[(before + st.in_str) % 2 == 0]
    ch = b[s]
    depth = st.depth + np.cumsum(_OPEN[ch], dtype=np.int64)
    st.in_str = bool((q.size + st.in_str) % 2)
    run = 0  # backslashes ending this chunk, for a quote opening the next
    if len(b) and b[-1] == _BACKSLASH:
        bp = bp if bp.size else np.flatnonzero(b == _BACKSLASH)
        gaps = np.flatnonzero(np.diff(bp) != 1)
        run = len(bp) - (gaps[-1] + 1 if gaps.size else 0)
    st.backslashes = (run + (st.backslashes if run == len(b) else 0)) if st.in_str else 0
    st.depth = int(depth[-1]) if depth.size else st.depth
    return (s, ch, depth, q) if quotes else (s, ch, depth)


def _keep_meta(st: _State, text: bytes) -> None:
    if st.meta_bytes <= MAX_META_BYTES:
        st.meta.append(text)
        st.meta_bytes += len(text)


def _events_open(b: np.ndarray, data: bytes, s, ch, depth, st: _State) -> int | None:
    """Where the events array opens in this chunk (the index after its `[`), or None."""
    opens = np.flatnonzero(_OPEN[ch] == 1)
    if not opens.size:
        return None
    first = opens[0]
    if depth[first] == 1 and ch[first] == ord("["):  # the JSON Array Format: the file is the array
        st.bare_array, st.events_depth = True, 1
        return int(s[first]) + 1
    for i in opens[(depth[opens] == 2) & (ch[opens] == ord("["))].tolist():
        pos = int(s[i])
        before = (st.tail + data[:pos]).rstrip(b" \t\r\n")
        if before.endswith(b":") and before[:-1].rstrip(b" \t\r\n").endswith(b'"traceEvents"'):
            st.events_depth = 2
            return pos + 1
    return None


def ndjson_blocks(path: str, meta: dict, digest=None) -> Iterator[bytes]:
    """The events of the Chrome trace at `path` as NDJSON blocks (each ends with a newline; an
    event per line, `ts`/`dur` as strings). `meta` gets the top-level members other than
    `traceEvents`; `digest` (hashlib) the file's raw bytes."""
    st = _State()
    digest = digest or hashlib.sha1()
    out: list[bytes] = []
    out_bytes = 0
    seen_any = False
    for data in _chunks(path, digest):
        if not seen_any:
            lead = data.lstrip(b" \t\r\n\xef\xbb\xbf")
            if not lead:
                continue
            if lead[:1] not in (b"{", b"["):
                raise TraceFormatError(f"{path}: not JSON text (starts with {lead[:16]!r}); {READABLE_FORMATS}")
            data = lead
            seen_any = True
        b = np.frombuffer(data, np.uint8)
        s, ch, depth = _scan(b, st)
        lo = 0
        if st.mode == "before":
            at = _events_open(b, data, s, ch, depth, st)
            if at is None:
                _keep_meta(st, data)
                st.tail = (st.tail + data)[-256:]
                continue
            _keep_meta(st, data[:at])
            st.mode, lo = "in", at
        hi = len(data)
        if st.mode == "in":
            sel = s >= lo
            close = np.flatnonzero(sel & (depth == st.events_depth - 1) & (ch == ord("]")))
            if close.size:
                hi = int(s[close[0]])
                st.mode = "after"
                _keep_meta(st, data[hi:])
            piece = b[lo:hi].copy()
            piece[(piece == 10) | (piece == 13)] = 32
            commas = s[sel & (s < hi) & (ch == _COMMA) & (depth == st.events_depth)] - lo
            piece[commas] = 10
            out.append(piece.tobytes())
            out_bytes += len(piece)
            if out_bytes >= BLOCK_BYTES or st.mode == "after":
                yield from _flush(path, out, final=st.mode == "after")
                out_bytes = sum(len(x) for x in out)
        elif st.mode == "after":
            _keep_meta(st, data)
        st.tail = data[-256:]
    if not seen_any:
        raise TraceFormatError(f"{path}: empty file, not a trace")
    if st.mode == "before":
        raise TraceFormatError(f"{path}: JSON without a traceEvents array, not a Chrome trace; {READABLE_FORMATS}")
    if st.mode == "in" and not st.bare_array:
        raise TraceFormatError(f"{path}: cut short inside the traceEvents array")
    if st.in_str:
        raise TraceFormatError(f"{path}: cut short inside a string")
    yield from _flush(path, out, final=True)
    meta.update(_metadata(st))


def _flush(path: str, out: list[bytes], final: bool) -> Iterator[bytes]:
    """The whole lines of `out` as one block (with `final`, all of it); what follows stays in `out`."""
    text = b"".join(out)
    out.clear()
    cut = len(text) if final else text.rfind(b"\n") + 1
    if not final and cut == 0:
        if len(text) > MAX_EVENT_BYTES:
            raise TraceFormatError(f"{path}: an event longer than {MAX_EVENT_BYTES:,} bytes; not read")
        out.append(text)
        return
    block, rest = text[:cut], text[cut:]
    if rest:
        out.append(rest)
    if len(block) > MAX_EVENT_BYTES:  # a line (an event) longer than that
        ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
        if np.diff(np.concatenate([[-1], ends, [len(block)]])).max() > MAX_EVENT_BYTES:
            raise TraceFormatError(f"{path}: an event longer than {MAX_EVENT_BYTES:,} bytes; not read")
    if block.strip():
        yield quote_times(block if block.endswith(b"\n") else block + b"\n")


def _metadata(st: _State) -> dict:
    """The top-level members other than traceEvents (empty when they were too long or not an object)."""
    if st.bare_array or st.meta_bytes > MAX_META_BYTES:
        return {}
    try:  # the text before the array ends with its `[`, the text after starts with its `]`
        head = json.loads(b"".join(st.meta))
    except (ValueError, RecursionError):
        return {}
    return {k: v for k, v in head.items() if k != "traceEvents"} if isinstance(head, dict) else {}


_TIME_KEYS = (b'"ts"', b'"dur"')
_MAX_BLANKS = 16  # blanks looked past around a time's colon (more: the number is left as it is)


def quote_times(block: bytes) -> bytes:
    """An NDJSON block with the numbers of each event's `ts` and `dur` made strings (exact digits)."""
    b = np.frombuffer(block, np.uint8)
    n = len(b)
    s, _, depth, q = _scan(b, _State(), quotes=True)
    starts = []
    opening = q[0::2]  # quotes that open a string (the block starts outside one)
    opening = opening[opening < n - 4]
    for key in _TIME_KEYS:
        hits = opening
        for j in range(1, len(key)):
            hits = hits[b[hits + j] == key[j]]
        if not hits.size:
            continue
        lvl = np.searchsorted(s, hits) - 1  # at an event's own level (depth 1)
        hits = hits[(lvl >= 0) & (depth[np.maximum(lvl, 0)] == 1)]
        pos = _skip(b, hits + len(key), 1)
        colon = (pos < n) & (b[np.minimum(pos, n - 1)] == ord(":"))
        pos = _skip(b, pos[colon] + 1, 1)
        first = b[np.minimum(pos, n - 1)]
        starts.append(pos[(pos < n) & (((first >= 48) & (first <= 57)) | (first == ord("-")))])
    start = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    if not start.size:
        return block
    nxt = np.searchsorted(s, start)
    end = np.where(nxt < len(s), s[np.minimum(nxt, len(s) - 1)], n)
    end = _skip(b, end - 1, -1) + 1  # before the blanks ahead of the comma or brace
    return np.insert(b, np.concatenate([start, np.maximum(end, start)]), _QUOTE).tobytes()


def _skip(b: np.ndarray, pos: np.ndarray, step: int) -> np.ndarray:
    """Each position moved past blanks in direction `step` (at most _MAX_BLANKS of them)."""
    n = len(b)
    pos = pos.copy()
    live = np.flatnonzero((pos >= 0) & (pos < n))
    for _ in range(_MAX_BLANKS):
        live = live[_WS[b[pos[live]]]]
        if not live.size:
            break
        pos[live] += step
        live = live[(pos[live] >= 0) & (pos[live] < n)]
    return pos
