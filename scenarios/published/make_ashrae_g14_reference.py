"""Write the reference series of the ASHRAE Guideline 14 case (ashrae_g14_chiller.toml).

Run: ``.venv/bin/python scenarios/published/make_ashrae_g14_reference.py`` (writes
``scenarios/data/cooling/ashrae_g14_chiller_reference.csv.gz``; re-running it reproduces the file
byte for byte). ``--calibrate`` then fits the ChillerPlant FMU's parameters to the calibration
half-year by running the case itself and prints them (the values in the case file came from it).

The reference is an independent chiller plant: two water-cooled centrifugal chillers of the
EnergyPlus dataset object "ElectricEIRChiller Trane CVHE 1372kW/7.49COP/Vanes" (EnergyPlus
``datasets/Chillers.idf``, NREL/EnergyPlus, BSD-3-Clause; the dataset's curves were fitted to
manufacturer data collected 1991-2001 by the CoolTools project). Our FMU carries another maker's
curves (York YT 1403 kW VSD, variable-speed unloading): the two share the DOE-2 model form, not
the machine. Per hour, following the EnergyPlus Engineering Reference, "Electric Chiller Model
Based on Condenser Entering Temperature" (Chiller:Electric:EIR):

    Te = leaving chilled water = 6.67 C (44 F, the AHRI 550/590 rating point)
    Tc = entering condenser water = max(T_wb + 3.9 K, 15 C)   (a tower at a constant 7 F approach;
                                                               the bypass holds the chiller minimum)
    CAPFT(Te, Tc), EIRFT(Te, Tc): biquadratics, inputs clamped to the fitted range
    Q_avail = Q_ref CAPFT;  n_on = min(N, ceil(Q / Q_avail));  PLR = Q / (n_on Q_avail)
    P = n_on Q_avail / COP_ref * EIRFT * EIRFPLR(max(PLR, PLR_min)) * min(1, PLR / PLR_min)

The cooling load Q is the heat of the shipped Helios Earth GPU-cluster month (hourly means of
``data/loads/helios_earth_2020-05_1min.csv.gz``, 0.77-1.98 MW; IT power = heat), repeated over
the year from 1 January; the wet bulb is the shipped TMY3 Greensboro year
(``data/weather/greensboro_nc_tmy3.csv``).
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from cosim.run import run_scenario
from cosim.scenario import load_scenario
from cosim.studies.reproduce import load_case, variant_overrides

HERE = Path(__file__).parent
DATA = HERE.parent / "data"
WEATHER = DATA / "weather" / "greensboro_nc_tmy3.csv"
LOAD = DATA / "loads" / "helios_earth_2020-05_1min.csv.gz"
OUT = DATA / "cooling" / "ashrae_g14_chiller_reference.csv.gz"
CASE = HERE / "ashrae_g14_chiller.toml"

#: EnergyPlus datasets/Chillers.idf, "ElectricEIRChiller Trane CVHE 1372kW/7.49COP/Vanes"
#: (Chiller:Electric:EIR and its three curves), copied as facts.
NAME = "ElectricEIRChiller Trane CVHE 1372kW/7.49COP/Vanes"
Q_REF_W = 1371500.0          # Reference Capacity {W}
COP_REF = 7.49               # Reference COP {W/W}
PLR_MIN = 0.41               # Minimum Part Load Ratio = Minimum Unloading Ratio
CAPFT = (5.993784E-01, 6.523380E-02, -7.714286E-03, 3.114955E-02, -1.843989E-03, 4.096552E-03)
EIRFT = (9.123765E-01, 1.616509E-02, 1.906349E-03, -1.143164E-02, 1.080775E-03, -2.873661E-03)
EIRFPLR = (5.154478E-02, 9.635713E-01, -1.896824E-02)
TE_RANGE = (4.44, 8.89)      # Minimum / Maximum Value of x (leaving chilled water) {C}
TC_RANGE = (12.78, 29.44)    # Minimum / Maximum Value of y (entering condenser water) {C}

#: The reference plant (our choices, stated in the case header).
N_CHILLERS = 2
T_CHW_C = 6.67               # leaving chilled water setpoint [C]
APPROACH_K = 3.9             # cooling-tower approach, constant [K] (7 F)
T_CW_MIN_C = 15.0            # minimum entering condenser water [C]
YEAR = 2023                  # the TMY file's stamp year


def biquadratic(a: tuple[float, ...], x: np.ndarray | float, y: np.ndarray | float) -> np.ndarray:
    return a[0] + a[1] * x + a[2] * x * x + a[3] * y + a[4] * y * y + a[5] * x * y


def chiller_plant_w(q_w: np.ndarray, t_wet_c: np.ndarray) -> dict[str, np.ndarray]:
    """The reference plant's hourly state for loads ``q_w`` [W] and wet bulbs [C] (module docstring)."""
    t_cw = np.maximum(t_wet_c + APPROACH_K, T_CW_MIN_C)
    te = float(np.clip(T_CHW_C, *TE_RANGE))
    tc = np.clip(t_cw, *TC_RANGE)
    q_avail = Q_REF_W * biquadratic(CAPFT, te, tc)
    n_on = np.clip(np.ceil(q_w / q_avail - 1e-9), 1, N_CHILLERS)
    q_met = np.minimum(q_w, n_on * q_avail)
    plr = q_met / (n_on * q_avail)
    plr_eff = np.maximum(plr, PLR_MIN)
    eirfplr = EIRFPLR[0] + EIRFPLR[1] * plr_eff + EIRFPLR[2] * plr_eff ** 2
    cycling = np.minimum(1.0, plr / PLR_MIN)
    p = n_on * q_avail / COP_REF * biquadratic(EIRFT, te, tc) * eirfplr * cycling
    return {"t_cw_c": t_cw, "n_on": n_on, "plr": plr, "p_w": p, "q_unmet_w": q_w - q_met}


