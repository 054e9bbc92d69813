"""What of an FMU becomes scenario attributes: FMI 3.0 arrays element by element, units
without a listed suffix under a derived one, and everything else left out with a warning at
validation instead of dropped in silence or refused."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from fmpy.validation import validate_fmu

import cosim
from cosim.adapters.fmu import FmuError, FmuInstance, FmuSim, SimParams, describe
from cosim.units import has_unit_suffix, unit_of

FOREIGN = Path(__file__).resolve().parent / "foreign"


# -- arrays ---------------------------------------------------------------------------------------
def test_array_elements_are_attributes(arrays_fmu3, unzip):
    iface = describe(str(arrays_fmu3))
    assert [a for a in iface.inputs if a.startswith("heat")] == ["heat_1_mw", "heat_2_mw", "heat_3_mw"]
    assert [a for a in iface.outputs if a.startswith("temps")] == ["temps_1_c", "temps_2_c", "temps_3_c"]
    inst = FmuInstance(iface, unzip(iface.path), "zones", {"heat_3_mw": 500e-6})
    start = inst.outputs()  # start values from the model description (100, 200 W) and the entity (500 W)
    assert [start[f"temps_{i}_c"] for i in (1, 2, 3)] == pytest.approx([21.0, 22.0, 25.0])
    inst.set_inputs({"heat_2_mw": 1e-3})  # one element set: the others keep their values
    inst.step(0.0, 60.0)
    out = inst.outputs()
    assert [out[f"temps_{i}_c"] for i in (1, 2, 3)] == pytest.approx([21.0, 30.0, 25.0])
    assert out["total_mw"] == pytest.approx(1.6e-3)
    assert out["energy_mwh"] == pytest.approx(1.6e3 * 60.0 / 3.6e9)
    inst.close()


def test_explicit_name_of_an_array_numbers_its_elements(arrays_fmu3):
    iface = describe(str(arrays_fmu3), {"temps": "t_zone_k"})
    assert [a for a in iface.outputs if a.startswith("t_zone")] == ["t_zone_1_k", "t_zone_2_k", "t_zone_3_k"]
    assert iface.ports["t_zone_2_k"].from_fmu(300.0) == 300.0


# -- units ----------------------------------------------------------------------------------------
def test_unit_without_a_listed_suffix_gets_one_from_its_symbols(arrays_fmu3, vdp_fmu):
    assert "accel_m_s2" in describe(str(arrays_fmu3)).settable  # a parameter [m/s2]: it blocked the FMU
    assert "accel_out_m_s2" in describe(str(arrays_fmu3)).outputs
    assert "u_m_s2" in describe(str(vdp_fmu)).inputs
    assert unit_of("accel_m_s2") == "m_s2" and unit_of("rho_kg_mol") == "kg_mol" and unit_of("area_m2") == "m2"
    for name in ("t_room", "flow_kgs", "speed_furlong_fortnight", "hall_2", "m_"):
        assert not has_unit_suffix(name), name


@pytest.mark.parametrize("attrs, message", [
    ({"accel": "g_c"}, r"no conversion from the FMU unit 'm/s2' to this suffix; use one of _m_s2"),
    ({"speed": "speed_fast"}, "needs a unit suffix"),
])
def test_explicit_mapping_mistakes_still_refuse(arrays_fmu3, attrs, message):
    with pytest.raises(FmuError, match=message):
        describe(str(arrays_fmu3), attrs)


def test_explicit_mapping_to_the_derived_suffix_or_with_a_scale(arrays_fmu3):
    attrs = {"accel": "g_load_m_s2", "speed": {"name": "speed_m_s", "scale": 0.000166309}}
    iface = describe(str(arrays_fmu3), SimParams.model_validate({"fmu": str(arrays_fmu3), "attrs": attrs}).attrs)
    assert iface.ports["g_load_m_s2"].from_fmu(9.81) == 9.81
    assert iface.ports["speed_m_s"].from_fmu(1.0) == pytest.approx(0.000166309)
    assert not any("speed" in text for text in iface.left_out)


# -- what is left out ------------------------------------------------------------------------------
SCENARIO = """
[scenario]
name = "zones"
start = 2024-07-15T00:00:00Z
duration_s = 300
step_s = 60

[sims.zones]
adapter = "fmu"
fmu = "{fmu}"

[entities.hall]
sim = "zones"
model = "Zones"

[record]
include = ["*"]
"""


def test_left_out_variables_are_a_warning_at_validation(arrays_fmu3, tmp_path):
    """label (String), blob (Binary) and speed (a unit no suffix follows from, a parameter that
    nothing connects to) used to vanish, or block the whole FMU; now validation passes and says so."""
    path = tmp_path / "zones.toml"
    path.write_text(SCENARIO.format(fmu=arrays_fmu3))
    scn = cosim.validate(path)
    assert len(scn.warnings) == 1
    text = scn.warnings[0]
    assert text.startswith("sims.zones: arrays3.fmu leaves out 3 variable(s) cosim cannot map:")
    assert "'label' (String" in text and "'blob' (Binary" in text and "'speed' (unit 'furlong/fortnight'" in text
    assert '"speed" = { name = "speed_<suffix>"' in text
    result = cosim.run(path, out_dir=tmp_path / "runs")
    assert result.ok and result.metadata["warnings"] == scn.warnings
    assert {"hall.temps_3_c", "hall.accel_out_m_s2", "hall.energy_mwh"} <= set(result.timeseries().columns)


def _xml_only_fmu(tmp_path: Path, name: str, replace: dict[str, str]) -> Path:
    xml = (FOREIGN / "scheduled3.xml").read_text()
    for old, new in replace.items():
        xml = xml.replace(old, new)
    fmu = tmp_path / f"{name}.fmu"
    with zipfile.ZipFile(fmu, "w") as zf:
        zf.writestr("modelDescription.xml", xml)
    return fmu


def test_fmu_with_nothing_to_connect_is_said(tmp_path):
    fmu = _xml_only_fmu(tmp_path, "strings", {
        "ScheduledExecution": "CoSimulation",
        '<Float64 name="y" valueReference="1" causality="output" variability="discrete" initial="exact" start="0"/>':
            '<String name="y" valueReference="1" causality="output" variability="discrete" initial="exact"><Start value=""/></String>'})
    warnings = [t for t in FmuSim.check(SimParams.model_validate({"fmu": str(fmu)}), None) if t.startswith("warning: ")]
    assert warnings == ["warning: strings.fmu leaves out 1 variable(s) cosim cannot map: 'y' (String: no numeric column)",
                        "warning: strings.fmu has no input, output or parameter cosim can connect or record"]


def test_scheduled_execution_has_its_own_message(tmp_path):
    fmu = _xml_only_fmu(tmp_path, "scheduled", {})
    problems = FmuSim.check(SimParams.model_validate({"fmu": str(fmu)}), None)
    assert problems == ["scheduled.fmu: scheduled execution is not supported; cosim runs co-simulation or model "
                        "exchange FMUs (this one offers only scheduled execution)"]


@pytest.mark.parametrize("fixture", ["vdp_fmu", "arrays_fmu3"])
def test_the_test_fmus_pass_fmpys_validation(request, fixture):
    assert validate_fmu(str(request.getfixturevalue(fixture))) == []
