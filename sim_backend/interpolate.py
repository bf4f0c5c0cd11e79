"""Interpolation over performance tables: a rate (bytes/s, FLOP/s) at any point of a grid.

XLA's interpolators look up a *throughput* (collectives: over
transfer size x device count; GEMMs: over batch x m x n x k) as a weighted average of
table points, weighted by Euclidean distance, and estimate time = work / throughput.
XLA weights the 2^N corners of the grid cell around the query by 1 / (squared distance
+ 1) in raw coordinates; that estimate is not exact at the table points (the + 1) and
not monotone between them. We keep its neighbour set (the cell's corners, clamped to
the table's range) and choose the weights so that the estimate is exact and monotone:

* **Coordinates** are log2 of each axis value: the tables are sampled on log scales
  (1 KiB .. 2 GiB, 2/4/8 devices, 256 .. 4096), so a cell is one step on every axis.
* **Weights** are inverse distances to the two bracketing points *along each axis*
  (distance d0 to the lower point, d1 to the upper: weights d1/(d0+d1), d0/(d0+d1)),
  multiplied over the axes. In one dimension this is inverse-distance weighting of the
  two neighbours; over N axes it is multilinear interpolation. A corner weight is 1 at
  that corner and 0 at every other, so table points come back exactly (the product of
  powers below reproduces the stored float), and every weight moves monotonically with
  each coordinate.
* **Averaged quantity** is the log of the rate (a weighted geometric mean). The
  arithmetic mean of throughputs would break the time ordering: between a
  latency-bound 1 KiB point and a 2 KiB point with almost twice its throughput, the
  arithmetic mean makes 1.4 KiB finish *faster* than 1 KiB. With log rates, between two
  points whose rate grows by 2^a per doubling (0 <= a <= 1 when both the rate and the
  time grow with size, as in every measured table) the rate is a power law of exponent
  a, so rate and time = work / rate are both monotone; the multilinear weights keep this
  per axis, because the slope on one axis is a convex mix of the cell edges' slopes.

Outside the table an axis value is clamped to the measured range (XLA's ClampDim):
beyond the largest point the rate stays at the last (saturated) value; what happens
below the smallest point is decided by the caller (perf_tables/tables.py), which knows whether
the axis is a work size or a device count.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GridInterpolator:
    """Rates on a full grid (axis values sorted, unique, > 0): multilinear in (log2 x, log rate)."""

    axes: tuple[np.ndarray, ...]
    rates: np.ndarray  # shape = tuple(len(a) for a in axes), every value > 0

    @classmethod
    def from_points(cls, axes: Sequence[Sequence[float]], rates: np.ndarray) -> GridInterpolator:
        """Build from axis values and the rate array indexed like them (validated by the caller)."""
        return cls(tuple(np.asarray(a, np.float64) for a in axes), np.asarray(rates, np.float64))

    def __call__(self, *coords: np.ndarray | float) -> np.ndarray:
        """The interpolated rate at each point (coords broadcast together; one array per axis)."""
        if len(coords) != len(self.axes):
            raise ValueError(f"expected {len(self.axes)} coordinates, got {len(coords)}")
        xs = np.broadcast_arrays(*(np.asarray(c, np.float64) for c in coords))
        lows, fracs = [], []
        for axis, x in zip(self.axes, xs, strict=True):
            lo, t = _bracket(axis, x)
            lows.append(lo)
            fracs.append(t)
        out = np.ones(xs[0].shape if xs else (), np.float64)
        for corner in itertools.product((0, 1), repeat=len(self.axes)):
            weight = np.ones_like(out)
            index = []
            for bit, lo, t, axis in zip(corner, lows, fracs, self.axes, strict=True):
                weight = weight * (t if bit else 1.0 - t)
                index.append(np.minimum(lo + bit, len(axis) - 1))
            # weighted geometric mean: product of rate ** weight (x ** 0 == 1, x ** 1 == x)
            out = out * np.power(self.rates[tuple(index)], weight)
        return out


def _bracket(axis: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the lower bracketing point of each x and its fraction of the way to the next.

    Fraction = d_low / (d_low + d_high) in log2 coordinates, i.e. the weight of the upper
    point under inverse-distance weighting of the two neighbours. Clamped to the range.
    """
    if len(axis) == 1:
        return np.zeros(x.shape, np.intp), np.zeros(x.shape, np.float64)
    lx = np.log2(axis)
    q = np.log2(np.clip(x, axis[0], axis[-1]))
    lo = np.clip(np.searchsorted(lx, q, side="right") - 1, 0, len(axis) - 2)
    t = (q - lx[lo]) / (lx[lo + 1] - lx[lo])
    return lo, np.clip(t, 0.0, 1.0)
