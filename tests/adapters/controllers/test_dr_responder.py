"""DR event responder: the policy against a toy plant (no mosaik), then scenarios/dr_event.toml
end to end with and without the responder and with levers that cannot suffice.

Issue #6 asks: the responder delivers >= 95 % of the requested reduction when its levers
suffice, and reports the shortfall when they don't; the no-control baseline breaks the
request. The toy plant makes the second case exact: its levers can give 0.2 MW, so the
shortfall of a 0.5 MW request is 0.3 MW.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

import cosim
from cosim.adapters.controllers.dr_responder import Responder, ResponderParams
from cosim.kpis import dr as kpis_dr

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "dr_event.toml"
STEP_S = 60
EVENT = (120, 300)  # event steps [start, end)
NOTICE = 30


def run_toy(params: ResponderParams, reduction_mw=0.5, cap_mw=None, dc_floor_mw=1.2, n=400):
    """A site of a 2.0 MW cluster (follows p_limit_mw down to dc_floor_mw), a 0.3 MW chiller
    plant (a tank saves 0.15 MW per MW of cooling) and a battery; setpoints act one step later."""
    responder = Responder(params, STEP_S)
    setpoints = {"p_set_mw": 0.0, "q_charge_cmd_mw": 0.0, "p_limit_mw": math.nan}
    soc, rows = 0.9, []
    for k in range(n):
        t = k * STEP_S
        active = EVENT[0] <= k < EVENT[1]
        notice = (EVENT[0] - k) * STEP_S if NOTICE <= k < EVENT[0] else (0.0 if active else None)
        limit = setpoints["p_limit_mw"]
        p_dc = 2.0 if math.isnan(limit) else max(min(2.0, limit), dc_floor_mw)
        p_cool = 0.3 + 0.15 * min(setpoints["q_charge_cmd_mw"], 0.0)
        p_bat = setpoints["p_set_mw"] if soc > 0.1 or setpoints["p_set_mw"] > 0 else 0.0
        soc -= -p_bat * STEP_S / 3600 / 1.0 if p_bat < 0 else 0.0
        m = {"event_active": active, "dr_reduction_mw": reduction_mw if active and cap_mw is None else 0.0,
             "dr_cap_mw": cap_mw if active else None, "dr_notice_s": notice,
             "dr_remaining_s": (EVENT[1] - k) * STEP_S if active else None,
             "p_site_mw": p_dc + p_cool + p_bat, "p_dc_mw": p_dc, "soc_frac": soc}
        out = responder.step(t, m)
        rows.append({**out, "p_site_mw": m["p_site_mw"], "soc": soc})
        setpoints = {key: out[key] for key in setpoints}
    return pd.DataFrame(rows)


def event_rows(frame):
    return frame.iloc[EVENT[0]:EVENT[1]]


def test_delivers_the_request_when_levers_suffice():
    frame = run_toy(ResponderParams(battery_p_max_mw=0.2, tank_q_max_mw=1.0, tank_mw_per_mw=0.15))
    ev = event_rows(frame)
    assert ev["dr_delivered_mw"].sum() >= 0.95 * ev["dr_requested_mw"].sum()
    # after the first step (setpoints act one step late) every interval meets the request
    assert (ev["dr_delivered_mw"].iloc[1:] > 0.5 - 1e-6).all()
    assert ev["dr_shortfall_mw"].iloc[1:].max() < 1e-6
    assert ev["p_baseline_mw"].iloc[0] == pytest.approx(2.3)


def test_reports_the_shortfall_when_levers_do_not_suffice():
    # levers: 0.1 MW battery + the cluster from 2.0 down to its 1.9 MW floor = 0.2 MW
    frame = run_toy(ResponderParams(battery_p_max_mw=0.1, p_dc_floor_mw=1.9), dc_floor_mw=1.9)
    ev = event_rows(frame).iloc[2:]
    assert ev["dr_shortfall_mw"].to_numpy() == pytest.approx(0.3, abs=1e-6)
    assert (ev["dr_command_mw"] <= 0.2 + 1e-9).all()  # no wind-up beyond what the levers hold


def test_levers_fill_cheapest_first():
    small = event_rows(run_toy(ResponderParams(battery_p_max_mw=0.2, tank_q_max_mw=1.0), reduction_mw=0.1))
    assert small["p_set_mw"].iloc[5] == pytest.approx(-0.1)  # battery alone
    assert small["q_charge_cmd_mw"].iloc[5] == 0.0 and small["p_limit_mw"].isna().all()
    big = event_rows(run_toy(ResponderParams(battery_p_max_mw=0.2, tank_q_max_mw=1.0, tank_mw_per_mw=0.15),
                             reduction_mw=0.6))
    row = big.iloc[10]
    assert row["p_set_mw"] == pytest.approx(-0.2) and row["q_charge_cmd_mw"] == pytest.approx(-1.0)
    assert row["p_limit_mw"] == pytest.approx(2.0 - 0.25, abs=1e-6)  # the rest from the cluster


def test_disabled_only_measures():
    frame = run_toy(ResponderParams(enabled=False, battery_p_max_mw=0.2))
    ev = event_rows(frame)
    assert (ev["p_set_mw"] == 0).all() and ev["p_limit_mw"].isna().all()
    assert ev["dr_delivered_mw"].abs().max() < 1e-9
    assert ev["dr_shortfall_mw"].to_numpy() == pytest.approx(0.5)


def test_cap_event_asks_baseline_minus_cap():
    frame = run_toy(ResponderParams(battery_p_max_mw=0.2), cap_mw=2.0)
    ev = event_rows(frame)
    assert ev["dr_requested_mw"].to_numpy() == pytest.approx(0.3)
    assert (ev["p_site_mw"].iloc[2:] <= 2.0 + 1e-6).all()


def test_release_ramps_down_over_release_s():
    frame = run_toy(ResponderParams(battery_p_max_mw=0.2, release_s=600.0))
    after = frame["dr_command_mw"].iloc[EVENT[1]:EVENT[1] + 12].to_numpy()
    assert np.all(np.diff(after[:11]) < 0)
    assert after[0] == pytest.approx(0.5 * 9 / 10, abs=1e-6)  # one of ten 60 s steps released
    assert after[10] == 0.0


def test_before_notice_baseline_ignores_precooling():
    params = ResponderParams(baseline_method="before_notice", baseline_window_s=600.0, battery_p_max_mw=0.2)
    frame = run_toy(params)
    assert frame["p_baseline_mw"].iloc[EVENT[0]] == pytest.approx(2.3)


def test_params_refuse_a_lowered_max_setpoint():
    with pytest.raises(ValidationError, match="t_chw_max_c"):
        ResponderParams(t_chw_nominal_c=12.0, t_chw_max_c=10.0)


# -- the scenario, end to end -----------------------------------------------------------------
def _run(tmp_path, name, **overrides):
    result = cosim.run(SCENARIO, out_dir=tmp_path / name,
                       overrides={f"entities.responder.{k}": v for k, v in overrides.items()})
    assert result.ok, result.reason
    ts = result.timeseries()
    return ts, kpis_dr.compute(ts, STEP_S / 3600, result.folder.roles())["responder"]


def test_scenario_with_and_without_the_responder(tmp_path):
    ts, with_ctl = _run(tmp_path, "with")
    _, without = _run(tmp_path, "without", enabled=False)
    assert with_ctl["n_event_intervals"] == 180
    assert with_ctl["delivered_frac"] >= 0.95
    assert with_ctl["intervals_met_frac"] >= 0.9
    assert without["delivered_frac"] < 0.2  # the uncontrolled site does not answer
    # the controller's own report and the KPI agree
    ev = ts[ts["responder.dr_requested_mw"] > 0]
    assert (ev["responder.dr_delivered_mw"].mean()) == pytest.approx(with_ctl["delivered_mean_mw"])
    cost = with_ctl["events"][0]["campus"]
    assert cost["delay_gpu_h"] > without["events"][0]["campus"]["delay_gpu_h"]  # curtailment costs GPU-hours


def test_scenario_reports_the_shortfall(tmp_path):
    ts, kpi = _run(tmp_path, "short", battery_p_max_mw=0.0, p_dc_floor_mw=1.95)
    assert kpi["delivered_frac"] < 0.8
    ev = ts[ts["responder.dr_requested_mw"] > 0].iloc[5:]
    reported = ev["responder.dr_shortfall_mw"]
    assert reported.min() > 0.1
    np.testing.assert_allclose(reported, ev["responder.dr_requested_mw"] - ev["responder.dr_delivered_mw"])
