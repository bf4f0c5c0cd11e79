"""Host preprocessing, for real, vectorised: stacking, COO, dedup, mod sharding, limits.

For each table group (a stacked table, or one table when stacking is off) and step:

1. every feature's ragged IDs become COO (row = sample, col = ID); a stacked table
   lays its tables side by side (row offset, vocabulary padded to a multiple of the
   SparseCore count) and shifts each table's IDs by its position in the stack, so the
   hot rows of different tables land on different SparseCores (DOMAIN.md §1, step 8;
   the groups: stacking.py);
   features sharing a table keep separate rows (feature stacking);
2. the batch is split across all SparseCores of the slice (each gets B / num_SCs
   samples: its *source* sub-batch) and every ID goes to partition
   `col_id % num_total_sparse_cores` (its *target*);
3. repeats within a bag (one sample's IDs of one feature) are dropped, and each
   (source, target) buffer is laid out contiguously with its IDs in sorted order, by
   one of two key encodings with the same counts, cuts and drops (preprocess_keys.py:
   the *packed path*, uint32 keys, for fixed-size bags; the *entry path*, int64 keys
   that keep each ID's sample, otherwise);
4. per buffer: IDs and unique IDs are counted and checked against the compiled
   limits; buffers that do not fit are split greedily, in sorted order, into
   minibatches (the same count for the whole group, as the SPMD program runs them in
   lockstep); past `max_minibatches` (or 1 with minibatching off) the rest is dropped
   when `allow_id_dropping`, else a PreprocessError names table, partition, observed
   and compiled values.

`max_ids_per_chip_per_sample` is applied between steps 3 and 4 over all groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim_backend.config import SparseCoreConfig
from sim_backend.errors import PreprocessError
from sim_backend.generate import FeatureBatch
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
from sim_backend.stacking import Layout, StackGroup


@dataclass
class GroupResult:
    """What preprocessing decided for one table group in one step."""

    group: StackGroup
    minibatches: int
    ids_mp: np.ndarray  # int64 [M, num_sc]: kept IDs per minibatch and target partition
    unique_mp: np.ndarray  # int64 [M, num_sc]: unique IDs (per source buffer, summed)
    cross_chip_mc: np.ndarray  # int64 [M, chips]: unique rows partition(s) on chip c send to
    # source SparseCores on other chips (all-to-all volume)
    ids_sp: np.ndarray  # int64 [num_sc, num_sc]: observed IDs per (source, target) buffer
    unique_sp: np.ndarray  # int64 [num_sc, num_sc]: observed unique IDs per buffer
    dropped_sp: np.ndarray  # int64 [num_sc, num_sc]: IDs dropped per buffer
    table_observed: dict[str, tuple[int, int]] = field(default_factory=dict)
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


@dataclass
class StepResult:
    """One step's preprocessing; per-SC figures are by source SparseCore (sample owner)."""

    step: int
    groups: list[GroupResult]
    raw_ids_per_sc: np.ndarray  # IDs before dedup
    kept_ids_per_sc: np.ndarray  # after dedup, caps and dropping
    dropped_ids_per_sc: np.ndarray  # dropped by limits or the chip cap
    chip_cap_dropped: int

    @property
    def dropped_ids(self) -> int:
        return int(self.dropped_ids_per_sc.sum())

    def per_chip(self, per_sc: np.ndarray, num_chips: int) -> np.ndarray:
        return per_sc.reshape(num_chips, -1).sum(axis=1)


@dataclass(frozen=True)
class _StepContext:
    """What every table group's preprocessing in one step shares: the step, the batch
    layout, the SparseCore settings and what to record beyond the counts."""

    step: int
    lay: Layout
    sc: SparseCoreConfig
    table_stats: bool = False  # per-table (IDs, unique IDs) maxima (GroupResult.table_observed)
    keep_entries: bool = False  # decoded entries (GroupResult.entries)

    @property
    def max_minibatches(self) -> int:
        """Minibatches a group may run before the rest is dropped (1: minibatching off)."""
        return self.sc.max_minibatches if self.sc.enable_minibatching else 1


