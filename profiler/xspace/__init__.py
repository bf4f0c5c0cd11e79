"""The XProf XSpace (`.xplane.pb`) import and the pieces its export shares, in pipeline order.

    read.py           the files of a capture: a file, a run directory, a logdir (`plugins/profile/<run>/`)
    wire.py           the wire format: field numbers, the numpy field walker, a file's planes and hostnames
    decode_native.py  each line's events decoded in C (_events.c, _planes.c, _wire.h)
    decode_python.py  the fallback for the lines the native walk leaves (and the reference for tests)
    columns.py        decoded events as numpy columns (LineEvents), what both decoders give
    decode.py         drives the above for one run's files into a Decoded, mapping each line in turn
    map_names.py      every name of the mapping (planes, lines, stats), shared with the export
    map_lines.py      a line's events -> events rows, typed columns, event_args, counter samples
    map_kinds.py      track kinds and event categories of a real capture
    map_facts.py      the runs row of a capture (and of one scprof exported)
    check.py          the range checks of files and values on the way
    source.py         a real capture's XSpace, kept for `scprof export xspace`
    store.py          a Decoded into the store
    encode.py         numpy encoding of XSpace rows (the exporters')
    xplane_pb2.py     generated from proto/xplane.proto (`make proto`)

Varints are profiler/wire.py's (the one place Python reads and writes them); the C walks have
their own in _wire.h.
"""
