"""Where an XProf capture's files are, and reading them: untrusted paths, checked before use.

    FILE.xplane.pb | RUN_DIR (one file per host) | LOGDIR/plugins/profile/<run>/  ->  runs

Every file is opened non-blocking and checked to be a regular file before a byte is read
(a FIFO, a device, a socket or a directory named like a capture is refused, never read),
and a file larger than this machine's memory is refused before it is read whole.
"""

from __future__ import annotations

import glob
import os

import numpy as np

from profiler.errors import TraceFormatError
from profiler.trace_file import check_regular, open_trace

XPLANE_SUFFIXES = (".xplane.pb", ".xspace.pb")


def max_capture_bytes() -> int:
    """The largest XSpace file read whole: this machine's physical memory (the decode needs more)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: no limit known
        return 1 << 62


def is_xplane_path(path: str) -> bool:
    """True for an XSpace file, or a directory holding them (run dir or logdir)."""
    if os.path.isdir(path):
        return True
    return path.endswith(XPLANE_SUFFIXES)


def find_runs(path: str) -> list[tuple[str, list[str]]]:
    """(run name, files) for a file, a run dir `plugins/profile/<run>/`, or a logdir."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise TraceFormatError(f"{path}: no such file or directory") from None
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    if not os.path.isdir(path):
        check_regular(path, mode)
        return [(session_run_name(path, stem(path), XPLANE_SUFFIXES), [path])]
    files = _xplanes_in(path)
    if files:
        return [(os.path.basename(os.path.normpath(path)), files)]
    runs = []
    for run_dir in sorted(glob.glob(os.path.join(glob.escape(path), "plugins", "profile", "*"))):
        files = _xplanes_in(run_dir) if os.path.isdir(run_dir) else []
        if files:
            runs.append((os.path.basename(run_dir), files))
    if not runs:
        raise TraceFormatError(
            f"{path}: no .xplane.pb files here or in {os.path.join(path, 'plugins', 'profile', '*')}"
        )
    return runs


def check_path(path: str) -> None:
    """Cheap checks before any write: files exist, are regular and are not empty."""
    for _, files in find_runs(path):
        for f in files:
            if os.path.getsize(f) == 0:
                raise TraceFormatError(f"{f}: empty file, not an XSpace (.xplane.pb)")


def files_of(path: str) -> list[str]:
    """Every capture file a path stands for (a file, or those of its runs)."""
    return [f for _, files in find_runs(path) for f in files]


def read_capture(path: str, pad: int = 0) -> bytes | np.ndarray:
    """The whole file, once it is known to be a regular file of a size this machine can hold.

    With `pad`, a uint8 array holding the file's bytes and then `pad` zero bytes (the numpy
    decoders read a few bytes past the end; reading into room for them saves a copy).
    """
    with open_trace(path) as f:
        size = os.fstat(f.fileno()).st_size
        limit = max_capture_bytes()
        if size > limit:
            raise TraceFormatError(
                f"{path}: {size:,} bytes, more than this machine's memory ({limit:,} bytes): not read"
            )
        if pad:
            data = np.empty(size + max(pad, 1), np.uint8)  # not zeroed first: a bytearray would be
            got = f.readinto(memoryview(data)[: size + 1])  # one byte more: a file that grew is seen
            data[size:] = 0
        else:
            data = f.read(size + 1)
            got = len(data)
    if got != size:  # the file changed while it was read
        raise TraceFormatError(f"{path}: file size changed while reading ({size:,} -> {got:,} bytes)")
    return data


def _xplanes_in(d: str) -> list[str]:
    """The capture files of a directory; an entry named like one but not a regular file is refused."""
    found = sorted({f for s in XPLANE_SUFFIXES for f in glob.glob(os.path.join(glob.escape(d), "*" + s))})
    for f in found:
        try:
            mode = os.stat(f).st_mode
        except FileNotFoundError:  # a dangling link
            raise TraceFormatError(f"{f}: no such file (a link to nothing?)") from None
        except OSError as e:  # a link loop, a name too long, ...
            raise TraceFormatError(f"{f}: cannot read ({e.strerror or e})") from None
        check_regular(f, mode)
    return found


def session_run_name(path: str, host: str, suffixes: tuple[str, ...]) -> str:
    """The default run name of one capture file `path` of host `host` (its name less the suffix).

    A file of a profiler session folder, `.../plugins/profile/<session>/<file>`, is named after
    its session (the file names there are host names, the same in every session): `<session>`,
    or `<session>/<host>` when the folder holds more than one file ending in one of `suffixes`
    (one run per host file ingested). Any other file keeps `host`.
    """
    session_dir = os.path.dirname(os.path.abspath(path))
    profile_dir = os.path.dirname(session_dir)
    if os.path.basename(profile_dir) != "profile" or os.path.basename(os.path.dirname(profile_dir)) != "plugins":
        return host
    session = os.path.basename(session_dir)
    try:
        names = os.listdir(session_dir)
    except OSError:  # a folder that lists nothing: the file alone
        names = []
    hosts = sum(1 for n in names if n.endswith(suffixes))
    return f"{session}/{host}" if hosts > 1 else session


def stem(path: str) -> str:
    """The file name without its capture suffix."""
    base = os.path.basename(path)
    for s in XPLANE_SUFFIXES:
        if base.endswith(s):
            return base[: -len(s)]
    return base
