-- @module analysis.sparsecore
-- The SparseCore analyses of one run: the load on each partition from host preprocessing (sc_partition_stats) and
-- its skew (analyzers/rules/skew.py), IDs dropped past the limits and by the chip cap (analyzers/rules/id_dropping.py), steps
-- split into minibatches by the compiled limits (analyzers/rules/minibatching.py) and the SPMEM the limits and the observed
-- load need per tile (analyzers/rules/spmem.py).
-- @include analysis.base, schema.views

-- @query partition_load
-- Per step and table, the load on each SparseCore partition from host preprocessing (sc_partition_stats), with the
-- compiled limits, the mean and max over partitions, and each partition's rank.
-- @param run INTEGER The run (runs.run_id).
-- @column step INTEGER Training step.
-- @column table_name VARCHAR The table group (stack).
-- @column chip INTEGER Chip index.
-- @column sc INTEGER SparseCore index on the chip.
-- @column ids BIGINT IDs the partition received.
-- @column unique_ids BIGINT Unique IDs the partition received.
-- @column max_ids_per_partition BIGINT The compiled limit of IDs.
-- @column max_unique_ids_per_partition BIGINT The compiled limit of unique IDs.
-- @column minibatches INTEGER Minibatches the step needed.
-- @column dropped_ids BIGINT IDs dropped past the limits.
-- @column mean_ids DOUBLE Mean IDs over the step's partitions of the table.
-- @column max_ids BIGINT Most IDs of those partitions.
-- @column std_ids DOUBLE Population standard deviation of their IDs.
-- @column load_rank BIGINT The partition's rank by IDs (1: the hottest).
SELECT step, table_name, chip, sc, ids, unique_ids, max_ids_per_partition, max_unique_ids_per_partition,
       minibatches, dropped_ids,
       avg(ids) OVER t AS mean_ids, max(ids) OVER t AS max_ids, stddev_pop(ids) OVER t AS std_ids,
       rank() OVER (PARTITION BY step, table_name ORDER BY ids DESC, chip, sc) AS load_rank
FROM sc_partition_stats
WHERE run_id = $run
WINDOW t AS (PARTITION BY step, table_name)
ORDER BY step, table_name, chip, sc;

-- @query skew_per_table
-- Per table: the partition loads' max/mean and coefficient of variation per step (averaged; the worst step's
-- max/mean), the hottest partition of most steps (chip * 1000 + sc) and the share of steps it is the hottest in.
-- @input partition_load(step INTEGER, table_name VARCHAR, chip INTEGER, sc INTEGER, ids BIGINT) The rows of partition_load.
-- @column table_name VARCHAR The table group (stack).
-- @column max_over_mean DOUBLE Max over mean partition load, averaged over the steps.
-- @column worst_max_over_mean DOUBLE The largest step's max over mean.
-- @column cv DOUBLE Coefficient of variation of the partition loads, averaged over the steps.
-- @column hot BIGINT The partition hottest in most steps, chip * 1000 + sc.
-- @column persistence DOUBLE Share of the steps where that partition is the hottest.
-- @column steps BIGINT Steps.
WITH s AS (SELECT step, table_name, max(ids) / nullif(avg(ids), 0) AS max_over_mean,
                  stddev_pop(ids) / nullif(avg(ids), 0) AS cv, arg_max(chip * 1000 + sc, ids) AS hot
           FROM partition_load GROUP BY step, table_name)
SELECT table_name, avg(max_over_mean) AS max_over_mean, max(max_over_mean) AS worst_max_over_mean,
       avg(cv) AS cv, mode(hot) AS hot, count(*) FILTER (WHERE hot = (SELECT mode(hot) FROM s s2
           WHERE s2.table_name = s.table_name)) / count(*) AS persistence, count(*) AS steps
FROM s GROUP BY table_name ORDER BY max_over_mean DESC;

-- @query skew_by_step
-- Per step and table: the partition loads' max over mean (the per-step series of the skew finding).
-- @input partition_load(step INTEGER, table_name VARCHAR, ids BIGINT) The rows of partition_load.
-- @column step INTEGER Training step.
-- @column table_name VARCHAR The table group (stack).
-- @column max_over_mean DOUBLE Max over mean partition load in the step (0 when no partition received IDs).
SELECT step, table_name, coalesce(max(ids) / nullif(avg(ids), 0), 0)::DOUBLE AS max_over_mean
FROM partition_load GROUP BY step, table_name ORDER BY table_name, step;

