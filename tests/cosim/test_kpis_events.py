"""Event-window KPIs (cosim/kpis/events.py) on a hand-computed series."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.kpis import events
from cosim.kpis._block import KpiInput
from cosim.roles import RunRoles

T0 = pd.Timestamp("2024-07-16T00:00:00Z")


def _input() -> KpiInput:
    """Eight 1-minute steps; events in steps 2-3 and 5-7. The meter reaches its 0.6 MW target one
    step into the first event and two into the second; the cluster's work counter grows 1 GPU-h a step
    outside events and 0.5 inside, its slowdown 0.5 inside."""
    active = [0, 0, 1, 1, 0, 1, 1, 1]
    p_mw = [1.0, 1.0, 1.0, 0.6, 1.0, 1.0, 0.8, 0.6]
    work = np.cumsum([1.0, 1.0, 0.5, 0.5, 1.0, 0.5, 0.5, 0.5])
    slow = np.cumsum([0.0, 0.0, 0.5, 0.5, 0.0, 0.5, 0.5, 0.5])
    ts = pd.DataFrame({
        "events.event_active": np.array(active, bool),
        "campus.p_mw": p_mw, "campus.work_gpu_h": work, "campus.slowdown_gpu_h": slow,
        "campus.p_gpu_mw": [0.5] * 8, "campus.tokens_per_s": [10.0] * 8,
        "resp.p_target_mw": [np.nan, np.nan, 0.6, 0.6, np.nan, 0.6, 0.6, 0.6],
        "resp.p_metered_mw": p_mw, "resp.p_baseline_mw": [1.0] * 8,
    }, index=pd.date_range(T0, periods=8, freq="1min"))
    return KpiInput(ts, 1 / 60, 60.0, RunRoles({"campus": "it", "events": "signal", "resp": "controller"}))


def test_windows_and_growth_of_counters():
    assert events.windows(np.array([0, 1, 1, 0, 1], bool)) == [(1, 3), (4, 5)]
    # growth over a window = last inside - last before: (3 - 1) + (5 - 4)
    assert events.growth(np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0]), [(2, 4), (5, 6)]) == 3.0


def test_the_block_by_hand():
    out = events._compute(_input())["events"]
    assert [w["duration_h"] for w in out["windows"]] == pytest.approx([2 / 60, 3 / 60])
    assert out["duration_h"] == pytest.approx(5 / 60)
    campus = out["campus"]
    assert campus["energy_mwh"] == pytest.approx((1.0 + 0.6 + 1.0 + 0.8 + 0.6) / 60)
    assert campus["work_gpu_h"] == pytest.approx(2.5) and campus["slowdown_gpu_h"] == pytest.approx(2.5)
    assert campus["slowdown_frac"] == pytest.approx(0.5)
    assert campus["n_tokens"] == pytest.approx(10.0 * 5 * 60)
    assert campus["p_gpu_mean_mw"] == pytest.approx(0.5)
    resp = out["resp"]
    errors = np.array([0.4, 0.0, 0.4, 0.2, 0.0])
    assert resp["tracking_rmse_mw"] == pytest.approx(np.sqrt(np.mean(errors ** 2)))
    assert resp["tracking_rmse_frac"] == pytest.approx(resp["tracking_rmse_mw"])  # baseline 1 MW
    assert resp["tracking_max_mw"] == pytest.approx(0.4)
    assert resp["response_max_s"] == pytest.approx(120.0)  # the second event: two steps
    assert resp["cut_frac"] == pytest.approx(1 - 4.0 / 5)
    first, second = (w["resp"] for w in out["windows"])
    assert first["response_max_s"] == pytest.approx(60.0) and second["response_max_s"] == pytest.approx(120.0)
    assert first["cut_frac"] == pytest.approx(0.2) and second["cut_frac"] == pytest.approx(1 - 2.4 / 3)


def test_a_meter_below_its_target_has_met_it():
    """A reduction target is a ceiling: overshooting it (0.3 MW under a 0.6 MW target) is a response."""
    inp = _input()
    inp.ts["resp.p_metered_mw"] = [1.0, 1.0, 0.3, 0.3, 1.0, 0.3, 0.3, 0.3]
    assert events._compute(inp)["events"]["resp"]["response_max_s"] == 0.0


def test_a_target_never_met_has_no_response_time_and_no_events_no_block():
    inp = _input()
    inp.ts["resp.p_metered_mw"] = 1.0
    assert events._compute(inp)["events"]["resp"]["response_max_s"] is None
    inp.ts["events.event_active"] = False
    assert events._compute(inp) == {}
