"""All-bus and point-of-connection voltage KPIs on hand-computed series, and the grid adapter's
per-step all-bus outputs on both engines.

The all-bus metric is OpenG2G's (gpu2grid/openg2g, ``openg2g/metrics/voltage.py``,
``compute_allbus_voltage_stats``): per snapshot the distance outside [0.95, 1.05] pu summed over
every non-excluded bus-phase; the snapshot counts as violated when that sum is positive.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cosim import kpis
from cosim.run.runner import kpi_params
from cosim.scenario import load_scenario
from cosim.roles import RunRoles

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "adapters"))
from test_grid_opendss import make_sim, step  # noqa: E402


def frame(**columns) -> pd.DataFrame:
    n = len(next(iter(columns.values())))
    index = pd.date_range("2024-07-15", periods=n, freq="1s", tz="UTC")
    return pd.DataFrame(columns, index=index)


def test_allbus_and_pcc_kpis_by_hand():
    """Four 1-s steps. All-bus sums per step 0, 0.03, 0, 0.01 (given) -> 2 s, 0.04 pu·s; the lowest
    phase 0.94 / 0.97 below 0.95 in step 2 only (1 s under), highest 1.06 in step 3 (1 s over; its sum
    given as 0 because the grid's own band may differ, the count follows the sum). PCC: phases
    (0.96, 0.94, 0.93) in step 2 -> 0.01 + 0.02 = 0.03 pu, other steps inside -> 1 s, 0.03 pu·s."""
    ts = frame(**{
        "feeder.p_import_mw": [1.0, 1.0, 1.0, 1.0],
        "feeder.allbus_vm_min_pu": [0.96, 0.94, 0.96, 0.97],
        "feeder.allbus_vm_max_pu": [1.01, 1.02, 1.06, 1.04],
        "feeder.allbus_violation_pu": [0.0, 0.03, 0.0, 0.01],
        "pcc.vm_phase_min_pu": [0.97, 0.93, 0.96, 0.99],
        "pcc.vm_phase_max_pu": [0.99, 0.96, 0.98, 1.00],
        "pcc.vm_violation_pu": [0.0, 0.03, 0.0, 0.0],
        "other.vm_phase_min_pu": [0.9, 0.9, 0.9, 0.9],
        "other.vm_phase_max_pu": [0.9, 0.9, 0.9, 0.9],
        "other.vm_violation_pu": [0.05, 0.05, 0.05, 0.05],
        "dc.p_mw": [1.0, 1.0, 1.0, 1.0],
    })
    roles = RunRoles({"feeder": "grid", "pcc": "grid_element", "other": "grid_element", "dc": "it", "pv": "clean_gen"})
    out = kpis.compute(ts, 1, roles, links={"dc": {"pcc"}, "pv": {"other"}})
    g = out["feeder"]
    assert g["allbus_violation_s"] == 2.0 and g["allbus_violation_pu_s"] == pytest.approx(0.04)
    assert g["allbus_undervoltage_s"] == 1.0 and g["allbus_overvoltage_s"] == 1.0
    assert g["allbus_vm_min_pu"] == 0.94 and g["allbus_vm_max_pu"] == 1.06
    pcc = out["points_of_connection"]
    assert list(pcc) == ["pcc"]  # "other" is fed by PV, not by an IT load
    assert pcc["pcc"]["violation_s"] == 1.0 and pcc["pcc"]["violation_pu_s"] == pytest.approx(0.03)
    assert pcc["pcc"]["undervoltage_s"] == 1.0 and pcc["pcc"]["overvoltage_s"] == 0.0
    assert pcc["pcc"]["vm_min_pu"] == 0.93 and pcc["pcc"]["vm_max_pu"] == 1.00


def test_a_grid_band_other_than_the_default_counts_every_kpi_against_it():
    """A grid with v_low_pu = 0.93 (its all-bus sum and the element's are then 0 at 0.94): the
    under/over counts, the plain min/max KPIs and the PCC's follow the grid's band, so no count
    exceeds its violation time (they used the fixed 0.95/1.05: undervoltage 1 s, violation 0 s)."""
    ts = frame(**{
        "feeder.p_import_mw": [1.0, 1.0, 1.0],
        "feeder.vm_min_pu": [0.96, 0.94, 0.92],
        "feeder.vm_max_pu": [1.01, 1.02, 1.02],
        "feeder.allbus_vm_min_pu": [0.96, 0.94, 0.92],
        "feeder.allbus_vm_max_pu": [1.01, 1.02, 1.02],
        "feeder.allbus_violation_pu": [0.0, 0.0, 0.01],
        "pcc.vm_phase_min_pu": [0.97, 0.94, 0.92],
        "pcc.vm_phase_max_pu": [0.99, 0.96, 0.96],
        "pcc.vm_violation_pu": [0.0, 0.0, 0.01],
        "dc.p_mw": [1.0, 1.0, 1.0],
    })
    roles = RunRoles({"feeder": "grid", "pcc": "grid_element", "dc": "it"})
    band = {kpis.BAND_PARAM: {"feeder": [0.93, 1.07], "pcc": [0.93, 1.07]}}
    g = kpis.compute(ts, 1, roles, links={"dc": {"pcc"}}, params=band)
    assert g["feeder"]["allbus_violation_s"] == 1.0 and g["feeder"]["allbus_undervoltage_s"] == 1.0
    assert g["feeder"]["undervoltage_s"] == 1.0 and g["feeder"]["voltage_violation_s"] == 1.0
    assert g["feeder"]["voltage_violation_pu_s"] == pytest.approx(0.01)
    pcc = g["points_of_connection"]["pcc"]
    assert pcc["violation_s"] == 1.0 and pcc["undervoltage_s"] == 1.0
    default = kpis.compute(ts, 1, roles, links={"dc": {"pcc"}})  # no band given: 0.95 / 1.05
    assert default["feeder"]["allbus_undervoltage_s"] == 2.0 and default["feeder"]["undervoltage_s"] == 2.0


@pytest.mark.parametrize("overrides, band", [
    ({"sims.grid.v_low_pu": 0.92, "sims.grid.v_high_pu": 1.08}, [0.92, 1.08]),
    ({"sims.grid.v_low_pu": 0.92}, [0.92, 1.05]),   # one bound set: the other is the grid's default
    ({}, [0.95, 1.05]),
])
def test_the_run_stage_passes_each_grid_entity_its_sims_band(overrides, band):
    scn = load_scenario(ROOT / "scenarios" / "ieee13_voltage_aware.toml", overrides)
    bands = kpi_params(scn)[kpis.BAND_PARAM]
    grid_entities = [e for e, spec in scn.entities.items() if spec.sim == "grid"]
    assert grid_entities and all(bands[e] == band for e in grid_entities)
    assert not set(bands) - set(grid_entities)


def test_nonconverged_steps_null_the_pcc_entries():
    ts = frame(**{"feeder.converged": [1.0, 0.0], "pcc.vm_phase_min_pu": [0.97, 0.97],
                  "pcc.vm_phase_max_pu": [0.99, 0.99], "pcc.vm_violation_pu": [0.0, 0.0]})
    out = kpis.compute(ts, 1, RunRoles({"feeder": "grid", "pcc": "grid_element", "dc": "it"}), links={"dc": {"pcc"}})
    entry = out["points_of_connection"]["pcc"]
    assert entry["violation_s"] is None and entry["n_nonconverged_steps"] == 1


def test_opendss_allbus_outputs_sum_every_monitored_phase():
    """The Grid's all-bus outputs equal the sum over its per-phase voltages by hand, without 650
    (the source) and rg60 (the regulator output), and the element's over its own three phases."""
    sim = make_sim(regulators="fixed", entities=[("dc", "Load", {"bus": "671", "p_mw": 2.0, "q_mvar": 0.6})])
    out = step(sim)
    phases = {k: v for k, v in out.items() if k.startswith("bus_") and k.endswith(("_a_vm_pu", "_b_vm_pu", "_c_vm_pu"))}
    monitored = np.array([v for k, v in phases.items() if not k.startswith(("bus_650_", "bus_rg60_"))])
    assert len(monitored) == 38 - 6  # IEEE 13 (with node 670) has 38 phase nodes; 650 and rg60 three each
    by_hand = np.clip(0.95 - monitored, 0, None).sum() + np.clip(monitored - 1.05, 0, None).sum()
    assert out["allbus_violation_pu"] == pytest.approx(by_hand, abs=1e-12) and by_hand > 0.01
    assert out["n_allbus_violating"] == int(((monitored < 0.95) | (monitored > 1.05)).sum())
    assert out["allbus_vm_min_pu"] == monitored.min() and out["allbus_vm_max_pu"] == monitored.max()
    pcc = np.array([out[f"bus_671_{ph}_vm_pu"] for ph in "abc"])
    element = sim.out["dc"]
    assert element["vm_phase_min_pu"] == pcc.min() and element["vm_phase_max_pu"] == pcc.max()
    assert element["vm_violation_pu"] == pytest.approx(np.clip(0.95 - pcc, 0, None).sum() + np.clip(pcc - 1.05, 0, None).sum())


def test_exclude_buses_and_band_are_parameters():
    """Monitoring every bus (exclude_buses = []) adds rg60's 1.0625+ pu phases; a wider band clears all."""
    loaded = [("dc", "Load", {"bus": "671", "p_mw": 2.0})]
    default = step(make_sim(regulators="fixed", tap_positions={"reg1a": 10, "reg1b": 8, "reg1c": 11},
                            entities=loaded))
    every = step(make_sim(regulators="fixed", tap_positions={"reg1a": 10, "reg1b": 8, "reg1c": 11},
                          entities=loaded, exclude_buses=[]))
    assert every["allbus_vm_max_pu"] == pytest.approx(max(every[f"bus_rg60_{p}_vm_pu"] for p in "abc"))
    assert every["allbus_violation_pu"] > default["allbus_violation_pu"]
    wide = step(make_sim(regulators="fixed", entities=loaded, v_low_pu=0.5, v_high_pu=1.5))
    assert wide["allbus_violation_pu"] == 0.0 and wide["n_allbus_violating"] == 0


def test_pandapower_allbus_outputs_leave_out_the_slack_bus():
    """ieee33 (case33bw): the slack bus 1 at 1.0 pu is not monitored; the lowest bus is 18."""
    from cosim.adapters.grid import GridSim

    sim = GridSim()
    sim.init("grid", 1.0, start_utc="2024-07-15T12:00:00Z", step_s=60, duration_s=3600, seed=1, network="ieee33",
             v_high_pu=0.999)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="pcc", bus="18", p_mw=0.5)
    sim.step(0, {}, 10**9)
    out = sim.out["grid"]
    vm = np.array([out[f"bus_{i}_vm_pu"] for i in range(1, 34)])
    monitored = vm[1:]
    assert out["allbus_vm_max_pu"] == monitored.max() < vm[0] == 1.0
    assert out["allbus_violation_pu"] == pytest.approx(np.clip(0.95 - monitored, 0, None).sum()
                                                       + np.clip(monitored - 0.999, 0, None).sum())
    assert sim.out["pcc"]["vm_phase_min_pu"] == sim.out["pcc"]["vm_pu"] == out["bus_18_vm_pu"]
