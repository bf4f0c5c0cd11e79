"""Host preprocessing, for real, vectorised, by jax-tpu-embedding's rules: COO, dedup, mod
sharding, limits, minibatching and dropping over every stacked table of a step.

For each stack (stacking.py) and step:

1. every feature's ragged IDs become COO (row = sample, col = stacked ID,
   `stacking.stacked_cols`); features sharing a table keep separate rows;
2. the batch is split across all SparseCores of the slice (each gets B / num_SCs samples:
   its *source* sub-batch) and every ID goes to partition `col % num_SCs` (its *target*);
3. repeats within a bag (one sample's IDs of one feature) merge into one entry, and each
   (source, target) buffer is laid out with its IDs in sorted order (preprocess_keys.py:
   the *packed path*, uint32 keys, for fixed-size bags; the *entry path*, int64 keys that
   keep each entry's sample and repeat count, otherwise);
4. IDs and unique IDs are counted per buffer (the stats, and the derived limits: their
   maxima). If no buffer of any stack exceeds its stack's limits, each stack runs one
   minibatch. Otherwise, with minibatching on, every ID is hashed into one of 64 buckets
   and the buckets are merged along a binary tree (minibatching.py): one minibatch count
   for all stacks, an ID never split; with minibatching off, one minibatch. Within a
   buffer (and bucket), IDs past `max_ids_per_partition` entries or past the
   `max_unique_ids_per_partition`-th distinct ID, in sorted order, are dropped when
   `allow_id_dropping`, each counted with its in-sample repeats; else a PreprocessError
   names stack, partition, observed and compiled values (the library aborts).

`max_ids_per_chip_per_sample` (the SparseCore guide's chip cap, a TF flag the library does
not have) is applied between steps 3 and 4 over all stacks, counting deduplicated IDs.
tests/sim_backend/test_library_oracle.py checks counts, kept IDs, drops, minibatches and
stats against jax-tpu-embedding itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim_backend.config import SparseCoreConfig
from sim_backend.errors import PreprocessError
from sim_backend.generate import FeatureBatch
from sim_backend.highway_hash import BUCKETS, minibatch_bucket
from sim_backend.minibatching import bucket_minibatch, minibatch_count, split_word
from sim_backend.preprocess_keys import (
    KeyLayout,
    SortedBuffers,
    group_keys,
    key_layout,
    key_positions,
    packed_group,
    packed_hots,
    sample_of,
)
from sim_backend.stacking import Layout, StackGroup, table_ids

ALIGN = 8  # the library rounds each partition's share of a SparseCore's buffer up to 8 entries


@dataclass
class GroupResult:
    """What preprocessing decided for one stack in one step."""

    group: StackGroup
    minibatches: int  # the step's minibatch count (the same for every stack)
    ids_mp: np.ndarray  # int64 [M, num_sc]: kept IDs per minibatch and target partition
    unique_mp: np.ndarray  # int64 [M, num_sc]: unique IDs (per source buffer, summed)
    cross_chip_mc: np.ndarray  # int64 [M, chips]: unique rows partition(s) on chip c send to
    # source SparseCores on other chips (all-to-all volume)
    ids_sp: np.ndarray  # int64 [num_sc, num_sc]: observed IDs per (source, target) buffer
    unique_sp: np.ndarray  # int64 [num_sc, num_sc]: observed unique IDs per buffer
    dropped_sp: np.ndarray  # int64 [num_sc, num_sc]: IDs dropped per buffer (in-sample repeats counted)
    kept_per_source: np.ndarray  # int64 [num_sc]: entries kept per source SparseCore
    entries: dict[str, np.ndarray] | None = None  # decoded entries (keep_entries=True)

    @property
    def partition_ids(self) -> np.ndarray:
        """Observed IDs per target partition: the largest source buffer (vs. the limit)."""
        return self.ids_sp.max(axis=0)

    @property
    def partition_unique_ids(self) -> np.ndarray:
        return self.unique_sp.max(axis=0)

    @property
    def partition_dropped(self) -> np.ndarray:
        return self.dropped_sp.sum(axis=0)

    def fdo_stats(self, chips: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The library's stats of this step: max IDs and max unique IDs per (device, partition)
        (the maximum over the device's SparseCores), the required buffer size per SparseCore
        (its buffers rounded up to 8 entries, summed) and the dropped IDs."""
        n = self.ids_sp.shape[0]
        max_ids = self.ids_sp.reshape(chips, n // chips, n).max(axis=1).ravel()
        max_uniq = self.unique_sp.reshape(chips, n // chips, n).max(axis=1).ravel()
        required = (-(-self.ids_sp // ALIGN) * ALIGN).sum(axis=1)
        return max_ids, max_uniq, required, int(self.dropped_sp.sum())


@dataclass
class StepResult:
    """One step's preprocessing; per-SC figures are by source SparseCore (sample owner)."""

    step: int
    groups: list[GroupResult]
    raw_ids_per_sc: np.ndarray  # IDs before dedup
    kept_ids_per_sc: np.ndarray  # after dedup, caps and dropping
    dropped_ids_per_sc: np.ndarray  # dropped by limits or the chip cap
    chip_cap_dropped: int
    minibatches: int = 1  # the step's minibatch count, for every stack

    @property
    def dropped_ids(self) -> int:
        return int(self.dropped_ids_per_sc.sum())

    def per_chip(self, per_sc: np.ndarray, num_chips: int) -> np.ndarray:
        return per_sc.reshape(num_chips, -1).sum(axis=1)


@dataclass(frozen=True)
class _StepContext:
    """What every stack's preprocessing in one step shares."""

    step: int
    lay: Layout
    sc: SparseCoreConfig
    keep_entries: bool = False  # decoded entries (GroupResult.entries)


@dataclass
class _Stack:
    """One stack's sorted, deduplicated IDs in a step: positions always; int64 keys, repeat
    counts and stacked IDs when the entry path made them (or step 4 needs them)."""

    group: StackGroup
    pos: SortedBuffers
    ids_sp: np.ndarray  # [nb] observed per buffer
    unique_sp: np.ndarray
    keys: np.ndarray | None = None
    mult: np.ndarray | None = None
    kl: KeyLayout | None = None
    new_u: np.ndarray | None = None  # first entry of each distinct (buffer, ID)
    bucket: np.ndarray | None = None  # each entry's minibatching bucket, once hashed
    segments: tuple[np.ndarray, np.ndarray] | None = None  # (order, segment) by buckets, once sorted

    @property
    def over(self) -> bool:
        g = self.group
        return bool(self.ids_sp.max(initial=0) > g.max_ids_per_partition) or bool(
            self.unique_sp.max(initial=0) > g.max_unique_ids_per_partition
        )


# -- max_ids_per_chip_per_sample (between steps 3 and 4, entry path) ---------------------------


def _apply_chip_cap(stacks: list[_Stack], raw: np.ndarray, ctx: _StepContext) -> np.ndarray:
    """Enforce max_ids_per_chip_per_sample on the stacks' keys (in place); returns dropped IDs
    per source SC. `raw`: IDs per sample before dedup, over all features."""
    lay, sc = ctx.lay, ctx.sc
    cap = sc.max_ids_per_chip_per_sample
    dropped = np.zeros(lay.num_sc, dtype=np.int64)
    if raw.max(initial=0) <= cap:  # cannot exceed after dedup either
        return dropped
    samples = [sample_of(s.keys, s.kl) for s in stacks]
    counts = [np.bincount(s, minlength=lay.global_batch) for s in samples]
    total = np.sum(counts, axis=0)
    if total.max(initial=0) <= cap:
        return dropped
    worst = int(total.argmax())
    per_chip = lay.global_batch // lay.num_chips
    if not sc.allow_id_dropping:
        raise PreprocessError(
            f"step {ctx.step}: sample {worst} (chip {worst // per_chip}) has {int(total[worst])} IDs "
            f"after dedup over all tables, above sparsecore.max_ids_per_chip_per_sample={cap}; "
            f"raise it or set sparsecore.allow_id_dropping = true"
        )
    before = np.zeros(lay.global_batch, dtype=np.int64)
    for st, s, c in zip(stacks, samples, counts, strict=True):
        order = np.argsort(s, kind="stable")
        first = np.concatenate([[0], np.cumsum(c)[:-1]])
        rank = np.empty(len(s), dtype=np.int64)
        rank[order] = np.arange(len(s)) - first[s[order]]
        keep = before[s] + rank < cap
        dropped += np.bincount(s[~keep] // lay.samples_per_sc, minlength=lay.num_sc)
        before += c
        _set_keys(st, st.keys[keep], st.mult[keep])
    return dropped


# -- steps 1-3 and the counts of step 4 ---------------------------------------------------------


def _set_keys(st: _Stack, keys: np.ndarray, mult: np.ndarray) -> None:
    """Rebuild a stack's positions and counts from fewer int64 keys (after the chip cap)."""
    pos, new_u = key_positions(keys, st.kl)
    st.pos, st.keys, st.mult, st.new_u = pos, keys, mult, new_u
    st.ids_sp, st.unique_sp = _counts(pos)


def _counts(pos: SortedBuffers) -> tuple[np.ndarray, np.ndarray]:
    ids = pos.ends - pos.starts
    uniq = np.searchsorted(pos.upos, pos.ends) - np.searchsorted(pos.upos, pos.starts)
    return ids, uniq


def _entry_stack(group: StackGroup, batches: list[FeatureBatch], lay: Layout) -> _Stack:
    kl = key_layout(group, lay)
    keys, mult = group_keys(group, batches, lay, kl)
    pos, new_u = key_positions(keys, kl)
    return _Stack(group, pos, *_counts(pos), keys=keys, mult=mult, kl=kl, new_u=new_u)


def _packed_stack(group: StackGroup, batches: list[FeatureBatch], lay: Layout) -> _Stack | None:
    hots = packed_hots(group, batches, lay)
    if hots is None:
        return None
    pos = packed_group(group, batches, lay, hots)
    ids_sp, unique_sp = _counts(pos)
    return _Stack(group, pos, ids_sp, unique_sp)


# -- step 4: minibatches and dropping -------------------------------------------------------------


def _buckets(st: _Stack, n_buckets: int) -> np.ndarray:
    """The minibatching bucket of each entry (0 for all when there is one bucket); each
    distinct ID hashed once."""
    n = len(st.keys)
    if n_buckets == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if st.bucket is None:
        kl = st.kl
        first = np.flatnonzero(st.new_u)
        col = (st.keys[first] >> kl.rbits) & ((1 << kl.vbits) - 1)
        st.bucket = np.repeat(minibatch_bucket(col), np.diff(np.append(first, n)))
    return st.bucket


def _segments(st: _Stack, bucket: np.ndarray, n_buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Entry order by (buffer, bucket, ID, row) and each entry's segment (buffer * B + bucket)."""
    if n_buckets > 1 and st.segments is not None:
        return st.segments
    kl = st.kl
    seg = (st.keys >> kl.buffer_shift) * n_buckets + bucket
    order = np.argsort(seg, kind="stable") if n_buckets > 1 else np.arange(len(seg))
    if n_buckets > 1:
        st.segments = (order, seg)
    return order, seg


def _keep_mask(seg_s: np.ndarray, new_s: np.ndarray, lim: int, ulim: int) -> np.ndarray:
    """Entries kept in segment order: rank < lim and the entry's distinct ID among the first
    `ulim` of its segment (a dropped ID's later entries stay dropped)."""
    n = len(seg_s)
    if n == 0:
        return np.ones(0, dtype=bool)
    start = np.empty(n, dtype=bool)
    start[0] = True
    np.not_equal(seg_s[1:], seg_s[:-1], out=start[1:])
    head = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    rank = np.arange(n) - head
    u = np.cumsum(new_s)
    urank = u - (u[head] - new_s[head])  # 1-based index of the entry's ID in its segment
    return (rank < lim) & (urank <= ulim)


def _limit_stack(st: _Stack, n_buckets: int, mb_of_bucket: np.ndarray, m_count: int, ctx: _StepContext) -> GroupResult:
    """Step 4 on a stack's entries: drops per (buffer, bucket), kept counts per minibatch."""
    lay, g = ctx.lay, st.group
    n_sc, spc, chips = lay.num_sc, lay.sparsecores_per_chip, lay.num_chips
    nb = n_sc * n_sc
    bucket = _buckets(st, n_buckets)
    order, seg = _segments(st, bucket, n_buckets)
    seg_s, new_s = seg[order], st.new_u[order]
    observed = np.bincount(seg, minlength=nb * n_buckets)
    observed_u = np.bincount(seg[st.new_u], minlength=nb * n_buckets)
    over = (observed > g.max_ids_per_partition) | (observed_u > g.max_unique_ids_per_partition)
    keep_s = np.ones(len(seg_s), dtype=bool)
    if over.any():
        if not ctx.sc.allow_id_dropping:
            _raise_overflow(g, int(np.flatnonzero(over)[0]) // n_buckets, st, observed, observed_u, n_buckets, ctx)
        keep_s = _keep_mask(seg_s, new_s, g.max_ids_per_partition, g.max_unique_ids_per_partition)
    buf_s = seg_s // n_buckets
    dropped_sp = np.bincount(buf_s[~keep_s], weights=st.mult[order][~keep_s], minlength=nb).astype(np.int64)
    kept_src = np.bincount(buf_s[keep_s] // n_sc, minlength=n_sc)
    mb_s = mb_of_bucket[seg_s % n_buckets]
    cell = mb_s * nb + buf_s  # (minibatch, source, target)
    ids_msp = np.bincount(cell[keep_s], minlength=m_count * nb).reshape(m_count, n_sc, n_sc)
    unique_msp = np.bincount(cell[keep_s & new_s], minlength=m_count * nb).reshape(m_count, n_sc, n_sc)
    cross = lay.cross_chip()
    cross_mc = (unique_msp * cross).sum(axis=1).reshape(m_count, chips, spc).sum(axis=2)
    result = GroupResult(
        group=g,
        minibatches=m_count,
        ids_mp=ids_msp.sum(axis=1),
        unique_mp=unique_msp.sum(axis=1),
        cross_chip_mc=cross_mc,
        ids_sp=st.ids_sp.reshape(n_sc, n_sc),
        unique_sp=st.unique_sp.reshape(n_sc, n_sc),
        dropped_sp=dropped_sp.reshape(n_sc, n_sc),
        kept_per_source=kept_src,
    )
    if ctx.keep_entries:
        keep = np.empty_like(keep_s)
        keep[order] = keep_s
        mb = np.empty_like(mb_s)
        mb[order] = mb_s
        result.entries = _decode(st, mb, ~keep, ctx)
    return result


def _unsplit(st: _Stack, ctx: _StepContext) -> GroupResult:
    """Step 4 when nothing exceeds its limits: one minibatch, nothing dropped (any path)."""
    lay = ctx.lay
    n_sc, spc, chips = lay.num_sc, lay.sparsecores_per_chip, lay.num_chips
    ids, uniq = st.ids_sp.reshape(n_sc, n_sc), st.unique_sp.reshape(n_sc, n_sc)
    cross = lay.cross_chip()
    result = GroupResult(
        group=st.group,
        minibatches=1,
        ids_mp=ids.sum(axis=0)[None, :],
        unique_mp=uniq.sum(axis=0)[None, :],
        cross_chip_mc=(uniq * cross).sum(axis=0).reshape(chips, spc).sum(axis=1)[None, :],
        ids_sp=ids,
        unique_sp=uniq,
        dropped_sp=np.zeros((n_sc, n_sc), dtype=np.int64),
        kept_per_source=ids.sum(axis=1),
    )
    if ctx.keep_entries:
        n = len(st.keys)
        result.entries = _decode(st, np.zeros(n, np.int64), np.zeros(n, bool), ctx)
    return result


def _decode(st: _Stack, minibatch: np.ndarray, dropped: np.ndarray, ctx: _StepContext) -> dict[str, np.ndarray]:
    """Each entry as fields: source SC, partition, stacked ID, table, raw ID, sample, slot,
    minibatch, dropped, and how many times it occurs in its bag."""
    lay, kl, g = ctx.lay, st.kl, st.group
    n_sc = lay.num_sc
    sp = st.keys >> kl.buffer_shift
    col = (st.keys >> kl.rbits) & ((1 << kl.vbits) - 1)
    table, raw = table_ids(col, g, n_sc)
    r = st.keys & ((1 << kl.rbits) - 1)
    slot, local = np.divmod(r, lay.samples_per_sc)
    return {
        "source_sc": sp // n_sc,
        "partition": sp % n_sc,
        "col": col,
        "table": table,
        "id": raw,
        "sample": (sp // n_sc) * lay.samples_per_sc + local,
        "feature_slot": slot,
        "minibatch": minibatch,
        "dropped": dropped,
        "count": st.mult,
    }


def _raise_overflow(
    g: StackGroup,
    buffer: int,
    st: _Stack,
    observed: np.ndarray,
    observed_u: np.ndarray,
    n_buckets: int,
    ctx: _StepContext,
) -> None:
    """PreprocessError naming a buffer still over its stack's limits after minibatching (or
    with minibatching off), with dropping off: the library aborts here."""
    src, part = divmod(buffer, ctx.lay.num_sc)
    chip, core = divmod(part, ctx.lay.sparsecores_per_chip)
    cells = slice(buffer * n_buckets, (buffer + 1) * n_buckets)
    if n_buckets > 1:
        how = (
            f"; minibatching cannot split it further: one of its 64 hash buckets alone holds "
            f"{int(observed[cells].max())} IDs / {int(observed_u[cells].max())} unique IDs"
        )
    else:
        how = " and minibatching is off"
    raise PreprocessError(
        f"step {ctx.step}: stack {g.name!r} partition {part} (chip {chip}, SparseCore {core}) "
        f"gets {int(st.ids_sp[buffer])} IDs / {int(st.unique_sp[buffer])} unique IDs from SparseCore "
        f"{src}, above the compiled max_ids_per_partition={g.max_ids_per_partition} / "
        f"max_unique_ids_per_partition={g.max_unique_ids_per_partition}{how}; raise the "
        f"stack's limits or set sparsecore.allow_id_dropping = true"
    )


def _split_of(st: _Stack, n_sc: int) -> int:
    """The stack's split word over its buffers (IDs and unique IDs per bucket)."""
    bucket = _buckets(st, BUCKETS)
    _, seg = _segments(st, bucket, BUCKETS)
    nb = n_sc * n_sc
    ids = np.bincount(seg, minlength=nb * BUCKETS).reshape(nb, BUCKETS)
    uniq = np.bincount(seg[st.new_u], minlength=nb * BUCKETS).reshape(nb, BUCKETS)
    g = st.group
    return split_word(ids, g.max_ids_per_partition) | split_word(uniq, g.max_unique_ids_per_partition)


def preprocess_step(
    step: int,
    batches: list[FeatureBatch],
    groups: list[StackGroup],
    lay: Layout,
    sc: SparseCoreConfig,
    keep_entries: bool = False,
) -> StepResult:
    """Run host preprocessing of one step over every stack.

    Pass 1 counts every buffer (packed path where it applies). When nothing exceeds its
    limits, that is all (the library's fast path). Otherwise the stacks are seen entry by
    entry (entry path): with minibatching on, buckets decide one minibatch count for all
    stacks and drops happen per bucket; with it off, per buffer.
    """
    ctx = _StepContext(step, lay, sc, keep_entries)
    per_sample = np.zeros(lay.global_batch, dtype=np.int64)
    for fb in batches:
        per_sample += fb.lengths
    entry_path = keep_entries or per_sample.max(initial=0) > sc.max_ids_per_chip_per_sample
    stacks: list[_Stack] = []
    for g in groups:
        st = None if entry_path else _packed_stack(g, batches, lay)
        stacks.append(st if st is not None else _entry_stack(g, batches, lay))
    cap_dropped = np.zeros(lay.num_sc, dtype=np.int64)
    if entry_path:
        cap_dropped = _apply_chip_cap(stacks, per_sample, ctx)
    m_count = 1
    if not any(st.over for st in stacks):
        results = [_unsplit(st, ctx) for st in stacks]
    else:
        for i, st in enumerate(stacks):
            if st.keys is None:
                stacks[i] = _entry_stack(st.group, batches, lay)
        if sc.enable_minibatching:
            word = 0
            for st in stacks:
                word |= _split_of(st, lay.num_sc)
            m_count, n_buckets, mb_of_bucket = minibatch_count(word), BUCKETS, bucket_minibatch(word)
        else:
            n_buckets, mb_of_bucket = 1, np.zeros(1, dtype=np.int64)
        results = [_limit_stack(st, n_buckets, mb_of_bucket, m_count, ctx) for st in stacks]
    raw = per_sample.reshape(lay.num_sc, lay.samples_per_sc).sum(axis=1)
    kept = np.zeros(lay.num_sc, dtype=np.int64)
    dropped = cap_dropped.copy()
    for r in results:
        kept += r.kept_per_source
        dropped += r.dropped_sp.sum(axis=1)
    return StepResult(step, results, raw, kept, dropped, int(cap_dropped.sum()), m_count)
