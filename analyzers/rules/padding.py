"""Padding waste, read from the table layout the producer recorded before step 0 (events of
category `compile` named `table_layout`, one per table): rows padded to 32 bytes, and
vocabularies padded to a multiple of the SparseCore count. The stacking analyzer reports these
findings beside its own (analyzers/rules/stacking.py), as both read the same layout.

- `padding_waste`: stacks whose tables' own rows are at least half padding and matter (share of
  the run's table bytes or of its lookups); critical from 3/4 padding on a big share; info
  where only the element type (int8, bf16) narrows the row.
- `vocab_padding_waste`: vocabulary padding above 5% of the run's table bytes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from analyzers.context import RunContext
from analyzers.findings import Finding, make_fix
from profiler import sqltree
from profiler.units import format_value

ROW_WASTE_WARN = 0.5  # rows at least half padding (f32 width <= 4, bf16 width <= 8)
ROW_WASTE_CRITICAL = 0.75
MATTERS_WARN = 0.01  # the stack's share of table bytes or of lookups for a warning
MATTERS_CRITICAL = 0.10
VOCAB_WASTE_WARN = 0.05  # vocabulary padding bytes, share of all table bytes
ACTIVATION_BYTES = 4  # f32 activations and gradients (and the library's activation-memory split)


def own_rows(ctx: RunContext, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each table's own row: the layout records its stack's width (the widest of its tables, as the
    SparseCores see the stack), so a narrow table stacked with wider ones (a width-2 table in a
    width-8 stack) shows no padding there; the config gives its own width. Also its weight in its
    stack's lookups: IDs per sample over the features that read it (the config's bag sizes, else
    the layout's feature count)."""
    widths = {t.get("name"): t.get("width") for t in ctx.config.get("tables") or [] if t.get("width")}
    load: dict[str, float] = defaultdict(float)
    for f in ctx.config.get("features") or []:
        hi = f.get("multi_hot") or 1
        load[f.get("table")] += (hi + (f.get("multi_hot_min") or hi)) / 2
    out = []
    for r in rows:
        width = min(widths.get(r["table_name"]) or r["width"], r["width"])
        row = width * r["dtype_bytes"]
        out.append(
            {
                **r,
                "own_width": width,
                "own_row_bytes": row,
                "own_row_padding_bytes": r["vocab"] * (r["padded_row_bytes"] - row),
                "own_row_padding_share": 1 - row / r["padded_row_bytes"],
                "lookup_weight": load.get(r["table_name"]) or r["features"] or 1,
            }
        )
    return out


