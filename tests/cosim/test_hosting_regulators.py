"""Hosting capacity on a feeder with a tap-changing regulator, where violations do not grow with the load.

The feeder (``FEEDER``): a stiff 12.47 kV source, a 20 MVA transformer with 6 % resistance, a
regulator (OpenDSS RegControl: 120 V level, 2 V band, PT ratio 60, 0.625 % steps), 0.5 km of
line to bus ``far`` where the load goes, and a 50 kVA single-phase service transformer to a
120 V secondary ``lv`` with a 30 kW house. As the load at ``far`` grows, the regulator's output
sags through the transformer's resistance until it leaves the band, and the regulator taps up
one step: ``far``'s voltage falls, jumps back up 0.625 %, falls again (a saw-tooth). With a
0.991 pu floor, ``far``'s lowest phase holds to 2.1 MW, fails to the first tap (~2.6 MW), holds
again to ~3.6 MW, and so on: bisection between 0 and a max answers whichever pass/fail edge its
midpoints happen to hit. The reference answers here come from OpenDSS directly (one solve per
size, :class:`~cosim.adapters.grid.opendss_flow.OpenDssFlow`), not from cosim's runs.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cosim import grid_models
from cosim.adapters.grid.opendss_flow import OpenDssFlow
from cosim.cli import main
from cosim.scenario import load_scenario
from cosim.studies.hosting import Limits, hosting_capacity
from cosim.studies.hosting_buses import VoltageBuses, feeder_bus_table

FEEDER = """! A regulated feeder whose far-end voltage is not monotonic in the load (cosim's hosting tests)
Clear
New Circuit.reg basekv=12.47 bus1=src pu=1.0 phases=3 R1=0 X1=0.0001 R0=0 X0=0.0001
New Transformer.sub phases=3 windings=2 buses=(src, mid) conns=(wye, wye) kvs=(12.47, 12.47) kvas=(20000, 20000) xhl=2 %r=6
New Transformer.reg phases=3 windings=2 buses=(mid, out) conns=(wye, wye) kvs=(12.47, 12.47) kvas=(20000, 20000) xhl=0.01 %loadloss=0.001
New RegControl.reg transformer=reg winding=2 vreg=120 band=2 ptratio=60
New Line.l1 bus1=out bus2=far length=0.5 units=km r1=0.3 x1=0.4 r0=0.3 x0=0.4 normamps=2000
New Transformer.svc phases=1 windings=2 buses=(far.1, lv.1) kvs=(7.2, 0.12) kvas=(50, 50) xhl=2 %r=15
New Load.house bus1=lv.1 phases=1 kv=0.12 kw=30 kvar=0
Set voltagebases=[12.47, 0.208]
Calcvoltagebases
"""

SCENARIO = """
[scenario]
name = "hc_reg"
start = 2024-07-15T00:00:00Z
duration_s = 60
step_s = 60
engine = "direct"

[sims.grid]
adapter = "grid"
engine = "opendss"
network = "reg.dss"

[entities.pcc]
sim = "grid"
model = "Load"
bus = "far"
p_mw = 1.0
q_mvar = 0.0

[entities.feeder]
sim = "grid"
model = "Grid"
"""

V_LOW = 0.991
LIMITS = Limits(v_low_pu=V_LOW)
TOL_MW = 0.05


@pytest.fixture(scope="module")
def feeder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reg")
    (folder / "reg.dss").write_text(FEEDER)
    (folder / "hc.toml").write_text(SCENARIO)
    return folder


def far_vm_pu(folder, p_mw: float) -> float:
    """``far``'s lowest phase voltage with ``p_mw`` there, from one OpenDSS solve (the RegControl
    settles). [pu]"""
    flow = OpenDssFlow(folder / "reg.dss")
    pos = flow.attach("load", "far", p_mw, 0.0, "pcc")
    p = {k: v.copy() for k, v in flow.p0.items()}
    p["load"][pos] = p_mw
    assert flow.solve(p, flow.q0)
    out = flow.device_outputs()
    return min(out[f"bus_far_{phase}_vm_pu"] for phase in "abc")


def first_failure(folder, step_mw: float = 0.02) -> tuple[float, float]:
    """The last size passing and the first failing on a fine scan from 0. [MW]"""
    p = 0.0
    while far_vm_pu(folder, p + step_mw) >= V_LOW:
        p += step_mw
    return p, p + step_mw


def test_the_feeder_holds_again_above_its_limit_so_bisection_alone_is_wrong(feeder):
    passing, failing = first_failure(feeder)
    assert 2.0 < passing < 2.3
    assert far_vm_pu(feeder, 3.0) >= V_LOW and far_vm_pu(feeder, 5.0) >= V_LOW  # holds again, twice
    lo, hi = 0.001, 4.0  # plain bisection up to 4 MW lands on the second window's edge
    while hi - lo > TOL_MW:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if far_vm_pu(feeder, mid) >= V_LOW else (lo, mid)
    assert lo > failing + 1.0


@pytest.mark.parametrize("max_mw", [2.6, 4.0, 8.0])
def test_the_answer_is_the_first_limit_from_below_whatever_max_mw(feeder, max_mw, tmp_path):
    passing, failing = first_failure(feeder)
    row = hosting_capacity(feeder / "hc.toml", "pcc", tmp_path / "out", buses=["far"], max_mw=max_mw, tol_mw=TOL_MW,
                           limits=LIMITS, voltage_buses="primary", scan_above=False, workers=0,
                           progress=False).iloc[0]
    assert row["limited_by"] == "voltage" and row["bound"] == "exact"
    assert passing - TOL_MW <= row["hosting_mw"] < failing
    assert row["vm_min_pu"] >= V_LOW


def test_sizes_where_the_limits_hold_again_are_reported_in_json_and_printed(feeder, tmp_path, capsys):
    """Scan points 0.5 MW apart above the first failure up to 6 MW: 3.0 and 3.5 MW (after the first
    tap), 4.5 and 5.0 MW (after the second) hold; 2.5, 4.0, 5.5, 6.0 MW fail (OpenDSS directly)."""
    holding = [p for p in np.arange(2.5, 6.01, 0.5) if far_vm_pu(feeder, p) >= V_LOW]
    assert holding == [3.0, 3.5, 4.5, 5.0]
    out = tmp_path / "out"
    code = main(["hosting-capacity", str(feeder / "hc.toml"), "--load", "pcc", "--bus", "far", "--max-mw", "6",
                 "--tol-mw", str(TOL_MW), "--v-low", str(V_LOW), "--voltage-buses", "primary", "--workers", "0",
                 "--quiet", "--out", str(out)])
    assert code == 0
    err = capsys.readouterr().err
    assert "note: bus far: every limit holds again at 3, 3.5, 4.5, 5 MW, above the" in err
    (bus,) = json.loads((out / "hosting.json").read_text())["buses"]
    assert bus["holds_again_mw"] == "3, 3.5, 4.5, 5" and bus["bound"] == "exact"
    search = json.loads((out / "hosting.json").read_text())["search"]
    assert search["step_mw"] == 0.5 and search["scan_above"] is True  # the RegControl acts: scanned by default


def test_primary_only_leaves_the_120_v_secondary_out(feeder, tmp_path):
    """The house's 120 V secondary sits at ~0.91 pu behind its service transformer: checking every
    bus, the base case already fails there; checking the primary, the load's own limit binds."""
    every = hosting_capacity(feeder / "hc.toml", "pcc", tmp_path / "every", buses=["far"], limits=LIMITS,
                             workers=0, progress=False).iloc[0]
    assert every["bound"] == "base case fails"
    assert "the lowest checked voltage is 0.90" in every["limited_by"] and "at bus lv" in every["limited_by"]
    assert "--v-low 0.90" in every["limited_by"]
    kv = hosting_capacity(feeder / "hc.toml", "pcc", tmp_path / "kv", buses=["far"], limits=LIMITS, max_mw=2.6,
                          tol_mw=TOL_MW, scan_above=False, voltage_buses={"kv_min": 1.0}, workers=0,
                          progress=False).iloc[0]
    assert kv["limited_by"] == "voltage" and kv["hosting_mw"] > 2.0


