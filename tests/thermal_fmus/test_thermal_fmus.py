"""The shipped cooling FMUs: FMI validity, sources in step, reference results, energy and
water balances, and steady states against published ranges (sources in each docstring)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fmpy import extract
from fmpy.validation import validate_fmu
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.adapters.fmu import FmuInstance, describe
from thermal_fmus.build import HERE as FMU_SRC
from thermal_fmus.build import build_all, models

MODELS = models()
DAY_S = 86_400
STEP_S = 60.0
RTOL, ATOL = 1e-6, 1e-9  # same C code on another compiler or libm: round-off only


@pytest.fixture(scope="module")
def unzipped(tmp_path_factory):
    """Build every shipped FMU (the script ``make build`` runs) and extract each once."""
    root = tmp_path_factory.mktemp("thermal_fmus")
    return {path.stem: (describe(path.stem), extract(str(path), unzipdir=str(root / path.stem))) for path in build_all()}


def run(unzipped, model, start, inputs, duration_s=DAY_S, step_s=STEP_S, every=1):
    """Step one instance; ``inputs(t_s) -> {attr: value}``; returns a frame of inputs and outputs."""
    iface, folder = unzipped[model]
    inst = FmuInstance(iface, folder, model, start, step_s=step_s)
    rows = []
    try:
        for k in range(int(duration_s / step_s)):
            t_s = k * step_s
            given_inputs = inputs(t_s)
            inst.set_inputs(given_inputs)
            inst.step(t_s, step_s)
            if k % every == 0:
                rows.append({"time_s": t_s, **given_inputs, **inst.outputs()})
    finally:
        inst.close()
    return pd.DataFrame(rows).set_index("time_s")


# -- FMI validity and sources --------------------------------------------------------------------------
def test_every_model_has_its_files():
    assert set(MODELS) == {"ChillerPlant", "DataHall", "LiquidCooling", "ChilledWaterTank"}
    for model in MODELS:
        for name in ("config.h", "model.c", "modelDescription.xml", "README.md", "reference.csv"):
            assert (FMU_SRC / model / name).is_file(), f"{model}/{name} is missing"


@pytest.mark.parametrize("model", MODELS)
def test_fmpy_validation_passes(unzipped, model):
    """fmpy's validator: schema, variable names, model structure, start values, units."""
    assert validate_fmu(str(unzipped[model][0].path)) == []


@pytest.mark.parametrize("model", MODELS)
def test_config_h_matches_the_model_description(model):
    """Value references, their count and the GUID are written twice (C and XML): they agree."""
    root = ET.parse(FMU_SRC / model / "modelDescription.xml").getroot()
    xml_vrs = {v.get("name"): int(v.get("valueReference")) for v in root.iter("ScalarVariable")}
    config = (FMU_SRC / model / "config.h").read_text()
    c_vrs = {m[0]: int(m[1]) for m in re.findall(r"vr_(\w+) = (\d+)", config)}
    assert c_vrs == xml_vrs
    assert int(re.search(r"#define N_REALS (\d+)", config)[1]) == len(xml_vrs) == max(xml_vrs.values()) + 1
    assert re.search(r'INSTANTIATION_TOKEN "([^"]+)"', config)[1] == root.get("guid")


# -- reference results -------------------------------------------------------------------------------------
def _ramp(t_s, lo, hi):
    return lo + (hi - lo) * t_s / DAY_S


REFERENCE_INPUTS = {
    # load swings around 1.6 MW while the wet-bulb climbs from -2 to 26 C: full economizer,
    # integrated economizer, chillers alone, one then two chillers
    "ChillerPlant": lambda t: {"q_load_mw": 1.6 + 0.8 * math.sin(2 * math.pi * t / DAY_S), "t_wet_c": _ramp(t, -2.0, 26.0)},
    # IT steps 0.5 -> 2.0 -> 1.2 MW, then the chilled water warms so the rack inlet leaves the A1 band
    "DataHall": lambda t: {"q_it_mw": 0.5 if t < 21_600 else 2.0 if t < 43_200 else 1.2,
                           "t_chw_supply_c": 12.0 if t < 64_800 else 24.0},
    # dry-bulb from 5 to 40 C: fans from minimum speed to saturation, coolant above setpoint
    "LiquidCooling": lambda t: {"q_it_mw": 1.5 + 0.5 * math.sin(2 * math.pi * t / DAY_S), "t_dry_c": _ramp(t, 5.0, 40.0)},
    # charge at 2 MW (until full), idle, discharge at 1.5 MW (until empty)
    "ChilledWaterTank": lambda t: {"q_charge_cmd_mw": 2.0 if t < 28_800 else 0.0 if t < 36_000 else -1.5,
                                   "t_ambient_c": 30.0},
}


