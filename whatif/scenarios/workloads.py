"""Random base workloads: small, healthy-by-construction raw configs (TOML-shaped dicts) the
cause injectors of causes.py start from. Sizes keep one scenario at about a second per run."""

from __future__ import annotations

import math
import random
from typing import Any

GENERATIONS = ("v4", "v5p", "v6e")
CHIPS = (1, 2, 4, 8)
BATCHES = (512, 1024, 2048)
WIDTHS = (8, 16, 32, 64, 128, 256)  # healthy widths: multiples of 8 (tiny widths are a cause)
STEPS = 8  # 6 counted steps (the first and last are not counted)
MAX_TABLES = 200
MIN_TABLES = 2
HOST_THREADS = 256  # plenty: the host is never the bottleneck unless a cause says so


def log_uniform_int(rng: random.Random, low: int, high: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def sample_base(seed: int) -> dict[str, Any]:
    """One healthy base workload, a pure function of `seed`."""
    rng = random.Random(seed)
    n_tables = log_uniform_int(rng, MIN_TABLES, MAX_TABLES)
    widths = [rng.choice(WIDTHS) for _ in range(min(3, n_tables))]  # a few width groups, so tables stack
    distribution = rng.choice(("uniform", "uniform", "zipf"))
    tables, features = [], []
    for i in range(n_tables):
        tables.append({"name": f"t{i}", "vocab": log_uniform_int(rng, 1_000, 2_000_000), "width": rng.choice(widths)})
        feature: dict[str, Any] = {"name": f"f{i}", "table": f"t{i}", "multi_hot": rng.choice((1, 1, 2, 4, 8))}
        if distribution == "zipf":
            feature["distribution"] = "zipf"
            feature["zipf_exponent"] = 1.05
        features.append(feature)
    chips = rng.choice(CHIPS)
    return {
        "name": f"base{seed}",
        "seed": seed,
        "steps": STEPS,
        "global_batch": rng.choice(BATCHES),
        "hardware": {"generation": rng.choice(GENERATIONS), "num_chips": chips},
        "host": {"num_threads": HOST_THREADS},
        "dense": {"bottom_mlp": [256, 128], "top_mlp": [512, 256, 1], "cross_layers": 2, "cross_low_rank": 128},
        "sparsecore": {"max_ids_per_chip_per_sample": 4096, "allow_id_dropping": False},
        "flags": {"maximum_parallel_iterations": 2, "tf_xla_disable_full_embedding_pipelining": False},
        "tables": tables,
        "features": features,
    }
