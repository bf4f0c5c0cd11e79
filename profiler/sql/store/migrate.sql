-- @module store.migrate
-- What profiler/store.py's schema migrations run besides the DDL (profiler/schema.py) and the summaries they
-- rebuild (derive.*): version 4 -> 5 drops the tables tile_sums replaced and refills tile_sums for every run.

-- @statement drop_timeline_bins
-- Version 4 -> 5: timeline_bins (only the UI read it) is gone; tile_sums replaces it.
DROP TABLE IF EXISTS timeline_bins;

-- @statement drop_timeline_long
-- Version 4 -> 5: timeline_long is gone too.
DROP TABLE IF EXISTS timeline_long;

-- @statement clear_tile_sums
-- Version 4 -> 5: tile_sums emptied before every run's are stored (a store migrated from version 1 got them with
-- its other summaries).
DELETE FROM tile_sums;

-- @statement drop_analysis_reports
-- Version 7 -> 8: the reports kept as JSON are gone; run_analysis, run_figures, run_findings and run_notes replace them.
DROP TABLE IF EXISTS analysis_reports;

-- @statement drop_analysis_report_tables
-- Version 7 -> 8: the reports' Arrow tables are gone; run_step_split keeps the one read outside the analyzers.
DROP TABLE IF EXISTS analysis_report_tables;
