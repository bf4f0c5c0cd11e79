"""SPMEM headroom per table group: would buffers sized to the observed load fit a tile's SPMEM?

A group's compiled limits size its SparseCore buffers statically: per tile,
the ID buffer (a COO entry per ID: row id, column id and weight, 4 bytes each), the
unique-ID buffer (the ID and its position, 4 bytes each) and the gather operand staging
((sample_count * feature_width) / kNumTiles activations of 4 bytes). When a group's
observed per-partition load exceeds its limits the step is split into minibatches; raising
the limits to the observed maxima removes them unless the buffers would then overflow
SPMEM, and only then is SPMEM the binding constraint (a smaller stack has a smaller load).

The byte counts above are this module's reading of the buffers; they are calibrated on the
trace: the run's `SPMEM per tile` counter holds what the largest group's buffers take at
its compiled limits, and every estimate is scaled by recorded / computed for that group.
Reads sc_partition_stats, the table layout, the run's hardware header and config.
"""

from __future__ import annotations

from typing import Any

from analyzers.context import RunContext

ID_BYTES = 12  # a COO entry per ID: row id, column id, weight
UNIQUE_ID_BYTES = 8  # a unique ID and its position
ACTIVATION_BYTES = 4  # f32 gather staging


def buffer_bytes_per_tile(ids: int, unique_ids: int, samples: int, width: int, tiles: int) -> int:
    """SPMEM one tile holds for a group compiled with these limits (see the module docstring)."""
    return (
        -(-ids // tiles) * ID_BYTES
        + -(-unique_ids // tiles) * UNIQUE_ID_BYTES
        + -(-samples * width // tiles) * ACTIVATION_BYTES
    )


def headroom(ctx: RunContext) -> dict[str, dict[str, Any]]:
    """Per table group: compiled limits, observed maxima, tables, the SPMEM per tile at both
    (calibrated) and the tile's capacity; `binding` says whether buffers sized to the observed
    load would overflow SPMEM (None when the run lacks the capacity or the stats). Cached."""
    return ctx.memo("spmem_headroom", lambda: _headroom(ctx))


def _headroom(ctx: RunContext) -> dict[str, dict[str, Any]]:
    rows = ctx.sql("analysis.sparsecore.spmem_groups").to_pylist()
    if not rows:
        return {}
    tiles = ctx.hardware("tiles_per_sparsecore")
    capacity = ctx.hardware("spmem_bytes_per_tile")
    chips, spc = ctx.hardware("num_chips"), ctx.hardware("sparsecores_per_chip")
    batch = ctx.config.get("global_batch")
    samples = batch // (chips * spc) if batch and chips and spc else 0  # unknown: no gather term
    recorded = ctx.sql("analysis.sparsecore.spmem_recorded").to_pylist()[0]["v"]
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        ok = tiles and r["limit_ids"] and r["limit_unique_ids"] and r["observed_ids"] is not None
        width = r["width"] or 0
        at_limits = buffer_bytes_per_tile(r["limit_ids"], r["limit_unique_ids"], samples, width, tiles) if ok else None
        at_observed = (
            buffer_bytes_per_tile(r["observed_ids"], r["observed_unique_ids"] or 0, samples, width, tiles)
            if ok
            else None
        )
        gather = -(-samples * width // tiles) * ACTIVATION_BYTES if ok else None
        out[r["table_name"]] = {
            **r,
            "spmem_at_limits_bytes": at_limits,
            "spmem_at_observed_bytes": at_observed,
            "gather_bytes": gather,
            "capacity_bytes": capacity,
        }
    computed = [g["spmem_at_limits_bytes"] for g in out.values() if g["spmem_at_limits_bytes"]]
    scale = recorded / max(computed) if recorded and computed else 1.0
    for g in out.values():
        for key in ("spmem_at_limits_bytes", "spmem_at_observed_bytes", "gather_bytes"):
            if g[key] is not None:
                g[key] = int(round(g[key] * scale))
        need = g["spmem_at_observed_bytes"]
        g["calibration"] = scale
        g["binding"] = None if need is None or not capacity else need > capacity
    return out


def pieces_to_fit(group: dict[str, Any]) -> int:
    """Stacks to split a group into so each piece's observed load fits SPMEM (the load spreads
    over the pieces with their tables; the gather staging stays per piece)."""
    need, gather, cap = group["spmem_at_observed_bytes"], group["gather_bytes"] or 0, group["capacity_bytes"]
    room = cap - gather
    if room <= 0:
        return group["tables"]
    return max(1, min(group["tables"], -(-(need - gather) // room)))