@pytest.mark.parametrize("model", MODELS)
def test_reference_result(unzipped, model, update_golden):
    """One day at 60 s steps, every 10 minutes compared with ``<Model>/reference.csv`` at
    rtol 1e-6 / atol 1e-9. Refresh with ``--update-golden`` and review the diff."""
    got = run(unzipped, model, {}, REFERENCE_INPUTS[model], every=10)
    path = FMU_SRC / model / "reference.csv"
    if update_golden:
        got.to_csv(path, float_format="%.12g")
    want = pd.read_csv(path, index_col="time_s")
    assert list(got.columns) == list(want.columns)
    np.testing.assert_allclose(got.to_numpy(float), want.to_numpy(float), rtol=RTOL, atol=ATOL)


# -- balances ------------------------------------------------------------------------------------------------
def test_data_hall_energy_balance(unzipped):
    """Heat in (IT + fans) minus heat out (coils) is what the hall air stored: C dT."""
    ts = run(unzipped, "DataHall", {"c_room_mj_k": 20.0}, REFERENCE_INPUTS["DataHall"])
    stored_mwh = (ts["e_heat_in_mwh"] - ts["e_coil_mwh"]).iloc[-1]
    dt_k = ts["t_air_return_c"].iloc[-1] - 34.0  # t_air_return_start default 307.15 K
    assert stored_mwh == pytest.approx(20.0 * dt_k / 3600.0, rel=1e-9, abs=1e-12)
    # and each step's coil duty is the air-side enthalpy drop
    np.testing.assert_allclose(ts["q_coil_mw"], ts["mdot_air_kg_s"] * 1005.0 * (ts["t_air_return_c"] - ts["t_air_supply_c"]) / 1e6,
                               rtol=1e-12)


