"""The utility's own model in (PSS/E RAW + DYR, MATPOWER + DYR), PERC1 inside ANDES, the model record out.

* ``ieee14.raw`` + ``ieee14.dyr`` (ANDES's public pair, copied to scenarios/data/transmission/) run
  as their ANDES-format twin ``ieee14.json`` (ANDES's own conversion of the same pair: same
  devices, GENROU x5, TGOV1 x3, IEEEG1 x2, EXST1, ESST3A x4, IEEEST, ST2CUT x2): same trajectories
  within 1e-9 through a fault and a load loss.
* The native PERC1 (adapters/andes_grid/perc1.py) and the co-simulated one (adapters/ride_through.py)
  on the IEEE 39 three-fault case (scenarios/interconnection_study.toml, its faults moved to 2, 5
  and 8 s and integrated at 1/60 s): the native ceases in the first ANDES sub-step of the fault (one
  cycle at 60 Hz), the co-simulated one a cosim step (0.1 s) later; both latch the deepest voltage
  by PERC1's linear characteristic between Vt1 = 0.7 and Vt0 = 0.5 pu (PowerWorld, "Load
  Characteristic Model: PERC1"): share = 1 - (0.7 - v_min) / 0.2.
* ``cosim model-record`` writes the PERC1 record; a Load reading it back (``perc1_dyr``) gives the
  identical run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import andes
import numpy as np
import pandas as pd
import pytest

import cosim
from cosim.adapters.andes_grid import perc1_record as record
from cosim.adapters import andes_grid
from cosim.adapters.andes_grid import AndesGridSim
from cosim.adapters.ride_through import Perc1Params
from cosim.cli import main as cli_main
from cosim.cli import model_record
from cosim.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "scenarios" / "data" / "transmission"
STUDY = ROOT / "scenarios" / "interconnection_study.toml"
PERC1 = ("perc1 = { vt0_pu = 0.5, vt1_pu = 0.7, fcease_frac = 1.0, frecon_frac = 0.9, t_recon_delay_s = 0.5, "
         "t_recon_s = 2.0 }")
ONE_CYCLE_DT = "0.016666666666666666"


def _adapter(case, dyr=None, faults=(), dt_s=None):
    sim = AndesGridSim()
    extra = {"dyr": str(dyr)} if dyr else {}
    if dt_s:
        extra["dt_s"] = dt_s
    sim.init("tgrid", time_resolution=0.1, start_utc="2024-07-10T00:00:00Z", step_s=0.1, duration_s=60, seed=1,
             case=str(case), faults=[list(f) for f in faults], **extra)
    sim.create(1, "Grid", eid="grid")
    return sim


def _trajectory(case, dyr=None) -> np.ndarray:
    sim = _adapter(case, dyr, faults=[(1.0, 0.1, 9, 0.05)])
    sim.create(1, "Load", eid="campus", bus=9, p_mw=20.0)
    rows = []
    for k in range(30):
        sim.step(k, {"campus": {"p_mw": {"dc": 20.0 if k < 20 else 0.0}}}, None)
        data = sim.get_data({"grid": ["f_hz", "vm_min_pu", "delta_spread_deg"], "campus": ["vm_pu"]})
        rows.append([data["grid"]["f_hz"], data["grid"]["vm_min_pu"], data["grid"]["delta_spread_deg"],
                     data["campus"]["vm_pu"]])
    return np.array(rows)


def test_ieee14_raw_and_dyr_run_as_their_andes_twin():
    raw = _trajectory(DATA / "ieee14.raw", DATA / "ieee14.dyr")
    twin = _trajectory(andes.get_case("ieee14/ieee14.json"))
    assert raw[10, 3] < 0.3 and raw[0, 0] == pytest.approx(60.0, abs=1e-6)  # the fault shows; the start is at rest
    np.testing.assert_allclose(raw, twin, rtol=0, atol=1e-9)


def test_a_matpower_case_takes_its_dyr_and_a_case_out_of_equilibrium_names_the_step():
    """MATPOWER's case14 with the IEEE 14 DYR: the machines attach (ids 1 at each generator bus),
    but the case's own dispatch drives an exciter past its limit: initialisation fails, named."""
    sim = _adapter(andes.get_case("matpower/case14.m"), DATA / "ieee14.dyr")
    assert sim.info["gens"] and len(sim.info["buses"]) == 14
    with pytest.raises(RuntimeError, match=r"step failed: TDS initialisation.*largest mismatch"):
        sim.step(0, {}, None)


