-- @module whatif.scenarios
-- What the labelled scenarios (whatif/scenarios/, the detector accuracy runs) read of a recorded run.
-- @include stdlib.memory

-- @query hbm_peak_share
-- The run's highest HBM peak share over its chips (NULL without HBM counters).
-- @param run INTEGER The run.
-- @column s DOUBLE The highest hbm_peaks.hbm_peak_share.
SELECT max(hbm_peak_share) AS s FROM hbm_peaks WHERE run_id = $run;
