-- op_arrays: the events of op_tracks ($tracks: their ids) as the narrow columns the
-- numpy interval code reads (analyzers/op_arrays.py). A filter, not a join, so the
-- scan keeps the file order (time order within a track, as a rule) and sorts nothing.
SELECT track_id, event_id, coalesce(step, -1) AS step, start_ps, start_ps + dur_ps AS end_ps,
       coalesce(category_id, -1) AS category_id, name_id
FROM events
WHERE run_id = $run AND list_contains($tracks, track_id)
