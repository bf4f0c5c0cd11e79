"""Host preprocessing, steps 1-3 (preprocess.py): a stack's IDs as sort keys, deduplicated
within each bag and sorted into (source SparseCore, target partition) buffers.

Two ways, with the same buffers, counts and distinct IDs (preprocess.py chooses):
- *packed path* (bags of a fixed size, stacked vocabulary <= 2^31 rows, no decoded
  entries asked, no sample above the chip cap before dedup): one uint32 key per ID,
  (target partition, stacked ID // num_SCs); a bag's repeats are found by sorting
  short runs of samples with each ID tagged by its sample, then one sort per source
  SC orders its buffers (its IDs are then distinct (ID, sample) entries, so their
  order among one ID's samples changes no count);
- *entry path* (otherwise, and whenever a step exceeds a limit): one int64 key per ID (bit
  fields: source SC and target partition, stacked ID, feature slot, sample) and one
  np.sort: repeats adjacent, and every entry keeps its sample and how many times its ID
  occurs in its bag (for the chip cap, the hash buckets, the drop counts and the decoded
  entries).

Both hand step 4 the buffers as positions (SortedBuffers): when nothing exceeds its limits
the packed path's positions are all it needs; minibatching and dropping need the entries.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from sim_backend.errors import ConfigError
from sim_backend.generate import FeatureBatch
from sim_backend.stacking import Layout, StackGroup, stacked_cols


@dataclass
class SortedBuffers:
    """A group's deduplicated IDs in sorted order, seen as positions (what step 4 needs).

    Buffer b = source * num_SCs + target holds positions [starts[b], ends[b]); positions
    outside every buffer (the removed duplicates of the packed path) are never read.
    """

    starts: np.ndarray  # int64 [num_sc * num_sc]
    ends: np.ndarray  # int64 [num_sc * num_sc]
    upos: np.ndarray  # sorted positions where a distinct ID starts (every buffer start too)
    size: int  # one past the last position


_scratch: dict[str, np.ndarray] = {}


def _scratch_buffer(n: int, dtype: type = np.int64, name: str = "col") -> np.ndarray:
    """A reused work buffer (fresh pages cost as much as the arithmetic)."""
    buf = _scratch.get(name)
    if buf is None or len(buf) < n or buf.dtype != dtype:
        buf = _scratch[name] = np.empty(max(n, 1 << 16), dtype=dtype)
    return buf[:n]


def _fixed_hot(fb: FeatureBatch) -> int:
    """IDs per sample when every sample has the same number, else 0."""
    if not len(fb.lengths) or len(fb.ids) != fb.lengths[0] * len(fb.lengths):
        return 0
    return int(fb.lengths[0]) if (fb.lengths == fb.lengths[0]).all() else 0


# -- packed path: 32-bit keys, dedup per bag, one sort per source SparseCore ------------------

REMOVED = np.uint32(0xFFFFFFFF)  # a duplicate within a bag: sorts after every packed ID
PACKED_MAX_VOCAB = 1 << 31  # stacked vocabularies up to this use the packed path


def packed_hots(group: StackGroup, batches: list[FeatureBatch], lay: Layout) -> list[int] | None:
    """Bag size per feature slot when the packed path applies (fixed bags, 31-bit IDs)."""
    if group.local_rows * lay.num_sc > PACKED_MAX_VOCAB or lay.samples_per_sc < 1:
        return None
    hots = [_fixed_hot(batches[fi]) for fi in group.features]
    return hots if all(hots) else None


def _packed_stride(group: StackGroup, n_sc: int) -> int:
    """Packed key of partition p's first row is p * stride (see `_packed_keys`)."""
    return 1 << (33 - n_sc.bit_length()) if n_sc & (n_sc - 1) == 0 else group.local_rows


