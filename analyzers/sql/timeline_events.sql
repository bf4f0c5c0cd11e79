-- timeline_events: the events of a run as (chip, start_ps, end_ps, priority) for the
-- wall-time split (analyzers/timeline.py). priority indexes timeline.CATEGORIES;
-- events without a category are classed by their track (tc_other, sc_other,
-- host_other). Host events (chip -1) are copied onto every chip, since the host
-- feeds them all; counter tracks and zero-length events take no time.
WITH chips AS (SELECT DISTINCT chip FROM {step_windows}),
ev AS (
    SELECT t.chip, e.start_ps, e.start_ps + e.dur_ps AS end_ps,
           CASE coalesce(c.value, CASE t.kind WHEN 'tensorcore' THEN 'tc_other'
                                              WHEN 'host' THEN 'host_other' ELSE 'sc_other' END)
               WHEN 'tc_forward' THEN 0 WHEN 'tc_backward' THEN 1 WHEN 'tc_collective' THEN 2
               WHEN 'tc_other' THEN 3 WHEN 'sc_forward' THEN 4 WHEN 'sc_backward' THEN 5
               WHEN 'sc_collective' THEN 6 WHEN 'sc_other' THEN 7 WHEN 'host_to_device' THEN 8
               WHEN 'host_preprocess' THEN 9 ELSE 10 END::TINYINT AS priority
    FROM events e
    JOIN tracks t USING (run_id, track_id)
    LEFT JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id
    WHERE e.run_id = $run AND e.dur_ps > 0 AND t.kind <> 'counter'
)
SELECT chip, start_ps, end_ps, priority FROM ev WHERE chip >= 0
UNION ALL
SELECT chips.chip, ev.start_ps, ev.end_ps, ev.priority FROM ev, chips WHERE ev.chip < 0
