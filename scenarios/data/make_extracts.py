"""Cut the data extracts in scenarios/data/ from ../shared/data and pvlib's bundled TMY3.

Run from the repository root: ``.venv/bin/python scenarios/data/make_extracts.py
[--source /work/shared/data]``. The tests do not run it; they import :func:`wet_bulb_c`
to check the psychrometric method against measured NOAA wet-bulb temperatures.
Every output is deterministic (same input, same bytes).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ZONES = ["US-CAL-CISO", "US-TEX-ERCO", "DE", "CA-ON", "AU-SA", "AU-VIC", "AU-WA", "KR"]
TMY3_YEAR = 2023  # a common year (8,760 h) to stamp the typical year with

# Facility power model of the load trace (see loads/README.md for the sources).
N_GPUS = 4096  # 512 eight-GPU servers
P_GPU_IDLE_W = 63.0  # A100-80GB, AcmeTrace p10 GPU power (Seren and Kalos)
P_GPU_BUSY_W = 400.0  # A100-80GB SXM board power limit (NVIDIA datasheet); Acme p90 395-404 W
P_HOST_PER_GPU_W = 126.0  # (Acme Seren 8-GPU server p10 1,512 W - 8 x 63 W) / 8
HELIOS_GPUS = 856  # capacity of the 16 Helios Earth VCs in the trace
HELIOS_UTC_OFFSET_H = 8  # China Standard Time, no daylight saving
REFERENCE_DAY = "2020-05-20"  # UTC day cut as the one-day reference trace


# -- psychrometrics -----------------------------------------------------------------------------
def saturation_vapour_pressure_hpa(t_c, p_hpa):
    """Saturation vapour pressure over water in moist air, WMO-No. 8 Annex 4.B. [hPa]

    ``e_w = 6.112 exp(17.62 t / (243.12 + t))`` times the enhancement factor
    ``f(p) = 1.0016 + 3.15e-6 p - 0.074 / p``.
    """
    t_c = np.asarray(t_c, dtype=float)
    return (1.0016 + 3.15e-6 * p_hpa - 0.074 / p_hpa) * 6.112 * np.exp(17.62 * t_c / (243.12 + t_c))


def wet_bulb_c(t_dry_c, t_dew_c, p_air_pa, iterations: int = 60):
    """Thermodynamic (psychrometric) wet-bulb temperature. [°C]

    Solves the Assmann psychrometer equation of WMO-No. 8 (Guide to Instruments and
    Methods of Observation, 2018, Vol. I, Annex 4.B)
    ``e = e_w(Tw) - 6.53e-4 (1 + 0.000944 Tw) p (T - Tw)`` for ``Tw`` by bisection on
    ``[Td, T]``, with ``e = e_w(Td)`` and station pressure ``p``. The water-bulb form is
    used below 0 °C as well (no ice bulb).

    Args:
        t_dry_c: dry-bulb temperature. [°C]
        t_dew_c: dew-point temperature, at most ``t_dry_c``. [°C]
        p_air_pa: station (not sea-level) air pressure. [Pa]
    """
    t_dry = np.asarray(t_dry_c, dtype=float)
    t_dew = np.asarray(t_dew_c, dtype=float)
    p_hpa = np.asarray(p_air_pa, dtype=float) / 100.0
    if np.any(t_dew > t_dry + 1e-9):
        raise ValueError("dew point above dry-bulb temperature")
    e_hpa = saturation_vapour_pressure_hpa(t_dew, p_hpa)
    low, high = t_dew.copy(), t_dry.copy()
    for _ in range(iterations):  # residual rises with Tw: positive means Tw is too high
        mid = (low + high) / 2
        residual = (
            saturation_vapour_pressure_hpa(mid, p_hpa)
            - 6.53e-4 * (1 + 0.000944 * mid) * p_hpa * (t_dry - mid)
            - e_hpa
        )
        high = np.where(residual > 0, mid, high)
        low = np.where(residual > 0, low, mid)
    return (low + high) / 2


# -- carbon ---------------------------------------------------------------------------------------
def cut_carbon(source: Path) -> None:
    out = HERE / "carbon"
    out.mkdir(exist_ok=True)
    for zone in ZONES:
        raw = pd.read_csv(source / "electricitymaps-2024-hourly" / f"{zone}_2024_hourly.csv.gz")
        tidy = pd.DataFrame(
            {
                "time_utc": pd.to_datetime(raw["datetime_utc"]).dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "ci_direct_g_kwh": raw["ci_direct_gco2eq_per_kwh"],
                "ci_lifecycle_g_kwh": raw["ci_lifecycle_gco2eq_per_kwh"],
                "cfe_frac": (raw["cfe_pct"] / 100).round(6),
                "re_frac": (raw["re_pct"] / 100).round(6),
                "estimated_frac": raw["data_estimated"].astype(str).str.lower().eq("true").astype(int),
            }
        )
        _write_csv_gz(tidy, out / f"{zone}_2024.csv.gz")


# -- weather --------------------------------------------------------------------------------------
def cut_weather() -> None:
    import pvlib

    tmy_path = Path(pvlib.__file__).parent / "data" / "723170TYA.CSV"
    data, meta = pvlib.iotools.read_tmy3(tmy_path, map_variables=True, coerce_year=TMY3_YEAR)
    # TMY3 stamps are hour-ending local standard time; stamp each row at the start of its
    # hour, in UTC, so that a held value covers the hour its irradiance was summed over.
    start_utc = (data.index - pd.Timedelta(hours=1)).tz_convert("UTC")
    # The last hours of 31 Dec LST fall on 1 Jan of the next year in UTC: the typical year
    # is periodic, so they move to the same hours of 1 Jan of TMY3_YEAR.
    next_year = start_utc.year > TMY3_YEAR
    start_utc = start_utc.where(~next_year, start_utc - pd.DateOffset(years=1))
    p_air_pa = data["pressure"].to_numpy() * 100.0  # mbar -> Pa
    frame = pd.DataFrame(
        {
            "time_utc": start_utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "t_dry_c": data["temp_air"].to_numpy(),
            "t_dew_c": data["temp_dew"].to_numpy(),
            "t_wet_c": wet_bulb_c(data["temp_air"], data["temp_dew"], p_air_pa).round(2),
            "rh_frac": (data["relative_humidity"].to_numpy() / 100).round(4),
            "ghi_w_m2": data["ghi"].to_numpy(),
            "dni_w_m2": data["dni"].to_numpy(),
            "dhi_w_m2": data["dhi"].to_numpy(),
            "wind_m_s": data["wind_speed"].to_numpy(),
            "p_air_pa": p_air_pa,
        }
    ).sort_values("time_utc")
    out = HERE / "weather"
    out.mkdir(exist_ok=True)
    frame.to_csv(out / "greensboro_nc_tmy3.csv", index=False, lineterminator="\n")
    print("TMY3 station:", meta)


def copy_noaa(source: Path) -> None:
    out = HERE / "noaa_lcd"
    out.mkdir(exist_ok=True)
    for path in sorted((source / "noaa-lcd-weather-samples").glob("*.csv")):
        shutil.copyfile(path, out / path.name)


# -- facility load --------------------------------------------------------------------------------
def facility_power_mw(busy_frac):
    """Facility IT power of the model in loads/README.md. [MW]"""
    per_gpu_w = P_GPU_IDLE_W + (P_GPU_BUSY_W - P_GPU_IDLE_W) * busy_frac + P_HOST_PER_GPU_W
    return N_GPUS * per_gpu_w / 1e6


def cut_loads(source: Path) -> None:
    raw = pd.read_csv(
        source / "heliosartifact-cluster-sequences" / "helios_earth_16vc_occupancy_1min.csv.gz",
        parse_dates=["time"],
    )
    busy_frac = raw["running_gpu_num"] / HELIOS_GPUS
    time_utc = raw["time"] - pd.Timedelta(hours=HELIOS_UTC_OFFSET_H)
    frame = pd.DataFrame(
        {
            "time_utc": time_utc.dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "n_busy_gpus": raw["running_gpu_num"],
            "busy_gpu_frac": busy_frac.round(6),
            "p_mw": facility_power_mw(busy_frac).round(6),
        }
    )
    out = HERE / "loads"
    out.mkdir(exist_ok=True)
    _write_csv_gz(frame, out / "helios_earth_2020-05_1min.csv.gz")
    day = frame[time_utc.dt.strftime("%Y-%m-%d") == REFERENCE_DAY]
    day.to_csv(out / f"helios_earth_day_{REFERENCE_DAY}.csv", index=False, lineterminator="\n")
    print(f"load: month peak {frame.p_mw.max():.3f} MW, {REFERENCE_DAY} "
          f"min/mean/max {day.p_mw.min():.3f}/{day.p_mw.mean():.3f}/{day.p_mw.max():.3f} MW")


def _write_csv_gz(frame: pd.DataFrame, path: Path) -> None:
    # mtime=0 keeps the gzip header, and so the file, byte-identical between runs
    import gzip

    text = frame.to_csv(index=False, lineterminator="\n").encode()
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(text)


def copy_demand(source: Path) -> None:
    """EIA-930 cleaned demand 2016-2024 (Ruggles et al., CC BY 4.0), copied unchanged."""
    out = HERE / "eia930_demand"
    out.mkdir(exist_ok=True)
    for name in ("demand_mw.csv.gz", "LICENSE"):
        shutil.copyfile(source / "eia930-ba-demand-2016-2024" / name, out / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("/work/shared/data"))
    args = parser.parse_args()
    cut_carbon(args.source)
    cut_weather()
    copy_noaa(args.source)
    cut_loads(args.source)
    copy_demand(args.source)


if __name__ == "__main__":
    main()
