-- @module analysis.compare
-- Two runs compared (analyzers/compare.py): their configurations, the wall-time categories, each op's time and events
-- per counted step with the sums of squares its significance needs, and each embedding table's SparseCore time.
-- @include stdlib.steps, stdlib.ops

-- @query configs
-- The two runs' configurations, the baseline's first.
-- @param base INTEGER The baseline run (runs.run_id).
-- @param cand INTEGER The candidate run (runs.run_id).
-- @column config JSON The run's configuration (runs.config).
SELECT config FROM runs WHERE run_id IN ($base, $cand) ORDER BY run_id = $cand;

-- @query breakdown_delta
-- Mean time per counted step and chip of each wall-time category, both runs: a category's time over every (chip,
-- counted step) window, those where it does not occur included, so the means are in proportion to the breakdown's
-- shares and sum to the mean window; the largest change first.
-- @input base_breakdown(chip INTEGER, step INTEGER, category VARCHAR, dur_ps BIGINT) The baseline's step breakdown over its counted steps.
-- @input cand_breakdown(chip INTEGER, step INTEGER, category VARCHAR, dur_ps BIGINT) The candidate's.
-- @column category VARCHAR The wall-time category.
-- @column base_ps DOUBLE The baseline's mean time per window, ps.
-- @column cand_ps DOUBLE The candidate's.
-- @column delta_ps DOUBLE cand_ps - base_ps.
WITH b AS (SELECT category, sum(dur_ps) / (SELECT count(DISTINCT (chip, step)) FROM base_breakdown) AS ps
           FROM base_breakdown GROUP BY category),
     c AS (SELECT category, sum(dur_ps) / (SELECT count(DISTINCT (chip, step)) FROM cand_breakdown) AS ps
           FROM cand_breakdown GROUP BY category)
SELECT category, coalesce(b.ps, 0)::DOUBLE AS base_ps, coalesce(c.ps, 0)::DOUBLE AS cand_ps,
       (coalesce(c.ps, 0) - coalesce(b.ps, 0))::DOUBLE AS delta_ps
FROM b FULL JOIN c USING (category) ORDER BY abs(delta_ps) DESC, category;

-- @query op_delta
-- Per-op deltas (like XProf's diff of two sessions): each op's time and events per counted step (step_times.counted,
-- the steps every summary covers; a step where the op does not run counts 0), and the sums of squares its
-- significance needs (summed as integers: a DOUBLE sum's last digits depend on the order DuckDB's threads add in, and
-- so did the interval's); the largest change first.
-- @param base INTEGER The baseline run (runs.run_id).
-- @param cand INTEGER The candidate run (runs.run_id).
-- @column track_kind VARCHAR tracks.kind of the op's tracks.
-- @column name VARCHAR The op's name.
-- @column base_events_per_step DOUBLE The baseline's events per counted step.
-- @column cand_events_per_step DOUBLE The candidate's.
-- @column base_ps_per_step DOUBLE The baseline's time per counted step, ps.
-- @column cand_ps_per_step DOUBLE The candidate's.
-- @column delta_ps_per_step DOUBLE cand - base, ps (a missing side counts 0).
-- @column base_steps BIGINT The baseline's counted steps.
-- @column cand_steps BIGINT The candidate's.
-- @column base_ps_sq DOUBLE The baseline's sum over counted steps of the squared time per step.
-- @column cand_ps_sq DOUBLE The candidate's.
WITH counted AS (SELECT run_id, step FROM step_times WHERE run_id IN ($base, $cand) AND counted),
steps AS (SELECT run_id, count(*) AS steps FROM counted GROUP BY run_id),
per_step AS (
    SELECT e.run_id, t.track_kind, e.name_id, e.step, count(*) AS events, sum(e.dur_ps) AS ps
    FROM events e
    JOIN op_tracks t USING (run_id, track_id)
    JOIN counted c USING (run_id, step)
    WHERE e.run_id IN ($base, $cand)
    GROUP BY ALL
),
per_op AS (
    SELECT p.run_id, p.track_kind, n.value AS name, sum(p.events) AS events, sum(p.ps) AS ps,
           sum(p.ps::HUGEINT * p.ps)::DOUBLE AS ps_sq,
           any_value(s.steps) AS steps
    FROM per_step p
    JOIN strings n ON n.run_id = p.run_id AND n.string_id = p.name_id
    JOIN steps s ON s.run_id = p.run_id
    GROUP BY ALL
    HAVING sum(p.ps) > 0
),
b AS (SELECT * FROM per_op WHERE run_id = $base), c AS (SELECT * FROM per_op WHERE run_id = $cand)
SELECT coalesce(b.track_kind, c.track_kind) AS track_kind, coalesce(b.name, c.name) AS name,
       b.events / b.steps AS base_events_per_step, c.events / c.steps AS cand_events_per_step,
       b.ps / b.steps AS base_ps_per_step, c.ps / c.steps AS cand_ps_per_step,
       coalesce(c.ps / c.steps, 0) - coalesce(b.ps / b.steps, 0) AS delta_ps_per_step,
       b.steps AS base_steps, c.steps AS cand_steps, b.ps_sq AS base_ps_sq, c.ps_sq AS cand_ps_sq
FROM b FULL JOIN c ON b.track_kind = c.track_kind AND b.name = c.name
ORDER BY abs(delta_ps_per_step) DESC, track_kind, name;

-- @query table_delta
-- Per-table deltas: SparseCore op time per step of each embedding table (the store's sc_table_stats view), the
-- largest change first.
-- @param base INTEGER The baseline run (runs.run_id).
-- @param cand INTEGER The candidate run (runs.run_id).
-- @column table_name VARCHAR The embedding table.
-- @column base_ops_per_step DOUBLE The baseline's SparseCore ops per step.
-- @column cand_ops_per_step DOUBLE The candidate's.
-- @column base_ps_per_step DOUBLE The baseline's SparseCore time per step, ps.
-- @column cand_ps_per_step DOUBLE The candidate's.
-- @column delta_ps_per_step DOUBLE cand - base, ps (a missing side counts 0).
WITH b AS (SELECT * FROM sc_table_stats WHERE run_id = $base), c AS (SELECT * FROM sc_table_stats WHERE run_id = $cand)
SELECT coalesce(b.table_name, c.table_name) AS table_name,
       b.ops / nullif(b.steps, 0) AS base_ops_per_step, c.ops / nullif(c.steps, 0) AS cand_ops_per_step,
       b.total_ps / nullif(b.steps, 0) AS base_ps_per_step, c.total_ps / nullif(c.steps, 0) AS cand_ps_per_step,
       coalesce(c.total_ps / nullif(c.steps, 0), 0) - coalesce(b.total_ps / nullif(b.steps, 0), 0) AS delta_ps_per_step
FROM b FULL JOIN c ON b.table_name = c.table_name
ORDER BY abs(delta_ps_per_step) DESC;
