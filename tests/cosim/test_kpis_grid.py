"""Grid-coordination KPIs on hand-computed series (cosim/kpis/grid.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cosim.kpis import grid as k


def test_voltage_violation_seconds_and_integral():
    vm_min = [0.96, 0.94, 0.93, 0.95, np.nan]
    vm_max = [1.00, 1.00, 1.06, 1.05, np.nan]
    # step 2 under, step 3 under and over; 0.95 and 1.05 exactly are inside the band
    assert k.voltage_violation_s(vm_min, vm_max, 60.0) == 120.0
    # (0.01) + (0.02 + 0.01) = 0.04 pu, held 60 s each
    assert k.voltage_violation_pu_s(vm_min, vm_max, 60.0) == pytest.approx(2.4)
    block = k.voltage_kpis(vm_min, vm_max, 60.0)
    assert (block["vm_min_pu"], block["vm_max_pu"]) == (0.93, 1.06)
    with pytest.raises(ValueError, match="dt_s"):
        k.voltage_violation_s(vm_min, vm_max, 0.0)


def test_line_overload_and_load_factor():
    assert k.line_overload_s([80.0, 100.0, 100.5, 130.0], 900.0) == 1800.0
    assert k.line_overload_s([80.0, 95.0], 60.0, limit_pct=90.0) == 60.0
    assert k.load_factor_frac([1.0, 2.0, 3.0, 2.0]) == pytest.approx(2.0 / 3.0)
    assert math.isnan(k.load_factor_frac([0.0, 0.0]))


def test_losses_against_a_baseline():
    assert k.throughput_loss_frac([90.0, 100.0], [100.0, 100.0]) == pytest.approx(0.05)
    assert k.slo_loss_frac([0.9, 1.0], [1.0, 1.0]) == pytest.approx(0.05)
    assert k.jct_slowdown_ratio([1.0, 2.0, 3.0], [1.0, 2.0, np.nan]) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="equal windows"):
        k.throughput_loss_frac([1.0], [1.0, 2.0])


def test_energy_in_window_wraps_midnight():
    index = pd.date_range("2024-07-15T22:00Z", periods=4, freq="1h")  # 22, 23, 0, 1 h
    p = pd.Series([1.0, 2.0, 4.0, 8.0], index=index)
    assert k.energy_in_window_mwh(p, 23.0, 1.0, 3600.0) == 6.0
    assert k.energy_in_window_mwh(p, 0.0, 24.0, 3600.0) == 15.0


def test_run_kpis_via_compute_and_versus_baseline_pick_their_columns():
    """The grid block of cosim.kpis.compute (which uses these functions) and versus_baseline."""
    from cosim import kpis as kpis_module

    index = pd.date_range("2024-07-15", periods=3, freq="1min")
    ts = pd.DataFrame({"feeder.vm_min_pu": [0.96, 0.94, 0.95], "feeder.vm_max_pu": [1.0, 1.0, 1.0],
                       "feeder.max_loading_pct": [90.0, 110.0, 120.0], "campus.p_mw": [1.0, 2.0, 3.0],
                       "campus.tokens_per_s": [90.0, 90.0, 90.0], "campus.slo_attainment_frac": [1.0, 0.9, 0.8],
                       "campus.jct_mean_h": [1.0, 1.1, 1.2], "campus.delay_gpu_h": [0.0, 5.0, 10.0]}, index=index)
    from cosim.roles import RunRoles

    kpis = kpis_module.compute(ts.assign(**{"feeder.p_import_mw": 1.0}), 60.0,
                               RunRoles({"feeder": "grid", "campus": "it"}))
    assert kpis["feeder"]["voltage_violation_s"] == 60.0
    assert kpis["feeder"]["voltage_violation_pu_s"] == pytest.approx(0.6)
    assert kpis["feeder"]["line_overload_s"] == 120.0
    assert kpis["entities"]["campus"]["load_factor_frac"] == pytest.approx(2.0 / 3.0)
    base = ts.assign(**{"campus.tokens_per_s": 100.0, "campus.slo_attainment_frac": 1.0,
                        "campus.jct_mean_h": [1.0, 1.0, 1.0], "campus.delay_gpu_h": [0.0, 1.0, 4.0]})
    cost = k.versus_baseline(ts, base)["campus"]
    assert cost["throughput_loss_frac"] == pytest.approx(0.1)
    assert cost["slo_loss_frac"] == pytest.approx(0.1)
    assert cost["jct_slowdown_ratio"] == pytest.approx(1.2)
    assert cost["delay_added_gpu_h"] == 6.0
