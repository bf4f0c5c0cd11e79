"""Random base workloads: small, healthy-by-construction raw configs (TOML-shaped dicts) the
cause injectors of causes.py start from. Sizes keep one scenario at about a second per run."""

from __future__ import annotations

import copy
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
# Enough prefetched steps that the device never waits for input it could have had: on 2-chip
# bases a depth of 2 left the device waiting (4 made them up to 42% faster, 8 no faster again).
PREFETCH_DEPTH = 4
# The static heap (tables, their optimizer slots, dense weights) a healthy base may take, as a
# share of HBM: the stack, the prefetched inputs and the memory causes need the rest (the memory
# analyzer reports pressure from 85%); larger bases have their vocabularies scaled down.
BASE_HEAP_SHARE = 0.6


def log_uniform_int(rng: random.Random, low: int, high: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def sample_base(seed: int) -> dict[str, Any]:
    """One healthy base workload, a pure function of `seed`: IDs shuffled over the SparseCores
    where they are skewed (Zipf), PREFETCH_DEPTH steps prefetched, the static heap within
    BASE_HEAP_SHARE of HBM."""
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
    base = {
        "name": f"base{seed}",
        "seed": seed,
        "steps": STEPS,
        "global_batch": rng.choice(BATCHES),
        "hardware": {"generation": rng.choice(GENERATIONS), "num_chips": chips},
        "host": {"num_threads": HOST_THREADS},
        "dense": {"bottom_mlp": [256, 128], "top_mlp": [512, 256, 1], "cross_layers": 2, "cross_low_rank": 128},
        "sparsecore": {
            "max_ids_per_chip_per_sample": 4096,
            "allow_id_dropping": False,
            "shuffle_ids": distribution == "zipf",
        },
        "flags": {"maximum_parallel_iterations": PREFETCH_DEPTH, "tf_xla_disable_full_embedding_pipelining": False},
        "tables": tables,
        "features": features,
    }
    fit_heap(base)
    return base


def fit_heap(raw: dict[str, Any]) -> None:
    """Scale the tables' vocabularies down (not below 1,000 rows) until the static heap is within
    BASE_HEAP_SHARE of HBM; the heap grows about linearly with the rows, so a few rounds do."""
    for _ in range(8):
        mem = static_memory(raw)
        share = mem.heap_static / mem.hbm_capacity
        if share <= BASE_HEAP_SHARE:
            return
        scale = 0.95 * BASE_HEAP_SHARE / share
        for t in raw["tables"]:
            t["vocab"] = max(1_000, int(t["vocab"] * scale))


def static_memory(raw: dict[str, Any]) -> Any:
    """What the emulator's compiler knows of `raw` before step 0 (sim_backend.memory.StaticMemory:
    the static heap by contributor, each table group's stack per SparseCore, the HBM capacity)."""
    from sim_backend.config import config_from_dict
    from sim_backend.costmodel import make_cost_model
    from sim_backend.emulator import setup
    from sim_backend.memory import static_memory as compiled_memory

    cfg = config_from_dict(copy.deepcopy(raw))
    hw, _, groups, _ = setup(cfg)
    cost = make_cost_model(cfg.cost_model, hw, cfg.cost, cfg.perf_tables)
    return compiled_memory(cfg, hw, groups, cost)