def test_a_load_no_power_flow_can_carry_names_the_power_flow_step():
    sim = _adapter(DATA / "ieee14.raw", DATA / "ieee14.dyr")
    sim.create(1, "Load", eid="campus", bus=9, p_mw=1e6)
    with pytest.raises(RuntimeError, match="step failed: power flow"):
        sim.step(0, {}, None)


# -- bad input -------------------------------------------------------------------------------------------
BASE = f"""
[scenario]
name = "raw_case"
start = 2024-07-10T23:00:00Z
duration_s = 4
step_s = 0.1
tick_s = 0.1

[sims.tgrid]
adapter = "andes_grid"
case = "ieee14.raw"
dyr = "ieee14.dyr"

[sims.rt]
adapter = "ride_through"

[entities.ups]
sim = "rt"
model = "RideThrough"
curve = "none"

[entities.pcc]
sim = "tgrid"
model = "Load"
bus = 9
p_mw = 20.0
{PERC1}

[entities.grid]
sim = "tgrid"
model = "Grid"
"""


def _bad_dyr(tmp: Path, extra: str) -> None:
    (tmp / "ieee14.dyr").write_text((DATA / "ieee14.dyr").read_text() + "\n" + extra)


def _bad_record(tmp: Path) -> None:
    line = record.record_line(9, "1", {**dict.fromkeys((k for k, _u, _m in record.PARAMS.values()), 0.0),
                                        "vt0_pu": 0.8, "vt1_pu": 0.7, "vt2_pu": 1.2, "vt3_pu": 1.3,
                                        "f_nominal_hz": 60.0})
    (tmp / "rec.dyr").write_text(line + "\n")


def _negative_timer_record(tmp: Path) -> None:
    line = record.record_line(9, "1", {**Perc1Params().model_dump(), "t_f_trip_low_s": -1.0})
    (tmp / "rec.dyr").write_text(line + "\n")


BAD = {
    "raw without dyr": ('dyr = "ieee14.dyr"\n', "", None, "sims.tgrid", ["a power-flow case without dynamic data",
                                                                         "give dyr = ", "ieee14.raw"]),
    "dyr record at a bus not in the raw": (
        "", "", lambda t: _bad_dyr(t, "     99 'GENCLS' 1  4.0 0.0 /\n"), "sims.tgrid",
        ["record(s) at buses that are not in case", "GENCLS at bus 99", "ieee14.dyr"]),
    "dyr records andes has no model for": (
        "", "", lambda t: _bad_dyr(t, "      4 'CLODBL' 1  -1 0 0 0 0 0 0 /\n      4 'CLODBL' 2 -1 0 0 0 0 0 0 /\n"),
        "sims.tgrid", ["ANDES has no model for 2 record(s)", "CLODBL x2", "the load stays a constant impedance",
                       "skip_unsupported_dyr = true", "ieee14.dyr"]),
    "campus bus that does not exist": ("bus = 9\n", 'bus = "BUS 9"\n', None, "entities.pcc",
                                       ["unknown bus 'BUS 9'", "the nearest: 9 (BUS9)"]),
    "vt0 above vt1": ("vt0_pu = 0.5", "vt0_pu = 0.8", None, "entities.pcc", ["vt0_pu < vt1_pu", "0.8"]),
    "frecon outside 0-1": ("frecon_frac = 0.9", "frecon_frac = 1.5", None, "entities.pcc", ["frecon_frac", "1"]),
    "ride-through perc1 out of order": ('curve = "none"\n', 'curve = "none"\nperc1 = { vt0_pu = 0.9 }\n', None,
                                        "entities.ups", ["vt0_pu < vt1_pu", "0.9"]),
    "perc1 record out of order": (PERC1, 'perc1_dyr = "rec.dyr"', _bad_record, "entities.pcc",
                                  ["perc1_dyr = ", "rec.dyr", "bus 9", "vt0_pu < vt1_pu"]),
    "perc1 record value out of range": (PERC1, 'perc1_dyr = "rec.dyr"', _negative_timer_record, "entities.pcc",
                                        ["perc1_dyr = ", "rec.dyr", "column Tfl (t_f_trip_low_s) = -1.0",
                                         "greater than or equal to 0"]),
    "perc1 record missing": (PERC1, 'perc1_dyr = "rec.dyr"\nperc1_id = "7"', _bad_record, "entities.pcc",
                             ["no PERC1 record at bus 9 with id '7'", "bus 9 id '1'"]),
    "perc1 and perc1_dyr both": ("t_recon_s = 2.0 }", 't_recon_s = 2.0 }\nperc1_dyr = "rec.dyr"', _bad_record,
                                 "entities.pcc", ["perc1 and perc1_dyr both given"]),
}