def hourly_load_mw(index: pd.DatetimeIndex) -> np.ndarray:
    """The Helios month's hourly mean facility power, repeated from the first hour of ``index``."""
    raw = pd.read_csv(LOAD)
    raw.index = pd.to_datetime(raw["time_utc"], utc=True)
    month = raw["p_mw"].resample("1h").mean().to_numpy()
    reps = math.ceil(len(index) / len(month))
    return np.tile(month, reps)[: len(index)]


def build() -> pd.DataFrame:
    weather = pd.read_csv(WEATHER)
    index = pd.DatetimeIndex(pd.to_datetime(weather["time_utc"], utc=True))
    assert index[0] == pd.Timestamp(f"{YEAR}-01-01", tz="UTC") and len(index) == 8760, "unexpected weather file"
    q_mw = np.round(hourly_load_mw(index), 6)
    t_wet = weather["t_wet_c"].to_numpy(dtype=float)
    ref = chiller_plant_w(q_mw * 1e6, t_wet)
    assert float(ref["q_unmet_w"].max()) < 1e-6, "the reference plant must meet every hour's load"
    return pd.DataFrame({
        "time_utc": index.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "q_load_mw": q_mw,
        "t_wet_c": t_wet,
        "ref_t_cw_supply_c": np.round(ref["t_cw_c"], 2),
        "ref_n_chillers_on": ref["n_on"].astype(int),
        "ref_plr_frac": np.round(ref["plr"], 6),
        "ref_p_chillers_mw": np.round(ref["p_w"] / 1e6, 6),
    })


def calibrate() -> None:
    """Fit the FMU's cop_ref_ratio, q_chiller_ref_mw and dt_tower_approach_k to the calibration
    variant (hourly CV(RMSE) of p_chillers_mw against the reference), running the case itself."""
    case = load_case(CASE)
    seen: dict[tuple[float, ...], float] = {}

    def cv(x: np.ndarray) -> float:
        key = tuple(round(float(v), 4) for v in x)
        if key in seen:
            return seen[key]
        cop, q_ref, approach = key
        extra = {"scenario.engine": "direct", "entities.plant.cop_ref_ratio": cop,
                 "entities.plant.q_chiller_ref_mw": q_ref, "entities.plant.dt_tower_approach_k": approach}
        with tempfile.TemporaryDirectory() as tmp:
            scn = load_scenario(case.scenario, variant_overrides(case, "calibration", False, extra))
            run = run_scenario(scn, Path(tmp) / "run", progress=False, report=False)
        out = run.kpis["calibration"]["plant"]["p_chillers_mw"]
        seen[key] = out["cv_rmse_frac"] + abs(out["nmbe_frac"])
        print(f"cop {cop:.4f} q_ref {q_ref:.4f} MW approach {approach:.3f} K: cv {out['cv_rmse_frac']:.5f} "
              f"nmbe {out['nmbe_frac']:+.5f}", flush=True)
        return seen[key]

    best = minimize(cv, np.array([6.94, 1.4031, 3.9]), method="Nelder-Mead",
                    options={"xatol": 1e-3, "fatol": 1e-5, "maxfev": 80, "initial_simplex": np.array(
                        [[6.94, 1.4031, 3.9], [7.6, 1.4031, 3.9], [6.94, 1.30, 3.9], [6.94, 1.4031, 5.5]])})
    print("best:", [round(float(v), 4) for v in best.x], "objective", round(float(best.fun), 5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibrate", action="store_true", help="fit the FMU's parameters (runs the case)")
    args = parser.parse_args()
    if args.calibrate:
        calibrate()
        return
    OUT.parent.mkdir(parents=True, exist_ok=True)
    build().to_csv(OUT, index=False, lineterminator="\n", compression={"method": "gzip", "mtime": 0})
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
