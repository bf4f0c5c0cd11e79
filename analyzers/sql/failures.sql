-- failures: compile errors and out-of-memory failures recorded with the run, as
-- events of category 'failure' (the emulator writes one on the host's Failures
-- line; its `message` argument holds the error as the compiler or runtime words it, its
-- bytes what was asked for and its `capacity_bytes` argument what there was room for).
SELECT e.event_id, n.value AS kind, e.start_ps, a.string_value AS message,
       nullif(e.bytes, 0) AS requested_bytes, nullif(cap.int_value, 0) AS capacity_bytes
FROM events e
JOIN strings n ON n.run_id = e.run_id AND n.string_id = e.name_id
JOIN strings c ON c.run_id = e.run_id AND c.string_id = e.category_id
LEFT JOIN event_args a ON a.run_id = e.run_id AND a.event_id = e.event_id AND a.key = 'message'
LEFT JOIN event_args cap ON cap.run_id = e.run_id AND cap.event_id = e.event_id AND cap.key = 'capacity_bytes'
WHERE e.run_id = $run AND c.value = 'failure'
ORDER BY e.start_ps
