-- @module ingest.flows
-- Flows: which event's work feeds which, per step and chip, found from the data alone (profiler/flows.py:
-- flows_of_step, for the UI's trace viewer). Each query covers every step, or the steps [step_lo, step_hi).
-- Their rows: dir (an index into profiler/flows.FLOW_KINDS), step, chip, src and dst (event ids).

-- @query flows
-- Flows, one per direction, step and chip, between the ops lines' events:
--   forward:  the last SparseCore op of step i on chip c that starts before the first TensorCore op of step i
--             on chip c  ->  that TensorCore op;
--   backward: the last TensorCore op of step i on chip c  ->  the first SparseCore op of step i on chip c that
--             starts at or after its end.
-- Ties go to the lower event_id; a flow is kept only if its origin starts in an earlier nanosecond than its
-- end (Perfetto draws arrows forward in time). (start_ps, event_id) orders are packed into one HUGEINT key
-- (k_asc, k_desc: event_id descending): DuckDB's arg_min/arg_max compare those much faster than a struct;
-- SparseCore ops are joined and aggregated once for both directions.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN Every step (step_lo and step_hi unused).
-- @param step_lo INTEGER The first step, unless all_steps.
-- @param step_hi INTEGER The step after the last, unless all_steps.
-- @param tc_line VARCHAR The TensorCore ops line (profiler/flows.TC_OPS_LINE).
-- @param sc_line VARCHAR The SparseCore ops line (profiler/flows.SC_OPS_LINE).
-- @column dir INTEGER 0: sc_fwd->tc_fwd, 1: tc_bwd->sc_bwd.
-- @column step INTEGER Step.
-- @column chip INTEGER Chip.
-- @column src BIGINT The origin event.
-- @column dst BIGINT The end event.
WITH ops AS NOT MATERIALIZED (  -- scanned twice rather than held in memory
  SELECT e.event_id, e.step, t.chip, t.kind = 'tensorcore' AS tc, e.start_ps, e.start_ps + e.dur_ps AS end_ps,
         (e.start_ps::HUGEINT << 64) + (e.event_id::HUGEINT + 9223372036854775808) AS k_asc,
         (e.start_ps::HUGEINT << 64) + (9223372036854775807 - e.event_id::HUGEINT) AS k_desc
  FROM events e JOIN tracks t ON t.run_id = e.run_id AND t.track_id = e.track_id
  WHERE e.run_id = $run AND ($all_steps OR (e.step >= $step_lo AND e.step < $step_hi)) AND e.step IS NOT NULL AND t.chip >= 0
    AND ((t.kind = 'tensorcore' AND t.line = $tc_line)
         OR (t.kind IN ('sparsecore', 'sc_tile') AND t.line = $sc_line))
),
tc AS (
  SELECT step, chip, arg_min(event_id, k_asc) AS first_id, min(start_ps) AS first_start,
         arg_max(event_id, k_desc) AS last_id, max(start_ps) AS last_start, arg_max(end_ps, k_desc) AS last_end
  FROM ops WHERE tc GROUP BY step, chip
),
sc AS (
  SELECT o.step, o.chip,
         arg_max(o.event_id, o.k_desc) FILTER (WHERE o.start_ps < t.first_start) AS fwd_src,
         max(o.start_ps) FILTER (WHERE o.start_ps < t.first_start) AS fwd_src_start,
         arg_min(o.event_id, o.k_asc) FILTER (WHERE o.start_ps >= t.last_end) AS bwd_dst,
         min(o.start_ps) FILTER (WHERE o.start_ps >= t.last_end) AS bwd_dst_start,
         any_value(t.first_id) AS fwd_dst, any_value(t.first_start) AS fwd_dst_start,
         any_value(t.last_id) AS bwd_src, any_value(t.last_start) AS bwd_src_start
  FROM ops o JOIN tc t ON o.step = t.step AND o.chip = t.chip
  WHERE NOT o.tc AND (o.start_ps < t.first_start OR o.start_ps >= t.last_end)
  GROUP BY o.step, o.chip
)
SELECT dir, step, chip, src, dst FROM (
  SELECT 0 AS dir, step, chip, fwd_src AS src, fwd_dst AS dst, fwd_src_start AS src_start, fwd_dst_start AS dst_start
  FROM sc WHERE fwd_src IS NOT NULL
  UNION ALL
  SELECT 1, step, chip, bwd_src, bwd_dst, bwd_src_start, bwd_dst_start FROM sc WHERE bwd_dst IS NOT NULL)
WHERE src_start // 1000 < dst_start // 1000
ORDER BY step, chip, dir;

-- @query host_flows
-- Host -> device flows, one per step and chip, for the viewer: the host's transfer of step i to chip c (an
-- event of step i on a host track of chip c whose line is "Host to HBM ...", e.g. "Host to HBM TPU:c"; the
-- last one to start when there are several, ties to the lower event_id)  ->  the first SparseCore op of step
-- i on chip c (lowest start_ps, ties to the lower event_id), on the ops line.
-- @param run INTEGER The run.
-- @param all_steps BOOLEAN Every step (step_lo and step_hi unused).
-- @param step_lo INTEGER The first step, unless all_steps.
-- @param step_hi INTEGER The step after the last, unless all_steps.
-- @param sc_line VARCHAR The SparseCore ops line (profiler/flows.SC_OPS_LINE).
-- @column dir INTEGER 2: host->device.
-- @column step INTEGER Step.
-- @column chip INTEGER Chip.
-- @column src BIGINT The host's transfer.
-- @column dst BIGINT The SparseCore op.
WITH xfer AS (
  SELECT e.step, t.chip,
         arg_max(e.event_id, (e.start_ps::HUGEINT << 64) + (9223372036854775807 - e.event_id::HUGEINT)) AS src
  FROM events e JOIN tracks t ON t.run_id = e.run_id AND t.track_id = e.track_id
  WHERE e.run_id = $run AND ($all_steps OR (e.step >= $step_lo AND e.step < $step_hi)) AND e.step IS NOT NULL AND t.kind = 'host' AND t.chip >= 0
    AND starts_with(t.line, 'Host to HBM')
  GROUP BY e.step, t.chip
),
sc AS (
  SELECT e.step, t.chip,
         arg_min(e.event_id, (e.start_ps::HUGEINT << 64) + (e.event_id::HUGEINT + 9223372036854775808)) AS dst
  FROM events e JOIN tracks t ON t.run_id = e.run_id AND t.track_id = e.track_id
  WHERE e.run_id = $run AND ($all_steps OR (e.step >= $step_lo AND e.step < $step_hi)) AND e.step IS NOT NULL AND t.chip >= 0
    AND t.kind IN ('sparsecore', 'sc_tile') AND t.line = $sc_line
  GROUP BY e.step, t.chip
)
SELECT 2 AS dir, step, chip, src, dst FROM xfer JOIN sc USING (step, chip)
ORDER BY step, chip;
