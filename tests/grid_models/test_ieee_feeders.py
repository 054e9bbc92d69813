"""Tests of the IEEE 13/34/123/8500-node OpenDSS feeders in the grid catalogue (8500: see test_ieee8500.py).

Published data and results: IEEE PES Distribution System Analysis Subcommittee, "IEEE 13 / 34 /
123 Node Test Feeder" (W. H. Kersting, "Radial distribution test feeders", IEEE PES Winter
Meeting 2001, vol. 2, pp. 908-912; first published in IEEE Trans. Power Systems 6(3), 1991).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cosim import grid_models
from cosim.adapters.grid.opendss_flow import OpenDssFlow

FEEDERS = ("ieee13", "ieee34", "ieee123", "ieee8500")

#: IEEE 34 Node Test Feeder, published voltage profile [pu] (phases a, b, c; None where absent),
#: solved with regulator 1 at taps 12/5/5 and regulator 2 at 13/11/12 as published.
IEEE34_PUBLISHED_VM_PU = {
    "800": (1.0500, 1.0500, 1.0500), "802": (1.0475, 1.0484, 1.0484), "806": (1.0457, 1.0474, 1.0474),
    "808": (1.0136, 1.0296, 1.0289), "810": (None, 1.0294, None), "812": (0.9763, 1.0100, 1.0069),
    "814": (0.9467, 0.9945, 0.9893), "850": (1.0176, 1.0255, 1.0203), "816": (1.0172, 1.0253, 1.0200),
    "818": (1.0163, None, None), "820": (0.9926, None, None), "822": (0.9895, None, None),
    "824": (1.0082, 1.0158, 1.0116), "826": (None, 1.0156, None), "828": (1.0074, 1.0151, 1.0109),
    "830": (0.9894, 0.9982, 0.9938), "854": (0.9890, 0.9978, 0.9934), "856": (None, 0.9977, None),
    "852": (0.9581, 0.9680, 0.9637), "832": (1.0359, 1.0345, 1.0360), "858": (1.0336, 1.0322, 1.0338),
    "834": (1.0309, 1.0295, 1.0313), "842": (1.0309, 1.0294, 1.0313), "844": (1.0307, 1.0291, 1.0311),
    "846": (1.0309, 1.0291, 1.0313), "848": (1.0310, 1.0291, 1.0314), "860": (1.0305, 1.0291, 1.0310),
    "836": (1.0303, 1.0287, 1.0308), "840": (1.0303, 1.0287, 1.0308), "862": (1.0303, 1.0287, 1.0308),
    "838": (None, 1.0285, None), "864": (1.0336, None, None), "888": (0.9996, 0.9983, 1.0000),
    "890": (0.9167, 0.9235, 0.9177),
}
IEEE34_PUBLISHED_TAPS = {"reg1a": 12, "reg1b": 5, "reg1c": 5, "reg2a": 13, "reg2b": 11, "reg2c": 12}


def solved(name: str, **kwargs) -> OpenDssFlow:
    flow = OpenDssFlow(grid_models.dss_file(name), **kwargs)
    empty = {k: np.zeros(0) for k in ("load", "sgen", "storage")}
    assert flow.solve(empty, empty)
    return flow


def phase_vm(flow: OpenDssFlow, bus: str, phase: str) -> float:
    return flow.device_outputs()[f"bus_{bus}_{phase}_vm_pu"]


def test_catalogue_lists_the_opendss_feeders_with_descriptions():
    entries = grid_models.catalogue()
    for name in FEEDERS:
        assert name in entries and entries[name].startswith(f"IEEE {name[4:]}-node")
        assert grid_models.engine_of(name) == "opendss"
    assert {"ieee33", "cigre_mv", "simbench"} <= set(entries)
    assert grid_models.engine_of("ieee33") == "pandapower"


def test_dss_file_resolves_names_and_user_paths(tmp_path):
    assert grid_models.dss_file("ieee13").name == "ieee13.dss"
    (tmp_path / "my.dss").write_text("Clear\nNew Circuit.x basekv=12.47\n")
    assert grid_models.dss_file("my.dss", base_dir=tmp_path) == (tmp_path / "my.dss").resolve()
    with pytest.raises(ValueError, match="not found"):
        grid_models.dss_file("missing.dss", base_dir=tmp_path)
    with pytest.raises(ValueError, match="ieee123"):
        grid_models.dss_file("ieee33")


def test_pandapower_loader_points_opendss_feeders_to_the_other_engine():
    with pytest.raises(ValueError, match='engine = "opendss"'):
        grid_models.load_network("ieee13")


def test_ieee34_matches_published_voltages():
    """All 86 published phase voltages within 0.5 % with the published taps (measured worst: 0.02 %).

    Distributed loads are split half and half between the segment ends.
    """
    flow = solved("ieee34", regulators="fixed", tap_positions=IEEE34_PUBLISHED_TAPS)
    errors = [abs(phase_vm(flow, bus, ph) / v - 1.0) for bus, values in IEEE34_PUBLISHED_VM_PU.items()
              for ph, v in zip("abc", values) if v is not None]
    assert len(errors) == 86 and max(errors) < 0.005


def test_ieee34_automatic_regulators_keep_the_feeder_in_band():
    """With OpenDSS's controls both regulator banks tap up and every node stays within 0.91-1.06 pu."""
    flow = solved("ieee34")
    assert all(flow.tap_count[:3] >= 5) and all(flow.tap_count[3:] >= 10)
    assert 0.91 < np.nanmin(flow.node_vm_pu) and np.nanmax(flow.node_vm_pu) < 1.06


def test_ieee123_published_load_and_switching():
    """The 123-node feeder carries its published 3,490 kW of spot load; normally open switches
    leave 251, 451 and 350 de-energised, and closing 250-251 energises 251."""
    flow = solved("ieee123")
    dss = flow.dss
    total_kw, more = 0.0, dss.Loads.First()
    while more:
        total_kw += dss.Loads.kW()
        more = dss.Loads.Next()
    assert total_kw == pytest.approx(3490.0)
    assert 3.49 < flow.p_import_mw < 3.70  # load plus losses at the regulated voltages
    assert 0.95 < np.nanmin(flow.node_vm_pu) and np.nanmax(flow.node_vm_pu) < 1.06
    assert math.isnan(phase_vm(flow, "251", "a")) and math.isnan(phase_vm(flow, "350", "b"))
    flow.set_line_in_service(flow.info.lines.index("sw_250_251"), True)
    empty = {k: np.zeros(0) for k in ("load", "sgen", "storage")}
    assert flow.solve(empty, empty)
    assert phase_vm(flow, "251", "a") == pytest.approx(phase_vm(flow, "250", "a"), abs=1e-4)


@pytest.mark.parametrize("name", FEEDERS)
def test_every_feeder_reports_regulators_and_capacitors(name):
    flow = solved(name)
    out = flow.device_outputs()
    assert flow.info.regs and flow.info.caps
    assert all(abs(out[f"reg_{r}_tap_count"]) <= 16 for r in flow.ids["reg"])
    assert all(out[f"cap_{c}_in_service"] is True for c in flow.ids["cap"])
    assert all(out[f"cap_{c}_q_mvar"] > 0 for c in flow.ids["cap"])