def test_the_base_case_names_every_violated_limit_at_once(feeder, tmp_path):
    """Voltage (the secondary below 0.991 pu) and thermal (the service transformer at ~55 % of its
    rating against a 50 % limit) in one message, each with the option to pass."""
    row = hosting_capacity(feeder / "hc.toml", "pcc", tmp_path / "out", buses=["far"],
                           limits=Limits(v_low_pu=V_LOW, loading_max_pct=50.0), workers=0, progress=False).iloc[0]
    text = row["limited_by"]
    assert text.startswith("base case: voltage+thermal (without the load: the lowest checked voltage is 0.90")
    assert "--v-low 0.90" in text and "transformer svc is loaded to 54." in text and "--loading-max 55" in text


def test_voltage_bus_choices_on_the_ieee8500_feeder(tmp_path):
    """Arritt & Dugan's 8500-node feeder: a 115 kV source, a 12.47 kV primary and 120/240 V
    triplex secondaries (base 0.208 kV line to line in its VoltageBases)."""
    (tmp_path / "s.toml").write_text(SCENARIO.replace('"reg.dss"', '"ieee8500"').replace('"far"', '"m1166366"'))
    scn = load_scenario(tmp_path / "s.toml")
    buses = feeder_bus_table(scn, "feeder")
    assert len(buses) == 4876
    primary = VoltageBuses.parse("primary").select(buses, "ieee8500")
    assert {round(b.vn_kv, 2) for b in primary} == {12.47}
    names = {str(b.ref) for b in primary}
    assert "m1166366" in names and "sourcebus" not in names and "regxfmr_hvmv_sub_lsb" not in names
    secondaries = [b for b in buses if b.vn_kv < 1.0]
    assert len(secondaries) > 2000 and not names & {str(b.ref) for b in secondaries}
    assert VoltageBuses.parse({"kv_max": 0.5}).select(buses, "ieee8500") == [b for b in secondaries if not b.source]
    assert VoltageBuses.parse("M1166366,l2673322").select(buses, "ieee8500")[0].ref == "m1166366"
    excluded = VoltageBuses.parse("primary").exclude_override(buses, "ieee8500")
    assert len(excluded) == len(buses) - len(primary)
    from cosim.errors import ScenarioError

    with pytest.raises(ScenarioError, match="ieee8500 has no bus 'nowhere'"):
        VoltageBuses.parse(["nowhere"]).select(buses, "ieee8500")
    with pytest.raises(ScenarioError, match="ieee8500 has none of the buses of nominal 200 kV and up line to line; "
                                            "its nominal voltages: 0.208, 12.47, 115 kV"):
        VoltageBuses.parse({"kv_min": 200.0}).select(buses, "ieee8500")
    with pytest.raises(ScenarioError, match='give "all", "primary"'):
        VoltageBuses.parse({"kv": 1})
    assert grid_models.engine_of("ieee8500") == "opendss"
    assert not math.isnan(primary[0].vn_kv)


