"""Hostile-input campaign, the what-if and store cases: the what-if commands (`analyze
--verify`, `compare --attribute`, `tune`), paths that traces and stored configs name,
refusals that must leave the store as it was, the folders `--out` names, damaged stores and
full disks.

Registered into _campaign_kit's CASES on import; tools/hostile_campaign.py runs them
after its own.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
from _campaign_kit import REPO, Campaign, Result, accepted, case, clean, refused, refuses_untouched

SECRET = "SCPROF-CAMPAIGN-SECRET-7f3a"
LIMITS = REPO / "configs" / "limits" / "baseline_limits.toml"


# -- setup: a run recorded with a limits file, and the file then swapped for something hostile --


def limited_run(c: Campaign) -> Path:
    """Record `limited` (the small config with a limits file at ws/lim/limits.toml) once; the
    store with it becomes the one every later case starts from. The limits file's path."""
    path = c.ws / "lim" / "limits.toml"
    if not getattr(c, "has_limited", False):
        path.parent.mkdir(exist_ok=True)
        shutil.copyfile(LIMITS, path)
        res = c.cli(
            "record",
            str(c.small),
            "--name",
            "limited",
            "--set",
            f"flags.xla_sparse_core_max_ids_file={path}",
            timeout=180,
        )
        if res.rc != 0:
            raise RuntimeError(f"recording the limited run failed: {res.err.strip()[-200:]}")
        c.pristine[c.db] = c.db.read_bytes()
        c.has_limited = True  # type: ignore[attr-defined]
    _reset(path)
    shutil.copyfile(LIMITS, path)
    return path


def _reset(path: Path) -> None:
    if path.is_symlink() or path.exists():
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def _secret(c: Campaign) -> Path:
    """A readable file outside the workspace that a hostile trace names (valid TOML, so reading
    it would succeed)."""
    secret = c.root / "secret.toml"
    secret.write_text(f"# {SECRET}\n[stacks.stolen]\nmax_ids_per_partition = 64\nmax_unique_ids_per_partition = 64\n")
    return secret


def make_hostile(c: Campaign, path: Path, kind: str) -> None:
    """Put `kind` where the stored config's limits file is."""
    _reset(path)
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "/dev/zero (a symlink)":
        path.symlink_to("/dev/zero")
    elif kind == "a secret (a symlink)":
        path.symlink_to(_secret(c))
    elif kind == "a secret (copied in place)":
        shutil.copyfile(_secret(c), path)
    elif kind == "a directory":
        path.mkdir()
    else:
        raise ValueError(kind)


def leaked(c: Campaign) -> list[str]:
    """Files under the workspace (but the secret's own place) that hold the secret's bytes."""
    found = []
    for p in c.ws.rglob("*"):
        if p.is_file() and not p.is_symlink() and p.name != "limits.toml" and p.suffix != ".duckdb":
            with contextlib.suppress(OSError), open(p, "rb") as fh:
                if SECRET.encode() in fh.read(50_000_000):
                    found.append(str(p.relative_to(c.ws)))
    return found


def guarded(c: Campaign, res: Result, before: str) -> str | None:
    """A re-simulation that met a hostile path: refused in one line with the store as it was,
    or done without reading it; never hung, never copied."""
    if copies := leaked(c):
        return f"the secret was copied into {copies[:3]}"
    problem = clean(res)
    if problem is None and res.rc == 2 and c.store_digest() != before:
        problem = "refused, yet the store changed"
    return problem


WHATIF_COMMANDS = {
    "analyze --verify": lambda: ["analyze", "limited", "--verify"],
    "compare --attribute": lambda: ["compare", "small", "limited", "--attribute"],
    "tune RUN": lambda: ["tune", "limited", "--budget", "2"],
}
HOSTILE_PATHS = ("a FIFO", "/dev/zero (a symlink)", "a secret (a symlink)", "a secret (copied in place)", "a directory")

for command, argv in WHATIF_COMMANDS.items():
    for kind in HOSTILE_PATHS:

        @case("stored-paths", f"{command} of a run whose stored limits file is now {kind}")
        def _stored_limits(c: Campaign, argv=argv, kind: str = kind) -> str | None:
            path = limited_run(c)
            make_hostile(c, path, kind)
            before = c.store_digest()
            res = c.cli(*argv(), timeout=120)
            try:
                return guarded(c, res, before)
            finally:
                _reset(path)


@case("stored-paths", "a shared trace whose header names a FIFO, ingested elsewhere, then verified")
def _shared_trace(c: Campaign) -> str | None:
    path = limited_run(c)
    trace = next((c.ws / "runs").glob("limited*/trace.sctrace"), None) or next((c.ws / "runs").rglob("*.sctrace"))
    other = c.ws / "other.duckdb"
    other.unlink(missing_ok=True)
    if (res := c.cli("ingest", str(trace), "--db", str(other), "--name", "shared")).rc != 0:
        return f"ingest failed: {res.err.strip()[-160:]}"
    make_hostile(c, path, "a FIFO")
    try:
        res = c.cli("analyze", "shared", "--verify", "--db", str(other), timeout=120)
        return guarded(c, res, c.store_digest())
    finally:
        _reset(path)
        other.unlink(missing_ok=True)


