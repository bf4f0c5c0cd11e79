"""Re-derive a bundled limits file from the runs its header names (and check it is fresh).

Each file in configs/limits/ starts with `# derived from: CONFIG [KEY=VALUE ...]` lines
(CONFIG relative to configs/). Every such run is recorded with
`flags.xla_sparse_core_estimate_max_ids=true` (all its steps; with dropping instead of
minibatching, which changes no observed count) and the limits it derives
(one `[stacks.NAME]` per stack) are merged, in order, into the file. A file naming two runs
covers both stackings (a pathology and its fix stack differently); a run ignores the
sections of stacks it does not have, with a warning. `# leaves out: STACK ...` names stacks
the file must not give limits (a lone table keeping the limits set on it).

    python configs/limits/derive.py configs/limits/baseline_limits.toml   # rewrite it
    python configs/limits/derive.py --check configs/limits/*.toml          # exit 1 when stale
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import tomllib

LIMITS_DIR = os.path.dirname(os.path.abspath(__file__))
CONFIG_DIR = os.path.dirname(LIMITS_DIR)
sys.path.insert(0, os.path.dirname(CONFIG_DIR))

from sim_backend.limits import write_limits_file  # noqa: E402
from sim_backend.recording.record import record_run  # noqa: E402

MARK = "# derived from:"
EXCLUDE = "# leaves out:"  # stacks the file must not name (they keep the limits set on their table)


def sources(path: str) -> list[tuple[str, list[str]]]:
    """The (config, overrides) runs a limits file's header names."""
    out = []
    with open(path) as fh:
        for line in fh:
            if line.startswith(MARK):
                config, *overrides = line[len(MARK) :].split()
                out.append((os.path.join(CONFIG_DIR, config), overrides))
    if not out:
        raise SystemExit(f"{path}: no '{MARK} CONFIG [KEY=VALUE ...]' line")
    return out


def left_out(path: str) -> set[str]:
    with open(path) as fh:
        return {name for line in fh if line.startswith(EXCLUDE) for name in line[len(EXCLUDE) :].split()}


def derive(path: str) -> dict[str, tuple[int, int]]:
    """Per stack, the limits the header's runs derive (later runs add their stacks)."""
    limits: dict[str, tuple[int, int]] = {}
    skip = left_out(path)
    for config, overrides in sources(path):
        with tempfile.TemporaryDirectory() as out:
            # the observed counts do not depend on the limits; dropping instead of minibatching keeps
            # a run with limits too low (or a stale limits file) from stopping
            fixed = ["sparsecore.allow_id_dropping=true", "sparsecore.enable_minibatching=false"]
            res = record_run(
                config, [*overrides, *fixed, "flags.xla_sparse_core_estimate_max_ids=true"], "derive", None, out
            )
            with open(res.limits_path, "rb") as fh:
                for name, entry in tomllib.load(fh)["stacks"].items():
                    if name in skip:
                        continue
                    limits.setdefault(name, (entry["max_ids_per_partition"], entry["max_unique_ids_per_partition"]))
    return limits


def current(path: str) -> dict[str, tuple[int, int]]:
    with open(path, "rb") as fh:
        stacks = tomllib.load(fh).get("stacks", {})
    return {k: (v["max_ids_per_partition"], v["max_unique_ids_per_partition"]) for k, v in stacks.items()}


def rewrite(path: str, limits: dict[str, tuple[int, int]]) -> None:
    """The file again: its header comment kept, then a [stacks.NAME] section per stack."""
    with open(path) as fh:
        header = [line.rstrip("\n")[1:].removeprefix(" ") for line in fh if line.startswith("#")]
    write_limits_file(path, limits, "\n".join(header))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when a file is stale")
    args = ap.parse_args()
    stale = 0
    for path in args.files:
        limits = derive(path)
        if args.check:
            if limits != current(path):
                print(f"{path}: stale (re-derive it: python configs/limits/derive.py {path})")
                stale += 1
        else:
            rewrite(path, limits)
            print(f"{path}: {len(limits)} stacks")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
