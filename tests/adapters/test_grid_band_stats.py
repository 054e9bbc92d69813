"""The grid's band statistics (all-bus and per element): the few-values path in plain floats gives
numpy's numbers bit for bit, NaN readings are ignored, and the definitions hold by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cosim.adapters.grid.voltage_band import band_stats


def numpy_band_stats(vm: np.ndarray, low: float, high: float) -> dict[str, float]:
    finite = vm[np.isfinite(vm)]
    if not len(finite):
        return {"vm_phase_min_pu": math.nan, "vm_phase_max_pu": math.nan, "vm_violation_pu": math.nan,
                "n_violating": 0}
    under, over = np.clip(low - finite, 0.0, None), np.clip(finite - high, 0.0, None)
    return {"vm_phase_min_pu": float(finite.min()), "vm_phase_max_pu": float(finite.max()),
            "vm_violation_pu": float(under.sum() + over.sum()), "n_violating": int(((under > 0) | (over > 0)).sum())}


@pytest.mark.parametrize("n", [*range(0, 12), 16, 33, 40])
def test_same_numbers_as_numpy(n):
    """Both paths (plain floats below 8 values, numpy's with its in-band shortcuts above) against
    the plain numpy definition: readings across the band, inside it, on one side only, with NaN."""
    rng = np.random.default_rng(n)
    for k in range(2_000):
        lo, hi = [(0.85, 1.12), (0.96, 1.04), (0.85, 1.0), (1.0, 1.12)][k % 4]
        vm = rng.uniform(lo, hi, n)
        if n and rng.random() < 0.2:
            vm[rng.integers(0, n)] = np.nan
        if n and rng.random() < 0.05:
            vm[:] = np.nan
        want, got = numpy_band_stats(vm, 0.95, 1.05), band_stats(vm, 0.95, 1.05)
        assert set(got) == set(want)
        for key, value in want.items():
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(got[key])
            else:
                assert got[key] == value and type(got[key]) is type(value), (key, vm)


def test_by_hand():
    """0.93 is 0.02 below 0.95, 1.06 is 0.01 above 1.05, 1.0 is inside; NaN is not a reading."""
    stats = band_stats(np.array([0.93, 1.0, np.nan, 1.06]), 0.95, 1.05)
    assert stats["vm_phase_min_pu"] == 0.93 and stats["vm_phase_max_pu"] == 1.06
    assert stats["vm_violation_pu"] == pytest.approx(0.03, abs=1e-12)
    assert stats["n_violating"] == 2
