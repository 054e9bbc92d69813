"""The supply block (``cosim/kpis/supply.py``): de-energised time and energy not carried, by hand.

A step is held over dt, so a duration is #steps · dt and an energy Σ p · dt; a step that did not
solve (served NaN) makes the totals unknown, never a smaller number read as the whole.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.kpis import compute, guards
from cosim.kpis.supply import degraded_notes, element_supply, run_warnings
from cosim.roles import RunRoles

NAN = np.nan


def test_deenergised_time_and_unserved_energy_by_hand():
    """60 s steps: 2 MW asked; served 2, 0 (dead), 0 (dead), 1.5 (short, OpenDSS below vmin), 2."""
    asked = np.array([2.0, 2.0, 2.0, 2.0, 2.0])
    served = np.array([2.0, 0.0, 0.0, 1.5, 2.0])
    vm = np.array([0.98, NAN, NAN, 0.9, 0.98])
    out = element_supply(asked, served, vm, 60.0)
    assert out == {"deenergised_s": 120.0, "unserved_mwh": pytest.approx((2 + 2 + 0.5) / 60)}


def test_a_zero_served_energised_element_is_not_deenergised():
    """Asking 0 MW on a live bus serves 0: not de-energised (its bus has a voltage)."""
    out = element_supply(np.zeros(3), np.zeros(3), np.full(3, 1.0), 60.0)
    assert out == {"deenergised_s": 0.0, "unserved_mwh": 0.0}


def test_an_unsolved_step_makes_the_totals_unknown_not_smaller():
    asked = np.array([2.0, 2.0, 2.0])
    served = np.array([0.0, NAN, 2.0])
    vm = np.array([NAN, NAN, 1.0])
    out = element_supply(asked, served, vm, 60.0)
    assert out["deenergised_s"] is None and out["unserved_mwh"] is None and out["n_unsolved_steps"] == 1
    assert out["over_solved_steps"] == {"deenergised_s": 60.0, "unserved_mwh": pytest.approx(2 / 60)}


def _roles() -> RunRoles:
    return RunRoles({"pcc": "grid_element", "feeder": "grid"})


def test_the_block_runs_from_roles_and_says_why_the_run_is_degraded():
    index = pd.date_range("2024-07-15", periods=4, freq="60s", tz="UTC")
    ts = pd.DataFrame({"pcc.p_mw": [1.0] * 4, "pcc.p_served_mw": [1.0, 0.0, 0.0, 1.0],
                       "pcc.vm_phase_max_pu": [1.0, NAN, NAN, 1.0], "feeder.n_buses_unsupplied": [0, 3, 3, 0],
                       "feeder.p_import_mw": [1.0, 0.0, 0.0, 1.0]}, index=index)
    kpis = compute(ts, 60.0, _roles())
    assert kpis["supply"]["pcc"] == {"deenergised_s": 120.0, "unserved_mwh": pytest.approx(2 / 60)}
    assert kpis["supply"]["feeder"] == {"deenergised_s": 120.0, "n_buses_unsupplied_max": 3}
    notes = degraded_notes(kpis)
    assert len(notes) == 2 and "pcc was de-energised for 120 s, 0.03333 MWh" in notes[0]
    assert all(w.startswith("after the run: ") for w in run_warnings(kpis))
    assert "guards" not in kpis  # dead steps are the supply block's, not the OpenDSS under-service guard's


def test_a_healthy_run_has_no_notes():
    index = pd.date_range("2024-07-15", periods=3, freq="60s", tz="UTC")
    ts = pd.DataFrame({"pcc.p_mw": [1.0] * 3, "pcc.p_served_mw": [1.0] * 3, "pcc.vm_phase_max_pu": [1.0] * 3,
                       "feeder.n_buses_unsupplied": [0, 0, 0], "feeder.p_import_mw": [1.0] * 3}, index=index)
    kpis = compute(ts, 60.0, _roles())
    assert degraded_notes(kpis) == [] and kpis["supply"]["pcc"]["deenergised_s"] == 0.0


def test_the_underservice_guard_leaves_out_deenergised_steps():
    """guards.unserved_frac judges what an energised bus served (served exactly 0: de-energised)."""
    asked = np.array([2.0, 2.0, 2.0])
    assert guards.unserved_frac(asked, np.array([2.0, 0.0, 1.0])) == pytest.approx(1.0 / 4.0)
