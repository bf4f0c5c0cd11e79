"""Host preprocessing, for real, vectorised: stacking, COO, dedup, mod sharding, limits.

For each table group (a stacked table, or one table when stacking is off) and step:

1. every feature's ragged IDs become COO (row = sample, col = ID); a stacked table
   lays its tables side by side (row offset, vocabulary padded to a multiple of the
   SparseCore count) and shifts each table's IDs by its position in the stack, so the
   hot rows of different tables land on different SparseCores (DOMAIN.md §1, step 8);
   features sharing a table keep separate rows (feature stacking);
2. the batch is split across all SparseCores of the slice (each gets B / num_SCs
   samples: its *source* sub-batch) and every ID goes to partition
   `col_id % num_total_sparse_cores` (its *target*);
3. repeats within a bag (one sample's IDs of one feature) are dropped, and each
   (source, target) buffer is laid out contiguously with its IDs in sorted order. Two
   ways, with the same counts, cuts and drops:
   - *packed path* (bags of a fixed size, stacked vocabulary <= 2^31 rows, no decoded
     entries asked, no sample above the chip cap before dedup): one uint32 key per ID,
     (target partition, stacked ID // num_SCs); a bag's repeats are found by sorting
     short runs of samples with each ID tagged by its sample, then one sort per source
     SC orders its buffers (its IDs are then distinct (ID, sample) entries, so their
     order among one ID's samples changes no count);
   - *entry path* (otherwise): one int64 key per ID (bit fields: source SC and target
     partition, stacked ID, feature slot, sample) and one np.sort: repeats adjacent, and
     every entry keeps its sample (for the chip cap and the decoded entries);
4. per buffer: IDs and unique IDs are counted and checked against the compiled
   limits; buffers that do not fit are split greedily, in sorted order, into
   minibatches (the same count for the whole group, as the SPMD program runs them in
   lockstep); past `max_minibatches` (or 1 with minibatching off) the rest is dropped
   when `allow_id_dropping`, else a PreprocessError names table, partition, observed
   and compiled values.

`max_ids_per_chip_per_sample` is applied between steps 3 and 4 over all groups.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from sim_backend.config import RunConfig, SparseCoreConfig
from sim_backend.costmodel import CostConstants
from sim_backend.errors import ConfigError, PreprocessError
from sim_backend.generate import FeatureBatch
from sim_backend.hardware import HardwareSpec
from sim_backend.limits import TableLimits

DTYPE_BYTES = {"f32": 4, "bf16": 2, "int8": 1}
OPTIMIZER_SLOTS = {"sgd": 0, "adagrad": 1, "adam": 2}


@dataclass(frozen=True)
class Layout:
    """How a global batch maps onto the slice."""

    global_batch: int
    num_chips: int
    sparsecores_per_chip: int

    @property
    def num_sc(self) -> int:
        return self.num_chips * self.sparsecores_per_chip

    @property
    def samples_per_sc(self) -> int:
        return self.global_batch // self.num_sc


@dataclass(frozen=True)
class StackGroup:
    """One logical (possibly stacked) table as the SparseCores see it."""

    index: int
    name: str
    tables: tuple[str, ...]
    features: tuple[int, ...]  # indices into cfg.features; position = feature slot
    feature_table: tuple[int, ...]  # per slot: index into `tables`
    width: int
    dtype_bytes: int
    optimizer_slots: int
    offsets: np.ndarray  # int64 per table: first row of its slot (multiple of num SCs)
    padded_vocab: np.ndarray  # int64 per table: vocab padded to a multiple of num SCs
    rotation: np.ndarray  # int64 per table: shift of its IDs inside the slot
    # stacked ID of table t's row j: offsets[t] + rotation[t] + j, so its SparseCore is
    # (j + rotation[t]) % num_SCs: table t's hot rows move to other SparseCores (step 8)
    local_rows: int  # rows of the stacked table per partition
    max_ids_per_partition: int  # compiled limits of the stacked table
    max_unique_ids_per_partition: int


def plan_groups(cfg: RunConfig, hw: HardwareSpec, limits: dict[str, TableLimits]) -> list[StackGroup]:
    """Group tables for stacking (same width, dtype, optimizer) unless disabled.

    `sparsecore.max_tables_per_stack = k` (k > 0) splits each such bucket, in config
    order, into stacks of at most k tables.
    """
    n_sc = hw.num_total_sparse_cores
    tables = {t.name: t for t in cfg.tables}
    buckets: dict[tuple, list[str]] = {}
    for t in cfg.tables:
        key = (t.name,) if cfg.sparsecore.disable_table_stacking else (t.width, t.dtype, t.optimizer)
        buckets.setdefault(key, []).append(t.name)
    per_stack = cfg.sparsecore.max_tables_per_stack
    chunks = [
        names[i : i + per_stack] if per_stack else names
        for names in buckets.values()
        for i in range(0, len(names), per_stack or len(names))
    ]
    groups = []
    for gi, names in enumerate(chunks):
        t0 = tables[names[0]]
        padded = np.array([-(-tables[n].vocab // n_sc) * n_sc for n in names], dtype=np.int64)
        # a stacked table's slot leaves n_sc spare rows so its IDs can be shifted by the rotation
        slot_rows = padded + (n_sc if len(names) > 1 else 0)
        offsets = np.concatenate([[0], np.cumsum(slot_rows)[:-1]]).astype(np.int64)
        slots = [i for i, f in enumerate(cfg.features) if f.table in names]
        lim_ids, lim_unique = stack_limits(cfg, hw, [limits[n] for n in names], t0.width)
        groups.append(
            StackGroup(
                index=gi,
                name=names[0] if len(names) == 1 else f"stack_{gi}",
                tables=tuple(names),
                features=tuple(slots),
                feature_table=tuple(names.index(cfg.features[i].table) for i in slots),
                width=t0.width,
                dtype_bytes=DTYPE_BYTES[t0.dtype],
                optimizer_slots=OPTIMIZER_SLOTS[t0.optimizer],
                offsets=offsets,
                padded_vocab=padded,
                rotation=np.arange(len(names), dtype=np.int64) % n_sc,
                local_rows=int(slot_rows.sum()) // n_sc,
                max_ids_per_partition=lim_ids,
                max_unique_ids_per_partition=lim_unique,
            )
        )
    return groups


def stack_limits(cfg: RunConfig, hw: HardwareSpec, members: list[TableLimits], width: int) -> tuple[int, int]:
    """Compiled (max_ids, max_unique_ids) per partition of a stack of tables.

    The sum of its tables' limits (as jax-tpu-embedding stacks them); for a stack of
    several tables, scaled down so its fixed-size SPMEM buffers fit in TileSpmem beside
    the gather staging (model choice: the stacking framework cannot ask for buffers the
    tile cannot hold, so a very large stack hits the per-partition limits and
    minibatches). A lone table keeps the user's limits, which may fail to compile.
    """
    ids = sum(m.max_ids_per_partition for m in members)
    uniq = sum(m.max_unique_ids_per_partition for m in members)
    if len(members) < 2:
        return ids, uniq
    c = CostConstants(**cfg.cost)
    tiles = hw.tiles_per_sparsecore
    sample_count = cfg.global_batch // hw.num_total_sparse_cores
    budget = hw.spmem_bytes_per_tile - -(-sample_count * width // tiles) * c.activation_bytes
    per_tile = (-(-ids // tiles), -(-uniq // tiles))
    fixed = per_tile[0] * c.spmem_bytes_per_id + per_tile[1] * c.spmem_bytes_per_unique_id
    if fixed <= budget or budget <= 0:
        return ids, uniq
    scale = budget / fixed
    return (max(1, int(per_tile[0] * scale)) * tiles, max(1, int(per_tile[1] * scale)) * tiles)


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


@dataclass
class _Sorted:
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


def _packed_hots(group: StackGroup, batches: list[FeatureBatch], lay: Layout) -> list[int] | None:
    """Bag size per feature slot when the packed path applies (fixed bags, 31-bit IDs)."""
    if group.local_rows * lay.num_sc > PACKED_MAX_VOCAB or lay.samples_per_sc < 1:
        return None
    hots = [_fixed_hot(batches[fi]) for fi in group.features]
    return hots if all(hots) else None


def _packed_stride(group: StackGroup, n_sc: int) -> int:
    """Packed key of partition p's first row is p * stride (see `_packed_keys`)."""
    return 1 << (33 - n_sc.bit_length()) if n_sc & (n_sc - 1) == 0 else group.local_rows