def _packed_keys(group: StackGroup, batches: list[FeatureBatch], lay: Layout, hots: list[int]) -> np.ndarray:
    """uint32 [num_sc, width]: each source SC's IDs as packed keys, repeats within a bag set to REMOVED.

    A stacked ID c = q * num_SCs + p (partition p; stacking.stacked_cols) becomes the packed
    key p * stride + q: ordering packed keys orders by (partition, ID), as the library's
    grouping keys do. With a power-of-two SC count this is c rotated right by log2(num_SCs)
    bits (stride 2^(32 - log2 num_SCs); c < 2^31 leaves REMOVED unused), else p * local_rows + q.

    Dedup within a bag (one sample's IDs of one feature, step 3): a feature's raw IDs are
    tagged with their sample's index in a run of G samples of one source (G = 2^(32 -
    vbits), capped by the sub-batch), `tag << vbits | id`, and each run is sorted: a bag's
    repeats become neighbours. Runs are short, so these sorts are cheap; the IDs left are
    distinct (ID, sample, slot) entries, so the caller sorts a source's row by ID alone (the
    order among one ID's samples changes no count).
    """
    n_sc, bs = lay.num_sc, lay.samples_per_sc
    keys = _scratch_buffer(n_sc * bs * sum(hots), np.uint32, "keys").reshape(n_sc, -1)
    vbits = int(group.local_rows * n_sc - 1).bit_length()
    run = min(1 << (32 - vbits), bs & -bs)  # samples per sorted run: a power of two dividing bs
    at = 0
    for fi, h in zip(group.features, hots, strict=True):
        keys[:, at : at + bs * h] = batches[fi].ids.reshape(n_sc, -1)  # IDs < 2^31: exact
        at += bs * h
    keys += _tag_row(tuple(hots), bs, run, vbits)
    at = 0
    for h in hots:
        if h > 1:
            keys[:, at : at + bs * h].reshape(n_sc, bs // run, run * h, copy=False).sort(axis=-1)
        at += bs * h
    # a repeat equals its left neighbour; neighbours across runs and slots differ in their tag
    gone = _scratch_buffer(keys.size, np.bool_, "gone").reshape(keys.shape)
    gone[:, 0] = False
    np.equal(keys[:, 1:], keys[:, :-1], out=gone[:, 1:])
    if run == 1:  # no tags: the first ID of every bag stays
        at = 0
        for h in hots:
            gone[:, at : at + bs * h : h] = False
            at += bs * h
    keys &= np.uint32((1 << vbits) - 1)  # the raw IDs again (their bag's repeats marked)
    at = 0
    for ti, h in zip(group.feature_table, hots, strict=True):
        _pack_slot(keys[:, at : at + bs * h], int(group.rotation[ti]), int(group.offsets[ti]), n_sc, group.local_rows)
        at += bs * h
    # REMOVED = all ones: OR in 0 - 1 where `gone`
    keys |= np.negative(
        gone.view(np.uint8),
        dtype=np.uint32,
        casting="unsafe",
        out=_scratch_buffer(keys.size, np.uint32, "low").reshape(keys.shape),
    )
    return keys


def _pack_slot(ids: np.ndarray, shift: int, offset: int, n_sc: int, local_rows: int) -> None:
    """In place: one feature slot's raw IDs (uint32) -> packed keys of their stacked IDs."""
    if n_sc & (n_sc - 1) == 0:
        s = n_sc.bit_length() - 1
        part = np.add(ids, np.uint32(shift), out=_scratch_buffer(ids.size, np.uint32, "low").reshape(ids.shape))
        part &= np.uint32(n_sc - 1)
        ids >>= np.uint32(s)
        ids += np.uint32(offset >> s)
        if s:
            part <<= np.uint32(32 - s)
            ids |= part
    else:
        q = ids // np.uint32(n_sc)
        part = ids - q * np.uint32(n_sc)
        part += np.uint32(shift)
        part %= np.uint32(n_sc)
        np.multiply(part, np.uint32(local_rows), out=ids)
        ids += q
        ids += np.uint32(offset // n_sc)


@functools.lru_cache(maxsize=64)
def _tag_row(hots: tuple[int, ...], bs: int, run: int, vbits: int) -> np.ndarray:
    """uint32 [width]: what to add to a source's raw IDs: each ID's sample index within its
    run of `run` samples, above the ID bits."""
    tags = np.arange(run, dtype=np.uint32) << np.uint32(vbits)
    row = np.concatenate([np.tile(np.repeat(tags, h), bs // run) for h in hots])
    row.flags.writeable = False  # cached: shared by every call
    return row


def packed_group(group: StackGroup, batches: list[FeatureBatch], lay: Layout, hots: list[int]) -> SortedBuffers:
    """Steps 1-3 with 32-bit keys: dedup per bag, then one sort per source SparseCore.
    Returns the buffers as positions."""
    n_sc = lay.num_sc
    keys = _packed_keys(group, batches, lay, hots)
    keys.sort(axis=1)
    width = keys.shape[1]
    # first key of each partition, then REMOVED: ends the last buffer
    edges = np.append(np.arange(n_sc, dtype=np.int64) * _packed_stride(group, n_sc), int(REMOVED)).astype(np.uint32)
    pos = np.empty((n_sc, len(edges)), dtype=np.int64)
    for src in range(n_sc):
        pos[src] = np.searchsorted(keys[src], edges)
    pos += np.arange(n_sc, dtype=np.int64)[:, None] * width
    new_u = _scratch_buffer(keys.size, np.bool_, "new").reshape(keys.shape)
    new_u[:, 0] = True
    np.not_equal(keys[:, 1:], keys[:, :-1], out=new_u[:, 1:])
    return SortedBuffers(pos[:, :-1].ravel(), pos[:, 1:].ravel(), np.flatnonzero(new_u), keys.size)


# -- entry path: int64 keys that keep each ID's sample (entries, chip cap, ragged bags) ------


@dataclass(frozen=True)
class KeyLayout:
    """Bit fields of a group's int64 sort key: (source SC, partition) | stacked col | row.

    `row` is feature_slot * samples_per_sc + sample within the source sub-batch.
    Sorting the keys orders IDs by buffer, then by ID, then by row.
    """

    n_sc: int
    samples_per_sc: int
    r_span: int  # rows per source sub-batch (features x samples)
    rbits: int
    vbits: int

    @property
    def buffer_shift(self) -> int:
        return self.vbits + self.rbits

    def buffer_edges(self) -> np.ndarray:
        """Smallest key of each (source, partition) buffer, plus one past the last."""
        return np.arange(self.n_sc * self.n_sc + 1, dtype=np.int64) << self.buffer_shift


def key_layout(group: StackGroup, lay: Layout) -> KeyLayout:
    r_span = len(group.features) * lay.samples_per_sc
    vocab = group.local_rows * lay.num_sc
    kl = KeyLayout(lay.num_sc, lay.samples_per_sc, r_span, int(r_span - 1).bit_length(), int(vocab - 1).bit_length())
    if (lay.num_sc * lay.num_sc) << kl.buffer_shift >= 1 << 63:
        raise ConfigError(
            f"tables: group {group.name!r} is too large for the emulator's "
            f"63-bit sort key (vocabulary x batch); shrink vocab or batch"
        )
    return kl


def _encode(col: np.ndarray, out: np.ndarray, n_sc: int, kl: KeyLayout) -> None:
    """out = (partition << vbits | col) << rbits, where partition = col % n_sc."""
    if n_sc & (n_sc - 1) == 0:
        np.bitwise_and(col, n_sc - 1, out=out)
    else:
        np.remainder(col, n_sc, out=out)
    out <<= kl.vbits
    out |= col
    out <<= kl.rbits


def group_keys(
    group: StackGroup, batches: list[FeatureBatch], lay: Layout, kl: KeyLayout
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, per-bag-deduplicated int64 sort keys of one group's IDs (steps 1-3), and how
    many times each entry's ID occurs in its bag (its in-sample repeats: the library merges
    them into one entry, and counts them all when it drops that entry)."""
    n_sc, bs = lay.num_sc, lay.samples_per_sc
    sample = np.arange(lay.global_batch, dtype=np.int64)
    src, local = np.divmod(sample, bs)
    src_term = ((src * n_sc) << kl.buffer_shift) + local
    feats = [
        (slot, batches[fi], ti) for slot, (fi, ti) in enumerate(zip(group.features, group.feature_table, strict=True))
    ]
    keys = np.empty(sum(len(fb.ids) for _, fb, _ in feats), dtype=np.int64)
    at = 0
    for slot, fb, ti in feats:
        out = keys[at : at + len(fb.ids)]
        at += len(fb.ids)
        col = stacked_cols(
            fb.ids, int(group.rotation[ti]), int(group.offsets[ti]), n_sc, out=_scratch_buffer(len(fb.ids))
        )
        _encode(col, out, n_sc, kl)
        out += np.repeat(src_term + slot * bs, fb.lengths)
    keys.sort()
    if len(keys) < 2:
        return keys, np.ones(len(keys), dtype=np.int64)
    first = np.empty(len(keys), dtype=bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    at_first = np.flatnonzero(first)
    mult = np.diff(np.append(at_first, len(keys)))
    return keys[at_first], mult


def sample_of(keys: np.ndarray, kl: KeyLayout) -> np.ndarray:
    """Global sample index of each sort key."""
    src = (keys >> kl.buffer_shift) // kl.n_sc
    return src * kl.samples_per_sc + (keys & ((1 << kl.rbits) - 1)) % kl.samples_per_sc


def key_positions(keys: np.ndarray, kl: KeyLayout) -> tuple[SortedBuffers, np.ndarray]:
    """Buffers and distinct-ID starts of sorted int64 keys; also the new-ID mask."""
    n = len(keys)
    bounds = np.searchsorted(keys, kl.buffer_edges())
    new_u = np.ones(n, dtype=bool)
    if n > 1:
        ukey = np.right_shift(keys, kl.rbits, out=_scratch_buffer(n))
        np.not_equal(ukey[1:], ukey[:-1], out=new_u[1:])
    return SortedBuffers(bounds[:-1], bounds[1:], np.flatnonzero(new_u), n), new_u
