"""Storage Q–V / P–V droop (adapters/controllers/storage_droop.py): the curve by hand, and a
closed loop on IEEE 13 that lifts the low phase it measures.

The curve is OpenG2G's ``LocalVoltageStorageDroopController`` (gpu2grid/openg2g,
``openg2g/controller/storage.py``: deadband, then linear to the limit at
``full_output_voltage_error_pu``; gain = limit / (full error - deadband)), the volt-var shape
of IEEE 1547-2018 §5.3.3.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from cosim.adapters.controllers.storage_droop import StorageDroopParams, StorageDroopSim, droop_output

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_grid_opendss import IEEE13_PUBLISHED_TAPS, make_sim, step  # noqa: E402


def test_droop_curve_by_hand():
    """Limit 0.3 Mvar, deadband 0.005, full output at 0.05: gain 0.3 / 0.045 = 6.667 Mvar/pu."""
    p = StorageDroopParams(mode="qv", q_max_mvar=0.3)
    assert droop_output(0.997, p) == 0.0  # inside the deadband
    assert droop_output(0.975, p) == pytest.approx(0.3 / 0.045 * 0.020)  # 0.025 low, 0.020 past the band
    assert droop_output(0.90, p) == 0.3  # clipped at the limit
    assert droop_output(1.02, p) == pytest.approx(-0.3 / 0.045 * 0.015)  # high: absorbs
    assert droop_output(1.02, StorageDroopParams(mode="qv", q_max_mvar=0.3, allow_negative_output=False)) == 0.0
    assert droop_output(0.90, StorageDroopParams(mode="qv", q_max_mvar=0.3, enabled=False)) == 0.0
    with pytest.raises(ValidationError, match="q_max_mvar"):
        StorageDroopParams(mode="qv")
    with pytest.raises(ValidationError, match="deadband_pu"):
        StorageDroopParams(mode="pv", p_max_mw=0.1, deadband_pu=0.06)


def test_signs_follow_the_consumer_convention():
    sim = StorageDroopSim()
    qv = sim.advance(StorageDroopParams(mode="qv", q_max_mvar=0.3), 0, {"vm_pu": 0.94})
    pv = sim.advance(StorageDroopParams(mode="pv", p_max_mw=0.2), 0, {"vm_pu": 0.94})
    assert qv["q_mvar"] < 0 and qv["p_set_mw"] == 0.0  # injects Mvar
    assert pv["p_set_mw"] == -0.2 and pv["q_mvar"] == 0.0  # discharges at its limit
    assert qv["error_pu"] == pytest.approx(0.06)


def _loop(q_max_mvar: float, steps: int = 40) -> tuple[float, list[float]]:
    """Q–V droop on a single-phase inverter at 675c, stepped against the OpenDSS engine (1.5 MW
    at 671, published taps): the voltage without it and the measured 675c each step."""
    p = StorageDroopParams(mode="qv", q_max_mvar=q_max_mvar, v_ref_pu=1.0)
    sim = make_sim(regulators="fixed", tap_positions=IEEE13_PUBLISHED_TAPS,
                   entities=[("dc", "Load", {"bus": "671", "p_mw": 1.5, "q_mvar": 0.5}),
                             ("bess", "Storage", {"bus": "675", "phases": "c"})])
    v0 = step(sim)["bus_675_c_vm_pu"]
    q, history = 0.0, []
    for t in range(1, steps):
        v = step(sim, t, {"bess": {"q_mvar": q}})["bus_675_c_vm_pu"]
        history.append(v)
        q = -droop_output(v, p)
    return v0, history


def test_closed_loop_qv_lifts_the_measured_phase_and_needs_loop_gain_below_one():
    """The droop iterates v_(k+1) = v0 + s·g·(v_ref - deadband - v_k) with s = ∂v/∂(-q) ≈ 0.17
    pu/Mvar on 675c and g = limit / 0.045 the droop gain: it settles when s·g < 1 (0.1 Mvar:
    s·g ≈ 0.38) and lifts 675c; with 0.3 Mvar (s·g ≈ 1.1) it swings between its limits."""
    v0, history = _loop(0.1)
    assert abs(history[-1] - history[-2]) < 1e-4  # settled
    assert history[-1] > v0 + 0.005
    _, swinging = _loop(0.3)
    assert abs(swinging[-1] - swinging[-2]) > 0.01
