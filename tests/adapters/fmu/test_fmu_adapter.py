"""The FMU adapter: naming and unit mapping, a foreign FMU in both interfaces against its
analytic solution, clean errors for broken FMUs and failing steps, and a run through mosaik."""

from __future__ import annotations

import math
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.adapters.fmu import FmuError, FmuInstance, FmuSim, SimParams, describe
from cosim.scenario import load_scenario

START = {"start_utc": "2024-07-15T00:00:00+00:00", "duration_s": 3600, "seed": 1}


def _run(unzip, iface, start, inputs, n_steps, step_s=60.0, **kw):
    """Step one instance with constant inputs; returns (its outputs each step, the instance)."""
    inst = FmuInstance(iface, unzip(iface.path), "x", start, step_s=step_s, **kw)
    rows = []
    try:
        for k in range(n_steps):
            inst.set_inputs(inputs)
            inst.step(k * step_s, step_s)
            rows.append(inst.outputs())
    finally:
        inst.close()
    return rows, inst


# -- naming and units ---------------------------------------------------------------------------------
def test_shipped_names_follow_the_units(shipped_fmus):
    iface = describe("ChillerPlant")
    assert iface.model == "ChillerPlant" and iface.kind == "cs"
    assert {"q_load_mw", "t_wet_c", "t_chw_supply_setpoint_c"} <= set(iface.inputs)
    assert {"p_cooling_mw", "water_m3", "e_cooling_mwh", "mdot_water_makeup_kg_s"} <= set(iface.outputs)
    # a temperature difference (relativeQuantity) is kelvin, without the -273.15 offset
    dt = iface.ports["dt_chw_k"]
    assert (dt.scale, dt.offset) == (1.0, 0.0)
    t = iface.ports["t_wet_c"]
    assert t.to_fmu(24.0) == pytest.approx(297.15)
    assert iface.ports["q_load_mw"].to_fmu(1.5) == pytest.approx(1.5e6)


def test_sidecar_and_scenario_mapping(foreign_fmu):
    iface = describe(str(foreign_fmu))  # sidecar rc_room.attrs.toml names three variables
    assert iface.outputs == ["t_room_c"]
    assert set(iface.inputs) == {"p_mw", "ta_c", "r_room_k_kw"}  # R is tunable: an input
    assert iface.ports["r_room_k_kw"].to_fmu(50.0) == pytest.approx(0.05)
    assert iface.ports["c_room_mj_k"].to_fmu(0.1) == pytest.approx(1e5)
    renamed = describe(str(foreign_fmu), {"P": "p_heat_kw", "T0": "skip"})
    assert "p_heat_kw" in renamed.inputs and "t0_c" not in renamed.ports
    assert renamed.ports["p_heat_kw"].to_fmu(2.0) == pytest.approx(2000.0)


@pytest.mark.parametrize("attrs, message", [
    ({"P": "p_heat"}, "needs a unit suffix"),
    ({"P": "p_heat_c"}, "no conversion from the FMU unit 'W'"),
    ({"nope": "x_mw"}, "attrs.nope: the FMU has no variable"),
    ({"T0": "ta_c"}, "both map to 'ta_c'"),
])
def test_mapping_mistakes_are_named(foreign_fmu, attrs, message):
    with pytest.raises(FmuError, match=message):
        describe(str(foreign_fmu), attrs)


def test_unknown_shipped_name_lists_the_shipped_ones():
    with pytest.raises(FmuError, match="shipped: .*ChillerPlant"):
        describe("ChillerPlnat")


# -- a foreign FMU, both interfaces ---------------------------------------------------------------------
def _analytic_c(t_s, p_w=200.0, ta_c=10.0, r=0.05, c=1e5, t0_c=40.0):
    """C dT/dt = P - (T - Ta)/R for constant inputs (the foreign model's own equation). [°C]"""
    t_inf = ta_c + p_w * r
    return t_inf + (t0_c - t_inf) * math.exp(-t_s / (r * c))


