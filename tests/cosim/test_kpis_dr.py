"""DR KPIs on hand-computed series (cosim/kpis/dr.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.kpis import dr as kpis_dr
from cosim.roles import RunRoles

T0 = pd.Timestamp("2024-07-16T00:00:00Z")


def series(values, step_min=60, start=T0):
    return pd.Series(values, index=pd.date_range(start, periods=len(values), freq=f"{step_min}min"), dtype=float)


def test_meter_before_baseline_is_the_mean_of_the_window():
    p = series([1.0, 2.0, 3.0, 4.0, 9.0])
    assert kpis_dr.baseline_meter_before(p, T0 + pd.Timedelta(hours=4), window_h=2.0) == pytest.approx(3.5)
    with pytest.raises(ValueError, match="no samples"):
        kpis_dr.baseline_meter_before(p, T0, window_h=1.0)


def test_dr_performance_by_hand():
    # baseline 10 MW; requested 2 MW in hours 1-3; draws 8, 8.5, 7 -> delivered 2, 1.5, 3
    p = series([10.0, 8.0, 8.5, 7.0, 10.0])
    requested = series([0.0, 2.0, 2.0, 2.0, 0.0])
    kpi = kpis_dr.dr_performance(p, 10.0, requested, dt_h=1.0)
    assert kpi["n_event_intervals"] == 3
    assert kpi["delivered_mean_mw"] == pytest.approx(6.5 / 3)
    assert kpi["delivered_frac"] == pytest.approx(6.5 / 6.0)
    assert kpi["intervals_met_frac"] == pytest.approx(2 / 3)  # 1.5 < 0.95 * 2
    assert kpi["energy_reduction_mwh"] == pytest.approx(6.5)
    assert kpi["shortfall_mwh"] == pytest.approx(0.5)
    assert kpi["shortfall_max_mw"] == pytest.approx(0.5)


def test_no_event_gives_no_figures():
    assert kpis_dr.dr_performance(series([1.0, 1.0]), 1.0, series([0.0, 0.0]), 1.0) == {"n_event_intervals": 0}


def test_rebound_counts_only_draw_above_the_baseline_in_the_window():
    p = series([5.0, 3.0, 6.0, 5.5, 4.0, 7.0])
    out = kpis_dr.rebound(p, baseline_mw=5.0, end=T0 + pd.Timedelta(hours=2), window_h=3.0, dt_h=1.0)
    assert out["rebound_mwh"] == pytest.approx(1.0 + 0.5)  # hours 2, 3, 4; hour 5 is outside
    assert out["rebound_peak_mw"] == pytest.approx(1.0)


def test_10in10_averages_the_same_interval_over_eligible_weekdays():
    # 14 days of hourly data: day d draws d MW all day; 2024-07-01 is a Monday
    start = pd.Timestamp("2024-07-01T00:00:00Z")
    days = np.repeat(np.arange(14, dtype=float), 24)
    p = series(days, start=start)
    event_start = pd.Timestamp("2024-07-15T14:00:00Z")  # Monday of the third week
    base = kpis_dr.baseline_10in10(p, event_start, event_start + pd.Timedelta(hours=2),
                                   excluded_dates={pd.Timestamp("2024-07-12").date()})
    # eligible: the weekdays before Mon 15th without Fri 12th: 11-8 and 5-1 July, only 9 in
    # the data, drawing 10, 9, 8, 7, 4, 3, 2, 1, 0 MW -> mean 44 / 9
    assert len(base) == 2
    assert base.to_numpy() == pytest.approx([44 / 9, 44 / 9])
    with pytest.raises(ValueError, match="no eligible day"):
        kpis_dr.baseline_10in10(p, start + pd.Timedelta(hours=5), start + pd.Timedelta(hours=6))


def test_performance_cost_is_the_growth_of_cumulative_delay():
    delay = series([0.0, 1.0, 3.0, 6.0, 6.0])
    base = series([0.0, 1.0, 2.0, 3.0, 4.0])
    slo = series([1.0, 0.9, 0.8, 1.0, 1.0])
    out = kpis_dr.performance_cost(delay, T0 + pd.Timedelta(hours=2), T0 + pd.Timedelta(hours=4), slo, base)
    assert out["delay_gpu_h"] == pytest.approx(6.0 - 1.0)  # from the last value before the start
    assert out["delay_gpu_h_extra"] == pytest.approx(5.0 - 2.0)
    assert out["slo_attainment_mean_frac"] == pytest.approx(0.9)


def test_events_finds_each_run_of_requests():
    requested = series([0, 1, 1, 0, 0, 2, 0])
    assert kpis_dr.events(requested) == [(T0 + pd.Timedelta(hours=1), T0 + pd.Timedelta(hours=3)),
                                         (T0 + pd.Timedelta(hours=5), T0 + pd.Timedelta(hours=6))]


def test_compute_reads_a_responders_columns():
    idx = pd.date_range(T0, periods=4, freq="60min")
    ts = pd.DataFrame({"r.dr_requested_mw": [0.0, 1.0, 1.0, 0.0], "r.dr_delivered_mw": [0.0, 1.0, 0.5, 0.0],
                       "r.p_baseline_mw": [np.nan, 5.0, 5.0, 5.0], "r.p_metered_mw": [5.0, 4.0, 4.5, 5.5]}, index=idx)
    out = kpis_dr.compute(ts, 1.0, RunRoles({"r": "controller"}))["r"]
    assert out["delivered_frac"] == pytest.approx(0.75)
    assert out["events"][0]["rebound_mwh"] == pytest.approx(0.5)
