-- op_tracks: the tracks whose events are units of work (ops): every track but counter
-- tracks and the step, module and annotation lines (`Steps`, `XLA Modules`, `Sparse Core Steps`,
-- `Sparse Core Modules`, `Annotations`: their events span the ops below them; `Annotations`
-- holds a Chrome trace's GPU annotations and profiler spans, profiler/chrome_json_to_store.py).
-- default_category is the category of an op that records none, by its track: tc_other, sc_other, host_other, or
-- device_compute on a GPU, a CPU running XLA ops or another device.
SELECT run_id, track_id, chip, core, kind AS track_kind, plane, line,
       CASE kind WHEN 'tensorcore' THEN 'tc_other' WHEN 'host' THEN 'host_other'
                 WHEN 'gpu' THEN 'device_compute' WHEN 'cpu' THEN 'device_compute' WHEN 'device' THEN 'device_compute'
                 ELSE 'sc_other' END
           AS default_category
FROM tracks
WHERE kind <> 'counter' AND line NOT IN ('Steps', 'XLA Modules', 'Sparse Core Steps', 'Sparse Core Modules', 'Annotations')