@pytest.mark.parametrize("case", list(BAD), ids=lambda c: c.replace(" ", "_"))
def test_bad_input_is_one_problem_naming_file_key_value_and_fix(tmp_path, case):
    old, new, make, where, expected = BAD[case]
    shutil.copy(DATA / "ieee14.raw", tmp_path)
    shutil.copy(DATA / "ieee14.dyr", tmp_path)
    if make is not None:
        make(tmp_path)
    assert old in BASE
    path = tmp_path / "study.toml"
    path.write_text(BASE.replace(old, new, 1))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert info.value.file == str(path) and problems[0].path.startswith(where), problems
    text = str(problems[0])
    for part in expected:
        assert part in text, (part, text)


def test_unsupported_dyr_records_run_without_them_when_asked(tmp_path):
    shutil.copy(DATA / "ieee14.raw", tmp_path)
    _bad_dyr(tmp_path, "      4 'CLODBL' 1  -1 0 0 0 0 0 0 /\n")
    path = tmp_path / "study.toml"
    path.write_text(BASE.replace('dyr = "ieee14.dyr"', 'dyr = "ieee14.dyr"\nskip_unsupported_dyr = true'))
    load_scenario(path)


def test_a_bus_name_of_several_buses_asks_for_the_number():
    with pytest.raises(ValueError, match=r"names 4 buses.*10 at 115 kV.*give the bus number"):
        andes_grid.find_bus(str(DATA / "npcc.raw"), "BRAYTON PT", str(DATA / "npcc_full.dyr"))
    assert andes_grid.find_bus(str(DATA / "npcc.raw"), "ludlow", str(DATA / "npcc_full.dyr")) == "30"


# -- native PERC1 ----------------------------------------------------------------------------------------
def test_native_perc1_ceases_in_the_first_substep_of_the_fault_and_latches(monkeypatch):
    """At dt = 1/60 s the share is resolved inside the integration: the first sub-step after the fault
    is applied (one cycle) already draws 1 - (0.7 - v) / 0.2 of the demand at that sub-step's voltage."""
    sim = _adapter("ieee39", faults=[(1.0, 0.1, 16, 0.02)], dt_s=1 / 60)
    sim.create(1, "Load", eid="pcc", bus=16, p_mw=200.0, q_mvar=40.0,
               perc1={"vt0_pu": 0.5, "vt1_pu": 0.7, "frecon_frac": 0.9, "t_recon_delay_s": 0.5, "t_recon_s": 2.0})
    seen = []
    substep = AndesGridSim._substep

    def spy(self, t_end_s, step_start_s):
        substep(self, t_end_s, step_start_s)
        ss = self.system
        seen.append((t_end_s, float(ss.Bus.v.v[self.bus_uid["pcc"]]), float(ss.PERC1.LP_y.v[0])))

    monkeypatch.setattr(AndesGridSim, "_substep", spy)
    for k in range(20):  # to 2 s: reconnection starts 0.5 s after the voltage is back (~1.1 s)
        sim.step(k, {"pcc": {"p_mw": {"dc": 200.0}, "q_mvar": {"dc": 40.0}}}, None)
    during = [(t, v, s) for t, v, s in seen if 1.0 < t <= 1.1 + 1e-9]
    t1, v1, s1 = during[0]
    assert t1 == pytest.approx(1.0 + 1 / 60) and v1 < 0.7
    assert s1 == pytest.approx(1 - (0.7 - v1) / 0.2, abs=1e-6)  # within one cycle of the fault
    v_min = min(v for _t, v, _s in during)
    after = [s for t, _v, s in seen if 1.15 < t < 1.55]  # back above Vt1, before Tdrecon = 0.5 s is over
    assert after and max(after) == pytest.approx(min(after)) == pytest.approx(1 - (0.7 - v_min) / 0.2, abs=1e-6)
    data = sim.get_data({"pcc": ["p_served_mw", "p_connected_frac"]})["pcc"]
    assert data["p_connected_frac"] > after[0] and data["p_served_mw"] == pytest.approx(200.0 * data["p_connected_frac"])


