"""Make the committed JAX CPU captures used by tests/test_xplane_*.py.

Real `.xplane.pb` files from `jax.profiler` (an XSpace per host), so the XProf
importer is tested on what users actually have, not only on files scprof wrote.
JAX runs on the CPU here; the model is a tiny MLP trained with plain SGD, every
step wrapped in `jax.profiler.StepTraceAnnotation` so the host plane carries
`step_num` stats.

Not part of the package or the test run (jax is not a dependency). To remake:

    python3 -m venv /tmp/jax-venv && /tmp/jax-venv/bin/pip install jax
    /tmp/jax-venv/bin/python tests/data/make_jax_captures.py

It writes, next to this script:
- jax_cpu_train/plugins/profile/run1/jaxhost.xplane.pb: a logdir as XProf lays it
  out (one file per host; the host file is renamed from the machine's hostname);
- jax_cpu_small.xplane.pb: a second, shorter capture as a bare file.

Files are kept well under 1 MB (few steps, small arrays); the content depends on
the JAX version and machine, so tests count what the file holds instead of
hard-coding numbers.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile

import jax
import jax.numpy as jnp

HERE = os.path.dirname(os.path.abspath(__file__))


def init(key, sizes=(32, 64, 8)):
    params = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        key, sub = jax.random.split(key)
        params.append((jax.random.normal(sub, (a, b)) * 0.1, jnp.zeros(b)))
    return params


def loss(params, x, y):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return jnp.mean((x @ w + b - y) ** 2)


@jax.jit
def train_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads, strict=True)]


def capture(steps: int) -> str:
    """Profile `steps` training steps; returns the path of the written .xplane.pb."""
    key = jax.random.PRNGKey(0)
    params = init(key)
    x = jax.random.normal(key, (16, 32))
    y = jnp.ones((16, 8))
    params = train_step(params, x, y)  # compile outside the capture
    jax.block_until_ready(params)
    logdir = tempfile.mkdtemp(prefix="jaxcap-")
    with jax.profiler.trace(logdir):
        for step in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                params = train_step(params, x, y)
                jax.block_until_ready(params)
    (path,) = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
    return path


def main() -> None:
    print(f"jax {jax.__version__}, devices {jax.devices()}", file=sys.stderr)
    run_dir = os.path.join(HERE, "jax_cpu_train", "plugins", "profile", "run1")
    shutil.rmtree(os.path.join(HERE, "jax_cpu_train"), ignore_errors=True)
    os.makedirs(run_dir)
    for src, dst in (
        (capture(5), os.path.join(run_dir, "jaxhost.xplane.pb")),
        (capture(3), os.path.join(HERE, "jax_cpu_small.xplane.pb")),
    ):
        shutil.copyfile(src, dst)
        shutil.rmtree(src.split(os.sep + "plugins" + os.sep)[0])
        print(f"{dst}: {os.path.getsize(dst):,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
