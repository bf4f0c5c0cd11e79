-- @module analysis.stored
-- Each run's analysis as tables (analyzers/materialize.py writes them, analyzers/runstats.py reads them): the stamp
-- (run_analysis), the figures, findings and notes of every analyzer, and the wall-time split. A run's rows are
-- replaced as a whole, in one transaction, and read only while its stamp is current.

-- @statement delete_stamp
-- Delete the run's stamp.
-- @param run INTEGER The run (runs.run_id).
DELETE FROM run_analysis WHERE run_id = $run;

-- @statement delete_figures
-- Delete the run's figures.
-- @param run INTEGER The run (runs.run_id).
DELETE FROM run_figures WHERE run_id = $run;

-- @statement delete_findings
-- Delete the run's findings.
-- @param run INTEGER The run (runs.run_id).
DELETE FROM run_findings WHERE run_id = $run;

-- @statement delete_notes
-- Delete the run's notes.
-- @param run INTEGER The run (runs.run_id).
DELETE FROM run_notes WHERE run_id = $run;

-- @statement delete_step_split
-- Delete the run's wall-time split.
-- @param run INTEGER The run (runs.run_id).
DELETE FROM run_step_split WHERE run_id = $run;

-- @statement insert_stamp
-- Stamp the run's analysis: the run (its uuid) and the code that made the rows, or why there are none.
-- @param run INTEGER The run (runs.run_id).
-- @param analysis_sha1 VARCHAR SHA-1 of the analysis library's source.
-- @param build_s DOUBLE Seconds the analysis took.
-- @param error VARCHAR Why the run has no analysis rows, else NULL.
INSERT INTO run_analysis
SELECT run_id, uuid, $analysis_sha1, now()::TIMESTAMP, $build_s, $error FROM runs WHERE run_id = $run;

-- @statement insert_figures
-- The run's figures, one row per value (analyzers/materialize.py flattens them).
-- @param run INTEGER The run (runs.run_id).
-- @input figures(analyzer VARCHAR, ord INTEGER, parent INTEGER, key VARCHAR, path VARCHAR, type VARCHAR, int_value BIGINT, double_value DOUBLE, text_value VARCHAR) The rows.
INSERT INTO run_figures
SELECT $run, analyzer, ord, parent, key, path, type, int_value, double_value, text_value FROM figures;

-- @statement insert_findings
-- The run's findings.
-- @param run INTEGER The run (runs.run_id).
-- @input findings(analyzer VARCHAR, ord INTEGER, rank INTEGER, rule VARCHAR, severity VARCHAR, title VARCHAR, metric VARCHAR, value DOUBLE, unit VARCHAR, confidence VARCHAR, finding VARCHAR) The findings, each whole as JSON text.
INSERT INTO run_findings
SELECT $run, analyzer, ord, rank, rule, severity, title, metric, value, unit, confidence, finding::JSON FROM findings;

-- @statement insert_notes
-- The run's notes.
-- @param run INTEGER The run (runs.run_id).
-- @input notes(analyzer VARCHAR, ord INTEGER, note VARCHAR) The notes.
INSERT INTO run_notes SELECT $run, analyzer, ord, note FROM notes;

-- @statement insert_step_split
-- The run's wall-time split.
-- @param run INTEGER The run (runs.run_id).
-- @input split(chip INTEGER, step INTEGER, category VARCHAR, dur_ps BIGINT) The split (analyzers.rules.breakdown.step_breakdown).
INSERT INTO run_step_split SELECT $run, chip, step, category, dur_ps FROM split;

-- @query current
-- Whether the run's analysis rows are current: stamped from this run (its uuid), by this code, without error.
-- @param run INTEGER The run (runs.run_id).
-- @param analysis_sha1 VARCHAR SHA-1 of this code's analysis library.
-- @column current BOOLEAN Whether they are.
SELECT count(*) > 0 AS current
FROM run_analysis a JOIN runs r ON r.run_id = a.run_id AND r.uuid = a.uuid
WHERE a.run_id = $run AND a.analysis_sha1 = $analysis_sha1 AND a.error IS NULL;

-- @query stale_runs
-- The runs this code has not analysed (no stamp, another run's of that id, or other code's), oldest first. A run this
-- code stamped with an error is not among them: analysing it again would fail again.
-- @param analysis_sha1 VARCHAR SHA-1 of this code's analysis library.
-- @column run_id INTEGER The run.
SELECT r.run_id
FROM runs r LEFT JOIN run_analysis a ON a.run_id = r.run_id AND a.uuid = r.uuid AND a.analysis_sha1 = $analysis_sha1
WHERE a.run_id IS NULL
ORDER BY r.run_id;

-- @query figures
-- The run's figure rows, by analyzer and order (analyzers/runstats.py rebuilds the figures from them).
-- @param run INTEGER The run (runs.run_id).
-- @column analyzer VARCHAR The analyzer.
-- @column ord INTEGER Position among its rows.
-- @column parent INTEGER ord of its dict or list, or NULL.
-- @column key VARCHAR Its key in that dict, or NULL.
-- @column type VARCHAR Which column holds the value.
-- @column int_value BIGINT An int's or a bool's value.
-- @column double_value DOUBLE A float's value.
-- @column text_value VARCHAR A str's value.
SELECT analyzer, ord, parent, key, type, int_value, double_value, text_value
FROM run_figures WHERE run_id = $run ORDER BY analyzer, ord;

-- @query findings
-- The run's findings, whole, by analyzer and order.
-- @param run INTEGER The run (runs.run_id).
-- @column analyzer VARCHAR The analyzer.
-- @column finding VARCHAR The finding as JSON text.
SELECT analyzer, finding::VARCHAR AS finding FROM run_findings WHERE run_id = $run ORDER BY analyzer, ord;

-- @query notes
-- The run's notes, by analyzer and order.
-- @param run INTEGER The run (runs.run_id).
-- @column analyzer VARCHAR The analyzer.
-- @column note VARCHAR The note.
SELECT analyzer, note FROM run_notes WHERE run_id = $run ORDER BY analyzer, ord;

-- @query step_split
-- The run's wall-time split, by chip, step and the categories' order.
-- @param run INTEGER The run (runs.run_id).
-- @param categories VARCHAR[] The categories in order (analyzers/time_split.py CATEGORIES).
-- @column chip INTEGER The chip.
-- @column step INTEGER The step.
-- @column category VARCHAR The category.
-- @column dur_ps BIGINT Its time in the window, ps.
SELECT chip, step, category, dur_ps FROM run_step_split WHERE run_id = $run
ORDER BY chip, step, list_position($categories, category) NULLS LAST, category;

-- @query run
-- The run's row of runs (every column).
-- @param run INTEGER The run (runs.run_id).
SELECT * FROM runs WHERE run_id = $run;
