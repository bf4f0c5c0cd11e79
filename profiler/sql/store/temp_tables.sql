-- @module store.temp_tables
-- Empty TEMP tables of the current schema, one per table a read-only connection to an older store lacks
-- (profiler/store.py's read-only adapters): written by tools/gen_sql.py from profiler/schema.py's TABLES.

-- @statement temp_whatif_trials
-- An empty TEMP whatif_trials.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE whatif_trials (run_id INTEGER, session VARCHAR, purpose VARCHAR, seq INTEGER, label VARCHAR, overrides JSON, derive_limits BOOLEAN, trial_run_id INTEGER, ref_run_id INTEGER, step_time_ps DOUBLE, ref_step_time_ps DOUBLE, change DOUBLE, ci_low DOUBLE, ci_high DOUBLE, verdict VARCHAR, accepted BOOLEAN, reason VARCHAR, created_at TIMESTAMP);

-- @statement temp_analysis_reports
-- An empty TEMP analysis_reports.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE analysis_reports (run_id INTEGER, uuid VARCHAR, code_sha1 VARCHAR, analyses JSON, PRIMARY KEY (run_id));

-- @statement temp_analysis_report_tables
-- An empty TEMP analysis_report_tables.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE analysis_report_tables (run_id INTEGER, analyzer VARCHAR, name VARCHAR, arrow_ipc BLOB, PRIMARY KEY (run_id, analyzer, name));

-- @statement temp_xspace_files
-- An empty TEMP xspace_files.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE xspace_files (run_id INTEGER, host INTEGER, file VARCHAR, space BLOB, PRIMARY KEY (run_id, host));

-- @statement temp_xspace_events
-- An empty TEMP xspace_events.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE xspace_events (run_id INTEGER, event_id BIGINT, host INTEGER, plane INTEGER, line INTEGER, xevent BLOB);
