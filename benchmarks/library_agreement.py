"""scprof's SparseCore input path against jax-tpu-embedding on many generated workloads: the table.

Draws N workloads (tests/sim_backend/library_cases.py: 1-40 tables, widths 1-128, every
optimizer and combiner, 1-8 chips of v4/v5p/v6e, fixed and ragged bags, uniform / Zipf /
hot-set IDs, limits from ample to far too low, dropping and minibatching on and off),
preprocesses one step of each with scprof and with the library (in a child process), and
prints per quantity: the cases where both gave a value, the cases where they agree, and
what the values spanned. Last line: one JSON object.

Usage: python benchmarks/library_agreement.py [--cases 250] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from sim_backend.reference_preprocess import ReferenceSession  # noqa: E402
from tests.sim_backend.library_cases import compare_step, quantity, random_case  # noqa: E402


def _span(values: list) -> str:
    nums = [v for v in values if isinstance(v, (int, np.integer))]
    if not nums:
        return ""
    return f"{min(nums):,} .. {max(nums):,}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=250)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    seen: dict[str, int] = defaultdict(int)
    agree: dict[str, int] = defaultdict(int)
    values: dict[str, list] = defaultdict(list)
    stopped = both_stopped = 0
    stacks = []
    with ReferenceSession() as session:
        for case in range(args.cases):
            raw = random_case(rng)
            cmp = compare_step(session, raw, case % 2)
            lib_err, my_err = cmp.stopped
            stopped += bool(lib_err) or bool(my_err)
            both_stopped += bool(lib_err) and bool(my_err)
            per_case: dict[str, bool] = {}
            differing = set(cmp.differing())
            for key, (theirs, _ours) in cmp.values.items():
                q = quantity(key)
                same = key not in differing
                per_case[q] = per_case.get(q, True) and same
                if q in ("minibatches", "dropped_ids"):
                    values[q].append(int(theirs))
                elif q == "kept_entries" and isinstance(theirs, int):
                    values[q].append(theirs)
            for q, ok in per_case.items():
                seen[q] += 1
                agree[q] += ok
            stacks.append(sum(1 for k in cmp.values if k.startswith("kept_entries")))
    rows = [
        {"quantity": q, "cases": seen[q], "agree": agree[q], "span": _span(values.get(q, []))}
        for q in (
            "outcome",
            "minibatches",
            "max_ids_per_partition",
            "max_unique_ids_per_partition",
            "required_buffer_size",
            "dropped_ids",
            "kept_entries",
            "unique_ids_per_minibatch",
        )
    ]
    print(
        f"{args.cases} workloads (seed {args.seed}), {sum(stacks):,} stacks; {stopped} stopped on a side "
        f"({both_stopped} on both: the library aborts where scprof raises)"
    )
    print("| quantity | cases | agree | values (library) |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['quantity']} | {r['cases']} | {r['agree']} | {r['span']} |")
    print(
        json.dumps(
            {
                "benchmark": "library_agreement",
                "cases": args.cases,
                "seed": args.seed,
                "stacks": sum(stacks),
                "stopped": stopped,
                "stopped_on_both": both_stopped,
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
