-- @module analysis.memory
-- The memory analysis of one run (analyzers/rules/memory.py): peaks of every memory counter, what HBM holds at the worst
-- chip's peak, and the HBM stack recomputed from the SparseCore guide's formulas.
-- @include analysis.base, stdlib.memory, schema.views

-- @query memory_peaks
-- Per chip and memory counter (HBM heap, HBM stack, SPMEM ..., any counter track in bytes), the peak value, when it
-- first happened and its mean, with the chip's HBM peak from the store's hbm_peaks view (heap + stack sampled
-- together, its earliest time, the capacity from the run's hardware header).
-- @param run INTEGER The run (runs.run_id).
-- @column chip INTEGER Chip index.
-- @column counter VARCHAR The counter.
-- @column peak_bytes DOUBLE Its peak.
-- @column peak_ts_ps BIGINT The earliest time at the peak.
-- @column mean_bytes DOUBLE Its mean over the samples.
-- @column hbm_peak_bytes DOUBLE The chip's HBM peak (heap + stack).
-- @column hbm_peak_ts_ps BIGINT Its earliest time.
-- @column hbm_capacity_bytes BIGINT HBM capacity per chip (runs.hbm_bytes).
WITH peaks AS (
    SELECT chip, counter, max(value) AS peak_bytes, avg(value) AS mean_bytes,
           arg_max(ts_ps, struct_pack(v := value, t := -(ts_ps::HUGEINT))) AS peak_ts_ps  -- the earliest at the peak
    FROM counter_samples
    WHERE run_id = $run AND unit = 'bytes' AND chip >= 0
    GROUP BY chip, counter
)
SELECT p.chip, p.counter, p.peak_bytes, p.peak_ts_ps, p.mean_bytes,
       h.hbm_peak_bytes, h.hbm_peak_ts_ps,
       (SELECT hbm_bytes FROM runs WHERE run_id = $run) AS hbm_capacity_bytes
FROM peaks p
LEFT JOIN (SELECT * FROM hbm_peaks WHERE run_id = $run) h USING (chip)
ORDER BY p.chip, p.counter;

-- @query memory_contributors
-- What HBM holds on chip `chip` at time `ts` (the combined peak): every HBM counter in bytes ('HBM heap', its
-- contributors 'HBM heap: <name>', 'HBM stack'), with its value held at `ts`, its first value (before any step: the
-- static part; 0 for a counter that starts later) and its growth since (value at `ts` minus it).
-- @param run INTEGER The run (runs.run_id).
-- @param chip INTEGER The chip.
-- @param ts BIGINT The time, ps.
-- @column counter VARCHAR The counter.
-- @column contributor VARCHAR What a 'HBM heap: <name>' counter names; NULL for the others.
-- @column bytes_at_peak DOUBLE Its value held at `ts`.
-- @column first_bytes DOUBLE Its first value (0 for a counter that starts after the chip's first HBM sample).
-- @column growth_bytes DOUBLE Its growth since.
WITH s AS (
    SELECT counter, ts_ps, value
    FROM counter_samples
    WHERE run_id = $run AND chip = $chip AND unit = 'bytes' AND counter LIKE 'HBM %'
)
SELECT counter,
       CASE WHEN counter LIKE 'HBM heap: %' THEN substr(counter, 11) END AS contributor,
       arg_max(value, ts_ps) FILTER (WHERE ts_ps <= $ts) AS bytes_at_peak,
       first_bytes,
       coalesce(arg_max(value, ts_ps) FILTER (WHERE ts_ps <= $ts), 0) - first_bytes AS growth_bytes
FROM (
    -- a counter whose first sample comes after the chip's first HBM sample held 0 before it
    SELECT *, CASE WHEN min(ts_ps) OVER (PARTITION BY counter) > min(ts_ps) OVER () THEN 0
                   ELSE first_value(value) OVER (PARTITION BY counter ORDER BY ts_ps) END AS first_bytes
    FROM s
)
GROUP BY counter, first_bytes
ORDER BY bytes_at_peak DESC NULLS LAST, counter;

-- @query stack_estimate
-- The HBM stack of each table group (stack) per chip, recomputed from the SparseCore guide's formulas
-- (docs/emulator.md "Memory model") with trace data only: forward = (2 * width + 1) * max_unique_nz_per_row *
-- logical_replica_count * 4 bytes, backward = 3 * width * max_unique_nz_per_row * logical_replica_count * 4 bytes per
-- SparseCore, times the SparseCores of a chip; logical_replica_count = every SparseCore of the slice (each serves one
-- buffer from every SparseCore), width from the table layout events, and max_unique_nz_per_row twice: the compiled
-- max_unique_ids_per_partition (what the compiler reserves) and the most unique IDs any partition saw in the run (what
-- the IDs needed: the floor lower limits could reach).
-- @param run INTEGER The run (runs.run_id).
-- @column stack_name VARCHAR The table group (stack).
-- @column width BIGINT Embedding width.
-- @column compiled_unique BIGINT The compiled max_unique_ids_per_partition.
-- @column observed_unique BIGINT The most unique IDs a partition saw.
-- @column logical_replica_count INTEGER Every SparseCore of the slice.
-- @column forward_bytes BIGINT Forward stack per chip with the compiled limit.
-- @column backward_bytes BIGINT Backward stack per chip with the compiled limit.
-- @column forward_observed_bytes BIGINT Forward stack per chip with the observed unique IDs.
-- @column backward_observed_bytes BIGINT Backward stack per chip with the observed unique IDs.
WITH hw AS (
    SELECT num_chips * sparsecores_per_chip AS replicas, sparsecores_per_chip AS spc
    FROM runs WHERE run_id = $run
),
widths AS (SELECT stack_name, max(width) AS width FROM stacking_layout($run) GROUP BY stack_name),
uniq AS (
    SELECT table_name AS stack_name, max(max_unique_ids_per_partition) AS compiled_unique,
           max(unique_ids) AS observed_unique
    FROM sc_partition_stats WHERE run_id = $run GROUP BY table_name
)
SELECT u.stack_name, w.width, u.compiled_unique, u.observed_unique, hw.replicas AS logical_replica_count,
       (2 * w.width + 1) * u.compiled_unique * hw.replicas * 4 * hw.spc AS forward_bytes,
       3 * w.width * u.compiled_unique * hw.replicas * 4 * hw.spc AS backward_bytes,
       (2 * w.width + 1) * u.observed_unique * hw.replicas * 4 * hw.spc AS forward_observed_bytes,
       3 * w.width * u.observed_unique * hw.replicas * 4 * hw.spc AS backward_observed_bytes
FROM uniq u JOIN widths w USING (stack_name), hw
ORDER BY u.stack_name;

-- @query table_groups
-- How many table groups (stacks) the run's partition statistics hold.
-- @param run INTEGER The run (runs.run_id).
-- @column n BIGINT Table groups.
SELECT count(DISTINCT table_name) AS n FROM sc_partition_stats WHERE run_id = $run;

-- @query allocators
-- The allocators' memory profile (XProf's memory profile from the MemoryAllocation / MemoryDeallocation events an
-- allocator records on the host plane, e.g. TensorFlow's GPU_4_bfc or gpu_host_bfc; their stats are event_args).
-- Per host and allocator, with its events in (time, file) order: the peak of `bytes_allocated` (what the allocator
-- holds after each event) at its earliest event, `peak_bytes_in_use` (the allocator's own running peak, which may
-- predate the capture), the allocations and deallocations, and `fragmentation` at the peak event. The allocations
-- live at the peak pair events by address: an allocation is live when the last event of its (allocator, addr) up to
-- the peak event is that allocation (an address freed and reused pairs each free with the allocation before it; a
-- free whose allocation came before the capture pairs with nothing). What the allocator held when the capture began
-- is in no allocation event: unattributed_at_peak_bytes is the peak less the live allocations it recorded. Device:
-- `GPU_<n>_...` is the chip of the host's /device:GPU:<n> plane (NULL when the run has none); an allocator named
-- after the host or the CPU (gpu_host_bfc, cpu) serves the host (chip -1); any other is of an unknown device.
-- @param run INTEGER The run (runs.run_id).
-- @param top INTEGER How many of the largest live allocations to list per allocator.
-- @column plane VARCHAR The host plane its events are on (tracks.plane).
-- @column host VARCHAR The host (the plane's name before /host:CPU; '' for a single-host capture).
-- @column allocator VARCHAR The allocator (allocator_name).
-- @column device_kind VARCHAR 'device' (GPU_<n>_...), 'host' (a name with host or cpu in it) or 'unknown'.
-- @column device_index INTEGER n of GPU_<n>_...; NULL for a host allocator.
-- @column chip INTEGER The chip of /device:GPU:<n> on the host; -1 for a host allocator; NULL when unknown.
-- @column events BIGINT Its allocation and deallocation events.
-- @column allocations BIGINT MemoryAllocation events.
-- @column deallocations BIGINT MemoryDeallocation events.
-- @column first_ts_ps BIGINT Its first event.
-- @column last_ts_ps BIGINT Its last event.
-- @column peak_bytes BIGINT Highest bytes_allocated.
-- @column peak_ts_ps BIGINT Time of the earliest event at the peak.
-- @column peak_in_use_bytes BIGINT Highest peak_bytes_in_use (the allocator's peak since it started).
-- @column fragmentation_at_peak_ratio DOUBLE fragmentation recorded by the peak event.
-- @column live_at_peak BIGINT Allocations recorded in the capture and live at the peak.
-- @column live_at_peak_bytes BIGINT Their allocation_bytes.
-- @column unattributed_at_peak_bytes BIGINT peak_bytes less live_at_peak_bytes (held since before the capture).
-- @column largest_live STRUCT(bytes BIGINT, requested_bytes BIGINT, tf_op VARCHAR, region_type VARCHAR, data_type VARCHAR, shape VARCHAR, allocated_ts_ps BIGINT)[]
--   The `top` largest live allocations at the peak, largest first (earliest on a tie).
WITH mem AS (
    SELECT event_id, plane, name, start_ps FROM slices
    WHERE run_id = $run AND name IN ('MemoryAllocation', 'MemoryDeallocation')
),
args AS (  -- the allocator stats of each memory event, one column each (a number may be an int or a double)
    SELECT event_id,
           max(string_value) FILTER (WHERE key = 'allocator_name') AS allocator,
           max(coalesce(int_value, double_value)) FILTER (WHERE key = 'bytes_allocated') AS bytes_allocated,
           max(coalesce(int_value, double_value)) FILTER (WHERE key = 'peak_bytes_in_use') AS peak_bytes_in_use,
           max(coalesce(int_value, double_value)) FILTER (WHERE key = 'allocation_bytes') AS allocation_bytes,
           max(coalesce(int_value, double_value)) FILTER (WHERE key = 'requested_bytes') AS requested_bytes,
           max(coalesce(double_value, int_value)) FILTER (WHERE key = 'fragmentation') AS fragmentation,
           max(coalesce(int_value::VARCHAR, string_value, double_value::VARCHAR)) FILTER (WHERE key = 'addr') AS addr,
           max(string_value) FILTER (WHERE key = 'tf_op') AS tf_op,
           max(string_value) FILTER (WHERE key = 'region_type') AS region_type,
           max(coalesce(string_value, int_value::VARCHAR)) FILTER (WHERE key = 'data_type') AS data_type,
           max(string_value) FILTER (WHERE key = 'shape') AS shape
    FROM event_args
    WHERE run_id = $run AND event_id IN (SELECT event_id FROM mem)
      AND key IN ('allocator_name', 'bytes_allocated', 'peak_bytes_in_use', 'allocation_bytes', 'requested_bytes',
                  'fragmentation', 'addr', 'tf_op', 'region_type', 'data_type', 'shape')
    GROUP BY event_id
),
ev AS (  -- each allocator's events in order: seq 1, 2, ... by (time, file order)
    SELECT m.plane, a.allocator, m.name = 'MemoryAllocation' AS is_allocation, m.start_ps, a.* EXCLUDE (allocator),
           row_number() OVER (PARTITION BY m.plane, a.allocator ORDER BY m.start_ps, m.event_id) AS seq
    FROM mem m JOIN args a USING (event_id)
    WHERE coalesce(a.allocator, '') <> ''
),
peak AS (
    SELECT plane, allocator, count(*) AS events,
           count(*) FILTER (WHERE is_allocation) AS allocations,
           count(*) FILTER (WHERE NOT is_allocation) AS deallocations,
           min(start_ps) AS first_ts_ps, max(start_ps) AS last_ts_ps,
           max(bytes_allocated)::BIGINT AS peak_bytes,
           max(peak_bytes_in_use)::BIGINT AS peak_in_use_bytes,
           -- the earliest event at the peak
           arg_max(struct_pack(seq := seq, ts := start_ps, frag := fragmentation),
                   struct_pack(b := bytes_allocated, s := -seq)) FILTER (WHERE bytes_allocated IS NOT NULL) AS at
    FROM ev GROUP BY plane, allocator
),
live AS (  -- per (allocator, addr), its last event up to the peak event, kept when it is an allocation
    SELECT e.*
    FROM ev e JOIN peak p USING (plane, allocator)
    WHERE e.seq <= p.at.seq AND e.addr IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY e.plane, e.allocator, e.addr ORDER BY e.seq DESC) = 1
        AND e.is_allocation
),
live_sum AS (
    SELECT plane, allocator, count(*) AS live_at_peak, sum(allocation_bytes)::BIGINT AS live_at_peak_bytes,
           list(struct_pack(bytes := allocation_bytes::BIGINT, requested_bytes := requested_bytes::BIGINT,
                            tf_op := tf_op, region_type := region_type, data_type := data_type, shape := shape,
                            allocated_ts_ps := start_ps)
                ORDER BY allocation_bytes DESC NULLS LAST, seq)[1:$top] AS largest_live
    FROM live GROUP BY plane, allocator
),
named AS (
    SELECT p.*, trim(regexp_replace(p.plane, '/host:CPU.*$', '')) AS host,
           regexp_extract(p.allocator, '^GPU_([0-9]+)_', 1) AS n
    FROM peak p
)
SELECT p.plane, p.host, p.allocator,
       CASE WHEN p.n <> '' THEN 'device' WHEN regexp_matches(p.allocator, '(?i)host|cpu') THEN 'host' ELSE 'unknown'
       END AS device_kind,
       CASE WHEN p.n <> '' THEN p.n::INTEGER END AS device_index,
       CASE WHEN p.n <> '' THEN (SELECT min(t.chip) FROM tracks t
                                 WHERE t.run_id = $run AND t.chip >= 0
                                   AND t.plane = replace(p.plane, '/host:CPU', '/device:GPU:' || p.n))
            WHEN regexp_matches(p.allocator, '(?i)host|cpu') THEN -1
       END AS chip,
       p.events, p.allocations, p.deallocations, p.first_ts_ps, p.last_ts_ps, p.peak_bytes, p.at.ts AS peak_ts_ps,
       p.peak_in_use_bytes, p.at.frag AS fragmentation_at_peak_ratio,
       coalesce(l.live_at_peak, 0) AS live_at_peak, coalesce(l.live_at_peak_bytes, 0) AS live_at_peak_bytes,
       greatest(p.peak_bytes - coalesce(l.live_at_peak_bytes, 0), 0) AS unattributed_at_peak_bytes,
       coalesce(l.largest_live, []) AS largest_live
FROM named p LEFT JOIN live_sum l USING (plane, allocator)
ORDER BY p.host, device_kind, device_index, p.allocator, p.plane;
