"""The analyzers: one module per question a user asks of a run, each with `NAME`, `QUESTION` and
`analyze(ctx) -> Analysis` (listed in analyzers/registry.py), and the rule modules they call
(device_wait for idle_gaps on real captures, spmem for memory, padding for stacking).

What they share lives one level up: the run's context (analyzers/context.py), findings
(findings.py), the computation kernels (op_arrays.py, time_split.py, gap_search.py,
core_busy.py), compare and the analysis tables (materialize, runstats).
"""
