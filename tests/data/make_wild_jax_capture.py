"""Make tests/data/wild/jax_cpu_4dev_collectives/: a JAX CPU capture over 4 devices with collectives.

The corpus of real captures (tests/data/wild/, see its PROVENANCE.md files) holds captures
made elsewhere; this one is made here, to cover what those lack: JAX on the CPU with
`--xla_force_host_platform_device_count=4`, a data-parallel step under `shard_map` whose
gradient is all-reduced (`psum`) across the 4 devices, a second jitted function with an
all-gather, several XLA executor threads, and `StepTraceAnnotation` steps.

Not part of the package or the test run (jax is not a dependency). To remake:

    python3 -m venv /tmp/jax-venv && /tmp/jax-venv/bin/pip install jax
    /tmp/jax-venv/bin/python tests/data/make_wild_jax_capture.py

The content depends on the JAX version and machine; tests read what the file holds.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import glob  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from functools import partial  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh  # noqa: E402
from jax.sharding import PartitionSpec as P

try:
    from jax import shard_map  # noqa: E402
except ImportError:  # older JAX
    from jax.experimental.shard_map import shard_map  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "wild", "jax_cpu_4dev_collectives")
MESH = Mesh(jax.devices()[:4], ("d",))


def loss(w, x, y):
    return jnp.mean((jnp.tanh(x @ w) - y) ** 2)


@jax.jit
@partial(shard_map, mesh=MESH, in_specs=(P(), P("d"), P("d")), out_specs=P())
def train_step(w, x, y):
    g = jax.grad(loss)(w, x, y)
    return w - 0.01 * jax.lax.psum(g, "d") / 4  # all-reduce of the gradient across the 4 devices


@jax.jit
@partial(shard_map, mesh=MESH, in_specs=(P("d"),), out_specs=P("d"))
def gathered_norm(x):
    return jnp.linalg.norm(jax.lax.all_gather(x, "d", tiled=True))[None]  # all-gather, then a reduction


def main() -> None:
    print(f"jax {jax.__version__}, devices {jax.devices()}", file=sys.stderr)
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    w = jax.random.normal(k1, (256, 256)) * 0.05
    x = jax.random.normal(k2, (512, 256))
    y = jnp.zeros((512, 256))
    jax.block_until_ready(gathered_norm(train_step(w, x, y)))  # compile outside the capture
    logdir = tempfile.mkdtemp(prefix="jaxwild-")
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # no Python function events: the file stays small
    with jax.profiler.trace(logdir, profiler_options=options):
        for step in range(6):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                w = train_step(w, x, y)
                jax.block_until_ready(gathered_norm(w))
    (src,) = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
    run_dir = os.path.join(OUT, "plugins", "profile", "run1")
    shutil.rmtree(os.path.join(OUT, "plugins"), ignore_errors=True)
    os.makedirs(run_dir)
    dst = os.path.join(run_dir, "jaxhost.xplane.pb")
    shutil.copyfile(src, dst)
    shutil.rmtree(logdir)
    print(f"{dst}: {os.path.getsize(dst):,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
