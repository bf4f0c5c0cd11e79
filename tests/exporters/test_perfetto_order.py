"""The stream's order computed in numpy (_window_order) against DuckDB's ORDER BY STREAM_ORDER, and its
gather (_gather) against pyarrow's take."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from exporters.perfetto import STREAM_COLUMNS, STREAM_ORDER, STREAM_SCHEMA
from exporters.perfetto.order import _gather, _window_order


def _rows(
    rng: np.random.Generator, n: int, start_hi: int, dur_lo: int, dur_hi: int, id_hi: int, null_ids: bool
) -> pa.RecordBatch:
    """Random stream rows whose (kind, id, track_id) are unique, as in the store; many ns ties."""
    kind = rng.integers(0, 4, n)
    track = rng.integers(0, 5, n)
    ident = rng.choice(id_hi, n, replace=False) if id_hi >= n else np.arange(n)
    start = rng.integers(0, start_hi, n)
    start[rng.random(n) < 0.3] = start[0]  # whole groups on one nanosecond
    dur = rng.integers(dur_lo, dur_hi, n)
    cols = {c: pa.nulls(n, pa.int64()) for c in STREAM_COLUMNS}
    cols["value"] = pa.nulls(n, pa.float64())
    id_mask = rng.random(n) < 0.2 if null_ids else None
    if null_ids:  # rows without an id keep (kind, id, track_id) unique by their track
        track = np.where(id_mask, 100 + np.arange(n), track)
    cols.update(
        kind=pa.array(kind),
        track_id=pa.array(track),
        start_ps=pa.array(start),
        dur_ps=pa.array(dur),
        id=pa.array(ident, mask=id_mask),
    )
    return pa.RecordBatch.from_arrays([cols[c] for c in STREAM_COLUMNS], schema=STREAM_SCHEMA)


def _duckdb_order(batch: pa.RecordBatch) -> np.ndarray:
    """Row indices in the order DuckDB's ORDER BY puts them (the reference)."""
    con = duckdb.connect()
    con.register("rows_in", pa.Table.from_batches([batch]))
    order = con.sql(f"SELECT rn FROM (SELECT *, row_number() OVER () - 1 AS rn FROM rows_in) {STREAM_ORDER}")
    return np.array([r[0] for r in order.fetchall()], np.int64)


@pytest.mark.parametrize(
    ("start_hi", "dur_lo", "dur_hi", "id_hi", "null_ids"),
    [
        (50_000, 0, 20_000, 1_000, False),  # packed keys, many ties on start and end ns
        (50_000, -30_000, 20_000, 1_000, True),  # negative ends (truncating division), NULL ids last
        (1 << 61, 0, 1 << 60, 1 << 62, False),  # ranges too wide to pack: separate keys
        (3_000, 0, 3_000, 1 << 62, True),
    ],
)
def test_window_order_matches_duckdb(start_hi: int, dur_lo: int, dur_hi: int, id_hi: int, null_ids: bool) -> None:
    rng = np.random.default_rng(start_hi + dur_lo)
    batch = _rows(rng, 3_000, start_hi, dur_lo, dur_hi, id_hi, null_ids)
    ref = _duckdb_order(batch)
    assert len(set(ref.tolist())) == batch.num_rows
    np.testing.assert_array_equal(_window_order(batch), ref)


def test_window_order_of_one_row_and_of_none() -> None:
    rng = np.random.default_rng(1)
    one = _rows(rng, 1, 10, 0, 10, 10, False)
    np.testing.assert_array_equal(_window_order(one), [0])
    assert len(_window_order(one.slice(0, 0))) == 0


@pytest.mark.parametrize(
    ("dtype", "null_share", "offset"),
    [
        (pa.int64(), 0.0, 0),
        (pa.int64(), 0.3, 0),
        (pa.int64(), 0.3, 13),
        (pa.float64(), 0.9, 5),
        (pa.int64(), 1.0, 3),
    ],
)
def test_gather_is_take(dtype: pa.DataType, null_share: float, offset: int) -> None:
    rng = np.random.default_rng(offset)
    n = 1_000
    values = rng.random(n + offset) * 1e6 if dtype == pa.float64() else rng.integers(-(1 << 62), 1 << 62, n + offset)
    arr = pa.array(values, dtype, mask=rng.random(n + offset) < null_share).slice(offset)  # a non-zero offset
    order = rng.permutation(n)
    picks = [order[a : a + 97] for a in range(0, n, 97)]
    got = _gather(arr, picks)
    assert len(got) == len(picks)
    for g, p in zip(got, picks, strict=True):
        want = arr.take(pa.array(p))
        assert g.null_count == want.null_count
        assert g.equals(want)  # values where valid, and validity