-- @query core_step_busy
-- Per counted step, chip and device core (a TensorCore's op line, its collectives line, each SparseCore), the core's
-- busy time inside the chip's step window: the union of its ops (device_busy, set 'ops') clipped to the window.
-- @param run INTEGER The run (runs.run_id).
-- @column step INTEGER Training step.
-- @column chip INTEGER Chip index.
-- @column core INTEGER Core index on the chip (a SparseCore's sc).
-- @column track_kind VARCHAR tensorcore or sparsecore.
-- @column busy_ps BIGINT The core's busy time in the step window.
WITH w AS (
    SELECT w.chip, w.step, w.start_ps, w.end_ps
    FROM run_step_windows($run) w JOIN step_times s ON s.run_id = $run AND s.step = w.step AND s.counted
)
SELECT w.step, b.chip, b.core, b.track_kind,
       sum(least(b.end_ps, w.end_ps) - greatest(b.start_ps, w.start_ps))::BIGINT AS busy_ps
FROM device_busy b JOIN w ON b.chip = w.chip AND b.start_ps < w.end_ps AND b.end_ps > w.start_ps
WHERE b.run_id = $run AND b.busy_set = 'ops' AND b.track_kind IN ('tensorcore', 'sparsecore')
GROUP BY ALL
ORDER BY ALL;

-- @query skew_busy
-- Per counted step and SparseCore: its busy time, the mean over the slice's SparseCores and the busiest other core of
-- its chip (TensorCore op line or collectives), from core_step_busy.
-- @input core_step_busy(step INTEGER, chip INTEGER, core INTEGER, track_kind VARCHAR, busy_ps BIGINT) The rows of core_step_busy.
-- @column step INTEGER Training step.
-- @column chip INTEGER Chip index.
-- @column sc INTEGER SparseCore index on the chip.
-- @column busy DOUBLE The SparseCore's busy time in the step window, ps.
-- @column mean_sc DOUBLE Mean busy time of the slice's SparseCores in the step, ps.
-- @column other DOUBLE Busy time of the chip's busiest other core in the step (0 if none), ps.
WITH b AS (SELECT * FROM core_step_busy),
     m AS (SELECT step, avg(busy_ps) AS mean_sc FROM b WHERE track_kind = 'sparsecore' GROUP BY step),
     o AS (SELECT step, chip, max(busy_ps) AS other FROM b WHERE track_kind <> 'sparsecore' GROUP BY ALL)
SELECT b.step, b.chip, b.core AS sc, b.busy_ps::DOUBLE AS busy, m.mean_sc, coalesce(o.other, 0)::DOUBLE AS other
FROM b JOIN m USING (step) LEFT JOIN o USING (step, chip) WHERE b.track_kind = 'sparsecore';

-- @query skew_tc_waits
-- Per chip and step: how long the TensorCores sat idle waiting for SparseCore work (idle gaps caused by another core or
-- a collective whose blocker is of one of `blocker_categories`).
-- @param blocker_categories VARCHAR[] The blockers' categories that count (SparseCore work).
-- @input gaps(chip INTEGER, step INTEGER, track_kind VARCHAR, cause VARCHAR, cause_ps BIGINT, blocker_category VARCHAR) The idle gaps with their causes (analyzers/rules/idle_gaps.py).
-- @column chip INTEGER Chip index.
-- @column step INTEGER Training step.
-- @column wait HUGEINT TensorCore time waiting, ps.
SELECT chip, step, sum(cause_ps) AS wait FROM gaps WHERE track_kind = 'tensorcore' AND step IS NOT NULL
   AND cause IN ('other_core', 'collective') AND blocker_category IN (SELECT unnest($blocker_categories)) GROUP BY ALL;

-- @query dropped_by_step
-- IDs dropped past the limits (allow_id_dropping), per table and step, against all IDs the table's partitions
-- received. Dropped IDs are lost silently for training: their embeddings are neither looked up nor updated.
-- @param run INTEGER The run (runs.run_id).
-- @column table_name VARCHAR The table group (stack).
-- @column step INTEGER Training step.
-- @column dropped_ids BIGINT IDs dropped.
-- @column all_ids BIGINT IDs received, kept and dropped.
-- @column max_ids_kept BIGINT Most IDs a partition kept.
-- @column max_ids_per_partition BIGINT The compiled limit of IDs.
-- @column max_unique_ids_kept BIGINT Most unique IDs a partition kept.
-- @column max_unique_ids_per_partition BIGINT The compiled limit of unique IDs.
SELECT table_name, step, sum(dropped_ids)::BIGINT AS dropped_ids,
       (sum(ids) + sum(dropped_ids))::BIGINT AS all_ids,
       max(ids)::BIGINT AS max_ids_kept, max(max_ids_per_partition) AS max_ids_per_partition,
       max(unique_ids)::BIGINT AS max_unique_ids_kept, max(max_unique_ids_per_partition) AS max_unique_ids_per_partition
FROM sc_partition_stats
WHERE run_id = $run AND dropped_ids IS NOT NULL
GROUP BY ALL
ORDER BY table_name, step;

-- @query dropped_by_table
-- Per table: the IDs dropped, in how many of the steps, the limits and the IDs its SparseCore forward ops kept
-- (op_events), most dropped first.
-- @param run INTEGER The run (runs.run_id).
-- @input dropped_by_step(table_name VARCHAR, step INTEGER, dropped_ids BIGINT, max_ids_per_partition BIGINT, max_ids_kept BIGINT) The rows of dropped_by_step.
-- @column table_name VARCHAR The table group (stack).
-- @column dropped BIGINT IDs dropped.
-- @column steps BIGINT Steps with dropped-ID counts.
-- @column steps_dropping BIGINT Steps that dropped IDs.
-- @column max_ids_per_partition BIGINT The compiled limit of IDs.
-- @column max_ids_kept BIGINT Most IDs a partition kept.
-- @column kept BIGINT IDs the table's SparseCore forward ops looked up; NULL without such ops.
WITH d AS (SELECT table_name, sum(dropped_ids)::BIGINT AS dropped, count(DISTINCT step) AS steps,
                  count(DISTINCT step) FILTER (WHERE dropped_ids > 0) AS steps_dropping,
                  max(max_ids_per_partition) AS max_ids_per_partition,
                  max(max_ids_kept) AS max_ids_kept
           FROM dropped_by_step GROUP BY table_name),
     k AS (SELECT table_name, sum(ids)::BIGINT AS kept FROM op_events($run)
           WHERE category = 'sc_forward' AND table_name IS NOT NULL GROUP BY table_name)
SELECT d.*, k.kept FROM d LEFT JOIN k USING (table_name) ORDER BY dropped DESC;

-- @query host_drops
-- IDs the host dropped over every step (the `Dropped IDs` counter, else the preprocessing events' dropped_ids), those
-- the partitions dropped (sc_partition_stats), the IDs kept after dedup (preprocessing events' unique_ids) and before
-- dedup (their ids); NULL where unrecorded.
-- @param run INTEGER The run (runs.run_id).
-- @column counter_dropped BIGINT Sum of the `Dropped IDs` counter.
-- @column host_dropped BIGINT Sum of the host preprocessing events' dropped_ids.
-- @column kept BIGINT Sum of their unique_ids.
-- @column raw BIGINT Sum of their ids.
-- @column partition_dropped BIGINT Sum of sc_partition_stats.dropped_ids.
-- @column steps BIGINT Steps with host preprocessing events.
SELECT (SELECT sum(value) FROM counter_samples WHERE run_id = $run
        AND counter = 'Dropped IDs')::BIGINT AS counter_dropped,
       h.host_dropped, h.kept, h.raw,
       (SELECT sum(dropped_ids) FROM sc_partition_stats WHERE run_id = $run)::BIGINT
           AS partition_dropped,
       h.steps
FROM (SELECT sum(dropped_ids)::BIGINT AS host_dropped, sum(unique_ids)::BIGINT AS kept,
             sum(ids)::BIGINT AS raw, count(DISTINCT step) AS steps
      FROM op_events($run) WHERE category = 'host_preprocess') h;

-- @query step_totals
-- Minibatches per step (mean and max over the counted steps) and dropped IDs (total over every step), from the
-- store's step_minibatches view; NULL where nothing is recorded.
-- @param run INTEGER The run (runs.run_id).
-- @column minibatches_per_step_mean DOUBLE Mean minibatches per counted step.
-- @column minibatches_per_step_max INTEGER Most minibatches of a counted step.
-- @column dropped_ids BIGINT IDs dropped over every step.
SELECT avg(minibatches) FILTER (WHERE counted)::DOUBLE AS minibatches_per_step_mean,
       max(minibatches) FILTER (WHERE counted) AS minibatches_per_step_max,
       sum(dropped_ids)::BIGINT AS dropped_ids
FROM step_minibatches WHERE run_id = $run;

-- @query minibatches_by_step
-- Per step and table: the most minibatches a partition of the table needed (the per-step series of the minibatching
-- finding).
-- @param run INTEGER The run (runs.run_id).
-- @column step INTEGER Training step.
-- @column table_name VARCHAR The table group (stack).
-- @column minibatches INTEGER Most minibatches of the step.
SELECT step, table_name, max(minibatches) AS minibatches
FROM sc_partition_stats WHERE run_id = $run GROUP BY step, table_name ORDER BY table_name, step;

-- @query minibatching
-- Per table, how many minibatches its steps needed, the largest observed per-partition ID and unique-ID counts against
-- the compiled limits, and the SparseCore forward ops per step actually executed (one per minibatch per SparseCore, so
-- more ops than SparseCores means minibatching), with the fixed cost of an op from a least-squares fit of op duration
-- on its IDs.
-- @param run INTEGER The run (runs.run_id).
-- @column table_name VARCHAR The table group (stack).
-- @column steps BIGINT Steps with partition statistics.
-- @column max_minibatches INTEGER Most minibatches of a step.
-- @column mean_minibatches DOUBLE Mean minibatches per partition and step.
-- @column steps_minibatched BIGINT Steps split into more than one minibatch.
-- @column observed_max_ids BIGINT Most IDs a partition received.
-- @column observed_max_unique_ids BIGINT Most unique IDs a partition received.
-- @column max_ids_per_partition BIGINT The compiled limit of IDs.
-- @column max_unique_ids_per_partition BIGINT The compiled limit of unique IDs.
-- @column fwd_ops_per_step DOUBLE SparseCore forward ops of the table per step.
-- @column sparsecores BIGINT SparseCores that ran them.
-- @column fixed_ps_per_op DOUBLE Intercept of the fit of op duration on IDs.
-- @column fit_r2 DOUBLE R² of that fit.
WITH stats AS (
    SELECT table_name, count(DISTINCT step) AS steps, max(minibatches) AS max_minibatches,
           avg(minibatches)::DOUBLE AS mean_minibatches,
           count(DISTINCT step) FILTER (WHERE minibatches > 1) AS steps_minibatched,
           max(ids) AS observed_max_ids, max(unique_ids) AS observed_max_unique_ids,
           max(max_ids_per_partition) AS max_ids_per_partition,
           max(max_unique_ids_per_partition) AS max_unique_ids_per_partition
    FROM sc_partition_stats WHERE run_id = $run GROUP BY table_name
),
ops AS (  -- op_base and ids, not op_events: only the forward ops' table names are looked up
    SELECT tb.value AS table_name, (count(*) / count(DISTINCT b.step))::DOUBLE AS fwd_ops_per_step,
           count(DISTINCT (b.chip, coalesce(b.sc, b.core))) AS sparsecores,
           regr_intercept(b.dur_ps, b.ids)::DOUBLE AS fixed_ps_per_op, regr_r2(b.dur_ps, b.ids)::DOUBLE AS fit_r2
    FROM op_base($run) b JOIN strings tb ON tb.run_id = $run AND tb.string_id = b.table_id
    WHERE b.category_id IN (SELECT string_id FROM strings WHERE run_id = $run AND value = 'sc_forward')
    GROUP BY tb.value
)
SELECT s.*, o.fwd_ops_per_step, o.sparsecores, o.fixed_ps_per_op, o.fit_r2
FROM stats s LEFT JOIN ops o USING (table_name)
ORDER BY s.max_minibatches DESC, s.table_name;

-- @query spmem_groups
-- Per table group: its compiled limits, the observed maxima of its partitions' loads, how many tables the layout
-- stacks in it (1 without a layout) and its width.
-- @param run INTEGER The run (runs.run_id).
-- @column table_name VARCHAR The table group (stack).
-- @column limit_ids BIGINT The compiled limit of IDs.
-- @column limit_unique_ids BIGINT The compiled limit of unique IDs.
-- @column observed_ids BIGINT Most IDs a partition received.
-- @column observed_unique_ids BIGINT Most unique IDs a partition received.
-- @column max_minibatches INTEGER Most minibatches of a step.
-- @column tables BIGINT Tables of the group.
-- @column width BIGINT Embedding width (the layout's; NULL without one).
WITH s AS (SELECT table_name, max(max_ids_per_partition) AS limit_ids,
                  max(max_unique_ids_per_partition) AS limit_unique_ids,
                  max(ids) AS observed_ids, max(unique_ids) AS observed_unique_ids,
                  max(minibatches) AS max_minibatches
           FROM sc_partition_stats WHERE run_id = $run GROUP BY table_name),
     l AS (SELECT stack_name AS table_name, count(*) AS tables, max(width) AS width
           FROM stacking_layout($run) GROUP BY stack_name)
SELECT s.*, coalesce(l.tables, 1) AS tables, l.width FROM s LEFT JOIN l USING (table_name)
ORDER BY s.table_name;

-- @query spmem_recorded
-- The largest `SPMEM per tile` the run recorded (bytes), NULL if none.
-- @param run INTEGER The run (runs.run_id).
-- @column v DOUBLE The counter's largest value.
SELECT max(value) AS v FROM counter_samples WHERE run_id = $run AND counter = 'SPMEM per tile';
