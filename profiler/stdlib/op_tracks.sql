-- op_tracks: the tracks whose events are units of work (ops): every track but counter
-- tracks, the step, module and annotation lines (`Steps`, `XLA Modules`, `Sparse Core Steps`,
-- `Sparse Core Modules`, `Annotations`: their events span the ops below them; `Annotations`
-- holds a Chrome trace's GPU annotations and profiler spans, profiler/chrome_json_to_store.py)
-- and `Async XLA Ops` (an
-- async op's window from its start to its done, which overlaps the ops the core runs
-- meanwhile: async_spans), and the lines XProf derives from the ops of other lines, which
-- would count their time twice: `TensorFlow Ops`, `TensorFlow Name Scope`, `Source code`
-- (framework ops and scopes over the kernels), and on a GPU `XLA Ops` (over its streams'
-- kernels); and `XLA TraceMe` (the TPU runtime's own markers: dependency waits, barriers).
-- default_category is the
-- category of an op that records none, by its track: tc_other, sc_other, host_other, or
-- device_compute on a GPU, a CPU running XLA ops or another device.
SELECT run_id, track_id, chip, core, kind AS track_kind, plane, line,
       CASE kind WHEN 'tensorcore' THEN 'tc_other' WHEN 'host' THEN 'host_other'
                 WHEN 'gpu' THEN 'device_compute' WHEN 'cpu' THEN 'device_compute' WHEN 'device' THEN 'device_compute'
                 ELSE 'sc_other' END
           AS default_category
FROM tracks
WHERE kind <> 'counter'
  AND line NOT IN ('Steps', 'XLA Modules', 'Sparse Core Steps', 'Sparse Core Modules', 'Annotations', 'Async XLA Ops',
                   'TensorFlow Ops', 'TensorFlow Name Scope', 'Source code', 'XLA TraceMe')
  AND NOT (kind = 'gpu' AND line = 'XLA Ops')