@pytest.mark.parametrize("interface, solver, atol_k", [
    ("cs", "CVode", 1e-8),      # the FMU's own RK4 over 1 s substeps
    ("me", "CVode", 2e-3),      # fmpy's SUNDIALS CVode, rtol 1e-6
    ("me", "Euler", 2e-2),      # explicit Euler, 1 s steps: error ~ dt/tau * dT/2
])
def test_foreign_fmu_matches_its_analytic_solution(foreign_fmu, interface, solver, atol_k, unzip):
    iface = describe(str(foreign_fmu), interface=interface)
    assert iface.kind == interface
    rows, _ = _run(unzip, iface, {"t0_c": 40.0}, {"p_mw": 200e-6, "ta_c": 10.0}, 60, solver=solver, solver_step_s=1.0)
    got = np.array([r["t_room_c"] for r in rows])
    want = np.array([_analytic_c(60.0 * (k + 1)) for k in range(60)])
    np.testing.assert_allclose(got, want, rtol=0, atol=atol_k)


@pytest.mark.parametrize("interface, solver, atol_k", [
    ("cs", "CVode", 1e-9),      # the FMU's exact exponential step
    ("me", "CVode", 2e-3),
    ("me", "Euler", 2e-2),
])
def test_foreign_fmi3_fmu_matches_its_analytic_solution(foreign_fmu3, interface, solver, atol_k, unzip):
    """The same room as an FMI 3.0 FMU; no sidecar, so every name is automatic (R has no unit)."""
    iface = describe(str(foreign_fmu3), interface=interface)
    assert iface.description.fmiVersion == "3.0" and iface.model == "RC_Room_3"
    assert iface.outputs == ["room_t_c"] and set(iface.inputs) == {"p_mw", "ta_c", "r_ratio"}
    rows, _ = _run(unzip, iface, {"t0_c": 40.0}, {"p_mw": 200e-6, "ta_c": 10.0}, 60, solver=solver, solver_step_s=1.0)
    got = np.array([r["room_t_c"] for r in rows])
    want = np.array([_analytic_c(60.0 * (k + 1)) for k in range(60)])
    np.testing.assert_allclose(got, want, rtol=0, atol=atol_k)


