"""rewrite_tags: a trace copied under a new header's tags, every other chunk unchanged."""

from __future__ import annotations

import numpy as np

from profiler.reader import read_trace
from profiler.recorder import rewrite_tags
from tests.tracekit import chunk_spans, record_small


def test_rewrite_tags_changes_only_the_tags(tmp_path):
    src = record_small(tmp_path / "a.sctrace", chunk_rows=2)
    dst = tmp_path / "b.sctrace"
    rewrite_tags(str(src), str(dst), {"status": "failed", "failure": "hbm_oom", "team": "emb"})
    a, b = read_trace(str(src)), read_trace(str(dst))
    assert dict(a.header.tags) == {"team": "emb"}
    assert dict(b.header.tags) == {"status": "failed", "failure": "hbm_oom", "team": "emb"}
    b.header.tags.clear()
    b.header.tags.update(a.header.tags)
    assert a.header == b.header and a.strings == b.strings and a.tracks == b.tracks
    for kind, cols in a.data.items():
        assert cols.keys() == b.data[kind].keys()
        for name, col in cols.items():
            np.testing.assert_array_equal(col, b.data[kind][name])
    # byte for byte after the header chunk
    da, db = src.read_bytes(), dst.read_bytes()
    (_, end_a), (_, end_b) = chunk_spans(da)[0], chunk_spans(db)[0]
    assert da[end_a:] == db[end_b:]
