"""Behaviour of two checkouts compared: what a refactor must leave unchanged.

For each checkout, in a fresh store of its own, this ingests every capture under tests/data/
(the wild corpus as tests/xplane/test_wild_captures.py ingests it, the XSpace files and logdirs,
the Chrome-trace captures) and records the bundled configs (configs/*.toml) with `scprof record`;
then it takes a snapshot: each command's exit status and output, `runs --json`; per run
`analyze`, `summary`, `ops` (whole run, and steps 1:3 of chip 0), `breakdown`, `events` (step 1, and the run's first 200)
and `find` (its top op's name), all `--json`; `compare --json` of each run against `baseline`
(else the first two runs); what the UI's data layer (ui/data.py) gives the Overview, SparseCore,
Memory and Compare pages; the sha256 of each run's `export xspace` and `export perfetto`, the
sha256 of each recorded run's files, the exports read back (`ingest` of each `export xspace`),
and the sha256 of each store table's sorted rows. Two snapshots are then compared, key by key;
`--expect-changed` names store tables a change alters by design.

What differs by construction is left out or normalized: the checkout's and the temp folder's
paths (replaced by <checkout> and <tmp>); the time columns `ingested_at` and `created_at` (and
`runs --json`'s / run_list's `ingested`); how long a command took ("(..., 0.2 s)" in its
output); `code_sha1` and run_analysis's `analysis_sha1`, `built_at` and `build_s` (a hash of the source, which a refactor changes, and
times); scprof_meta's `ddl_sha1`
(the DDL holds every table's and column's documentation); string ids, compared as the strings
they stand for (`strings` without `string_id`, events' name_id, table_id and category_id as
text); analysis_report_tables' Arrow IPC blobs, compared as the rows they hold (two
serializations of one table may differ in bytes). The configs are copied to one fixed folder and
recorded from there (a recording keeps the absolute paths a config names), so take snapshots one
after the other; every DuckDB connection runs one thread (the Chrome-trace import's parallel
JSON reader interns strings in a varying order, so its exports would vary run to run).

Usage
    python tools/behaviour_diff.py BEFORE_CHECKOUT AFTER_CHECKOUT [--configs all|none|a,b] [--keep DIR]
                                   [--expect-changed TABLE,...]
    python tools/behaviour_diff.py BEFORE.json AFTER.json           # compare two saved snapshots
    python tools/behaviour_diff.py --snapshot CHECKOUT -o SNAP.json [--configs ...]

Each checkout runs with its own code (PYTHONPATH=<checkout>, this interpreter); its compiled
extensions must be built in place. Prints each difference, then one JSON line:
{"identical": bool, "keys": n, "differences": n, ...}; the exit status is 0 when identical.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

IGNORED_COLUMNS = ("ingested_at", "created_at", "code_sha1", "ingested", "analysis_sha1", "built_at", "build_s")
STRING_ID_COLUMNS = ("name_id", "table_id", "category_id")  # strings.string_id: compared as their text
_SECONDS = re.compile(r"\b\d+(?:\.\d+)? s\)")  # "(..., 0.2 s)": how long a command took


def captures(root: str) -> list[tuple[str, str]]:
    """(run name, path given to `scprof ingest`) for every capture under tests/data/."""
    data = os.path.join(root, "tests", "data")
    out = []
    wild = os.path.join(data, "wild")
    for name in sorted(os.listdir(wild)) if os.path.isdir(wild) else []:
        folder = os.path.join(wild, name)
        if not os.path.isdir(folder):
            continue
        if os.path.isdir(os.path.join(folder, "plugins", "profile")):
            out.append((f"wild_{name}", folder))
        else:
            files = [f for f in sorted(os.listdir(folder)) if f != "PROVENANCE.md"]
            out += [
                (f"wild_{name}" + (f"_{i}" if len(files) > 1 else ""), os.path.join(folder, f))
                for i, f in enumerate(files)
            ]
    for path in sorted(glob.glob(os.path.join(data, "**", "*"), recursive=True)):
        rel = os.path.relpath(path, data)
        if rel.startswith("wild" + os.sep):
            continue
        is_logdir = os.path.isdir(os.path.join(path, "plugins", "profile"))
        is_file = os.path.isfile(path) and path.endswith((".xplane.pb", ".trace.json.gz", ".pt.trace.json.gz"))
        inside_logdir = "plugins" in rel.split(os.sep)
        if is_logdir or (is_file and not inside_logdir):
            out.append((rel.replace(os.sep, "_").split(".")[0], path))
    return out


def configs(root: str, which: str) -> list[str]:
    paths = sorted(glob.glob(os.path.join(root, "configs", "*.toml")))
    if which == "none":
        return []
    if which == "all":
        return paths
    wanted = set(which.split(","))
    return [p for p in paths if os.path.basename(p).removesuffix(".toml") in wanted]


# ---- the snapshot, taken inside a process running the checkout's code ----


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class _Cli:
    """`scprof` commands run in this process, their output normalized."""

    def __init__(self, root: str, tmp: str):
        import duckdb

        connect = duckdb.connect

        def one_thread(*a, **k):  # DuckDB's parallel JSON reader interns strings in a varying order
            config = {**(k.pop("config", None) or {}), "threads": 1}
            return connect(*a, **k, config=config)

        duckdb.connect = one_thread
        from scprof.cli import main

        self.main, self.root, self.tmp = main, os.path.realpath(root), os.path.realpath(tmp)

    def norm(self, text: str) -> str:
        for real, name in ((self.tmp, "<tmp>"), (self.root, "<checkout>")):
            text = text.replace(real, name)
        return _SECONDS.sub("<t> s)", text)

    def __call__(self, *argv: str) -> dict:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = self.main(list(argv))
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
        return {"rc": rc, "stdout": self.norm(out.getvalue()), "stderr": self.norm(err.getvalue())}


def _tables(cli: _Cli, db: str) -> dict:
    import duckdb
    import pyarrow as pa

    out = {}
    con = duckdb.connect(db, read_only=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1"
            ).fetchall()
        ]
        for t in names:
            cols = [r[0] for r in con.execute(f"DESCRIBE {t}").fetchall() if r[0] not in IGNORED_COLUMNS]
            if t == "strings":
                cols = [c for c in cols if c != "string_id"]
            if not cols:
                continue
            ids = [c for c in cols if c in STRING_ID_COLUMNS and "run_id" in cols and t != "strings"]
            sel = ", ".join(
                f'x."{c}"'
                if c not in ids
                else f'(SELECT value FROM strings s WHERE s.run_id = x.run_id AND s.string_id = x."{c}") AS "{c}"'
                for c in cols
            )
            where = " WHERE key <> 'ddl_sha1'" if t == "scprof_meta" else ""  # the DDL holds the docs
            cur = con.execute(f"SELECT {sel} FROM {t} x{where} ORDER BY ALL")
            ipc = cols.index("arrow_ipc") if "arrow_ipc" in cols else -1
            h, n = hashlib.sha256(), 0
            while rows := cur.fetchmany(100_000):
                for r in rows:
                    if ipc >= 0 and r[ipc] is not None:  # an Arrow table: its rows (the bytes may vary)
                        r = (*r[:ipc], pa.ipc.open_stream(r[ipc]).read_all().to_pylist(), *r[ipc + 1 :])
                    # other bytes as their digest: a checkout's path inside a capture is data, not normalized
                    r = tuple(hashlib.sha256(v).hexdigest() if isinstance(v, bytes) else v for v in r)
                    h.update(cli.norm(repr(r)).encode())
                n += len(rows)
            out[f"table {os.path.basename(db)} {t}"] = {"rows": n, "sha256": h.hexdigest()}
    finally:
        con.close()
    return out


def _jsonable(value: object) -> object:
    """A UI data result as plain JSON (arrays as lists, dataclasses as dicts, NaN as text)."""
    import dataclasses
    import math

    import numpy as np

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def _ui(cli: _Cli, db: str, names: list[str], pairs: list[tuple[str, str]], snap: dict, label: str) -> None:
    """What the UI's data layer hands its pages (ui/data.py), per run over its whole step range, and
    each compared pair: the figures a refactor of the store must not move."""
    try:
        from profiler.store import Store
        from ui import data
    except ImportError as e:
        snap[f"{label} ui"] = f"unavailable: {e}"
        return

    def call(key: str, fn, *args: object) -> None:  # noqa: ANN001 - any of the data layer's functions
        try:
            text = json.dumps(_jsonable(fn(store, *args)), sort_keys=True)
        except Exception as e:  # noqa: BLE001 - an error is part of the behaviour compared
            text = f"error: {type(e).__name__}: {e}"
        text = cli.norm(text)
        snap[f"{label} ui {key}"] = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "head": text[:300]}

    def breakdown(store: Store, run: int, steps: tuple[int, int]) -> object:
        return data.breakdown_per_step(data.analysis(store, run), steps)

    def sparsecore(store: Store, run: int, steps: tuple[int, int]) -> object:
        return data.sparsecore(store, run, steps, data.sc_tables(store, run)[0])

    with Store.open(db, read_only=True) as store:
        ids = {n: data.resolve(store, n) for n in names}
        for name, run in ids.items():
            steps = data.clamp_steps(data.step_bounds(store, run), None)
            call(f"{name} overview_kpis", data.overview_kpis, run, steps)
            call(f"{name} chip_step_times", data.chip_step_times, run, steps)
            call(f"{name} breakdown_per_step", breakdown, run, steps)
            call(f"{name} sparsecore", sparsecore, run, steps)
            call(f"{name} counters", data.counters, run)
            call(f"{name} hbm_peaks", data.hbm_peaks, run)
        for base, cand in pairs:
            call(f"compare {base} {cand}", data.compare, ids[base], ids[cand])


def _pairs(names: list[str]) -> list[tuple[str, str]]:
    """Runs compared: each run against `baseline` where there is one, else the first two runs."""
    if "baseline" in names:
        return [("baseline", n) for n in names if n != "baseline"]
    return [(names[0], names[1])] if len(names) > 1 else []


def _runs(cli: _Cli, db: str, tmp: str, snap: dict, label: str) -> None:
    got = cli("runs", "--json", "--db", db)
    runs = json.loads(got["stdout"]) if got["rc"] == 0 else []
    for r in runs:
        r.pop("ingested", None)  # when it was ingested, to the minute
    snap[f"{label} runs --json"] = dict(got, stdout=runs)
    names = [r["name"] for r in runs]
    for base, cand in _pairs(names):
        snap[f"{label} compare {base} {cand}"] = cli("compare", base, cand, "--json", "--db", db)
    for name in names:
        snap[f"{label} analyze {name}"] = cli("analyze", name, "--json", "--db", db)
        for argv in (
            ["summary"],
            ["ops", "--limit", "50"],
            ["ops", "--steps", "1:3", "--chip", "0"],
            ["breakdown", "--limit", "100"],
            ["events", "--steps", "1:2", "--limit", "200"],
            ["events", "--limit", "200"],
        ):
            snap[f"{label} {' '.join(argv)} {name}"] = cli(*argv, name, "--json", "--db", db)
        ops = snap[f"{label} ops --limit 50 {name}"]
        top = json.loads(ops["stdout"]).get("rows", []) if ops["rc"] == 0 else []
        if top and isinstance(top[0], dict) and top[0].get("name"):  # a name every run has: its top op's
            snap[f"{label} find {name}"] = cli(
                "find", name, str(top[0]["name"])[:40], "--limit", "100", "--json", "--db", db
            )
        for fmt in ("xspace", "perfetto"):
            path = os.path.join(tmp, f"{name}." + ("xplane.pb" if fmt == "xspace" else "perfetto-trace"))
            r = cli("export", fmt, name, "-o", path, "--db", db)
            r["sha256"] = _sha256(path) if os.path.exists(path) else None
            snap[f"{label} export {fmt} {name}"] = r
        if snap[f"{label} export xspace {name}"]["sha256"]:  # the export read back
            back = os.path.join(tmp, f"{label}_reingested.duckdb")
            path = os.path.join(tmp, f"{name}.xplane.pb")
            snap[f"{label} reingest {name}"] = cli("ingest", path, "--db", back, "--name", name)
    _ui(cli, db, names, _pairs(names), snap, label)
    snap.update(_tables(cli, db))
    back = os.path.join(tmp, f"{label}_reingested.duckdb")
    if os.path.exists(back):
        snap.update(_tables(cli, back))


def take(root: str, which: str, keep: str | None) -> dict:
    tmp = keep or tempfile.mkdtemp(prefix="behaviour_diff_")
    os.makedirs(tmp, exist_ok=True)
    cli = _Cli(root, tmp)
    snap: dict = {}
    db = os.path.join(tmp, "captures.duckdb")
    for name, path in captures(root):
        snap[f"ingest {name}"] = cli("ingest", path, "--db", db, "--name", name)
    _runs(cli, db, tmp, snap, "captures")
    rec_db = os.path.join(tmp, "records.duckdb")
    # Configs name other files by absolute path (limits, ids), which a recording keeps: both
    # checkouts record from the same place (snapshots taken one after the other).
    fixed = os.path.join(tempfile.gettempdir(), "behaviour_diff_configs")
    shutil.rmtree(fixed, ignore_errors=True)
    shutil.copytree(os.path.join(root, "configs"), os.path.join(fixed, "configs"))
    for cfg in configs(fixed, which):
        name = os.path.basename(cfg).removesuffix(".toml")
        out = os.path.join(tmp, "records")
        snap[f"record {name}"] = cli("record", cfg, "--out", out, "--db", rec_db, "--name", name)
        for f in sorted(glob.glob(os.path.join(out, name, "**", "*"), recursive=True)):
            if os.path.isfile(f):
                snap[f"record {name} file {os.path.relpath(f, out)}"] = _sha256(f)
    if os.path.exists(rec_db):
        _runs(cli, rec_db, tmp, snap, "records")
    return snap


# ---- driving and comparing ----


def snapshot(checkout: str, which: str, out: str, keep: str | None) -> None:
    """Take a snapshot of `checkout` in a fresh process running its code."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--inner",
        os.path.abspath(checkout),
        "-o",
        out,
        "--configs",
        which,
    ] + (["--keep", keep] if keep else [])
    subprocess.run(cmd, check=True, cwd=checkout, env=env)