def test_model_exchange_follows_input_steps(foreign_fmu3, unzip):
    """Inputs jump between mosaik steps; the ME solver restarts there and tracks the exact
    co-simulation answer of the same FMU."""
    def heat(k):
        return {"p_mw": (600e-6 if (k // 10) % 2 else 0.0), "ta_c": 10.0 + 0.1 * k}

    results = {}
    for interface in ("cs", "me"):
        iface = describe(str(foreign_fmu3), interface=interface)
        inst = FmuInstance(iface, unzip(iface.path), interface, {"t0_c": 25.0})
        temps = []
        for k in range(60):
            inst.set_inputs(heat(k))
            inst.step(60.0 * k, 60.0)
            temps.append(inst.outputs()["room_t_c"])
        inst.close()
        results[interface] = np.array(temps)
    assert np.ptp(results["cs"]) > 3.0  # the steps do move the room
    np.testing.assert_allclose(results["me"], results["cs"], rtol=0, atol=2e-3)


def test_tunable_parameter_changes_mid_run(foreign_fmu, unzip):
    iface = describe(str(foreign_fmu), interface="cs")
    inst = FmuInstance(iface, unzip(iface.path), "x", {"t0_c": 10.0})
    inst.set_inputs({"p_mw": 200e-6, "ta_c": 10.0, "r_room_k_kw": 100.0})  # R doubled: twice the rise
    for k in range(600):
        inst.step(k * 60.0, 60.0)
    want = _analytic_c(36_000.0, p_w=200.0, ta_c=10.0, r=0.1, c=1e5, t0_c=10.0)
    assert inst.outputs()["t_room_c"] == pytest.approx(want, abs=1e-6)
    inst.close()


# -- broken FMUs and failing steps ----------------------------------------------------------------------
def _zip(path, files):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def test_truncated_zip(foreign_fmu, tmp_path):
    broken = tmp_path / "truncated.fmu"
    broken.write_bytes(foreign_fmu.read_bytes()[:300])
    with pytest.raises(FmuError, match=r"truncated.fmu: cannot read the model description"):
        describe(str(broken))


def test_bad_xml(tmp_path):
    broken = _zip(tmp_path / "badxml.fmu", {"modelDescription.xml": "<fmiModelDescription fmiVersion='2.0'"})
    with pytest.raises(FmuError, match=r"badxml.fmu: cannot read the model description"):
        describe(str(broken))


def test_model_description_against_the_schema(foreign_fmu, tmp_path):
    with zipfile.ZipFile(foreign_fmu) as zf:
        xml = zf.read("modelDescription.xml").decode().replace('causality="output"', 'causality="outlet"')
    broken = _zip(tmp_path / "schema.fmu", {"modelDescription.xml": xml})
    with pytest.raises(FmuError, match=r"schema.fmu: cannot read the model description"):
        describe(str(broken))


def test_missing_binary_is_found_by_validation(foreign_fmu, tmp_path, unzip):
    with zipfile.ZipFile(foreign_fmu) as zf:
        xml = zf.read("modelDescription.xml")
    broken = _zip(tmp_path / "nobinary.fmu", {"modelDescription.xml": xml})
    params = SimParams.model_validate({"fmu": str(broken)})
    problems = FmuSim.check(params, None)  # R [K/W] has no listed suffix: derived (r_k_w), not refused
    assert len(problems) == 1 and "nobinary.fmu" in problems[0] and "binaries/linux64/rc_room.so" in problems[0]
    assert "r_k_w" in describe(str(broken)).inputs
    with pytest.raises(FmuError, match=r"nobinary.fmu \(x\): its binary binaries/linux64/rc_room.so is missing"):
        FmuInstance(describe(str(broken)), unzip(broken), "x", {})


def test_error_status_from_a_step_names_fmu_variable_and_time(shipped_fmus, unzip):
    iface = describe("DataHall")
    inst = FmuInstance(iface, unzip(iface.path), "hall_a", {})
    inst.set_inputs({"q_it_mw": 1.0})
    inst.step(0.0, 60.0)
    inst.set_inputs({"q_it_mw": -1.0})
    with pytest.raises(FmuError) as err:
        inst.step(60.0, 60.0)
    text = str(err.value)
    assert "DataHall.fmu (hall_a)" in text and "t = 60 s" in text and "q_it = -1e+06" in text
    inst.close()


def test_error_status_when_setting_a_parameter(foreign_fmu, unzip):
    iface = describe(str(foreign_fmu))
    inst = FmuInstance(iface, unzip(iface.path), "room", {})
    with pytest.raises(FmuError, match=r"rc_room.fmu \(room\) at t = 0 s, variable 'R'.*R must be > 0"):
        inst.set_inputs({"r_room_k_kw": -1.0})
    inst.close()


def test_error_in_a_batch_of_inputs_names_the_variable(foreign_fmu, unzip):
    """Scalar reals are set with one call; when that call fails they are set one by one, so the
    message still names the variable the FMU refused (R), not the batch."""
    iface = describe(str(foreign_fmu))
    inst = FmuInstance(iface, unzip(iface.path), "room", {})
    other = next(a for a in iface.inputs if a != "r_room_k_kw" and iface.ports[a].kind == "real")
    batch = {"r_room_k_kw": -1.0, other: 1.0}
    with pytest.raises(FmuError, match=r"rc_room.fmu \(room\) at t = 0 s, variable 'R'.*R must be > 0"):
        inst.set_inputs(batch)
    inst.close()


def test_non_numeric_input_is_named(shipped_fmus, unzip):
    iface = describe("ChillerPlant")
    inst = FmuInstance(iface, unzip(iface.path), "plant", {})
    with pytest.raises(FmuError, match=r"variable 'q_load' \(q_load_mw = 'lots'\).*not a number"):
        inst.set_inputs({"q_load_mw": "lots"})
    inst.close()


# -- the mosaik face ------------------------------------------------------------------------------------
def test_entity_keys_are_checked_against_the_fmu(shipped_fmus):
    params = SimParams.model_validate({"fmu": "ChillerPlant"})
    entity = FmuSim.ModelParams["ChillerPlant"].model_validate({"n_chillers": 3, "q_load_kw": 5, "t_wet_c": "hot"})
    problems = FmuSim.check_entity("ChillerPlant", entity, None, params)
    assert len(problems) == 2
    assert problems[0].startswith("q_load_kw: ChillerPlant.fmu has no input or parameter")
    assert problems[1].startswith("t_wet_c = 'hot': give a number")


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("q_it_design_mw", -2.0, r"q_it_design_mw = -2.0: outside \[1e-06, 1000\] mw, the min and max DataHall.fmu's"),
    ("q_it_design_mw", 0.0, r"outside \[1e-06, 1000\] mw"),  # the model divides by it
    ("q_it_design_mw", math.nan, r"q_it_design_mw = nan: give a finite number"),
    ("c_room_mj_k", math.inf, r"c_room_mj_k = inf: give a finite number"),
    ("eta_fan_frac", 1.5, r"eta_fan_frac = 1.5: outside \[0.01, 1\] frac"),
    ("t_chw_supply_c", -273.0, r"t_chw_supply_c = -273.0: outside \[1, 45\] c"),
])
def test_start_values_outside_the_fmus_min_max_are_one_validation_problem(shipped_fmus, key, value, problem):
    """``entities.hall.q_it_design_mw = -2.0`` passed validation and failed at t = 0 (the FMU's
    own domain check); a start value outside the description's min/max, NaN or inf is now a
    problem at validation, naming the key, the value and the range."""
    params = SimParams.model_validate({"fmu": "DataHall"})
    entity = FmuSim.ModelParams["DataHall"].model_validate({key: value})
    (found,) = FmuSim.check_entity("DataHall", entity, None, params)
    assert re.search(problem, found), found


def test_a_bad_start_value_fails_validation_with_file_and_key(shipped_fmus):
    scenario = Path(__file__).resolve().parents[3] / "scenarios" / "default.toml"
    with pytest.raises(cosim.ScenarioError) as caught:
        load_scenario(scenario, {"entities.hall.q_it_design_mw": -2.0})
    text = str(caught.value)
    assert "default.toml: 1 problem" in text and "entities.hall: q_it_design_mw = -2.0: outside" in text


SCENARIO = """
[scenario]
name = "fmu_smoke"
start = 2024-07-15T12:00:00Z
duration_s = 7200
step_s = 300

[sims.weather]
adapter = "signals"
file = "{root}/scenarios/data/weather/greensboro_nc_tmy3.csv"
align_year = true
interpolation = "linear"
columns = {{ t_wet_c = "t_wet_c" }}

[sims.facility]
adapter = "load"

[sims.cooling]
adapter = "fmu"
fmu = "ChillerPlant"

[sims.room]
adapter = "fmu"
fmu = "{foreign}"
interface = "me"

[entities.tmy]
sim = "weather"
model = "Series"

[entities.campus]
sim = "facility"
model = "FacilityLoad"
file = "{root}/scenarios/data/loads/helios_earth_day_2020-05-20.csv"
repeat = true

[entities.plant]
sim = "cooling"
model = "ChillerPlant"
t_chw_supply_setpoint_c = 12.0

[entities.office]
sim = "room"
model = "RC_Room"
t0_c = 40.0

[[connect]]
src = "campus"
dst = "plant"
attrs = [["p_mw", "q_load_mw"]]

[[connect]]
src = "tmy"
dst = "plant"
attrs = ["t_wet_c"]

[[connect]]
src = "tmy"
dst = "office"
attrs = [["t_wet_c", "ta_c"]]

[record]
include = ["*"]
"""


def test_runs_inside_mosaik(shipped_fmus, foreign_fmu, tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    path = tmp_path / "fmu_smoke.toml"
    path.write_text(SCENARIO.format(root=root, foreign=foreign_fmu))
    result = cosim.run(path, out_dir=tmp_path / "runs")
    assert result.ok, result.reason
    ts = result.timeseries()
    assert len(ts) == 24
    load = ts["campus.p_mw"].to_numpy()
    np.testing.assert_allclose(ts["plant.q_chillers_mw"] + ts["plant.q_economizer_mw"] + ts["plant.q_unmet_mw"],
                               load, rtol=1e-9)
    assert (ts["plant.p_cooling_mw"] > 0).all() and (ts["plant.water_m3"].diff().dropna() > 0).all()
    assert ts["office.t_room_c"].iloc[-1] < 40.0  # the foreign room cools towards ambient + P R


FAILING = """
[scenario]
name = "fmu_failing"
start = 2024-07-15T12:00:00Z
duration_s = 7200
step_s = 300

[sims.weather]                    # IT heat that turns negative near 13:30 UTC: out of the FMU's domain
adapter = "signals"
file = "{root}/scenarios/data/weather/greensboro_nc_tmy3.csv"
align_year = true
interpolation = "linear"
columns = {{ q_it_mw = {{ column = "t_dry_c", scale = -1.0, offset = 24.95 }} }}

[sims.cooling]
adapter = "fmu"
fmu = "DataHall"

[entities.tmy]
sim = "weather"
model = "Series"

[entities.hall]
sim = "cooling"
model = "DataHall"

[[connect]]
src = "tmy"
dst = "hall"
attrs = ["q_it_mw"]

[record]
include = ["*"]
"""


def test_failing_step_inside_mosaik_keeps_what_was_recorded(shipped_fmus, tmp_path):
    """A step error stops the run with a reason naming FMU, variable and time; rows so far stay."""
    from pathlib import Path

    path = tmp_path / "failing.toml"
    path.write_text(FAILING.format(root=Path(__file__).resolve().parents[3]))
    result = cosim.run(path, out_dir=tmp_path / "runs")
    assert not result.ok
    assert "DataHall.fmu (hall) at t = 5400 s" in result.reason and "q_it = -" in result.reason
    ts = result.timeseries()
    assert 10 <= len(ts) < 24 and (ts["tmy.q_it_mw"] >= 0).all() and ts["hall.q_coil_mw"].notna().all()


def test_cooling_summer_week_scenario_validates(shipped_fmus):
    from pathlib import Path

    scn = cosim.validate(Path(__file__).resolve().parents[3] / "scenarios" / "cooling_summer_week.toml")
    assert {"hall_air", "plant_air", "dlc", "hall_rest", "plant_rest"} <= set(scn.entities)


@pytest.mark.parametrize("make, expected", [
    (lambda path, xml: path.write_text("hello, I am not a zip"), "not a zip archive"),
    (lambda path, xml: _zip(path, {"readme.txt": "hi"}), "the zip archive has none (not an FMU)"),
    (lambda path, xml: _zip(path, {"modelDescription.xml": xml.replace('fmiVersion="2.0"', 'fmiVersion="1.0"')}),
     "fmiVersion = '1.0': cosim runs FMI 2.0 and 3.0 FMUs"),
    (lambda path, xml: _zip(path, {"modelDescription.xml": xml.replace('fmiVersion="2.0"', 'fmiVersion="banana"')}),
     "fmiVersion = 'banana'"),
])
def test_a_file_that_is_not_a_usable_fmu_gets_one_message_with_the_fix(foreign_fmu, tmp_path, make, expected):
    """Not a zip, a zip without a model description, FMI 1.0 or a made-up version: one message naming
    the file, what is wrong and how to export it (before: fmpy's KeyError, or a list of schema errors
    for FMI 1.0 that never said the version)."""
    with zipfile.ZipFile(foreign_fmu) as zf:
        xml = zf.read("modelDescription.xml").decode()
    assert 'fmiVersion="2.0"' in xml
    path = tmp_path / "mine.fmu"
    make(path, xml)
    problems = FmuSim.check(SimParams(fmu=str(path)), None)
    assert len(problems) == 1
    assert problems[0].startswith("mine.fmu: ") and expected in problems[0] and "FMI 2.0 or 3.0" in problems[0]


@pytest.mark.parametrize("fixture", ["foreign_fmu", "foreign_fmu3", "arrays_fmu3", "vdp_fmu"])
def test_an_fmu_without_min_max_still_bounds_every_input(request, fixture):
    """A user's FMU (FMI 2.0 or 3.0, arrays, model exchange) whose description gives no min/max:
    every input still has finite bounds, its unit's plausible range or 1000 times its start value
    either side, and an end the description gives is kept."""
    path = request.getfixturevalue(fixture)
    params = SimParams.model_validate({"fmu": str(path)})
    iface = describe(str(path))
    bounds = FmuSim.settable_bounds(iface.model, None, params)
    assert iface.inputs and set(bounds) == set(iface.inputs)
    for attr, (low, high) in bounds.items():
        assert math.isfinite(low) and math.isfinite(high) and low < high, (attr, low, high)
        given = iface.ports[attr].bounds()
        assert (given[0] is None or given[0] == low) and (given[1] is None or given[1] == high), attr
