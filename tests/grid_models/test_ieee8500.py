"""The IEEE 8500-node test feeder in the catalogue (``network = "ieee8500"``, OpenDSS engine).

Source: R. F. Arritt and R. C. Dugan, "The IEEE 8500-node test feeder," IEEE PES T&D Conference
and Exposition, 2010, doi:10.1109/TDC.2010.5484381, as distributed with OpenDSS's test cases
(dss-extensions/electricdss-tst, commit 3b20839, ``Version8/Distrib/IEEETestCases/8500-Node``,
balanced load case). The feeder as described there and in its files: a 115/12.47 kV substation,
4,876 buses with 8,531 phase nodes, 12 single-phase regulators in 4 banks, 4 capacitor banks
(three switched per phase, one three-phase), ~1,100 center-tapped 120/240 V service transformers
with triplex drops, and a peak load of about 11 MW (GridAPPS-D's description of the model,
gridappsd-training.readthedocs.io, "IEEE 8500-Node Test Feeder").
"""

from __future__ import annotations

import numpy as np
import pytest

from cosim import grid_models
from cosim.adapters.grid.opendss_flow import OpenDssFlow, dss_file_problems

#: The balanced case's loads as the files give them: 1,177 loads, sum of kW and kvar. [kW, kvar]
LOADS_KW, LOADS_KVAR, N_LOADS = 10_773.17, 2_700.01, 1_177


@pytest.fixture(scope="module")
def flow() -> OpenDssFlow:
    flow = OpenDssFlow(grid_models.dss_file("ieee8500"))
    empty = {k: np.zeros(0) for k in ("load", "sgen", "storage")}
    assert flow.solve(empty, empty)  # with the RegControls and CapControls acting
    return flow


def test_the_catalogue_ships_the_feeder_with_its_licence():
    path = grid_models.dss_file("ieee8500")
    assert grid_models.engine_of("ieee8500") == "opendss"
    assert grid_models.catalogue()["ieee8500"].startswith("IEEE 8500-node test feeder (12.47 kV")
    folder = path.parent / "ieee8500"
    assert "Redistribution and use in source and binary forms" in (folder / "License.txt").read_text()
    assert "doi:10.1109/TDC.2010.5484381" in (folder / "README.md").read_text()
    assert dss_file_problems(path) == []  # network definitions only: nothing written, shown or read outside


def test_the_feeder_has_its_published_size(flow):
    info = flow.info
    assert (len(info.buses), len(flow.node_vm_pu)) == (4876, 8531)
    assert len(info.regs) == 12 and len({r.rstrip("abc").rstrip("_") for r in info.regs}) == 4
    assert len(info.loads) == N_LOADS
    kv = {round(k * 3**0.5, 2) for k in info.bus_kv_base}
    assert {115.0, 12.47, 0.21} <= kv


def test_the_power_flow_balances_the_published_load(flow):
    """About 11 MW of peak load: the files' 10,773 kW; the substation supplies it plus the losses."""
    dss = flow.dss
    kw = kvar = 0.0
    more = dss.Loads.First()
    while more:
        kw, kvar = kw + dss.Loads.kW(), kvar + dss.Loads.kvar()
        more = dss.Loads.Next()
    assert (kw, kvar) == (pytest.approx(LOADS_KW, abs=0.01), pytest.approx(LOADS_KVAR, abs=0.01))
    assert flow.p_import_mw == pytest.approx(kw / 1e3 + flow.losses_mw, rel=1e-3)
    assert 10.5 < flow.p_import_mw < 12.5 and 0 < flow.losses_mw < 0.12 * flow.p_import_mw


def test_every_regulator_holds_its_band_unless_at_its_last_tap(flow):
    """Each RegControl keeps its winding's voltage, on the 120 V base of its PT, within
    vreg ± band/2 (126.5 V at the substation bank, 125 V on banks 2-4, 2 V bands, Regulators.dss
    and Transformers.dss), unless its tap is at the end of its range (±16 steps)."""
    dss = flow.dss
    checked = at_limit = 0
    more = dss.RegControls.First()
    while more:
        vreg, band, pt = dss.RegControls.ForwardVreg(), dss.RegControls.ForwardBand(), dss.RegControls.PTRatio()
        tap, winding = dss.RegControls.TapNumber(), dss.RegControls.Winding()
        dss.Transformers.Name(dss.RegControls.Transformer())
        bus, node = dss.CktElement.BusNames()[winding - 1].split(".")[:2]
        dss.Circuit.SetActiveBus(bus)
        volts = dict(zip(dss.Bus.Nodes(), dss.Bus.VMagAngle()[::2]))[int(node)] / pt
        if abs(tap) >= 16:
            at_limit += 1
        else:
            assert vreg - band / 2 - 0.01 <= volts <= vreg + band / 2 + 0.01, (dss.RegControls.Name(), volts)
            checked += 1
        more = dss.RegControls.Next()
    assert checked + at_limit == 12 and checked >= 10
    assert 0.90 < np.nanmin(flow.node_vm_pu) and np.nanmax(flow.node_vm_pu) < 1.06
