"""The hostile campaign's harness: cases by class, a scratch folder with a store, children
run under a time limit, and what must hold (refused in one line, accepted, store untouched).

The cases are in tools/hostile_campaign.py and _campaign_whatif_stores.py; run the campaign
with `python tools/hostile_campaign.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "configs" / "baseline.toml"


@dataclasses.dataclass
class Result:
    rc: int | None  # None: killed at the time limit
    out: str
    err: str
    wall_s: float
    peak_rss_bytes: int


@dataclasses.dataclass
class Case:
    cls: str
    label: str
    check: Callable[[Campaign], str | None]  # the problem, or None when it held


CASES: list[Case] = []


def case(cls: str, label: str) -> Callable:
    def add(fn: Callable[[Campaign], str | None]) -> Callable:
        CASES.append(Case(cls, label, fn))
        return fn

    return add


class Campaign:
    """The scratch folder: a store with one small run, an escape folder, a private TMPDIR."""

    def __init__(self, root: Path, verbose: bool):
        self.root, self.verbose = root, verbose
        self.ws = root / "ws"  # the children's working directory
        self.escape = root / "escape"  # names aim here: it must stay empty
        self.tmp = root / "tmp"  # the children's TMPDIR: it must end every case empty
        for d in (self.ws, self.escape, self.tmp):
            d.mkdir()
        self.db = self.ws / "scprof.duckdb"
        self.small = self.ws / "small.toml"
        self.small.write_text(f'extends = "{BASELINE}"\nname = "small"\nsteps = 2\n')
        res = self.cli("record", str(self.small), timeout=120)
        if res.rc != 0:
            raise SystemExit(f"setup: recording the small run failed: {res.err.strip()}")
        self.trace = next(p for p in (self.ws / "runs" / "small").iterdir() if p.suffix == ".sctrace")
        self.pristine = {p: p.read_bytes() for p in (self.db, self.trace)}

    def restore(self) -> None:
        """The store and the small run's trace as set up (a case that broke them harms no other)."""
        Path(str(self.db) + ".wal").unlink(missing_ok=True)
        for p, data in self.pristine.items():
            if p.is_symlink() or p.is_dir():
                shutil.rmtree(p) if p.is_dir() else p.unlink()
            if not p.exists() or p.read_bytes() != data:
                p.write_bytes(data)

    def env(self) -> dict[str, str]:
        env = dict(os.environ, TMPDIR=str(self.tmp), SCPROF_DB=str(self.db))
        env.pop("SCPROF_MEMORY_LIMIT", None)
        return env

    def run(
        self,
        argv: list[str],
        timeout: float = 60,
        stdin: bytes | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> Result:
        """A child in its own session, its peak RSS from wait4; killed (the whole group) at `timeout`;
        `preexec` runs in the child before it starts (a resource limit)."""
        t0 = time.perf_counter()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
            inp.write(stdin or b"")
            inp.seek(0)
            p = subprocess.Popen(
                argv,
                cwd=self.ws,
                env=self.env(),
                stdin=inp,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=preexec,
            )
            rc: int | None = None
            while True:
                pid, status, usage = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    rc = os.waitstatus_to_exitcode(status)
                    break
                if time.perf_counter() - t0 > timeout:
                    os.killpg(p.pid, signal.SIGKILL)
                    _, _, usage = os.wait4(p.pid, 0)
                    break
                time.sleep(0.02)
            p.returncode = -1 if rc is None else rc  # reaped here, not by Popen
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)  # grandchildren left behind
            out.seek(0)
            err.seek(0)
            text_out, text_err = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        return Result(rc, text_out, text_err, time.perf_counter() - t0, usage.ru_maxrss * 1024)

    def cli(self, *args: str, timeout: float = 60, stdin: bytes | None = None) -> Result:
        return self.run([sys.executable, "-m", "scprof.cli", *args], timeout, stdin)

    def store_digest(self) -> str:
        """What the store holds: every run's row and every table's row count (not its bytes:
        a writer's open may rewrite the file's header without changing what it holds)."""
        import duckdb

        con = duckdb.connect(str(self.db), read_only=True)
        try:
            tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
            held = [con.execute(f'SELECT count(*) FROM "{t}"').fetchall() for t in tables]
            runs = con.execute("SELECT * FROM runs ORDER BY run_id").fetchall()
        finally:
            con.close()
        return hashlib.sha256(repr((tables, held, runs)).encode()).hexdigest()

    def store_file_digest(self) -> str:
        """sha256 of the store file's bytes, and whether a WAL file exists beside it."""
        wal = Path(str(self.db) + ".wal")
        return hashlib.sha256(self.db.read_bytes()).hexdigest() + ("+wal" if wal.exists() else "")

    def leftovers(self) -> list[str]:
        """Files in the escape folder or the private TMPDIR (emptied for the next case)."""
        found = [str(p) for d in (self.escape, self.tmp) for p in d.rglob("*")]
        for d in (self.escape, self.tmp):
            for p in d.iterdir():
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        return found


