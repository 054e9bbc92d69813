"""OpenG2G's IEEE-13 quickstart feeder (grid_models/openg2g_ieee13.dss).

Facts checked against gpu2grid/openg2g data/grid/ieee13/IEEE13Bus.dss and its run script
(examples/offline/systems.py; GPU-to-Grid, Liang et al., arXiv:2602.05116): the 671 spot
load removed, capacitors out, 1,561 kW of static load, regulators held at +14 / +6 / +15
steps of 0.00625 pu; monitored bus-phases all but sourcebus, 650 and rg60.
"""

from __future__ import annotations

import numpy as np
import pytest

from cosim import grid_models
from cosim.adapters.grid.opendss_flow import OpenDssFlow

TAPS = {"creg1a": 14, "creg1b": 6, "creg1c": 15}


@pytest.fixture(scope="module")
def flow():
    flow = OpenDssFlow(grid_models.dss_file("openg2g_ieee13"), regulators="fixed", tap_positions=TAPS)
    assert flow.solve({k: np.zeros(0) for k in ("load", "sgen", "storage")},
                      {k: np.zeros(0) for k in ("load", "sgen", "storage")})
    return flow


def test_static_load_is_openg2gs_1561_kw_with_nothing_at_671_and_no_capacitors(flow):
    dss = flow.dss
    kw, buses = 0.0, []
    for name in dss.Loads.AllNames():
        dss.Loads.Name(name)
        kw += dss.Loads.kW()
        buses.append(dss.CktElement.BusNames()[0].split(".")[0])
    assert kw == pytest.approx(1561.0, abs=1e-9)
    assert "671" not in buses
    assert dss.Capacitors.Count() == 0


def test_regulators_are_held_at_plus_14_6_15_steps(flow):
    taps = dict(zip(flow.ids["reg"], flow.tap_pu.tolist()))
    assert taps == pytest.approx({"creg1a": 1 + 14 * 0.00625, "creg1b": 1 + 6 * 0.00625, "creg1c": 1 + 15 * 0.00625},
                                 abs=1e-9)


def test_monitored_bus_phases_leave_out_sourcebus_650_and_rg60(flow):
    monitored = flow.monitored_phase_attrs(None)
    assert len(monitored) == 32
    assert not [a for a in monitored if a.split("_")[1] in ("sourcebus", "650", "rg60")]
