"""Source and storage adapters' speed: µs per adapter step, and the campus PV + battery week.

Run:  .venv/bin/python bench/bench_sources.py

Steps each adapter (pv, wind, battery, firm, tariff, dr_events) through one simulated week
at 60 s steps with fixed inputs, then runs ``scenarios/campus_pv_battery.toml`` end to end
and times it. Prints figures; asserts nothing.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cosim.adapters.battery import BatterySim  # noqa: E402
from cosim.adapters.dr_events import DrEventsSim  # noqa: E402
from cosim.adapters.firm import FirmSim  # noqa: E402
from cosim.adapters.pv import PvSim  # noqa: E402
from cosim.adapters.tariff import SimParams as TariffParams, TariffSim  # noqa: E402
from cosim.adapters.wind import WindSim  # noqa: E402

STEP_S, DURATION_S = 60, 7 * 86_400
START = dict(start_utc="2024-07-15T00:00:00Z", step_s=STEP_S, duration_s=DURATION_S, seed=0)
SCENARIOS = ROOT / "scenarios"
CASES = {
    "pv (fixed)": (PvSim, {}, "PvPlant", dict(latitude_deg=36.1, longitude_deg=-79.95, p_dc_mw=8.0, p_ac_mw=6.0),
                   {"ghi_w_m2": 800.0, "dni_w_m2": 700.0, "dhi_w_m2": 120.0, "t_dry_c": 30.0, "wind_m_s": 2.0}),
    "pv (tracker)": (PvSim, {}, "PvPlant", dict(latitude_deg=36.1, longitude_deg=-79.95, p_dc_mw=8.0, p_ac_mw=6.0,
                                                tracking="single_axis"),
                     {"ghi_w_m2": 800.0, "dni_w_m2": 700.0, "dhi_w_m2": 120.0, "t_dry_c": 30.0, "wind_m_s": 2.0}),
    "wind": (WindSim, {}, "WindFarm", dict(turbine="iea_3p3mw", n_turbines=3), {"wind_m_s": 6.0}),
    "battery": (BatterySim, {}, "Battery", dict(e_capacity_mwh=8.0, p_charge_max_mw=2.0, p_discharge_max_mw=2.0),
                {"p_set_mw": 1.0}),
    "smr": (FirmSim, {}, "Smr", dict(p_max_mw=77.0), {"p_set_mw": 50.0}),
    "gas turbine": (FirmSim, {}, "GasTurbine", dict(p_max_mw=2.0), {"p_set_mw": 1.5}),
    "tariff": (TariffSim, TariffParams(default_usd_mwh=60.0, tz="America/New_York", periods=[
        {"name": "on_peak", "start_h": 14, "end_h": 19, "energy_usd_mwh": 140.0}]).model_dump(mode="json"), "Tariff", {}, {}),
    "dr_events": (DrEventsSim, {}, "Events", dict(file=str(SCENARIOS / "data/dr_events/example_events.csv")), {}),
}


def bench_adapter(cls, sim_params, model, params, inputs) -> float:
    sim = cls()
    sim.init("s", time_resolution=1.0, **START, **sim_params)
    eid = sim.create(1, model, eid="e", **params)[0]["eid"]
    step_inputs = {eid: {k: {"src": v} for k, v in inputs.items()}} if inputs else {}
    n = DURATION_S // STEP_S
    began = time.perf_counter()
    for k in range(n):
        sim.step(k * STEP_S, step_inputs, DURATION_S)
    return (time.perf_counter() - began) / n * 1e6


def main() -> None:
    print(f"adapter steps, one week at {STEP_S} s ({DURATION_S // STEP_S} steps), one entity:")
    for name, case in CASES.items():
        print(f"  {name:14s} {bench_adapter(*case):8.1f} µs/step")
    with tempfile.TemporaryDirectory() as out:
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cosim", "run", str(SCENARIOS / "campus_pv_battery.toml"), "--out", out],
                       cwd=ROOT, check=True, capture_output=True)
        print(f"campus_pv_battery.toml (7 days, 300 s steps, 2016 steps): {time.perf_counter() - began:.1f} s wall")


if __name__ == "__main__":
    main()
