"""What smoothing cost (cosim/kpis/smoothing.py): Σ p·Δt of the floor and the rack losses, the ramp
limiter's cumulative withheld GPU-hours, and the share of the energy spent on them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.kpis._block import KpiInput
from cosim.kpis.smoothing import BLOCK
from cosim.roles import RunRoles


def _input(frame: pd.DataFrame, step_s: float = 0.5) -> KpiInput:
    frame.index = pd.date_range("2024-01-01", periods=len(frame), freq=pd.Timedelta(seconds=step_s), tz="UTC")
    cols = list(BLOCK.columns(list(frame.columns), RunRoles()))
    return KpiInput(ts=frame[cols], dt_h=step_s / 3600.0, step_s=step_s, roles=RunRoles(), links={})


def test_floor_rack_and_ramp_costs_by_hand():
    n = 7200  # one hour at 0.5 s
    frame = pd.DataFrame({"campus.p_mw": np.full(n, 100.0), "campus.p_floor_mw": np.full(n, 5.0),
                          "campus.p_rack_loss_mw": np.full(n, 1.0), "campus.ramp_lost_gpu_h": np.linspace(0, 12.5, n),
                          "other.p_mw": np.full(n, 3.0)})
    out = BLOCK.compute(_input(frame))["smoothing"]
    assert list(out) == ["campus"]                      # only entities with smoothing outputs
    c = out["campus"]
    assert c["floor_mwh"] == pytest.approx(5.0) and c["rack_loss_mwh"] == pytest.approx(1.0)
    assert c["energy_mwh"] == pytest.approx(100.0) and c["cost_energy_frac"] == pytest.approx(0.06)
    assert c["ramp_lost_gpu_h"] == pytest.approx(12.5)


def test_no_smoothing_outputs_no_block():
    assert BLOCK.compute(_input(pd.DataFrame({"campus.p_mw": [1.0, 2.0]}))) == {}
