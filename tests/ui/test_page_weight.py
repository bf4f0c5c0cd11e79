"""Pages stay light for Dash's renderer (issue 19's first view within 1 s): every component of a
page is re-checked by the renderer on each update of the store, about 2 ms per component per view
on this machine (benchmarks/ui_browser.py), so long folded listings are one component of text.
Compare's derived config keys: every key with both values, aligned, as one <pre>."""

from __future__ import annotations

import json

from analyzers.compare import config_diff
from tests.ui.test_data import find
from ui import compare_data as CD
from ui.pages.compare import render_compare_verdict


def count(tree) -> int:
    if isinstance(tree, list | tuple):
        return sum(count(c) for c in tree)
    if tree is None or isinstance(tree, str | int | float):
        return 0
    return 1 + count(getattr(tree, "children", None))


def test_compares_derived_keys_are_one_text_block_with_every_key_and_both_values(mixed, mixed_ids):
    base, cand = mixed_ids["baseline"], mixed_ids["tuned"]
    top, _ = render_compare_verdict(mixed, {"base": base, "cand": cand})
    details = find(top, "compare-config-derived-details")
    assert count(details) == 3  # the fold, its summary and one block of text
    lines = find(details, "compare-config-derived").children.split("\n")
    configs = [
        json.loads(mixed.rows("SELECT config FROM runs WHERE run_id = ?", [r])[0]["config"]) for r in (base, cand)
    ]
    derived = CD.split_config_diff(config_diff(*configs))["derived"]
    assert len(derived) > 50 and len(lines) == len(derived) + 1
    assert lines[0].split() == ["key", "baseline", "→", "tuned"]
    at_values = lines[0].index("baseline")  # the keys' column is as wide as the longest key
    for line, r in zip(lines[1:], derived, strict=True):
        base_text, cand_text = (v if isinstance(v, str) else json.dumps(v) for v in (r["base"], r["cand"]))
        cut = [t if len(t) <= 100 else t[:100] + "…" for t in (base_text, cand_text)]
        assert (line[:at_values].rstrip(), line[at_values:]) == (r["key"], f"{cut[0]} → {cut[1]}")
