"""Make the committed JAX CPU capture written both ways: `jaxhost.xplane.pb` and the
`jaxhost.trace.json.gz` jax.profiler writes beside it (`create_perfetto_trace=True`).

The same tiny MLP training loop as make_jax_captures.py (plain SGD on JAX's CPU backend, each step
in `jax.profiler.StepTraceAnnotation`), 5 steps, so the tests can import one capture from its
XSpace and from its Chrome trace JSON and compare the two runs (tests/profiler/test_chrome_json.py).
JAX also writes `perfetto_trace.json.gz` (the same events for ui.perfetto.dev); it is not kept.

Not part of the package or the test run (jax is not a dependency). To remake:

    python3 -m venv /tmp/jax-venv && /tmp/jax-venv/bin/pip install jax
    /tmp/jax-venv/bin/python tests/data/make_jax_trace_json.py
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
sys.path.insert(0, HERE)
from make_jax_captures import init, train_step  # noqa: E402  (the same model and step)

RUN_DIR = os.path.join(HERE, "jax_cpu_json", "plugins", "profile", "run1")
STEPS = 5


def main() -> None:
    print(f"jax {jax.__version__}, devices {jax.devices()}", file=sys.stderr)
    key = jax.random.PRNGKey(0)
    params = init(key)
    x = jax.random.normal(key, (16, 32))
    y = jnp.ones((16, 8))
    params = train_step(params, x, y)  # compile outside the capture
    jax.block_until_ready(params)
    logdir = tempfile.mkdtemp(prefix="jaxjson-")
    with jax.profiler.trace(logdir, create_perfetto_trace=True):
        for step in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                params = train_step(params, x, y)
                jax.block_until_ready(params)
    shutil.rmtree(os.path.join(HERE, "jax_cpu_json"), ignore_errors=True)
    os.makedirs(RUN_DIR)
    for suffix in (".xplane.pb", ".trace.json.gz"):
        (src,) = [
            p
            for p in glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*" + suffix))
            if not os.path.basename(p).startswith("perfetto")
        ]
        dst = os.path.join(RUN_DIR, "jaxhost" + suffix)
        shutil.copyfile(src, dst)
        print(f"{dst}: {os.path.getsize(dst):,} bytes", file=sys.stderr)
    shutil.rmtree(logdir)


if __name__ == "__main__":
    main()