def compare(a: dict, b: dict) -> list[str]:
    diffs = []
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            diffs.append(f"{k}: only in {'after' if k not in a else 'before'}")
        elif a[k] != b[k]:
            va, vb = a[k], b[k]
            if isinstance(va, dict) and isinstance(vb, dict):
                parts = [
                    f"{f}: {str(va.get(f))[:300]!r} -> {str(vb.get(f))[:300]!r}"
                    for f in sorted(set(va) | set(vb))
                    if va.get(f) != vb.get(f)
                ]
                diffs.append(f"{k}: " + "; ".join(parts))
            else:
                diffs.append(f"{k}: {str(va)[:300]!r} -> {str(vb)[:300]!r}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", help="two checkouts, or two snapshot JSON files")
    ap.add_argument("--snapshot", metavar="CHECKOUT", help="only take this checkout's snapshot (with -o)")
    ap.add_argument("--inner", metavar="CHECKOUT", help=argparse.SUPPRESS)
    ap.add_argument("-o", "--out", help="snapshot file to write")
    ap.add_argument("--configs", default="all", help="configs to record: all, none, or names (a,b)")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR (stores, exports, recordings) and keep it")
    ap.add_argument(
        "--expect-changed",
        metavar="T1,T2",
        help="store tables a change alters by design: their differences are printed as expected and do not count",
    )
    args = ap.parse_args(argv)
    if args.inner:
        with open(args.out, "w") as f:
            json.dump(take(args.inner, args.configs, args.keep), f, indent=1, sort_keys=True)
        return 0
    if args.snapshot:
        snapshot(args.snapshot, args.configs, args.out, args.keep)
        return 0
    if len(args.paths) != 2:
        ap.error("give two checkouts or two snapshot files")
    snaps = []
    for i, p in enumerate(args.paths):
        if os.path.isdir(p):
            out = os.path.join(tempfile.mkdtemp(prefix="behaviour_snap_"), "snapshot.json")
            keep = os.path.join(args.keep, "before" if i == 0 else "after") if args.keep else None
            snapshot(p, args.configs, out, keep)
            print(f"snapshot of {p}: {out}", file=sys.stderr)
            p = out
        with open(p) as f:
            snaps.append(json.load(f))
    expected = {t for t in (args.expect_changed or "").split(",") if t}
    diffs, allowed = [], []
    for d in compare(*snaps):
        key = d.split(":", 1)[0].split()
        (allowed if key[0] == "table" and key[-1] in expected else diffs).append(d)
    for d in allowed:
        print(f"(expected) {d}")
    for d in diffs:
        print(d)
    failed = sorted(k for k, v in snaps[1].items() if isinstance(v, dict) and v.get("rc") not in (None, 0))
    print(
        json.dumps(
            {
                "identical": not diffs,
                "keys": len(set(snaps[0]) | set(snaps[1])),
                "differences": len(diffs),
                "expected_differences": len(allowed),
                "nonzero_exit_after": failed,
            }
        )
    )
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