#: The native PERC1's shares back to the UPS logic, for its backup accounting (time-shifted like the voltage).
SHARES_BACK = ('attrs = [["vm_min_pu", "vm_pu"], "f_hz"]\ntime_shifted = true\ninitial_data = { vm_min_pu = 1.0, f_hz = 60.0 }',
               'attrs = [["vm_min_pu", "vm_pu"], "f_hz", ["p_connected_frac", "p_grid_connected_frac"], '
               '["q_connected_frac", "q_grid_connected_frac"]]\ntime_shifted = true\n'
               'initial_data = { vm_min_pu = 1.0, f_hz = 60.0, p_connected_frac = 1.0, q_connected_frac = 1.0 }')


def _study(tmp_path: Path, native: bool, name: str) -> Path:
    text = STUDY.read_text().replace("duration_s = 45", "duration_s = 12").replace(
        "faults = [[10.0, 0.1, 16, 0.02], [22.0, 0.1, 16, 0.02], [34.0, 0.1, 16, 0.02]]",
        f"faults = [[2.0, 0.1, 16, 0.02], [5.0, 0.1, 16, 0.02], [8.0, 0.1, 16, 0.02]]\ndt_s = {ONE_CYCLE_DT}")
    assert PERC1 in text and SHARES_BACK[0] in text
    if native:
        text = text.replace(PERC1 + "\n", "").replace('model = "Load"\nbus = 16', f'model = "Load"\nbus = 16\n{PERC1}')
        text = text.replace(SHARES_BACK[0], SHARES_BACK[1])
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("perc1")
    out = {}
    for native in (False, True):
        result = cosim.run(_study(tmp, native, "native" if native else "cosim"), out_dir=tmp / "runs")
        assert result.ok, result.reason
        out[native] = pd.read_parquet(Path(result.run_dir) / "timeseries.parquet")
    return out


def test_native_and_cosimulated_perc1_on_the_ieee39_three_faults(both):
    """Where they differ: the fault steps (2.0, 5.0, 8.0 s). The native share is already latched in the
    record of the fault step; the co-simulated one acts from the next step (its voltage comes back
    time-shifted). After the fault they latch within 0.02 of each other (the co-simulated sees the
    step's lowest sub-step voltage a step late, the native the same voltage in-step); the grid's
    frequency differs by under 5 mHz."""
    cosim_run, native = both[False], both[True]
    for t_fault in (2.0, 5.0):
        k = round(t_fault / 0.1)
        before_c, before_n = cosim_run["ups.p_connected_frac"].iloc[k - 1], native["pcc.p_connected_frac"].iloc[k - 1]
        assert cosim_run["ups.p_connected_frac"].iloc[k] == before_c  # not yet: it acts a step late
        assert cosim_run["ups.p_connected_frac"].iloc[k + 1] < before_c - 0.1
        assert native["pcc.p_connected_frac"].iloc[k] < before_n - 0.1  # in the fault step itself
        v_min = native["pcc.vm_min_pu"].iloc[k]
        # what stayed off after the first fault (1 - Frecon of what ceased) stays off: the share compounds
        assert native["pcc.p_connected_frac"].iloc[k] == pytest.approx(before_n * (1 - (0.7 - v_min) / 0.2), abs=1e-3)
        assert abs(cosim_run["ups.p_connected_frac"].iloc[k + 1] - native["pcc.p_connected_frac"].iloc[k + 1]) < 0.02
    assert (cosim_run["ieee39.f_hz"] - native["ieee39.f_hz"]).abs().max() < 5e-3


