"""The step rules in words, and the HBM counters: what docs, the UI and the analyzers say about
the analysis standard library's figures (its SQL: profiler/sql/stdlib/)."""

from __future__ import annotations

from collections.abc import Sequence

# The counters whose sum is the HBM in use (stdlib.memory's hbm_usage names them too; a test checks).
HBM_COUNTERS = ("HBM heap", "HBM stack")

# step_times.counted, in words (docs, the UI's notes).
COUNTED_RULE = "warm-up and drain excluded: every step but a run's first and last, when it has 5 or more"


def steps_covered(steps: Sequence[int], counted: Sequence[bool]) -> str:
    """Which steps a summary over `steps` (in order, with step_times.counted) covers, for people:
    'over 18 counted steps, 1–18 of 0–19 (warm-up and drain excluded)'."""
    kept = [s for s, c in zip(steps, counted, strict=True) if c]
    if not kept:
        return f"no counted step among the {len(steps)} shown (a run's first and last step are not counted)"
    why = "warm-up and drain excluded" if len(kept) < len(steps) else "every step shown"
    if len(kept) == 1:  # 'over 1 counted step, step 0 (every step shown)'
        among = f" of {steps[0]}–{steps[-1]}" if len(steps) > 1 else ""
        return f"over 1 counted step, step {kept[0]}{among} ({why})"
    return f"over {len(kept)} counted steps, {kept[0]}–{kept[-1]} of {steps[0]}–{steps[-1]} ({why})"