def _packed_keys(group: StackGroup, batches: list[FeatureBatch], lay: Layout, hots: list[int]) -> np.ndarray:
    """uint32 [num_sc, width]: each source SC's IDs, repeats within a bag set to REMOVED.

    A stacked ID c = q * num_SCs + p (partition p) becomes the packed key p * stride + q:
    ordering packed keys orders by (partition, ID), as DOMAIN.md §1 step 4 groups them.
    With a power-of-two SC count this is c rotated right by log2(num_SCs) bits (stride
    2^(32 - log2 num_SCs); c < 2^31 leaves REMOVED unused), else p * local_rows + q.

    Dedup within a bag (one sample's IDs of one feature, step 3): a feature's IDs are
    tagged with their sample's index in a run of G samples of one source (G = 2^(32 -
    vbits), capped by the sub-batch), `tag << vbits | c`, and each run is sorted: a
    bag's repeats become neighbours. Runs are short, so these sorts are cheap; the IDs
    left are distinct (ID, sample, slot) entries, so the caller sorts a source's row by
    ID alone (the order among one ID's samples changes no count).
    """
    n_sc, bs = lay.num_sc, lay.samples_per_sc
    keys = _scratch_buffer(n_sc * bs * sum(hots), np.uint32, "keys").reshape(n_sc, -1)
    vbits = int(group.local_rows * n_sc - 1).bit_length()
    run = min(1 << (32 - vbits), bs & -bs)  # samples per sorted run: a power of two dividing bs
    at = 0
    for fi, h in zip(group.features, hots, strict=True):
        keys[:, at : at + bs * h] = batches[fi].ids.reshape(n_sc, -1)  # IDs < 2^31: exact
        at += bs * h
    shifts = tuple(int(group.offsets[t] + group.rotation[t]) for t in group.feature_table)
    keys += _tag_row(shifts, tuple(hots), bs, run, vbits)
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
    mask = np.uint32((1 << vbits) - 1)
    if n_sc & (n_sc - 1):
        col = keys & mask
        q = col // np.uint32(n_sc)
        col -= q * np.uint32(n_sc)
        col *= np.uint32(group.local_rows)
        np.add(col, q, out=keys)
    elif n_sc > 1:
        s = n_sc.bit_length() - 1
        low = np.left_shift(keys, 32 - s, out=_scratch_buffer(keys.size, np.uint32, "low").reshape(keys.shape))
        keys &= mask
        keys >>= s
        keys |= low
    else:
        keys &= mask
    # REMOVED = all ones: OR in 0 - 1 where `gone`
    keys |= np.negative(
        gone.view(np.uint8),
        dtype=np.uint32,
        casting="unsafe",
        out=_scratch_buffer(keys.size, np.uint32, "low").reshape(keys.shape),
    )
    return keys


