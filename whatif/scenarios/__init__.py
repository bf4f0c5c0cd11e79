"""Labelled scenarios for measuring the analyzers (docs/analyzers.md): random base workloads, causes
injected into them one at a time or in pairs, each label verified by experiment, and scoring."""
