-- @module store.temp_tables
-- Empty TEMP tables of the current schema, one per table a read-only connection to an older store lacks
-- (profiler/store.py's read-only adapters): written by tools/gen_sql.py from profiler/schema.py's TABLES.

-- @statement temp_whatif_trials
-- An empty TEMP whatif_trials.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE whatif_trials (run_id INTEGER, session VARCHAR, purpose VARCHAR, seq INTEGER, label VARCHAR, overrides JSON, derive_limits BOOLEAN, trial_run_id INTEGER, ref_run_id INTEGER, step_time_ps DOUBLE, ref_step_time_ps DOUBLE, change DOUBLE, ci_low DOUBLE, ci_high DOUBLE, verdict VARCHAR, accepted BOOLEAN, reason VARCHAR, created_at TIMESTAMP);

-- @statement temp_xspace_files
-- An empty TEMP xspace_files.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE xspace_files (run_id INTEGER, host INTEGER, file VARCHAR, space BLOB, PRIMARY KEY (run_id, host));

-- @statement temp_xspace_events
-- An empty TEMP xspace_events.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE xspace_events (run_id INTEGER, event_id BIGINT, host INTEGER, plane INTEGER, line INTEGER, xevent BLOB);

-- @statement temp_run_analysis
-- An empty TEMP run_analysis.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE run_analysis (run_id INTEGER, uuid VARCHAR, analysis_sha1 VARCHAR, built_at TIMESTAMP, build_s DOUBLE, error VARCHAR, PRIMARY KEY (run_id));

-- @statement temp_run_figures
-- An empty TEMP run_figures.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE run_figures (run_id INTEGER, analyzer VARCHAR, ord INTEGER, parent INTEGER, key VARCHAR, path VARCHAR, type VARCHAR, int_value BIGINT, double_value DOUBLE, text_value VARCHAR, PRIMARY KEY (run_id, analyzer, ord));

-- @statement temp_run_findings
-- An empty TEMP run_findings.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE run_findings (run_id INTEGER, analyzer VARCHAR, ord INTEGER, rank INTEGER, rule VARCHAR, severity VARCHAR, title VARCHAR, metric VARCHAR, value DOUBLE, unit VARCHAR, confidence VARCHAR, finding JSON, PRIMARY KEY (run_id, analyzer, ord));

-- @statement temp_run_notes
-- An empty TEMP run_notes.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE run_notes (run_id INTEGER, analyzer VARCHAR, ord INTEGER, note VARCHAR, PRIMARY KEY (run_id, analyzer, ord));

-- @statement temp_run_step_split
-- An empty TEMP run_step_split.
-- @generated tools/gen_sql.py (TABLES of profiler/schema.py)
CREATE TEMP TABLE run_step_split (run_id INTEGER, chip INTEGER, step INTEGER, category VARCHAR, dur_ps BIGINT);