def row_padding(ctx: RunContext, rows: list[dict], stacks: dict, total_padded: int, total_ids: int) -> list[Finding]:
    """Narrow rows padded to 32 bytes, in HBM and on every lookup, per stack: its tables whose
    own rows are at least half padding.

    Who pads them decides the severity. A feature narrower than a padded f32 row (width < 8: the
    32 bytes hold 8 f32 values) pads the table row and, as activations and gradients are f32, every
    row a lookup moves: widening it uses bytes the model pays for anyway. A feature at least that
    wide whose row is narrow only by its element type (int8 or bf16 at width 8-31) pads the
    table row alone, the activations and gradients being unpadded f32 rows as wide as before: most
    bytes a lookup moves are not padding, and a wider feature costs f32 activations the
    quantization did not save. That is reported at info.
    """
    by_stack: dict[str, list[dict]] = defaultdict(list)
    for r in own_rows(ctx, rows):
        by_stack[r["stack_name"]].append(r)
    out = []
    for name, members in sorted(by_stack.items()):
        narrow = [r for r in members if r["own_row_padding_share"] >= ROW_WASTE_WARN]
        if not narrow:
            continue
        stored = sum(r["vocab"] * r["padded_row_bytes"] for r in narrow) or 1
        pad_bytes = sum(r["own_row_padding_bytes"] for r in narrow)
        share = pad_bytes / stored
        bytes_share = sum(r["padded_bytes"] for r in narrow) / total_padded
        ids = (stacks.get(name) or {}).get("ids") or 0
        weight = sum(r["lookup_weight"] for r in narrow) / (sum(r["lookup_weight"] for r in members) or 1)
        lookup_share = ids / total_ids * weight if total_ids else 0.0
        matters = max(bytes_share, lookup_share)
        if matters < MATTERS_WARN:
            continue
        by_dtype = all(r["own_width"] * ACTIVATION_BYTES >= r["padded_row_bytes"] for r in narrow)
        critical = share >= ROW_WASTE_CRITICAL and matters >= MATTERS_CRITICAL
        names = [r["table_name"] for r in narrow]
        widths = sorted({r["own_width"] for r in narrow})
        padded_width = narrow[0]["padded_width"]
        out.append(
            Finding(
                rule="padding_waste",
                severity="info" if by_dtype else "critical" if critical else "warning",
                title=(
                    f"{name}: rows of width {'/'.join(map(str, widths))} are {format_value(share, 'share')} padding ({len(names)} table"
                    f"{'s' if len(names) > 1 else ''}, {bytes_share:.1%} of table bytes, {lookup_share:.1%} of lookups)"
                    + (f"; {narrow[0]['dtype_bytes']}-byte elements pad only the table rows" if by_dtype else "")
                ),
                metric="row_padding_share",
                value=share,
                unit="share of each row",
                recommendation=(
                    f"Rows are padded to 32 bytes ({padded_width} elements), so widen the features to use it, "
                    f"e.g. --set tables.{names[0]}.width={padded_width}, or pack several narrow features into one "
                    "wider table; the padding costs HBM and bandwidth on every lookup either way."
                    if not by_dtype
                    else f"The rows are narrow by their {narrow[0]['dtype_bytes']}-byte elements, not by the feature "
                    f"width: 32-byte rows hold {padded_width} of them, so below that width the quantized rows save "
                    "less than their element size suggests; the f32 activations and gradients are not padded."
                ),
                evidence={
                    "width": widths[0],
                    "padded_width": padded_width,
                    "row_padding_bytes": pad_bytes,
                    "padded_bytes": sum(r["padded_bytes"] for r in narrow),
                    "share_of_table_bytes": bytes_share,
                    "share_of_lookups": lookup_share,
                    "padded_by": "element type" if by_dtype else "feature width",
                    "tables": names,
                },
                entities={"tables": sorted(names)},
                evidence_sql=sqltree.show("evidence.stacking.layout_stack", run=ctx.run_id, stack=name),
                # wider features change the model
                fix=None
                if by_dtype
                else make_fix(set={f"tables.{t}.width": padded_width for t in names}, changes_numerics=True),
            )
        )
    return out


def vocab_padding(ctx: RunContext, rows: list[dict], total_padded: int) -> Finding | None:
    """Vocabularies padded to a multiple of the SparseCore count, when it adds up."""
    wasted = sum(r["vocab_padding_bytes"] for r in rows)
    share = wasted / total_padded
    if share < VOCAB_WASTE_WARN:
        return None
    worst = sorted(rows, key=lambda r: -r["vocab_padding_bytes"])[:10]
    return Finding(
        rule="vocab_padding_waste",
        severity="warning",
        title=f"Vocabulary padding is {format_value(share, 'share')} of the table bytes (tiny vocabularies padded to the SparseCore count)",
        metric="vocab_padding_share",
        value=share,
        unit="share of table bytes",
        recommendation=(
            "Vocabularies are padded to a multiple of the SparseCore count: merge tiny-vocabulary features into one "
            "table (feature stacking, an ID offset per feature) so their padding is paid once."
        ),
        evidence={"vocab_padding_bytes": wasted, "padded_bytes": total_padded},
        entities={"tables": [r["table_name"] for r in worst]},
        evidence_sql=sqltree.show("evidence.stacking.layout_vocab", run=ctx.run_id),
    )