def test_ups_dip_counter_keeps_working_with_the_native_perc1(both):
    """Three dips below 0.9 pu within 60 s: the third fault (8 s) transfers the campus to backup on
    either model; the grid then serves nothing."""
    for run in both.values():
        trips = run["ups.n_trips"].to_numpy()
        assert trips[79] == 0 and trips[81] == 1 and trips[-1] == 1
        assert run["pcc.p_mw"].iloc[-1] == pytest.approx(0.0, abs=1e-6)
        assert run["ups.p_ups_mw"].iloc[-1] > 100.0


def test_backup_energy_with_the_native_perc1_matches_the_cosimulated_one(both):
    """The native PERC1's shares come back to the UPS logic (p/q_grid_connected_frac): the ceased share
    rides on the UPS as with the co-simulated PERC1. Both count it from the step after the fault step
    (the shares, like the voltage, come back time-shifted). Band, measured on this case: the UPS energy
    before the transfer (faults at 2 and 5 s) within 10 % (0.061 vs 0.058 MWh: the native latches the
    fault's deepest sub-step voltage in-step, and its reconnection starts at ANDES's step), over the
    whole run within 3 %; the draw asked of the grid is the demand (the native PERC1 applies its share)."""
    cosim_run, native = both[False], both[True]
    dt_h = 0.1 / 3600.0

    def ups_mwh(run, stop=None):
        return float(run["ups.p_ups_mw"].iloc[:stop].sum()) * dt_h

    pre_c, pre_n = ups_mwh(cosim_run, 80), ups_mwh(native, 80)
    assert pre_c > 0.03 and pre_n > 0.03  # the ceased share was carried by the UPS in both
    assert pre_n == pytest.approx(pre_c, rel=0.10)
    assert ups_mwh(native) == pytest.approx(ups_mwh(cosim_run), rel=0.03)
    for run in (cosim_run, native):  # backup = UPS + generator + unserved - recharge, the demand not served
        parts = run["ups.p_ups_mw"] + run["ups.p_genset_mw"] + run["ups.p_unserved_mw"] - run["ups.p_recharge_mw"]
        assert np.allclose(run["ups.p_backup_mw"], parts, atol=1e-9)
    k = 21  # the step after the first fault: the native Load's share is below 1, the UPS carries the rest
    share = native["pcc.p_connected_frac"].iloc[k - 1]
    assert share < 0.9
    assert native["ups.p_mw"].iloc[k] == pytest.approx(native["campus.p_mw"].iloc[k])
    assert native["ups.p_lost_mw"].iloc[k] == pytest.approx((1 - share) * native["campus.p_mw"].iloc[k])
    assert native["ups.p_connected_frac"].iloc[k] == 1.0  # its own (absent) PERC1's share


def test_two_perc1_in_series_are_refused():
    from cosim.adapters.ride_through import RideThrough, RideThroughParams  # noqa: PLC0415

    rt = RideThrough(RideThroughParams(perc1={}))
    with pytest.raises(ValueError, match="two PERC1 in series"):
        rt.step(0.0, 0.1, {"p_load_mw": 10.0, "p_grid_connected_frac": 0.5})


# -- the model record ------------------------------------------------------------------------------------
def test_the_record_line_reads_back(tmp_path):
    values = {k: float(i) / 10 + 0.05 for i, (k, _u, _m) in enumerate(record.PARAMS.values())}
    line = record.record_line(16, "1", values)
    assert line.startswith("16 'PERC1' '1' ") and line.endswith(" /")
    (tmp_path / "r.dyr").write_text("      1 'GENCLS' 1  4.0 0.0 /\n" + line + "\n")  # other models are skipped
    assert record.read_records(tmp_path / "r.dyr") == [("16", "1", pytest.approx(values))]


def test_a_record_of_the_first_16_values_reads_with_the_frequency_trip_off(tmp_path):
    keys = [k for k, _u, _m in record.PARAMS.values()]
    assert keys[record.N_BEFORE_TRIP:] == list(record.TRIP_KEYS)
    values = {k: 0.5 + i for i, k in enumerate(keys[:record.N_BEFORE_TRIP])}
    short = record.record_line(16, "1", {**values, **dict.fromkeys(record.TRIP_KEYS, 9.0)}).rsplit(" ", 5)[0] + " /"
    (tmp_path / "old.dyr").write_text("@! a comment line\n" + short + "\n")
    [(bus, device_id, got)] = record.read_records(tmp_path / "old.dyr")
    assert (bus, device_id) == ("16", "1")
    assert got == pytest.approx({**values, **dict.fromkeys(record.TRIP_KEYS, 0.0)})


