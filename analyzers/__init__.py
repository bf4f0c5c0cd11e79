"""SQL-first analyses over the store: findings with evidence and advice, and run comparison.

Analyzers read only what a trace holds (events, counters, steps, partition
statistics and the run's hardware header), never an emulator config, so they
work the same on imported captures. The list of analyzers is analyzers/registry.py.
"""
