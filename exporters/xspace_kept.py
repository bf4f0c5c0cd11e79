"""An imported XProf capture written back as XProf read it: its kept XSpace (profiler/xspace/source.py)
with the store's events put back into their lines.

    xspace_files.space (per host: planes, metadata, line headers)  +  xspace_events.xevent
    -> per host one XSpace file: each line's header, then its events (those of the chosen steps)

Stats keep their types and places (event metadata stats on the metadata), display names, HLO
text, device type strings, hostnames and the metadata planes are the capture's own; the events
are the file's bytes. A run of several files (hosts) is written as several files, in FILE's
directory under the capture's own file names (`host0.xplane.pb`, ...: XProf names each host by its
file), so that XProf, given that directory, reads the hosts as it read the capture. With --steps,
the events of other steps are left out (`_counters_` lines, kept whole, are not cut).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from profiler import sqltree
from profiler.errors import ScprofError
from profiler.safe_output import check_output_path, open_output, store_owned_paths
from profiler.wire import encode_varint
from profiler.xspace import encode as enc
from profiler.xspace import wire as xf
from profiler.xspace import xplane_pb2 as xp
from profiler.xspace.wire import XPlaneLite, split_space

SUFFIX = ".xplane.pb"


def has_kept_space(store, run_id: int) -> bool:
    """Whether the run is an imported capture that kept its XSpace."""
    return bool(sqltree.execute(store.con, "export.xspace.has_kept_space", run=run_id).fetchall())


def host_paths(path: str, names: list[str]) -> list[str]:
    """The output file of each host: `path` for a single host; for several, their files' own names
    (XProf names a host by its file) in `path`'s directory."""
    if len(names) == 1:
        return [path]
    return [os.path.join(os.path.dirname(path), os.path.basename(n)) for n in names]


def export_kept(store, run_id: int, path: str, steps: tuple[int, int] | None = None, check: bool = False) -> str:
    """Write run `run_id`'s kept XSpace (one file per host); returns a one-line summary."""
    owned = store_owned_paths(store)
    files = sqltree.query(store.con, "export.xspace.kept_files", run=run_id).to_pylist()
    paths = host_paths(path, [f["file"] for f in files])
    for p in paths:
        check_output_path(p, owned)  # before the work: a refused output costs nothing
    total = {"events": 0, "planes": 0, "kept": 0}
    for f, out in zip(files, paths, strict=True):
        space, counts = build_host(store, run_id, f["host"], steps)
        with open_output(out, owned) as fh:  # a temporary file renamed over `out` at the end
            fh.write(space)
        if check:
            msg = xp.XSpace.FromString(space)
            n = sum(len(ln.events) for p in msg.planes for ln in p.lines)
            if n != counts["events"] + counts["kept"]:
                raise ScprofError(
                    f"{out}: check failed: file holds {n} events, expected {counts['events'] + counts['kept']}"
                )
        for k in total:
            total[k] += counts[k]
    where = paths[0] if len(paths) == 1 else f"{len(paths)} host files in {os.path.dirname(paths[0]) or '.'}"
    line = (
        f"wrote {where}: {total['events']:,} events of the capture, {total['kept']:,} counter samples "
        f"kept, on {total['planes']} planes (its own XSpace)"
    )
    return line + (" (checked)" if check else "")


def build_host(store, run_id: int, host: int, steps: tuple[int, int] | None) -> tuple[bytes, dict]:
    """One host's XSpace: its kept space with the events of the chosen steps back in their lines."""
    ((space,),) = sqltree.execute(store.con, "export.xspace.kept_space", run=run_id, host=host).fetchall()
    if steps:
        ev = sqltree.query(
            store.con, "export.xspace.kept_events_of_steps", run=run_id, host=host, step_a=steps[0], step_b=steps[1]
        )
    else:
        ev = sqltree.query(store.con, "export.xspace.kept_events", run=run_id, host=host)
    plane = ev.column("plane").to_numpy()
    line = ev.column("line").to_numpy()
    xevent = ev.column("xevent").combine_chunks().cast(pa.large_binary())
    bufs = xevent.buffers()
    offsets = np.frombuffer(bufs[1], np.int64)[xevent.offset : xevent.offset + len(xevent) + 1]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    key = plane.astype(np.int64) * (1 << 32) + line
    order = np.argsort(key, kind="stable")  # by plane and line, file order within a line
    key_sorted = key[order]
    planes, hosts = split_space(bytes(space), f"run {run_id} host {host}")
    out = bytearray()
    counts = {"events": len(key), "planes": len(planes), "kept": 0}
    for k, raw in enumerate(planes):
        msg = XPlaneLite.FromString(raw)
        lines = list(msg.lines)
        del msg.lines[:]
        body = bytearray(msg.SerializeToString())
        for i, ln in enumerate(lines):
            counts["kept"] += len(ln.events)
            lo, hi = np.searchsorted(key_sorted, [k * (1 << 32) + i, k * (1 << 32) + i + 1])
            text = ln.SerializeToString() + _events(data, offsets, order[lo:hi])
            body += enc.key(xf.PLANE_LINES, 2) + encode_varint(len(text)) + text
        out += enc.key(xf.SPACE_PLANES, 2) + encode_varint(len(body)) + body
    for h in hosts:
        out += enc.key(xf.SPACE_HOSTNAMES, 2) + encode_varint(len(h.encode())) + h.encode()
    return bytes(out), counts


def _events(data: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> bytes:
    """The XLine `events` fields of events `rows` (their XEvent messages in `data` at `offsets`)."""
    if not len(rows):
        return b""
    starts, ends = offsets[rows], offsets[rows + 1]
    lens = ends - starts
    at = np.concatenate([[0], np.cumsum(lens)])
    lo, hi = int(starts[0]), int(ends[-1])
    if at[-1] == hi - lo:  # consecutive events (a whole line): one slice
        picked = data[lo:hi]
    else:  # rows ascending: a mask over their span (+1 where one starts, -1 where it ends)
        edge = np.zeros(hi - lo + 1, np.int8)
        np.add.at(edge, starts - lo, 1)
        np.add.at(edge, ends - lo, -1)
        picked = data[lo:hi][np.cumsum(edge[:-1], dtype=np.int8).astype(bool)]
    return enc.encode_rows(len(rows), enc.message_pieces(xf.LINE_EVENTS, (picked, at)))[0].tobytes()