# -- refusals that must leave the store as it was ------------------------------------------------

BAD_SETS = [
    "steps=nan",
    "steps=inf",
    "steps=-inf",
    "steps=0",
    "steps=100000000000000000000",
    "steps=1.5",
    "steps=",
    "steps",
    "=5",
    "no_such_key=1",
    "sparsecore.allow_id_dropping=maybe",
    "tables.t0.width=-8",
    "tables.no_such_table.width=8",
    "hardware.num_chips=nan",
]

for item in BAD_SETS:

    @case("refusals-keep-store", f"tune small --set {item}")
    def _bad_set(c: Campaign, item: str = item) -> str | None:
        before = {p for p in c.ws.rglob("*") if p.is_dir()}
        problem = refuses_untouched(c, "tune", "small", "--set", item, "--budget", "2", timeout=180)
        made = sorted(str(p.relative_to(c.ws)) for p in c.ws.rglob("*") if p.is_dir() and p not in before)
        if problem is None and made:
            problem = f"folders were made: {made[:3]}"
        return problem


@case("refusals-keep-store", "tune small --scheduler ''")
def _empty_scheduler(c: Campaign) -> str | None:
    return refuses_untouched(c, "tune", "small", "--scheduler", "", "--budget", "2", timeout=180)


for argv in (
    ["tune", "small", "--budget", "2"],
    ["analyze", "small", "--verify"],
    ["compare", "small", "small", "--attribute"],
):

    @case("refusals-keep-store", f"{' '.join(argv)} --db <absent store>")
    def _absent_db(c: Campaign, argv: list[str] = argv) -> str | None:
        absent = c.ws / "new" / "absent.duckdb"
        problem = refused(c.cli(*argv, "--db", str(absent), timeout=180))
        if absent.exists() or absent.parent.exists():
            problem = problem or "an empty store was created"
        shutil.rmtree(absent.parent, ignore_errors=True)
        return problem


# -- outputs: where files go, what they may replace ----------------------------------------------

for label, target in (("a file", "afile"), ("a store", "s.duckdb"), ("/proc/x", "/proc/x"), ("the store", None)):

    @case("outputs", f"tune small --out {label}")
    def _tune_out(c: Campaign, target: str | None = target) -> str | None:
        out = c.db if target is None else (Path(target) if target.startswith("/") else c.ws / target)
        if target == "afile":
            out.write_text("mine\n")
        if target == "s.duckdb":
            shutil.copyfile(c.db, out)
        kept = out.read_bytes() if out.is_file() and not str(out).startswith("/proc") else None
        try:
            problem = refuses_untouched(c, "tune", "small", "--out", str(out), "--budget", "2", timeout=180)
            if problem is None and kept is not None and out.read_bytes() != kept:
                problem = f"{out.name} was changed"
            return problem
        finally:
            if target in ("afile", "s.duckdb"):
                out.unlink(missing_ok=True)


@case("outputs", "tune CONFIG --out DIR writes nothing outside DIR")
def _tune_config_out(c: Campaign) -> str | None:
    before = {p for p in c.ws.rglob("*") if p.is_file()}
    out = c.ws / "tuned-here"
    res = c.cli("tune", str(c.small), "--out", str(out), "--budget", "1", timeout=600)
    after = {p for p in c.ws.rglob("*") if p.is_file()}
    outside = sorted(
        str(p.relative_to(c.ws))
        for p in after - before
        if not p.is_relative_to(out) and p.name not in ("scprof.duckdb", "scprof.duckdb.wal")
    )
    shutil.rmtree(out, ignore_errors=True)
    for p in outside:
        with contextlib.suppress(OSError):
            (c.ws / p).unlink()
    if outside:
        return f"wrote outside {out.name}/: {outside[:3]}"
    return accepted(res)


@case("outputs", "two records with the same --out")
def _record_same_out(c: Campaign) -> str | None:
    out = c.ws / "sweep"
    try:
        for i in (1, 2):
            res = c.cli("record", str(c.small), "--name", f"point{i}", "--out", str(out), timeout=180)
            if (problem := accepted(res)) is not None:
                return f"record {i}: {problem}"
        traces = sorted(str(p.relative_to(out)) for p in out.rglob("*.sctrace"))
        return None if len(traces) == 2 else f"{len(traces)} traces under --out: {traces}"
    finally:
        shutil.rmtree(out, ignore_errors=True)


for fmt in ("perfetto", "xspace"):

    @case("outputs", f"export {fmt} -o a read-only file (mode 444)")
    def _read_only(c: Campaign, fmt: str = fmt) -> str | None:
        out = c.ws / f"keep.{fmt}"
        out.write_text("do not replace\n")
        out.chmod(0o444)
        try:
            problem = refuses_untouched(c, "export", fmt, "small", "-o", str(out), mention=out.name)
            if out.read_bytes() != b"do not replace\n":
                problem = "the read-only file was replaced"
            return problem
        finally:
            out.chmod(0o644)
            out.unlink(missing_ok=True)


