"""Pages stay light for Dash's renderer (the target: a first view within 1 s): every component of a
page is re-checked by the renderer on each update of the store, about 2 ms per component per view
on this machine (benchmarks/ui_browser.py), so long folded listings are one component of text.
Compare's derived config keys: every key with both values, aligned, as one <pre>."""

from __future__ import annotations

import json

from analyzers.compare import config_diff
from tests.ui.test_data import find
from ui import compare_data
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
    derived = compare_data.split_config_diff(config_diff(*configs))["derived"]
    assert len(derived) >= 6 and len(lines) == len(derived) + 1  # per stack: limits and their source
    assert lines[0].split() == ["key", "baseline", "→", "tuned"]
    at_values = lines[0].index("baseline")  # the keys' column is as wide as the longest key
    for line, r in zip(lines[1:], derived, strict=True):
        base_text, cand_text = (
            "-" if v is None else v if isinstance(v, str) else json.dumps(v) for v in (r["base"], r["cand"])
        )  # absent on one side: "-"
        cut = [t if len(t) <= 100 else t[:100] + "…" for t in (base_text, cand_text)]
        assert (line[:at_values].rstrip(), line[at_values:]) == (r["key"], f"{cut[0]} → {cut[1]}")


def test_the_figures_template_is_plotly_white_without_the_parts_no_page_draws():
    """ui/render.TEMPLATE: plotly_white's layout and trace defaults for every trace type the pages
    draw, unchanged but for tick labels drawn where they fall (the axes' ticklabeloverflow), and
    none of its geo, polar, ternary, 3-D and map parts (4.7 of its 7.2 KB, sent with every figure)."""
    import plotly.io as pio

    from ui import render

    white = pio.templates["plotly_white"].to_plotly_json()
    kept = render.TEMPLATE["layout"]
    for axis in ("xaxis", "yaxis"):
        assert kept[axis] == {**white["layout"][axis], "ticklabeloverflow": "allow"}
    assert {k: white["layout"][k] for k in kept if k not in ("xaxis", "yaxis")} == {
        k: v for k, v in kept.items() if k not in ("xaxis", "yaxis")
    }
    assert not {"geo", "polar", "ternary", "scene", "mapbox"} & set(kept)
    assert {"xaxis", "yaxis", "colorway", "font", "plot_bgcolor", "hoverlabel"} <= set(kept)
    assert render.TEMPLATE["data"] == {k: white["data"][k] for k in ("bar", "scatter", "heatmap", "histogram")}
    fig = render.figure("t")
    assert fig.layout.template.layout.xaxis.gridcolor == white["layout"]["xaxis"]["gridcolor"]
    assert len(json.dumps(render.TEMPLATE)) < len(json.dumps(white)) / 2


def test_a_figure_takes_the_template_as_if_given_it():
    """render.figure takes the template as plotly.py's default (validated once, not per figure): what it
    sends is the figure made with the template given explicitly, key for key."""
    import plotly.graph_objects as go

    from ui import render

    fig = render.figure("t", xaxis_title="x", barmode="stack")
    given = go.Figure(
        layout=dict(
            template=render.TEMPLATE,
            title="t",
            margin=dict(l=60, r=20, t=40, b=40),
            legend=dict(orientation="h", y=-0.2),
            font=dict(size=12, family=render.FONT_FAMILY),
            xaxis_title="x",
            barmode="stack",
        )
    )
    assert json.dumps(fig.to_plotly_json(), sort_keys=True) == json.dumps(given.to_plotly_json(), sort_keys=True)
    assert fig.to_plotly_json()["layout"]["template"]["layout"]["colorway"] == render.TEMPLATE["layout"]["colorway"]
