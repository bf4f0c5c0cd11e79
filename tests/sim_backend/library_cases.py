"""Random workloads for the differential tests against jax-tpu-embedding, and the comparison.

`random_case(rng)` draws one small workload (tables, features, chips x SparseCores, batch,
ID distributions, limits from ample to far too low, dropping and minibatching on or off);
`compare_step` runs one step through scprof and through the library (a ReferenceSession)
and returns every quantity side by side. Shared by tests/sim_backend/test_library_oracle.py
(hypothesis) and benchmarks/library_agreement.py (the agreement table over many cases).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim_backend.config import config_from_dict
from sim_backend.emulator import setup
from sim_backend.errors import PreprocessError
from sim_backend.generate import generate_step
from sim_backend.preprocess import preprocess_step
from sim_backend.reference_preprocess import ReferenceSession, library_entries, session_setup

WIDTHS = (1, 4, 8, 13, 16, 24, 32, 64, 128)
GENERATIONS = {"v4": 4, "v5p": 4, "v6e": 2}  # SparseCores per chip
QUANTITIES = (
    "minibatches",
    "max_ids_per_partition",
    "max_unique_ids_per_partition",
    "required_buffer_size",
    "dropped_ids",
    "kept_entries",
    "unique_ids_per_minibatch",
    "outcome",
)


def random_case(rng: np.random.Generator, max_tables: int = 40) -> dict:
    """One workload as a raw config (power-of-two SparseCore counts, the library's domain)."""
    gen = str(rng.choice(list(GENERATIONS)))
    chips = int(rng.choice([1, 2, 4, 8]))
    n_sc = chips * GENERATIONS[gen]
    batch = n_sc * int(rng.integers(1, 9)) * int(rng.choice([1, 4]))
    n_tables = int(rng.integers(1, max_tables + 1))
    tables, features = [], []
    for i in range(n_tables):
        vocab = int(rng.choice([1, 7, 100, 1000, 5000, 40_000, 200_000]))
        tables.append(
            {
                "name": f"t{i}",
                "vocab": max(1, int(vocab * rng.uniform(0.5, 1.5))),
                "width": int(rng.choice(WIDTHS)),
                "optimizer": str(rng.choice(["sgd", "adagrad", "adam"], p=[0.2, 0.6, 0.2])),
                "combiner": str(rng.choice(["sum", "mean", "sqrtn"], p=[0.7, 0.2, 0.1])),
            }
        )
    for i in range(n_tables + int(rng.integers(0, 1 + n_tables // 3))):
        table = tables[i] if i < n_tables else tables[int(rng.integers(0, n_tables))]
        hot = int(rng.integers(1, 9))
        f = {"name": f"f{i}", "table": table["name"], "multi_hot": hot}
        if rng.random() < 0.4:
            f["multi_hot_min"] = int(rng.integers(1, hot + 1))
        dist = str(rng.choice(["uniform", "zipf", "hot_set"]))
        f["distribution"] = dist
        if dist == "zipf":
            f["zipf_exponent"] = float(rng.choice([0.8, 1.05, 1.3]))
        if dist == "hot_set":
            f["hot_set_size"] = int(rng.integers(1, 32))
            f["hot_fraction"] = float(rng.uniform(0.2, 0.9))
        features.append(f)
    # limits: ample, around the load, or far too low
    scale = float(rng.choice([0.05, 0.3, 1.0, 4.0, 100.0]))
    load = max(1, int(batch / n_sc * 4 * scale))
    ids = max(1, int(load * rng.uniform(0.5, 1.5)))
    return {
        "name": "case",
        "seed": int(rng.integers(0, 2**31)),
        "steps": 2,
        "global_batch": batch,
        "hardware": {"generation": gen, "num_chips": chips},
        "dense": {"bottom_mlp": [8], "top_mlp": [8, 1], "cross_layers": 0},
        "sparsecore": {
            "max_ids_per_partition": ids,
            "max_unique_ids_per_partition": max(1, int(ids * rng.uniform(0.3, 1.0))),
            "allow_id_dropping": bool(rng.random() < 0.5),
            "enable_minibatching": bool(rng.random() < 0.7),
            "max_ids_per_chip_per_sample": 1 << 30,  # the library has no chip cap
            "disable_table_stacking": bool(rng.random() < 0.1),
        },
        "tables": tables,
        "features": features,
    }


@dataclass
class StepComparison:
    """One step's quantities as (library, scprof), or why it stopped on either side."""

    values: dict[str, tuple[object, object]] = field(default_factory=dict)
    stopped: tuple[str | None, str | None] = (None, None)  # (library, scprof) error text

    def differing(self) -> list[str]:
        return [k for k, (a, b) in self.values.items() if not _same(a, b)]


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


def _kept_set(e: dict[str, np.ndarray], keep: np.ndarray | None = None) -> set[tuple]:
    cols = ("source_sc", "partition", "table", "id", "sample", "feature_slot", "minibatch")
    arrays = [np.asarray(e[c]) if keep is None else np.asarray(e[c])[keep] for c in cols]
    return set(zip(*(a.tolist() for a in arrays), strict=True))


def _unique_per_minibatch(kept: set[tuple]) -> dict[tuple, int]:
    """Distinct IDs per (source SC, partition, minibatch)."""
    out: dict[tuple, set] = {}
    for src, part, table, ident, _sample, _slot, mb in kept:
        out.setdefault((src, part, mb), set()).add((table, ident))
    return {k: len(v) for k, v in out.items()}


def compare_step(session: ReferenceSession, raw: dict, step: int) -> StepComparison:
    """Preprocess one step of `raw` with scprof and with the library; every quantity paired."""
    cfg = config_from_dict(raw)
    _, _, groups, lay = setup(cfg)
    session.setup(session_setup(cfg, groups, lay))
    batches = generate_step(cfg, step)
    out = StepComparison()
    lib = mine = None
    lib_error = my_error = None
    try:
        lib = session.step(step, batches)
    except PreprocessError as e:
        lib_error = str(e)
    try:
        mine = preprocess_step(step, batches, groups, lay, cfg.sparsecore, keep_entries=True)
    except PreprocessError as e:
        my_error = str(e)
    out.stopped = (lib_error, my_error)
    out.values["outcome"] = ("stopped" if lib_error else "ran", "stopped" if my_error else "ran")
    if lib is None or mine is None:
        return out
    out.values["minibatches"] = (lib["minibatches"], mine.minibatches)
    for gr in mine.groups:
        st = lib["stacks"][gr.group.name]
        max_ids, max_uniq, required, dropped = gr.fdo_stats(lay.num_chips)
        name = gr.group.name
        out.values[f"max_ids_per_partition[{name}]"] = (st["max_ids"], max_ids)
        out.values[f"max_unique_ids_per_partition[{name}]"] = (st["max_unique_ids"], max_uniq)
        out.values[f"required_buffer_size[{name}]"] = (st["required_buffer_size"], required)
        out.values[f"dropped_ids[{name}]"] = (st["dropped"], dropped)
        theirs = _kept_set(library_entries(st, gr.group, lay))
        ours = _kept_set(gr.entries, ~gr.entries["dropped"])
        out.values[f"kept_entries[{name}]"] = (len(theirs), len(ours)) if theirs == ours else (theirs, ours)
        out.values[f"unique_ids_per_minibatch[{name}]"] = (_unique_per_minibatch(theirs), _unique_per_minibatch(ours))
    return out


def quantity(key: str) -> str:
    """The quantity a comparison key belongs to (its name without the stack)."""
    return key.split("[", 1)[0]
