"""Make the committed real captures of a host-bound and a prefetched training loop.

A DLRM-like step (embedding lookups summed into an MLP, trained with SGD) on JAX's CPU
backend, fed by a host input pipeline that reads a batch (a 12 ms wait, as on storage or
the network) and preprocesses it in numpy (hash, clip and sort the IDs):

- host_bound: the training loop preprocesses each batch in line, so the device (here the
  XLA CPU executor thread) waits for the host every step;
- prefetched: a pool of 4 threads prepares batches ahead; the loop only takes them.
- two_hosts: two processes run the host-bound loop at the same time, one capture each,
  laid out as a TPU pod writes them (one `<host>.xplane.pb` per host in one run directory);
- missing_stats: the prefetched capture with the stats newer XProf versions drop or widen
  removed (`hlo_op`, `correlation_id`) and `program_id` beyond 2**31, rewritten with the
  official protobuf classes (tests read it to check the import does not depend on them).

Each step is wrapped in `jax.profiler.StepTraceAnnotation` and the batch preparation in
`jax.profiler.TraceAnnotation("preprocess_batch")`; the script measures each step's wall
time with time.perf_counter around the annotation and writes them to `<capture>.steps.json`
next to the capture, the reference the tests compare scprof's step times with.

Not part of the package or the test run (jax is not a dependency). To remake:

    python3 -m venv /tmp/jax-venv && /tmp/jax-venv/bin/pip install jax protobuf
    /tmp/jax-venv/bin/python tests/data/make_input_captures.py
"""

from __future__ import annotations

import glob
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "input_pipeline")
STEPS = 16
BATCH, FEATURES, VOCAB, DIM = 256, 8, 20_000, 32
READ_WAIT_S = 0.012  # the batch read: storage or network latency the host waits for
WORKERS = 4


def make_batch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Read and preprocess one batch on the host: wait for the read, then hash, clip and sort IDs."""
    with jax.profiler.TraceAnnotation("preprocess_batch"):
        time.sleep(READ_WAIT_S)
        rng = np.random.default_rng(seed)
        raw = rng.zipf(1.2, size=(BATCH, FEATURES * 4)).astype(np.int64)
        ids = (raw * 2654435761) % VOCAB
        ids = np.sort(ids, axis=1)[:, :FEATURES].astype(np.int32)
        labels = (ids.sum(axis=1) % 2).astype(np.float32)
        return ids, labels


def init(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "table": jax.random.normal(k1, (VOCAB, DIM)) * 0.01,
        "w1": jax.random.normal(k2, (DIM, 512)) * 0.05,
        "w2": jax.random.normal(k3, (512, 1)) * 0.05,
    }


def loss(params, ids, labels):
    emb = jnp.take(params["table"], ids, axis=0).sum(axis=1)
    h = jax.nn.relu(emb @ params["w1"])
    for _ in range(4):  # enough TensorCore-like work for the device to be visibly busy
        h = jax.nn.relu(h @ (params["w1"].T @ params["w1"]) * 0.01 + h)
    logits = (h @ params["w2"])[:, 0]
    return jnp.mean((jax.nn.sigmoid(logits) - labels) ** 2)


@jax.jit
def train_step(params, ids, labels):
    grads = jax.grad(loss)(params, ids, labels)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


def run_loop(mode: str, logdir: str) -> list[float]:
    """Train STEPS steps under the profiler; returns each step's wall time in seconds."""
    params = init(jax.random.PRNGKey(0))
    ids, labels = make_batch(0)
    params = train_step(params, ids, labels)  # compile outside the capture
    jax.block_until_ready(params)
    pool = ThreadPoolExecutor(WORKERS) if mode == "prefetched" else None
    ahead: queue.Queue = queue.Queue()
    if pool:
        for s in range(WORKERS * 2):
            ahead.put(pool.submit(make_batch, s + 1))
    walls = []
    with jax.profiler.trace(logdir):
        for step in range(STEPS):
            t0 = time.perf_counter()
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                if pool:
                    ids, labels = ahead.get().result()
                    ahead.put(pool.submit(make_batch, step + 1 + WORKERS * 2))
                else:
                    ids, labels = make_batch(step + 1)
                params = train_step(params, ids, labels)
                jax.block_until_ready(params)
            walls.append(time.perf_counter() - t0)
    if pool:
        pool.shutdown(wait=True, cancel_futures=True)
    return walls


def save(logdir: str, dst_dir: str, host: str, walls: list[float]) -> str:
    (src,) = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
    os.makedirs(dst_dir, exist_ok=True)
    dst = os.path.join(dst_dir, f"{host}.xplane.pb")
    shutil.copyfile(src, dst)
    with open(dst[: -len(".xplane.pb")] + ".steps.json", "w") as f:
        json.dump({"step_wall_s": walls, "jax": jax.__version__, "steps": STEPS}, f, indent=1)
    print(f"{dst}: {os.path.getsize(dst):,} bytes, mean step {np.mean(walls[1:-1]) * 1e3:.2f} ms", file=sys.stderr)
    return dst


def strip_stats(src: str, dst: str) -> None:
    """The capture as a newer XProf writes it: no hlo_op / correlation_id, program_id >= 2**31."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
    from profiler.xspace import xplane_pb2  # the official XSpace classes, generated from XProf's proto

    space = xplane_pb2.XSpace()
    with open(src, "rb") as f:
        space.ParseFromString(f.read())
    for plane in space.planes:
        drop = {i for i, m in plane.stat_metadata.items() if m.name in ("hlo_op", "correlation_id")}
        wide = {i for i, m in plane.stat_metadata.items() if m.name == "program_id"}
        for i in drop:
            del plane.stat_metadata[i]
        for holder in [*plane.event_metadata.values(), *(e for ln in plane.lines for e in ln.events)]:
            keep = [s for s in holder.stats if s.metadata_id not in drop]
            for s in keep:
                if s.metadata_id in wide:
                    s.int64_value = (1 << 31) + s.int64_value + s.uint64_value
            del holder.stats[:]
            holder.stats.extend(keep)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "wb") as f:
        f.write(space.SerializeToString())


def main() -> None:
    if len(sys.argv) == 3:  # one host of the two-host capture (a child process)
        walls = run_loop("host_bound", sys.argv[2])
        print(json.dumps(walls))
        return
    print(f"jax {jax.__version__}, devices {jax.devices()}", file=sys.stderr)
    shutil.rmtree(OUT, ignore_errors=True)
    for mode in ("host_bound", "prefetched"):
        logdir = tempfile.mkdtemp(prefix=f"jaxcap-{mode}-")
        walls = run_loop(mode, logdir)
        save(logdir, os.path.join(OUT, mode, "plugins", "profile", "run1"), "host0", walls)
        shutil.rmtree(logdir)
    strip_stats(
        os.path.join(OUT, "prefetched", "plugins", "profile", "run1", "host0.xplane.pb"),
        os.path.join(OUT, "missing_stats.xplane.pb"),
    )
    logdirs = [tempfile.mkdtemp(prefix=f"jaxcap-host{h}-") for h in range(2)]
    procs = [subprocess.Popen([sys.executable, __file__, "child", d], stdout=subprocess.PIPE) for d in logdirs]
    for h, (p, d) in enumerate(zip(procs, logdirs, strict=True)):
        walls = json.loads(p.communicate()[0])
        save(d, os.path.join(OUT, "two_hosts", "plugins", "profile", "run1"), f"host{h}", walls)
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
