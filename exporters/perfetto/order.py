"""A stream window's rows in Perfetto's order (STREAM_ORDER) and gathered into batches, with numpy.

DuckDB's ORDER BY over the stream's 16 columns and pyarrow's take cost several times as much;
these reproduce both exactly (tests/exporters/test_perfetto_order.py checks them against DuckDB).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _values(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """A column without nulls as numpy (zero-copy)."""
    arr = batch.column(name)
    if arr.null_count:
        raise ValueError(f"stream column {name} has nulls")
    return arr.to_numpy()


def _gather(arr: pa.Array, picks: list[np.ndarray]) -> list[pa.Array]:
    """arr.take(p) for each p, for an 8-byte column: numpy gathers of its values and validity.

    pyarrow's take cost several times as much per column; values under nulls are gathered
    as they are (nothing reads them).
    """
    n = len(arr)
    validity, data = arr.buffers()[:2]
    values = np.frombuffer(data, np.float64 if arr.type == pa.float64() else np.int64, n, arr.offset * 8)
    if not arr.null_count:
        return [pa.Array.from_buffers(arr.type, len(p), [None, pa.py_buffer(values[p])], 0) for p in picks]
    valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[arr.offset : arr.offset + n]
    out = []
    for p in picks:
        v = valid[p]
        out.append(
            pa.Array.from_buffers(
                arr.type,
                len(p),
                [pa.py_buffer(np.packbits(v, bitorder="little")), pa.py_buffer(values[p])],
                len(p) - int(v.sum()),
            )
        )
    return out


def _window_order(t: pa.RecordBatch) -> np.ndarray:
    """Indices that put a window's rows in STREAM_ORDER, exactly as DuckDB's ORDER BY would.

    Keys as in SQL: start ns, end ns descending, kind, id (NULLs last), track_id; `//` truncates
    toward zero as in DuckDB. Each pair of keys is packed into one int64 where its range fits
    (end descending as end - start ascending, equal within a start), else sorted as separate keys.
    """
    start, dur = _values(t, "start_ps"), _values(t, "dur_ps")
    s_ns, e_ns = _div_1000(start), _div_1000(start + dur)
    gap = s_ns - e_ns  # within one start nanosecond, ascending gap is descending end
    kind, track = _values(t, "kind"), _values(t, "track_id")
    ids = t.column("id")
    if ids.null_count:  # NULLS LAST
        ids = pc.fill_null(ids, pc.max(ids).as_py() + 1 if ids.null_count < len(ids) else 0)
    ident = ids.to_numpy()
    return np.lexsort((*_packed(track, ident, kind), *_packed(gap, s_ns)))


def _packed(*keys: np.ndarray) -> tuple[np.ndarray, ...]:
    """Keys for np.lexsort (last one primary): one int64 when the keys' ranges multiply below 2**62."""
    if len(keys[0]) == 0:
        return keys
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows, strict=True)]
    if np.prod([float(x) for x in spans]) >= 2.0**62 or any(x >= 1 << 62 for x in spans):
        return keys
    out = keys[-1] - np.int64(lows[-1])
    for k, lo, span in zip(keys[-2::-1], lows[-2::-1], spans[-2::-1], strict=True):
        out = out * np.int64(span) + (k - np.int64(lo))
    return (out,)


def _div_1000(x: np.ndarray) -> np.ndarray:
    """x // 1000 truncated toward zero, as DuckDB's integer `//`."""
    q = x // 1000
    neg = x < 0
    if neg.any():
        q += neg & (q * 1000 != x)
    return q
