-- @module analysis.reports
-- Run reports kept in the store (analyzers/kept_reports.py): a run's report is replaced as a whole (its
-- analysis_reports row and its analysis_report_tables rows, in one transaction) and read back when current.

-- @statement delete_report
-- Delete the run's kept report.
-- @param run INTEGER The run (runs.run_id).
DELETE FROM analysis_reports WHERE run_id = $run;

-- @statement delete_report_tables
-- Delete the tables of the run's kept report.
-- @param run INTEGER The run (runs.run_id).
DELETE FROM analysis_report_tables WHERE run_id = $run;

-- @statement insert_report
-- Keep the run's report (nothing without a run).
-- @param run INTEGER The run (runs.run_id).
-- @param uuid VARCHAR runs.uuid of the run analysed.
-- @param code_sha1 VARCHAR SHA-1 of the source the report was made with.
-- @param analyses VARCHAR Each analyzer's findings, figures and notes, as JSON text.
INSERT INTO analysis_reports SELECT $run, $uuid, $code_sha1, $analyses WHERE $run IS NOT NULL;

-- @statement insert_report_table
-- Keep one table of the run's report (nothing without a run).
-- @param run INTEGER The run (runs.run_id).
-- @param analyzer VARCHAR The analyzer that made the table.
-- @param name VARCHAR The table's name in that analyzer's result.
-- @param arrow_ipc BLOB The table as an Arrow IPC stream.
INSERT INTO analysis_report_tables SELECT $run, $analyzer, $name, $arrow_ipc WHERE $run IS NOT NULL;

-- @query kept_analyses
-- The report kept for the run when it was made from this run (its uuid) by this code (code_sha1).
-- @param run INTEGER The run (runs.run_id).
-- @param code_sha1 VARCHAR SHA-1 of this code's source.
-- @column analyses JSON Each analyzer's findings, figures and notes.
SELECT k.analyses FROM analysis_reports k JOIN runs r ON r.run_id = k.run_id AND r.uuid = k.uuid WHERE k.run_id = $run AND k.code_sha1 = $code_sha1;

-- @query report_tables
-- The tables of the run's kept report.
-- @param run INTEGER The run (runs.run_id).
-- @column analyzer VARCHAR The analyzer that made the table.
-- @column name VARCHAR The table's name in that analyzer's result.
-- @column arrow_ipc BLOB The table as an Arrow IPC stream.
SELECT analyzer, name, arrow_ipc FROM analysis_report_tables WHERE run_id = $run;

-- @query run
-- The run's row of runs (every column).
-- @param run INTEGER The run (runs.run_id).
SELECT * FROM runs WHERE run_id = $run;
