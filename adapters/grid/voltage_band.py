"""Voltages against a band: the extremes, the summed distance outside it and the count outside,
NaN-safe, with numpy's sums (the grid adapter's all-bus and per-element voltage outputs)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["band_stats", "band_stats_one", "nan_extremes"]


#: ``a.min()`` / ``a.max()`` without ndarray's Python wrappers (they call these reductions)
_min, _max = np.minimum.reduce, np.maximum.reduce


def nan_extremes(values: np.ndarray) -> tuple[float, float]:
    """``(np.nanmin, np.nanmax)`` of ``values``; NaN for both when none is finite.

    One NaN filter for both (min and max are exact, so the numbers are nanmin's and nanmax's),
    and none when every value is finite (the usual case).
    """
    if len(values):
        lowest, highest = float(_min(values)), float(_max(values))
        if math.isfinite(lowest) and math.isfinite(highest):
            return lowest, highest
    if not np.isfinite(values).any():
        return math.nan, math.nan
    present = values[~np.isnan(values)]
    return float(present.min()), float(present.max())


def band_stats(vm: np.ndarray, low: float, high: float) -> dict[str, float]:
    """Lowest, highest, Σ distance outside ``[low, high]`` and count strictly outside, NaN-safe. [pu, pu, pu, -]"""
    if len(vm) < 8:  # an element's phases: plain floats beat numpy's per-call cost, same sums (in order)
        return _band_stats_few(vm.tolist(), low, high)
    lowest, highest = float(_min(vm)), float(_max(vm))
    finite = vm
    if not (math.isfinite(lowest) and math.isfinite(highest)):  # a NaN (or inf) reading: leave it out
        finite = vm[np.isfinite(vm)]
        if not len(finite):
            return {"vm_phase_min_pu": math.nan, "vm_phase_max_pu": math.nan, "vm_violation_pu": math.nan,
                    "n_violating": 0}
        lowest, highest = float(finite.min()), float(finite.max())
    # a side nobody crosses sums to exactly 0.0, so it is skipped; the other is numpy's own sum
    under = float(np.maximum(low - finite, 0.0).sum()) if lowest < low else 0.0
    over = float(np.maximum(finite - high, 0.0).sum()) if highest > high else 0.0
    n_under = int(np.count_nonzero(finite < low)) if lowest < low else 0
    n_over = int(np.count_nonzero(finite > high)) if highest > high else 0
    return {"vm_phase_min_pu": lowest, "vm_phase_max_pu": highest, "vm_violation_pu": under + over,
            "n_violating": n_under + n_over}


def _band_stats_few(vm: list[float], low: float, high: float) -> dict[str, float]:
    """:func:`band_stats` for a few values (numpy sums fewer than 8 numbers in order, as here)."""
    if len(vm) == 1:  # a balanced net's element: one reading
        return band_stats_one(vm[0], low, high)
    finite = [v for v in vm if math.isfinite(v)]
    if not finite:
        return {"vm_phase_min_pu": math.nan, "vm_phase_max_pu": math.nan, "vm_violation_pu": math.nan,
                "n_violating": 0}
    under = [max(low - v, 0.0) for v in finite]
    over = [max(v - high, 0.0) for v in finite]
    return {"vm_phase_min_pu": min(finite), "vm_phase_max_pu": max(finite),
            "vm_violation_pu": _in_order(under) + _in_order(over),
            "n_violating": sum(1 for u, o in zip(under, over) if u > 0 or o > 0)}


def band_stats_one(v: float, low: float, high: float) -> dict[str, float]:
    """:func:`band_stats` of a single reading ``v`` (a balanced net's element), without an array. [pu, pu, pu, -]"""
    if not math.isfinite(v):
        return {"vm_phase_min_pu": math.nan, "vm_phase_max_pu": math.nan, "vm_violation_pu": math.nan,
                "n_violating": 0}
    under, over = max(low - v, 0.0), max(v - high, 0.0)
    return {"vm_phase_min_pu": v, "vm_phase_max_pu": v, "vm_violation_pu": under + over,
            "n_violating": 1 if under > 0 or over > 0 else 0}


def _in_order(values: list[float]) -> float:
    total = 0.0
    for value in values:
        total += value
    return total