# -- what must hold -------------------------------------------------------------------------


def refused(res: Result, mention: str | None = None) -> str | None:
    """Exit 2 with one line naming the argument or file; no traceback, in time."""
    if res.rc is None:
        return f"hung: killed after {res.wall_s:.0f} s"
    lines = [x for x in res.err.splitlines() if x.strip()]
    if res.rc != 2:
        return f"exit {res.rc}, not 2: {_tail(res.err)}"
    if len(lines) != 1 or "Traceback" in res.err or "internal error" in res.err:
        return f"{len(lines)} stderr lines, not one: {_tail(res.err)}"
    if mention and mention not in lines[0]:
        return f"the error does not name {mention!r}: {lines[0][:160]}"
    return None


def accepted(res: Result) -> str | None:
    if res.rc is None:
        return f"hung: killed after {res.wall_s:.0f} s"
    if res.rc != 0:
        return f"exit {res.rc}: {_tail(res.err)}"
    return None


def clean(res: Result) -> str | None:
    """Refused or accepted, either way without an internal error."""
    if res.rc is None:
        return f"hung: killed after {res.wall_s:.0f} s"
    if res.rc not in (0, 2) or "Traceback" in res.err or "internal error" in res.err:
        return f"exit {res.rc}: {_tail(res.err)}"
    return refused(res) if res.rc == 2 else None


def _tail(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return (lines[-1] if lines else "(no output)")[:200]


def refuses_untouched(c: Campaign, *args: str, mention: str | None = None, timeout: float = 60) -> str | None:
    """The command is refused and the store stays byte-identical: what it holds, and the file's
    sha256 (with no write-ahead log appearing)."""
    before, file_before = c.store_digest(), c.store_file_digest()
    problem = refused(c.cli(*args, timeout=timeout), mention)
    if problem is None and c.store_digest() != before:
        problem = "the store changed"
    if problem is None and c.store_file_digest() != file_before:
        problem = "the store's file changed (its sha256, or a WAL appeared)"
    return problem


# -- the campaign -----------------------------------------------------------------------------


def run_campaign(description: str) -> dict[str, dict[str, int]]:
    """Run the registered cases (those of --only's classes); print each that did not hold and the
    table per class; the counts per class."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--only", nargs="*", help="classes to run (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--verbose", action="store_true", help="print every case")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="scprof-campaign-"))
    counts: dict[str, dict[str, int]] = {}
    try:
        c = Campaign(root, args.verbose)
        for k in CASES:
            if args.only and k.cls not in args.only:
                continue
            c.restore()
            try:
                problem = k.check(c)
            except Exception as e:  # noqa: BLE001 - a case that breaks the campaign itself did not hold
                problem = f"campaign error: {type(e).__name__}: {e}"
            left = c.leftovers()
            if left and problem is None:
                problem = f"left behind: {left[:3]}"
            tally = counts.setdefault(k.cls, {"tried": 0, "held": 0})
            tally["tried"] += 1
            tally["held"] += problem is None
            if problem is not None or args.verbose:
                print(f"[{'held' if problem is None else 'FAILED'}] {k.cls}: {k.label}: {problem or 'ok'}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(f"{'class':<20} {'tried':>6} {'held':>6}")
    for cls, t in counts.items():
        print(f"{cls:<20} {t['tried']:>6} {t['held']:>6}")
    return counts