def test_a_record_without_its_slash_is_named_not_skipped(tmp_path):
    line = record.record_line(16, "1", Perc1Params().model_dump()).removesuffix(" /")
    (tmp_path / "r.dyr").write_text("      1 'GENCLS' 1  4.0 0.0 /\n" + line + "\n")
    with pytest.raises(ValueError, match=r"r\.dyr: a PERC1 record does not end with '/'.*end each record with ' /'"):
        record.read_records(tmp_path / "r.dyr")


def test_a_value_that_is_not_a_number_is_named_by_its_column(tmp_path):
    cells = record.record_line(16, "1", Perc1Params().model_dump()).split()  # bus 'PERC1' 'id' values... /
    cells[3 + list(record.PARAMS).index("Fh")] = "fast"
    (tmp_path / "r.dyr").write_text(" ".join(cells) + "\n")
    with pytest.raises(ValueError, match=r"r\.dyr: the PERC1 record at bus 16 id '1' has Fh = 'fast', not a number"):
        record.read_records(tmp_path / "r.dyr")


def test_record_out_and_back_gives_the_same_run(tmp_path):
    """``cosim model-record`` on the native scenario, then the Load reading ``perc1_dyr``: identical series."""
    native = _study(tmp_path, True, "native").read_text().replace("duration_s = 12", "duration_s = 3")
    first = tmp_path / "first.toml"
    first.write_text(native)
    assert cli_main(["model-record", str(first), "--out", str(tmp_path / "rec")]) == 0
    dyr_text = (tmp_path / "rec" / "perc1.dyr").read_text()
    _head, _, body = dyr_text.rpartition("@!")
    assert dyr_text.startswith("@! PERC1 records written by cosim") and "order is cosim's own" in dyr_text
    assert " ".join(record.PARAMS) in " ".join(line.removeprefix("@!").strip() for line in dyr_text.splitlines()
                                               if line.startswith("@!"))
    assert body.splitlines()[1].startswith("16 'PERC1' '1' 0.5 0.7 1.2 1.3 1 0.9 0.5 2 ")
    table = pd.read_csv(tmp_path / "rec" / "perc1_params.csv")
    assert list(table["name"]) == list(record.PARAMS) and set(table["unit"]) >= {"pu", "s", "Hz", "-"}
    second = tmp_path / "second.toml"
    second.write_text(native.replace(PERC1, 'perc1_dyr = "rec/perc1.dyr"'))
    runs = [cosim.run(p, out_dir=tmp_path / "runs") for p in (first, second)]
    assert all(r.ok for r in runs)
    a, b = (pd.read_parquet(Path(r.run_dir) / "timeseries.parquet") for r in runs)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a["pcc.p_connected_frac"].min() < 0.9  # the fault at 2 s made it cease: the record mattered


def test_the_cosimulated_campus_record_takes_the_bus_it_feeds(tmp_path):
    rows = model_record.records(STUDY)
    assert rows == [("ups", 16, "1", pytest.approx(rows[0][3]))]
    assert rows[0][3]["frecon_frac"] == 0.9 and rows[0][3]["vt2_pu"] == 1.2  # the defaults filled in


def test_model_record_of_a_scenario_without_perc1_is_one_message(capsys):
    assert cli_main(["model-record", str(ROOT / "scenarios" / "ffr_trip.toml"), "--out", "/nonexistent/never"]) == 1
    err = capsys.readouterr().err
    assert "no entity has a perc1 table or a perc1_dyr record" in err and "ffr_trip.toml" in err


def test_a_malformed_perc1_record_names_the_file_and_the_count(tmp_path):
    (tmp_path / "rec.dyr").write_text("16 'PERC1' '1' 0.5 0.7 /\n")
    with pytest.raises(ValueError, match=r"rec.dyr: the PERC1 record at bus 16 id '1' has 2 values; a PERC1 record "
                                         r"has 20: Vt0, Vt1"):
        record.read_records(tmp_path / "rec.dyr")