# -- max_ids_per_chip_per_sample (between steps 3 and 4, entry path) ---------------------------


def _apply_chip_cap(
    keys: list[np.ndarray], kls: list[KeyLayout], raw: np.ndarray, ctx: _StepContext
) -> tuple[list[np.ndarray], np.ndarray]:
    """Enforce max_ids_per_chip_per_sample; returns kept keys and dropped IDs per source SC.

    `raw`: IDs per sample before dedup, over all features.
    """
    lay, sc = ctx.lay, ctx.sc
    cap = sc.max_ids_per_chip_per_sample
    dropped = np.zeros(lay.num_sc, dtype=np.int64)
    if raw.max(initial=0) <= cap:  # cannot exceed after dedup either
        return keys, dropped
    samples = [sample_of(k, kl) for k, kl in zip(keys, kls, strict=True)]
    counts = [np.bincount(s, minlength=lay.global_batch) for s in samples]
    total = np.sum(counts, axis=0)
    if total.max(initial=0) <= cap:
        return keys, dropped
    worst = int(total.argmax())
    per_chip = lay.global_batch // lay.num_chips
    if not sc.allow_id_dropping:
        raise PreprocessError(
            f"step {ctx.step}: sample {worst} (chip {worst // per_chip}) has {int(total[worst])} IDs "
            f"after dedup over all tables, above sparsecore.max_ids_per_chip_per_sample={cap}; "
            f"raise it or set sparsecore.allow_id_dropping = true"
        )
    before = np.zeros(lay.global_batch, dtype=np.int64)
    out = []
    for k, s, c in zip(keys, samples, counts, strict=True):
        order = np.argsort(s, kind="stable")
        first = np.concatenate([[0], np.cumsum(c)[:-1]])
        rank = np.empty(len(s), dtype=np.int64)
        rank[order] = np.arange(len(s)) - first[s[order]]
        keep = before[s] + rank < cap
        dropped += np.bincount(s[~keep] // lay.samples_per_sc, minlength=lay.num_sc)
        before += c
        out.append(k[keep])
    return out, dropped


# -- step 4: counts, minibatches, dropping (both paths) ---------------------------------------


@dataclass
class _Cuts:
    """Greedy minibatch cuts of every buffer: per round, start and end positions."""

    starts: list[np.ndarray]  # [rounds] of int64 [buffers]
    ends: list[np.ndarray]
    leftover_start: np.ndarray  # first entry past the last allowed minibatch, per buffer


def greedy_cuts(pos: SortedBuffers, max_ids: int, max_unique: int, max_rounds: int) -> _Cuts:
    """Cut each buffer [pos.starts[i], pos.ends[i]) greedily into minibatches, in sorted order.

    Walking a buffer, an entry starts a new minibatch when adding it would exceed
    `max_ids` entries or `max_unique` distinct IDs (`pos.upos`: sorted positions where a
    distinct ID starts, each buffer start among them; `pos.size`: one past the last
    position). One vectorised pass per minibatch over all buffers; after `max_rounds`
    minibatches, what is left of a buffer is overflow.
    """
    starts, ends, upos, size = pos.starts, pos.ends, pos.upos, pos.size
    cur = starts.copy()
    last = len(upos) - 1
    starts_r, ends_r = [], []
    for _ in range(max_rounds):
        active = cur < ends
        if not active.any():
            break
        # index (in upos) of the distinct ID at `cur`; the minibatch may hold max_unique of them
        first_u = np.searchsorted(upos, cur, "right") - 1
        nxt = first_u + max_unique  # the distinct ID that would not fit
        by_unique = np.where(nxt <= last, upos[np.minimum(nxt, last)], size)
        cut = np.minimum(np.minimum(cur + max_ids, by_unique), ends)
        cut = np.where(active, cut, cur)
        starts_r.append(cur)
        ends_r.append(cut)
        cur = cut
    return _Cuts(starts_r, ends_r, cur)


def _limit_group(pos: SortedBuffers, group: StackGroup, ctx: _StepContext) -> tuple[GroupResult, _Cuts | None]:
    """Counts, minibatches and dropping of one group's sorted, deduplicated IDs (step 4)."""
    lay = ctx.lay
    n_sc, spc, chips = lay.num_sc, lay.sparsecores_per_chip, lay.num_chips
    nb = n_sc * n_sc
    ids_sp = pos.ends - pos.starts
    unique_sp = np.searchsorted(pos.upos, pos.ends) - np.searchsorted(pos.upos, pos.starts)
    lim, ulim = group.max_ids_per_partition, group.max_unique_ids_per_partition
    cuts = None
    if ids_sp.max(initial=0) <= lim and unique_sp.max(initial=0) <= ulim:
        ids_msp, unique_msp = ids_sp[None, :], unique_sp[None, :]
        dropped_sp = np.zeros(nb, dtype=np.int64)
    else:
        cuts = greedy_cuts(pos, lim, ulim, ctx.max_minibatches)
        dropped_sp = pos.ends - cuts.leftover_start
        if dropped_sp.any() and not ctx.sc.allow_id_dropping:
            _raise_overflow(group, np.flatnonzero(dropped_sp), ids_sp, unique_sp, ctx)
        st, en = np.array(cuts.starts), np.array(cuts.ends)
        ids_msp = en - st
        # distinct IDs in [st, en): the first entry counts even inside a run of one ID
        unique_msp = np.where(en > st, np.searchsorted(pos.upos, en) - np.searchsorted(pos.upos, st, "right") + 1, 0)
    m_count = ids_msp.shape[0]
    src_chip = np.repeat(np.arange(n_sc) // spc, n_sc)
    tgt = np.tile(np.arange(n_sc), n_sc)
    cross = src_chip != tgt // spc
    ids_mp = ids_msp.reshape(m_count, n_sc, n_sc).sum(axis=1)
    unique_mp = unique_msp.reshape(m_count, n_sc, n_sc).sum(axis=1)
    cross_mc = (unique_msp * cross).reshape(m_count, n_sc, n_sc).sum(axis=1).reshape(m_count, chips, spc).sum(axis=2)
    result = GroupResult(
        group=group,
        minibatches=m_count,
        ids_mp=ids_mp,
        unique_mp=unique_mp,
        cross_chip_mc=cross_mc,
        ids_sp=ids_sp.reshape(n_sc, n_sc),
        unique_sp=unique_sp.reshape(n_sc, n_sc),
        dropped_sp=dropped_sp.reshape(n_sc, n_sc),
    )
    return result, cuts


def _partition_group(keys: np.ndarray, group: StackGroup, kl: KeyLayout, ctx: _StepContext) -> GroupResult:
    """Step 4 on int64 keys, with per-table statistics and decoded entries if asked."""
    lay, table_stats, keep_entries = ctx.lay, ctx.table_stats, ctx.keep_entries
    n_sc, nb, n = lay.num_sc, lay.num_sc * lay.num_sc, len(keys)
    pos, new_u = key_positions(keys, kl)
    result, cuts = _limit_group(pos, group, ctx)
    if table_stats or keep_entries:
        sp = keys >> kl.buffer_shift
        col = (keys >> kl.rbits) & ((1 << kl.vbits) - 1)
        table = np.searchsorted(group.offsets, col, "right") - 1
    if table_stats:
        nt = len(group.tables)
        t_ids = np.bincount(table * nb + sp, minlength=nt * nb).reshape(nt, nb).max(axis=1)
        t_uni = np.bincount(table[new_u] * nb + sp[new_u], minlength=nt * nb).reshape(nt, nb).max(axis=1)
        result.table_observed = {t: (int(t_ids[i]), int(t_uni[i])) for i, t in enumerate(group.tables)}
    if keep_entries:
        mb = np.zeros(n, dtype=np.int64)
        if cuts is not None:
            marker = np.zeros(n + 1, dtype=np.int64)
            for en in cuts.ends:
                np.add.at(marker, en[en < pos.ends], 1)
            cum = np.cumsum(marker)
            mb = cum[:n] - cum[pos.starts][sp]
        r = keys & ((1 << kl.rbits) - 1)
        slot, local = np.divmod(r, lay.samples_per_sc)
        result.entries = {
            "source_sc": sp // n_sc,
            "partition": sp % n_sc,
            "col": col,
            "table": table,
            "sample": (sp // n_sc) * lay.samples_per_sc + local,
            "feature_slot": slot,
            "minibatch": mb,
            "dropped": mb >= ctx.max_minibatches,
        }
    return result


def _raise_overflow(
    group: StackGroup, over: np.ndarray, ids_sp: np.ndarray, unique_sp: np.ndarray, ctx: _StepContext
) -> None:
    """PreprocessError naming the worst overflowing buffer among `over` (IDs left after the
    last allowed minibatch, with dropping off)."""
    worst = int(over[np.argmax(ids_sp[over])])
    src, part = divmod(worst, ctx.lay.num_sc)
    chip, core = divmod(part, ctx.lay.sparsecores_per_chip)
    how = (
        f" even with {ctx.max_minibatches} minibatches (sparsecore.max_minibatches)"
        if ctx.sc.enable_minibatching
        else " and minibatching is off"
    )
    raise PreprocessError(
        f"step {ctx.step}: table {group.name!r} partition {part} (chip {chip}, SparseCore {core}) "
        f"gets {int(ids_sp[worst])} IDs / {int(unique_sp[worst])} unique IDs from SparseCore "
        f"{src}, above the compiled max_ids_per_partition={group.max_ids_per_partition} / "
        f"max_unique_ids_per_partition={group.max_unique_ids_per_partition}{how}; raise the "
        f"limits or set sparsecore.allow_id_dropping = true"
    )


def preprocess_step(
    step: int,
    batches: list[FeatureBatch],
    groups: list[StackGroup],
    lay: Layout,
    sc: SparseCoreConfig,
    table_stats: bool = False,
    keep_entries: bool = False,
) -> StepResult:
    """Run host preprocessing of one step over every table group.

    The packed path serves groups of fixed-size bags and small enough vocabularies; the
    entry path (int64 keys that keep each ID's sample) serves the rest, decoded entries,
    and steps where a sample may exceed the chip cap (the cap ranks a sample's IDs).
    Both give the same counts, cuts and drops.
    """
    ctx = _StepContext(step, lay, sc, table_stats, keep_entries)
    kls = [key_layout(g, lay) for g in groups]
    per_sample = np.zeros(lay.global_batch, dtype=np.int64)
    for fb in batches:
        per_sample += fb.lengths
    entry_path = keep_entries or per_sample.max(initial=0) > sc.max_ids_per_chip_per_sample
    results = []
    if entry_path:
        keys = [group_keys(g, batches, lay, kl) for g, kl in zip(groups, kls, strict=True)]
        keys, cap_dropped = _apply_chip_cap(keys, kls, per_sample, ctx)
        results = [_partition_group(k, g, kl, ctx) for k, g, kl in zip(keys, groups, kls, strict=True)]
    else:
        cap_dropped = np.zeros(lay.num_sc, dtype=np.int64)
        for g, kl in zip(groups, kls, strict=True):
            hots = packed_hots(g, batches, lay)
            if hots is None:
                keys = group_keys(g, batches, lay, kl)
                results.append(_partition_group(keys, g, kl, ctx))  # keep_entries is off here
                continue
            pos, observed = packed_group(g, batches, lay, hots, table_stats)
            res, _ = _limit_group(pos, g, ctx)
            res.table_observed = observed
            results.append(res)
    raw = per_sample.reshape(lay.num_sc, lay.samples_per_sc).sum(axis=1)
    kept = np.zeros(lay.num_sc, dtype=np.int64)
    dropped = cap_dropped.copy()
    for r in results:
        src_drop = r.dropped_sp.sum(axis=1)
        kept += r.ids_sp.sum(axis=1) - src_drop
        dropped += src_drop
    return StepResult(step, results, raw, kept, dropped, int(cap_dropped.sum()))
