"""Recording: a simulated run written as a trace as it is simulated (`scprof record`).

record.py runs a config behind the CLI and summarises the run; stream.py simulates and writes the
trace as it goes; instrument.py turns the simulation's tasks into the profiler's Recorder calls
on the simulated clock; check_events.py adds the debug-check and quantization results.
"""
