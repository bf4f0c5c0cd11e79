"""Fuzz campaign of both decoders: the `.sctrace` reader and the XSpace (`.xplane.pb`) import.

Each decoder gets --inputs inputs (default 1,000), in five classes taken in turn:
- mutation: one or two protobuf values or strings set to hostile ones (2^63 - 1, 2^64 - 1,
  "²", "{", "group_id", ...) with lengths and .sctrace chunk CRCs fixed up (tests/fuzzkit.py);
- bytes: one to four byte flips, insertions or deletions;
- truncation: the file cut at a random byte;
- concatenation: the file appended to itself, to another seed, or spliced with one;
- hostile: hand-built files (XSpace: tests/xplane/hostile.py, every class of docs/security.md;
  .sctrace: crafted traces with negative durations, ends past int64, unknown ids, ...).

Every input is ingested (`ingest_traces`, replace=True) into a store that already holds a run,
in a worker process; its outcome is one of:
- ok: imported, the run complete (runs.events = its rows, summaries present) and its values
  in range (no negative duration, no end past int64; for XSpace the import's documented limits);
- refused: a ScprofError with a one-line message, and the store exactly as before;
- other: any other exception, a broken property, or the worker dying;
- hang: no answer within --timeout seconds (the worker is killed and restarted).

Last line of stdout: one JSON object with the counts per decoder and class.
Usage: python benchmarks/fuzz_decoders.py [--inputs 1000] [--seed 14] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/fuzzkit.py and the hostile builders live with the tests

CLASSES = ("mutation", "bytes", "truncation", "concatenation", "hostile")
OUTCOMES = ("ok", "refused", "other", "hang")


def _sctrace_hostile(d: Path) -> list[Path]:
    """Crafted .sctrace files, each with one hostile value (framed with valid CRCs)."""
    from profiler import scprof_trace_pb2 as pb
    from tests.tracekit import HOST_TRACK, crafted_trace

    big = (1 << 63) - 1
    cases = {
        "neg_dur": pb.EventBatch(track=[1], name=[1], start_ps=[0], dur_ps=[-5]),
        "end_past_int64": pb.EventBatch(track=[1], name=[1], start_ps=[big - 10], dur_ps=[100]),
        "start_min": pb.EventBatch(track=[1], name=[1], start_ps=[-(1 << 63)], dur_ps=[1]),
        "unknown_track": pb.EventBatch(track=[7], name=[1], start_ps=[0], dur_ps=[1]),
        "track_zero": pb.EventBatch(track=[0], name=[1], start_ps=[0], dur_ps=[1]),
        "unknown_name": pb.EventBatch(track=[1], name=[1 << 31], start_ps=[0], dur_ps=[1]),
        "ragged": pb.EventBatch(track=[1, 1], name=[1], start_ps=[0], dur_ps=[1]),
        "arg_event_past": pb.EventBatch(
            track=[1], name=[1], start_ps=[0], dur_ps=[1], arg_event=[5], arg_key=[1], arg_kind=[1], arg_int=[1]
        ),
        "arg_key_unknown": pb.EventBatch(
            track=[1], name=[1], start_ps=[0], dur_ps=[1], arg_event=[0], arg_key=[99], arg_kind=[1], arg_int=[1]
        ),
        "ids_max": pb.EventBatch(
            track=[1, 1], name=[1, 1], start_ps=[0, 1], dur_ps=[1, 1], step=[0, 0], sc=[0, 0], ids=[big, big]
        ),
    }
    ok_event = pb.EventBatch(track=[1], name=[1], start_ps=[0], dur_ps=[1])
    sc_track = pb.Track(
        id=1,
        plane="/device:TPU:0 SparseCore 0",
        line="Sparse Core Ops",
        kind=pb.TRACK_KIND_SPARSECORE,
        chip=0,
        core=0,
        tile=-1,
    )
    out = []
    for name, ev in cases.items():
        out.append(crafted_trace(d / f"h-{name}.sctrace", ev, tracks=(sc_track if name == "ids_max" else HOST_TRACK,)))
    for name, header in {
        "num_chips": pb.Header(format_version=1, run_id="h", hardware=pb.Hardware(num_chips=(1 << 32) - 1)),
        "hbm_bytes": pb.Header(format_version=1, run_id="h", hardware=pb.Hardware(hbm_bytes=(1 << 64) - 1)),
        "flops_nan": pb.Header(format_version=1, run_id="h", hardware=pb.Hardware(tc_peak_flops=float("nan"))),
        "config_nan": pb.Header(format_version=1, run_id="h", config_json='{"a": NaN}'),
        "config_surrogate": pb.Header(format_version=1, run_id="h", config_json='{"a": "\\udc80"}'),
        "extra_bad": pb.Header(format_version=1, run_id="h", hardware=pb.Hardware(extra_json="{")),
    }.items():
        out.append(crafted_trace(d / f"h-header-{name}.sctrace", ok_event, header=header))
    big_track = pb.Track(id=1 << 31, plane="/host:CPU", line="main", kind=pb.TRACK_KIND_HOST)
    out.append(
        crafted_trace(
            d / "h-track-2^31.sctrace",
            pb.EventBatch(track=[1 << 31], name=[1], start_ps=[0], dur_ps=[1]),
            tracks=(big_track,),
        )
    )
    fifo = d / "h-fifo.sctrace"
    os.mkfifo(fifo)
    out.append(fifo)
    out.append(
        crafted_trace(
            d / "h-footer.sctrace", pb.EventBatch(track=[1], name=[1], start_ps=[0], dur_ps=[1]), footer_events=5
        )
    )
    out.append(crafted_trace(d / "h-dup-track.sctrace", None, tracks=(HOST_TRACK, HOST_TRACK)))
    out.append(crafted_trace(d / "h-version.sctrace", None, header=pb.Header(format_version=9, run_id="v")))
    twice = d / "h-twice.sctrace"
    twice.write_bytes(out[0].read_bytes() * 2)
    return out + [twice]


def _hostile_inputs(d: Path, decoder: str) -> list[list[str]]:
    if decoder == "sctrace":
        return [[str(p)] for p in _sctrace_hostile(d)]
    from tests.xplane.hostile import CASES

    out = []
    for name, (_, build, _) in CASES.items():
        sub = d / f"h-{name.replace('^', '_')}"
        sub.mkdir()
        out.append(build(sub))
    return out


def _inputs(d: Path, decoder: str, n: int, rng: random.Random, seeds: list[bytes]):
    """(class, paths) for each input; files written under `d`."""
    from tests.fuzzkit import apply

    hostile = _hostile_inputs(d, decoder)
    suffix = ".sctrace" if decoder == "sctrace" else ".xplane.pb"
    for i in range(n):
        cls = CLASSES[i % len(CLASSES)]
        if cls == "hostile":
            yield cls, hostile[(i // len(CLASSES)) % len(hostile)]
            continue
        kinds = {
            "mutation": ("value", "text"),
            "bytes": ("flip", "insert", "delete"),
            "truncation": ("truncate",),
            "concatenation": ("concat", "splice"),
        }[cls]
        muts = [
            (rng.choice(kinds), rng.getrandbits(32), rng.getrandbits(24 if rng.random() < 0.9 else 64))
            for _ in range(rng.randint(1, 2 if cls == "mutation" else 4 if cls == "bytes" else 1))
        ]
        data = apply(rng.choice(seeds), muts, rng.choice(seeds), sctrace=decoder == "sctrace")
        path = d / f"in-{i}{suffix}"
        path.write_bytes(data)
        yield cls, [str(path)]


# ------------------------------------------------------------------ worker (one store, many inputs)


def worker(db: str, base: str) -> None:
    """Read JSON requests (paths, decoder) on stdin; answer one JSON outcome line each."""
    from profiler.store import Store
    from profiler.trace_to_store import ingest_traces
    from tests.fuzzkit import Hang, check_ingest

    with Store.open(db) as store:
        if not store.con.execute("SELECT count(*) FROM runs").fetchall()[0][0]:
            ingest_traces(store, [base])
        for line in sys.stdin:
            req = json.loads(line)
            try:
                out = {"outcome": check_ingest(store, req["paths"], req["decoder"] == "xspace", seconds=req["timeout"])}
            except Hang:
                out = {"outcome": "hang"}
            except BaseException as e:  # a broken property or an internal error
                out = {"outcome": "other", "error": f"{type(e).__name__}: {str(e)[:300]}"}
            print(json.dumps(out), flush=True)


class Worker:
    def __init__(self, db: str, base: str):
        self.db, self.base, self.proc = db, base, None

    def ask(self, req: dict, timeout_s: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--worker", self.db, self.base],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            self.kill()
            return {"outcome": "hang"}
        line = self.proc.stdout.readline()
        if not line:
            self.kill()
            return {"outcome": "other", "error": "the worker died"}
        return json.loads(line)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=1000, help="inputs per decoder")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--timeout", type=int, default=60, help="seconds per input before it counts as a hang")
    ap.add_argument("--keep", help="copy inputs that end 'other' or 'hang' into this directory")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(*args.worker)
    from tests.fuzzkit import seeds
    from tests.xplane.helpers import JAX_SMALL

    rng = random.Random(args.seed)
    counts: dict = {}
    failures = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        all_seeds = seeds(root)
        for decoder in ("sctrace", "xspace"):
            d = root / decoder
            d.mkdir()
            w = Worker(str(d / "store.duckdb"), JAX_SMALL)
            per = counts[decoder] = {c: dict.fromkeys(OUTCOMES, 0) for c in CLASSES}
            for i, (cls, paths) in enumerate(_inputs(d, decoder, args.inputs, rng, all_seeds[decoder])):
                out = w.ask({"paths": paths, "decoder": decoder, "timeout": args.timeout}, args.timeout + 30)
                per[cls][out["outcome"]] += 1
                if out["outcome"] in ("other", "hang"):
                    failures.append({"decoder": decoder, "class": cls, "input": i, **out})
                    print(f"{decoder} input {i} ({cls}): {out}", file=sys.stderr)
                    if args.keep:
                        os.makedirs(args.keep, exist_ok=True)
                        for p in paths:
                            if os.path.isfile(p):
                                shutil.copy(p, os.path.join(args.keep, f"{decoder}-{i}-{os.path.basename(p)}"))
                for p in paths:
                    if p.startswith(str(d / "in-")):
                        os.remove(p)
            w.kill()
    totals = {dec: {o: sum(c[o] for c in per.values()) for o in OUTCOMES} for dec, per in counts.items()}
    print(
        json.dumps(
            {
                "benchmark": "fuzz_decoders",
                "inputs_per_decoder": args.inputs,
                "seed": args.seed,
                "totals": totals,
                "by_class": counts,
                "failures": len(failures),
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