def test_liquid_cooling_energy_balance(unzipped):
    ts = run(unzipped, "LiquidCooling", {"c_loop_mj_k": 40.0}, REFERENCE_INPUTS["LiquidCooling"])
    stored_mwh = (ts["e_heat_in_mwh"] - ts["e_rejected_mwh"]).iloc[-1]
    dt_k = ts["t_facility_return_c"].iloc[-1] - 42.0
    assert stored_mwh == pytest.approx(40.0 * dt_k / 3600.0, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(ts["q_liquid_mw"] + ts["q_air_mw"], ts["q_it_mw"], rtol=1e-12)


def test_chiller_plant_energy_and_water_balance(unzipped):
    """Tower heat = load met + compressor work; load = chillers + economizer + unmet; the
    make-up water is evaporation (all rejected heat latent, h_fg = 2.43 MJ/kg) times
    CoC/(CoC-1) for blowdown."""
    ts = run(unzipped, "ChillerPlant", {}, REFERENCE_INPUTS["ChillerPlant"])
    met = ts["q_chillers_mw"] + ts["q_economizer_mw"]
    np.testing.assert_allclose(met + ts["q_unmet_mw"], ts["q_load_mw"], rtol=1e-12)
    np.testing.assert_allclose(ts["q_rejected_mw"], met + ts["p_chillers_mw"], rtol=1e-12)
    np.testing.assert_allclose(ts["mdot_water_makeup_kg_s"], ts["q_rejected_mw"] * 1e6 / 2.43e6 * 4 / 3, rtol=1e-12)
    assert ts["water_m3"].iloc[-1] == pytest.approx((ts["mdot_water_makeup_kg_s"] * STEP_S / 1000).sum(), rel=1e-12)
    assert ts["e_cooling_mwh"].iloc[-1] == pytest.approx((ts["p_cooling_mw"] * STEP_S / 3600).sum(), rel=1e-12)


def test_chilled_water_tank_balance(unzipped):
    ts = run(unzipped, "ChilledWaterTank", {}, REFERENCE_INPUTS["ChilledWaterTank"])
    start_mwh = 0.5 * ts["e_capacity_mwh"].iloc[0]
    assert ts["e_stored_mwh"].iloc[-1] - start_mwh == pytest.approx(
        ts["e_charged_mwh"].iloc[-1] - ts["e_lost_mwh"].iloc[-1], rel=1e-12)
    # 1000 m3 x 10 K x 0.9 usable = 10.47 MWh of cooling
    assert ts["e_capacity_mwh"].iloc[0] == pytest.approx(1000 * 1000 * 4186 * 10 * 0.9 / 3.6e9)
    assert ts["soc_frac"].max() > 0.99 and ts["soc_frac"].min() < 0.01


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-5.0, 5.0), min_size=1, max_size=12), st.floats(0.0, 1.0))
def test_tank_state_of_charge_stays_in_bounds(unzipped, commands_mw, soc0):
    ts = run(unzipped, "ChilledWaterTank", {"soc_start_frac": soc0, "q_max_mw": 4.0},
             lambda t: {"q_charge_cmd_mw": commands_mw[int(t // 7200) % len(commands_mw)]}, duration_s=86_400)
    assert ts["soc_frac"].between(0.0, 1.0).all()
    assert (ts["q_tank_mw"].abs() <= 4.0 + 1e-12).all()


# -- published numbers -------------------------------------------------------------------------------------
def test_chiller_full_load_cop_meets_ashrae_90_1(unzipped):
    """At AHRI 550/590 standard rating conditions (6.67 C leaving chilled water, 29.44 C
    entering condenser water, full load) the chiller curve gives COP 6.30, which meets
    ASHRAE 90.1-2019 Table 6.8.1-3 Path A for water-cooled centrifugal chillers of
    300-600 tons: full load <= 0.560 kW/ton, i.e. COP >= 3.517/0.560 = 6.28. The curve
    itself reproduces its reference point (COP 6.94 at 5.56 C / 23.89 C, EnergyPlus
    dataset "ElectricEIRChiller York YT 1403kW/6.94COP/VSD") within the fit error."""
    params = {"n_chillers": 1, "dt_tower_approach_k": 0.0, "wse_enable_frac": 0.0, "t_cw_min_c": 10.0}
    ahri = run(unzipped, "ChillerPlant", params, lambda t: {"q_load_mw": 3.0, "t_wet_c": 29.44,
                                                            "t_chw_supply_setpoint_c": 6.67}, duration_s=60)
    assert ahri["plr_frac"].iloc[-1] == pytest.approx(1.0)
    assert 3.517 / 0.560 <= ahri["cop_chillers_ratio"].iloc[-1] <= 7.0
    ref = run(unzipped, "ChillerPlant", params, lambda t: {"q_load_mw": 3.0, "t_wet_c": 23.89,
                                                           "t_chw_supply_setpoint_c": 5.56}, duration_s=60)
    assert ref["cop_chillers_ratio"].iloc[-1] == pytest.approx(6.94, rel=0.03)
    assert ref["q_chillers_mw"].iloc[-1] == pytest.approx(1.4031, rel=0.03)


@pytest.mark.parametrize("t_wet_c", [20.0, 24.0, 26.0])
def test_plant_efficiency_inside_published_range(unzipped, t_wet_c):
    """Whole-plant efficiency (chillers + tower fans + pumps) in summer without free cooling:
    0.5-1.0 kW/ton, the span of the ASHRAE plant-efficiency scale from 'excellent' (< 0.75)
    to 'fair' (0.85-1.0) (Hydeman/Erpelding chart, ASHRAE Journal; also Taylor, "Measuring
    and Modeling Chilled Water Plant Efficiency", ASHRAE Journal 2012), i.e. plant COP 3.5-7.0."""
    ts = run(unzipped, "ChillerPlant", {}, lambda t: {"q_load_mw": 1.6, "t_wet_c": t_wet_c}, duration_s=60)
    kw_per_ton = 3.517 / ts["cop_plant_ratio"].iloc[-1]
    assert 0.5 <= kw_per_ton <= 1.0
    assert ts["q_economizer_mw"].iloc[-1] == 0.0


def test_economizer_takes_the_load_in_winter(unzipped):
    """Free cooling: at -2 C wet-bulb the tower water (wet-bulb + approach) plus the heat
    exchanger approach is far below the 12 C supply setpoint, so the chillers stay off."""
    cold = run(unzipped, "ChillerPlant", {}, lambda t: {"q_load_mw": 1.6, "t_wet_c": -2.0}, duration_s=60)
    assert cold["q_economizer_mw"].iloc[-1] == pytest.approx(1.6) and cold["p_chillers_mw"].iloc[-1] == 0.0
    off = run(unzipped, "ChillerPlant", {"wse_enable_frac": 0.0}, lambda t: {"q_load_mw": 1.6, "t_wet_c": -2.0}, duration_s=60)
    assert off["p_cooling_mw"].iloc[-1] > 2 * cold["p_cooling_mw"].iloc[-1]


def test_unmet_load_raises_the_supply_temperature(unzipped):
    ts = run(unzipped, "ChillerPlant", {"wse_enable_frac": 0.0}, lambda t: {"q_load_mw": 4.0, "t_wet_c": 26.0}, duration_s=60)
    assert ts["q_unmet_mw"].iloc[-1] > 0.5 and ts["n_chillers_on"].iloc[-1] == 2
    assert ts["t_chw_supply_c"].iloc[-1] > 12.0 + 1.0


def test_air_cooled_pue_and_wue_inside_published_ranges(unzipped):
    """A 1.5 MW air-cooled hall at a Greensboro summer design wet-bulb (24 C): PUE (IT + CRAH
    fans + plant)/IT between 1.1 (hyperscale fleets, e.g. Google 2023 TTM 1.10) and 1.58
    (Uptime Institute Global Data Center Survey 2023 average); WUE of the evaporative tower
    between 1 and 2.5 L/kWh (Shehabi et al. 2016, LBNL-1005775: about 1.8 L/kWh on site)."""
    hall = run(unzipped, "DataHall", {}, lambda t: {"q_it_mw": 1.5}, duration_s=7200)
    q_coil = hall["q_coil_mw"].iloc[-1]
    plant = run(unzipped, "ChillerPlant", {}, lambda t: {"q_load_mw": q_coil, "t_wet_c": 24.0}, duration_s=60)
    pue = (1.5 + hall["p_fans_mw"].iloc[-1] + plant["p_cooling_mw"].iloc[-1]) / 1.5
    wue_l_kwh = plant["mdot_water_makeup_kg_s"].iloc[-1] * 3600 / (1.5 * 1000)
    assert 1.1 <= pue <= 1.58
    assert 1.0 <= wue_l_kwh <= 2.5


def test_rack_inlet_against_ashrae_a1(unzipped):
    """ASHRAE TC 9.9 (2021) recommended inlet 18-27 C: inside at the 22 C supply setpoint;
    out by the right margin when the coils can only reach 24 C chilled water + 3 K."""
    ts = run(unzipped, "DataHall", {}, REFERENCE_INPUTS["DataHall"])
    normal = ts.loc[ts.index < 64_800].iloc[-1]
    assert 18.0 <= normal["t_rack_inlet_c"] <= 27.0 and normal["dt_inlet_excursion_k"] == 0.0
    warm = ts.iloc[-1]
    assert warm["t_air_supply_c"] == pytest.approx(27.0)
    assert warm["dt_inlet_excursion_k"] == pytest.approx(warm["t_rack_inlet_c"] - 27.0) and warm["dt_inlet_excursion_k"] > 0


def test_fan_power_follows_the_cube_law(unzipped):
    half = run(unzipped, "DataHall", {}, lambda t: {"q_it_mw": 1.0}, duration_s=60)
    full = run(unzipped, "DataHall", {}, lambda t: {"q_it_mw": 2.0}, duration_s=60)
    assert half["p_fans_mw"].iloc[-1] / full["p_fans_mw"].iloc[-1] == pytest.approx(0.125)
    # design: 2 MW / (1005 J/kgK x 12 K) / 1.2 kg/m3 x 500 Pa / 0.6
    assert full["p_fans_mw"].iloc[-1] == pytest.approx(2e6 / (1005 * 12) / 1.2 * 500 / 0.6 / 1e6)


def test_liquid_cooling_holds_the_w32_setpoint_until_the_dry_cooler_saturates(unzipped):
    """ASHRAE W32 facility water (32 C) is held while the dry-bulb leaves room for the dry
    cooler's conductance; above that the fans run flat out and the coolant follows the weather.
    The liquid loop's power stays within a few percent of the heat it moves."""
    ts = run(unzipped, "LiquidCooling", {}, lambda t: {"q_it_mw": 1.5, "t_dry_c": _ramp(t, 5.0, 40.0)})
    mild = ts[ts["t_dry_c"] < 25]
    assert np.allclose(mild["t_facility_supply_c"].iloc[60:], 32.0, atol=0.05)
    hot = ts.iloc[-1]
    assert hot["fan_speed_frac"] == 1.0 and hot["t_facility_supply_c"] > 35.0
    assert hot["t_coolant_gpu_c"] == pytest.approx(hot["t_facility_supply_c"] + 3.0)
    assert (ts["p_cooling_mw"] / ts["q_liquid_mw"] < 0.05).all()


def test_build_script_reports_the_fmus(unzipped):
    """``python thermal_fmus/build.py`` (the Makefile's build line) exits 0 and lists every FMU."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(FMU_SRC / "build.py")], capture_output=True, text=True, check=True)
    assert sorted(Path(line).stem for line in done.stdout.split()) == MODELS