@functools.lru_cache(maxsize=64)
def _tag_row(shifts: tuple[int, ...], hots: tuple[int, ...], bs: int, run: int, vbits: int) -> np.ndarray:
    """uint32 [width]: what to add to a source's raw IDs: its slot's shift, plus each ID's
    sample index within its run of `run` samples, above the ID bits."""
    tags = np.arange(run, dtype=np.uint32) << np.uint32(vbits)
    row = np.concatenate(
        [np.tile(np.repeat(tags, h), bs // run) + np.uint32(shift) for shift, h in zip(shifts, hots, strict=True)]
    )
    row.flags.writeable = False  # cached: shared by every call
    return row


def _packed_group(
    group: StackGroup, batches: list[FeatureBatch], lay: Layout, hots: list[int], table_stats: bool
) -> tuple[_Sorted, dict[str, tuple[int, int]]]:
    """Steps 1-3 with 32-bit keys: dedup per bag, then one sort per source SparseCore.

    Returns the buffers as positions, and with `table_stats` each table's largest
    (IDs, unique IDs) over the buffers, from the key range of each (partition, table).
    """
    n_sc, nt = lay.num_sc, len(group.tables)
    keys = _packed_keys(group, batches, lay, hots)
    keys.sort(axis=1)
    width = keys.shape[1]
    # first key of each (partition, table) range, then REMOVED: ends the last buffer
    stride = _packed_stride(group, n_sc)
    first = (np.arange(n_sc, dtype=np.int64)[:, None] * stride + (group.offsets // n_sc)[None, :]).ravel()
    edges = np.append(first, int(REMOVED)).astype(np.uint32)
    pos = np.empty((n_sc, len(edges)), dtype=np.int64)
    for src in range(n_sc):
        pos[src] = np.searchsorted(keys[src], edges)
    pos += np.arange(n_sc, dtype=np.int64)[:, None] * width
    new_u = _scratch_buffer(keys.size, np.bool_, "new").reshape(keys.shape)
    new_u[:, 0] = True
    np.not_equal(keys[:, 1:], keys[:, :-1], out=new_u[:, 1:])
    upos = np.flatnonzero(new_u)
    sorted_ = _Sorted(pos[:, :-1:nt].ravel(), pos[:, nt::nt].ravel(), upos, keys.size)
    observed = {}
    if table_stats:
        t_ids = np.diff(pos, axis=1).reshape(n_sc * n_sc, nt).max(axis=0)
        t_uni = np.diff(np.searchsorted(upos, pos), axis=1).reshape(n_sc * n_sc, nt).max(axis=0)
        observed = {t: (int(t_ids[i]), int(t_uni[i])) for i, t in enumerate(group.tables)}
    return sorted_, observed


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


def _group_keys(group: StackGroup, batches: list[FeatureBatch], lay: Layout, kl: KeyLayout) -> np.ndarray:
    """Sorted, per-sample-deduplicated int64 sort keys of one group's IDs (steps 1-3)."""
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
        col = np.add(fb.ids, int(group.offsets[ti] + group.rotation[ti]), out=_scratch_buffer(len(fb.ids)))
        _encode(col, out, n_sc, kl)
        out += np.repeat(src_term + slot * bs, fb.lengths)
    keys.sort()
    if len(keys) > 1:
        keep = np.empty(len(keys), dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    return keys


def _sample_of(keys: np.ndarray, kl: KeyLayout) -> np.ndarray:
    """Global sample index of each sort key."""
    src = (keys >> kl.buffer_shift) // kl.n_sc
    return src * kl.samples_per_sc + (keys & ((1 << kl.rbits) - 1)) % kl.samples_per_sc


def _apply_chip_cap(
    keys: list[np.ndarray], kls: list[KeyLayout], raw: np.ndarray, lay: Layout, sc: SparseCoreConfig, step: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """Enforce max_ids_per_chip_per_sample; returns kept keys and dropped IDs per source SC.

    `raw`: IDs per sample before dedup, over all features.
    """
    cap = sc.max_ids_per_chip_per_sample
    dropped = np.zeros(lay.num_sc, dtype=np.int64)
    if raw.max(initial=0) <= cap:  # cannot exceed after dedup either
        return keys, dropped
    samples = [_sample_of(k, kl) for k, kl in zip(keys, kls, strict=True)]
    counts = [np.bincount(s, minlength=lay.global_batch) for s in samples]
    total = np.sum(counts, axis=0)
    if total.max(initial=0) <= cap:
        return keys, dropped
    worst = int(total.argmax())
    per_chip = lay.global_batch // lay.num_chips
    if not sc.allow_id_dropping:
        raise PreprocessError(
            f"step {step}: sample {worst} (chip {worst // per_chip}) has {int(total[worst])} IDs "
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


def _key_positions(keys: np.ndarray, kl: KeyLayout) -> tuple[_Sorted, np.ndarray]:
    """Buffers and distinct-ID starts of sorted int64 keys; also the new-ID mask."""
    n = len(keys)
    bounds = np.searchsorted(keys, kl.buffer_edges())
    new_u = np.ones(n, dtype=bool)
    if n > 1:
        ukey = np.right_shift(keys, kl.rbits, out=_scratch_buffer(n))
        np.not_equal(ukey[1:], ukey[:-1], out=new_u[1:])
    return _Sorted(bounds[:-1], bounds[1:], np.flatnonzero(new_u), n), new_u


# -- step 4: counts, minibatches, dropping (both paths) ---------------------------------------


@dataclass
class _Cuts:
    """Greedy minibatch cuts of every buffer: per round, start and end positions."""

    starts: list[np.ndarray]  # [rounds] of int64 [buffers]
    ends: list[np.ndarray]
    leftover_start: np.ndarray  # first entry past the last allowed minibatch, per buffer


def greedy_cuts(
    starts: np.ndarray, ends: np.ndarray, upos: np.ndarray, size: int, max_ids: int, max_unique: int, max_rounds: int
) -> _Cuts:
    """Cut each buffer [starts[i], ends[i]) greedily into minibatches, in sorted order.

    Walking a buffer, an entry starts a new minibatch when adding it would exceed
    `max_ids` entries or `max_unique` distinct IDs (`upos`: sorted positions where a
    distinct ID starts, each buffer start among them; `size`: one past the last
    position). One vectorised pass per minibatch over all buffers; after `max_rounds`
    minibatches, what is left of a buffer is overflow.
    """
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


def _limit_group(
    pos: _Sorted, group: StackGroup, lay: Layout, sc: SparseCoreConfig, step: int
) -> tuple[GroupResult, _Cuts | None]:
    """Counts, minibatches and dropping of one group's sorted, deduplicated IDs (step 4)."""
    n_sc, spc, chips = lay.num_sc, lay.sparsecores_per_chip, lay.num_chips
    nb = n_sc * n_sc
    ids_sp = pos.ends - pos.starts
    unique_sp = np.searchsorted(pos.upos, pos.ends) - np.searchsorted(pos.upos, pos.starts)
    lim, ulim = group.max_ids_per_partition, group.max_unique_ids_per_partition
    max_mb = sc.max_minibatches if sc.enable_minibatching else 1
    cuts = None
    if ids_sp.max(initial=0) <= lim and unique_sp.max(initial=0) <= ulim:
        ids_msp, unique_msp = ids_sp[None, :], unique_sp[None, :]
        dropped_sp = np.zeros(nb, dtype=np.int64)
    else:
        cuts = greedy_cuts(pos.starts, pos.ends, pos.upos, pos.size, lim, ulim, max_mb)
        dropped_sp = pos.ends - cuts.leftover_start
        if dropped_sp.any() and not sc.allow_id_dropping:
            _raise_overflow(group, np.flatnonzero(dropped_sp), ids_sp, unique_sp, lay, sc, step, max_mb)
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


def _partition_group(
    keys: np.ndarray,
    group: StackGroup,
    kl: KeyLayout,
    lay: Layout,
    sc: SparseCoreConfig,
    step: int,
    table_stats: bool,
    keep_entries: bool,
) -> GroupResult:
    """Step 4 on int64 keys, with per-table statistics and decoded entries if asked."""
    n_sc, nb, n = lay.num_sc, lay.num_sc * lay.num_sc, len(keys)
    pos, new_u = _key_positions(keys, kl)
    result, cuts = _limit_group(pos, group, lay, sc, step)
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
        max_mb = sc.max_minibatches if sc.enable_minibatching else 1
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
            "dropped": mb >= max_mb,
        }
    return result


def _raise_overflow(
    group: StackGroup,
    over: np.ndarray,
    ids_sp: np.ndarray,
    unique_sp: np.ndarray,
    lay: Layout,
    sc: SparseCoreConfig,
    step: int,
    max_mb: int,
) -> None:
    worst = int(over[np.argmax(ids_sp[over])])
    src, part = divmod(worst, lay.num_sc)
    chip, core = divmod(part, lay.sparsecores_per_chip)
    how = (
        f" even with {max_mb} minibatches (sparsecore.max_minibatches)"
        if sc.enable_minibatching
        else " and minibatching is off"
    )
    raise PreprocessError(
        f"step {step}: table {group.name!r} partition {part} (chip {chip}, SparseCore {core}) "
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
    kls = [key_layout(g, lay) for g in groups]
    per_sample = np.zeros(lay.global_batch, dtype=np.int64)
    for fb in batches:
        per_sample += fb.lengths
    entry_path = keep_entries or per_sample.max(initial=0) > sc.max_ids_per_chip_per_sample
    results = []
    if entry_path:
        keys = [_group_keys(g, batches, lay, kl) for g, kl in zip(groups, kls, strict=True)]
        keys, cap_dropped = _apply_chip_cap(keys, kls, per_sample, lay, sc, step)
        results = [
            _partition_group(k, g, kl, lay, sc, step, table_stats, keep_entries)
            for k, g, kl in zip(keys, groups, kls, strict=True)
        ]
    else:
        cap_dropped = np.zeros(lay.num_sc, dtype=np.int64)
        for g, kl in zip(groups, kls, strict=True):
            hots = _packed_hots(g, batches, lay)
            if hots is None:
                keys = _group_keys(g, batches, lay, kl)
                results.append(_partition_group(keys, g, kl, lay, sc, step, table_stats, False))
                continue
            pos, observed = _packed_group(g, batches, lay, hots, table_stats)
            res, _ = _limit_group(pos, g, lay, sc, step)
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
