"""Run guards (cosim/kpis/guards.py): a controller chattering between its limits, or sitting at its floor.

The chatter case is the droop loop of adapters/controllers/storage_droop.py on its own: stepped
with the grid, ``v_(k+1) = v0 + s·q_k`` and ``q_k = clip(g·(v_ref − v_k), ±q_max)``, which settles
when the loop gain ``s·g < 1`` and swings between ±q_max when it is above 1 (the IEEE 13 case of
issue 31: s ≈ 0.17 pu/Mvar at 675c, g = q_max / 0.045: 0.1 Mvar gives s·g ≈ 0.38, 0.3 Mvar 1.1;
tests/adapters/controllers/test_storage_droop.py runs it against OpenDSS).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.kpis._block import KpiInput
from cosim.kpis.guards import BLOCK, FED_PARAM, chatter_frac, floor_frac, run_warnings
from cosim.roles import RunRoles

S_PU_PER_MVAR, V0_PU, FULL_ERR_PU = 0.17, 0.94, 0.045


def _droop_q(q_max_mvar: float, n: int = 200) -> np.ndarray:
    g = q_max_mvar / FULL_ERR_PU
    v, out = V0_PU, []
    for _ in range(n):
        q = float(np.clip(g * (1.0 - v), -q_max_mvar, q_max_mvar))
        out.append(q)
        v = V0_PU + S_PU_PER_MVAR * q
    return np.array(out)


@pytest.mark.parametrize(("q_max", "fires"), [(0.05, False), (0.1, False), (0.2, False), (0.3, True), (0.6, True)])
def test_chatter_fires_exactly_when_the_loop_gain_is_above_one(q_max, fires):
    gain = S_PU_PER_MVAR * q_max / FULL_ERR_PU
    assert (gain > 1.0) is fires  # the premise: the loop gain decides
    assert (chatter_frac(_droop_q(q_max)) >= 0.3) is fires


def test_floor_needs_a_knob_that_started_high_and_stayed_low():
    knob = np.r_[np.full(10, 128.0), np.linspace(128, 8, 10), np.full(80, 8.0)]
    assert floor_frac(knob) == pytest.approx(0.81)      # 80 steps at 8 plus the arrival, of 100
    assert floor_frac(np.r_[knob[:50], np.full(50, 128.0)]) == pytest.approx(0.31)  # came back: 31 of 100, below 50 %
    dual = np.r_[np.zeros(10), np.ones(5), np.zeros(85)]  # a diagnostic at 0 most of the time
    assert floor_frac(dual) == 0.0
    assert floor_frac(np.full(100, 5.0)) == 0.0          # never moved
    assert floor_frac(np.r_[np.full(10, 100.0), np.full(90, 50.0)]) == 0.0  # a floor at half: not saturated


def _input(frame: pd.DataFrame, roles: RunRoles) -> KpiInput:
    frame.index = pd.date_range("2024-01-01", periods=len(frame), freq="1s", tz="UTC")
    return KpiInput(ts=frame, dt_h=1 / 3600, step_s=1.0, roles=roles, links={})


def test_only_controllers_are_judged_and_the_warning_reaches_the_run():
    n = 200
    frame = pd.DataFrame({"droop.q_mvar": _droop_q(0.3, n), "ofo.n_batch_max": np.r_[128.0, np.full(n - 1, 8.0)],
                          "site.p_mw": np.r_[10.0, np.zeros(n - 1)], "calm.q_mvar": _droop_q(0.1, n)})
    roles = RunRoles(entities={"droop": "controller", "ofo": "controller", "calm": "controller", "site": "it"})
    kpis = BLOCK.compute(_input(frame, roles))
    assert set(kpis["guards"]) == {"droop.q_mvar", "ofo.n_batch_max"}
    texts = run_warnings(kpis)
    assert any("droop.q_mvar swings between its limits" in t for t in texts)
    assert any("ofo.n_batch_max sits at its floor (8)" in t for t in texts)
    assert BLOCK.compute(_input(frame[["calm.q_mvar"]].copy(), roles)) == {}


def test_only_setpoints_that_feed_another_entity_are_judged_and_sentinels_are_no_range():
    """A dual variable decaying to 0 (constraints met) is a diagnostic, not a knob at its floor; a
    facility limit that starts at the 1e6 MW "no limit" sentinel and then holds 148 MW is not saturated."""
    n = 100
    frame = pd.DataFrame({"ofo.lambda_per_pu": np.r_[5.0, np.zeros(n - 1)],
                          "ofo.n_batch_max": np.r_[128.0, np.full(n - 1, 8.0)],
                          "ffr.p_limit_mw": np.r_[np.full(10, 1e6), np.full(n - 10, 148.6)]})
    roles = RunRoles(entities={"ofo": "controller", "ffr": "controller"})
    inp = _input(frame, roles)
    everything = BLOCK.compute(inp)["guards"]
    assert set(everything) == {"ofo.lambda_per_pu", "ofo.n_batch_max"}  # the sentinel never counts as a range
    fed = KpiInput(ts=inp.ts, dt_h=inp.dt_h, step_s=1.0, roles=roles, links={},
                   params={FED_PARAM: ["ofo.n_batch_max", "ffr.p_limit_mw"]})
    assert set(BLOCK.compute(fed)["guards"]) == {"ofo.n_batch_max"}
