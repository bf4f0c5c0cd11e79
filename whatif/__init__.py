"""The what-if engine: re-simulate a stored emulated run with changes, and measure them.

It sits above the emulator (sim_backend) and the analyzers, which never import it: it
rebuilds a run's config from the store, applies a finding's fix or a tuner's overrides,
simulates the trials (in process, or on Dask workers), ingests their traces into the same
store, and compares step times with the interval `scprof compare` computes. `verify` proves
each finding's fix, `tune` searches for a better config, `attribute` splits a gain between
the changes that made it. Every trial is recorded in the store's `whatif_trials` table.
"""
