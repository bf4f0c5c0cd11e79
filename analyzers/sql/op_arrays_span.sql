-- op_arrays_span: op_arrays (sql/op_arrays.sql) restricted to the events that overlap
-- [$lo, $hi): starting before $hi and ending after $lo. $max_dur, the run's longest event,
-- bounds how early such an event starts, so the scan's zonemaps skip the rest.
SELECT track_id, event_id, coalesce(step, -1) AS step, start_ps, start_ps + dur_ps AS end_ps,
       coalesce(category_id, -1) AS category_id, name_id
FROM events
WHERE run_id = $run AND list_contains($tracks, track_id)
  AND start_ps < $hi AND start_ps >= $lo - $max_dur AND start_ps + dur_ps > $lo
