"""Labelled scenarios for measuring the analyzers (issue 40): random base workloads, causes
injected into them one at a time or in pairs, each label verified by experiment, and scoring."""