STUDY = """
[hosting]
scenario = "hc.toml"
load = "pcc"
buses = ["far"]
voltage_buses = "primary"
v_low_pu = 0.991
max_mw = 2.6
tol_mw = 0.05
scan_above = false

[hosting.set]
"scenario.duration_s" = 60
"""


def test_a_hosting_study_file_gives_the_same_study_and_the_command_line_wins(feeder, tmp_path, capsys):
    passing, failing = first_failure(feeder)
    (feeder / "study.toml").write_text(STUDY)
    out = tmp_path / "out"
    assert main(["hosting-capacity", str(feeder / "study.toml"), "--max-mw", "4", "--workers", "0", "--quiet",
                 "--out", str(out)]) == 0
    saved = json.loads((out / "hosting.json").read_text())
    assert saved["search"]["max_mw"] == 4.0 and saved["search"]["scan_above"] is False  # flag won, file kept
    assert saved["limits"]["v_low_pu"] == V_LOW and saved["setup"]["voltage_buses"].startswith("primary buses")
    (bus,) = saved["buses"]
    assert bus["bus"] == "far" and passing - TOL_MW <= bus["hosting_mw"] < failing


def test_a_hosting_study_file_with_mistakes_names_them_all(feeder, capsys):
    (feeder / "bad.toml").write_text(STUDY.replace('voltage_buses = "primary"', "voltage_buses = 3")
                                     .replace("max_mw = 2.6", "max_mw = -1\nstep = 0.5"))
    assert main(["hosting-capacity", str(feeder / "bad.toml"), "--workers", "0", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "bad.toml: 3 problems:" in err
    assert "hosting.step: unknown key" in err and "hosting.max_mw = -1: give a positive number" in err
    assert 'hosting.voltage_buses = 3: give "all", "primary"' in err