@case("outputs", "tune RUN --set a relative limits path resolves against the working directory")
def _relative_set(c: Campaign) -> str | None:
    shutil.copyfile(LIMITS, c.ws / "rel_limits.toml")
    try:
        res = c.cli(
            "tune",
            "small",
            "--set",
            "flags.xla_sparse_core_max_ids_file=rel_limits.toml",
            "--budget",
            "1",
            "--out",
            str(c.ws / "rel-tune"),
            timeout=600,
        )
        return accepted(res)
    finally:
        shutil.rmtree(c.ws / "rel-tune", ignore_errors=True)
        (c.ws / "rel_limits.toml").unlink(missing_ok=True)


@case("outputs", "tune --workers 2 serves no HTTP endpoint")
def _dask_http(c: Campaign) -> str | None:
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scprof.cli",
            "tune",
            "small",
            "--workers",
            "2",
            "--budget",
            "2",
            "--out",
            str(c.ws / "dask-tune"),
        ],
        cwd=c.ws,
        env=c.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    answered: set[str] = set()
    try:
        t0 = time.perf_counter()
        while p.poll() is None and time.perf_counter() - t0 < 300:
            for port in _listening_ports(p.pid):
                if _speaks_http(port):
                    answered.add(f"127.0.0.1:{port}")
            time.sleep(0.5)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, 9)
        p.wait()
        shutil.rmtree(c.ws / "dask-tune", ignore_errors=True)
    return f"HTTP served on {sorted(answered)}" if answered else None


def _listening_ports(pid: int) -> set[int]:
    ports: set[int] = set()
    with contextlib.suppress(psutil.Error):
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                ports |= {s.laddr.port for s in proc.net_connections("tcp") if s.status == psutil.CONN_LISTEN}
    return ports


def _speaks_http(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
            return r.status < 600
    except urllib.error.HTTPError:
        return True  # an HTTP error is still HTTP
    except Exception:  # noqa: BLE001 - not HTTP (Dask's own comm port): nothing served
        return False


# -- damaged stores and full disks ---------------------------------------------------------------


def _damage(db: Path, how: str) -> None:
    data = db.read_bytes()
    if how == "truncated to 50%":
        db.write_bytes(data[: len(data) // 2])
    elif how == "truncated to 4 KiB":
        db.write_bytes(data[:4096])
    elif how == "zero bytes":
        db.write_bytes(b"")
    elif how == "garbage in the middle":
        mid = len(data) // 2
        db.write_bytes(data[:mid] + os.urandom(65536) + data[mid + 65536 :])
    elif how == "a text file":
        db.write_text("not a database\n" * 100)
    elif how == "a garbage WAL":
        Path(str(db) + ".wal").write_bytes(os.urandom(8192))
    else:
        raise ValueError(how)


DAMAGE = (
    "truncated to 50%",
    "truncated to 4 KiB",
    "zero bytes",
    "garbage in the middle",
    "a text file",
    "a garbage WAL",
)
STORE_COMMANDS = {
    "runs": lambda c: ["runs"],
    "analyze": lambda c: ["analyze", "small"],
    "ingest": lambda c: ["ingest", str(c.trace), "--name", "again"],
    "sql": lambda c: ["sql", "SELECT count(*) FROM runs"],
    "tune": lambda c: ["tune", "small", "--budget", "1"],
}

for how in DAMAGE:
    for command, argv in STORE_COMMANDS.items():

        @case("store-faults", f"{command} on a store {how}")
        def _damaged(c: Campaign, how: str = how, argv=argv) -> str | None:
            _damage(c.db, how)
            files = {p: p.read_bytes() for p in (c.db, Path(str(c.db) + ".wal")) if p.exists()}
            res = c.cli(*argv(c), timeout=180)
            problem = refused(res, mention="scprof.duckdb")
            if res.rc == 0 and how == "garbage in the middle":
                problem = None  # DuckDB may not read the damaged blocks for this command: fine if right
            changed = [p.name for p, data in files.items() if not p.exists() or p.read_bytes() != data]
            if changed:
                problem = problem or f"{changed} changed"
            return problem


@case("store-faults", "ingest with the disk full (file-size limit: EFBIG)")
def _full_disk(c: Campaign) -> str | None:
    before, size = c.store_digest(), c.db.stat().st_size
    limit = size + 2**18  # room for 256 KiB more: the million-event run below needs far more

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    big = c.ws / "big.sctrace"
    if not big.exists():
        from profiler.synthetic import write_synthetic_trace

        write_synthetic_trace(str(big), 1_000_000)
    res = c.run([sys.executable, "-m", "scprof.cli", "ingest", str(big), "--name", "big"], 300, None, cap)
    problem = refused(res)
    if problem is None and not any(w in res.err.lower() for w in ("space", "too large", "file size")):
        problem = f"the cause is not named: {res.err.strip()[:160]}"
    if c.store_digest() != before:
        problem = problem or "the store changed"
    grown = c.db.stat().st_size - size
    c.full_disk_growth = grown  # type: ignore[attr-defined]
    return problem
