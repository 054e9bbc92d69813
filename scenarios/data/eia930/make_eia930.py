"""Cut the EIA-930 fuel-mix extract for cosim: tidy, unit-suffixed hourly CSVs per balancing authority.

Run from the repository root (re-running reproduces the files byte for byte):

    .venv/bin/python scenarios/data/eia930/make_eia930.py --source /work/shared/data/eia930-ba-fuelmix-ci-2022

Average intensity: the IPCC AR5 life-cycle medians the source used (checked: the recomputed
value equals the source's ``avg_ci_gco2_per_kwh`` to 1e-6 g/kWh in every complete hour).
Marginal intensity: a statistical estimate in the manner of Siler-Evans, Azevedo & Morgan
(2012), "Marginal emissions factors for the U.S. electricity system", Environ. Sci.
Technol. 46(9):4742-4748: per balancing authority, season and hour of day, the slope of
the least-squares fit of hour-to-hour changes in emissions against changes in generation.
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np
import pandas as pd

BAS = ("AZPS", "BPAT", "CISO", "ERCO", "MISO", "NYIS", "PJM", "SOCO")
FUELS = {"WND": "wind", "SUN": "solar", "WAT": "hydro", "OIL": "oil", "NG": "gas", "COL": "coal",
         "NUC": "nuclear", "OTH": "other"}
#: IPCC AR5 (2014) WG3 Annex III life-cycle medians [g CO2e/kWh], as fitted in the source README.
FACTORS_G_KWH = {"wind": 11, "solar": 41, "hydro": 24, "oil": 650, "gas": 490, "coal": 820, "nuclear": 12,
                 "other": 230}
CLEAN = ("wind", "solar", "hydro", "nuclear")
RENEWABLE = ("wind", "solar", "hydro")
SEASONS = {12: "winter", 1: "winter", 2: "winter", 3: "spring", 4: "spring", 5: "spring",
           6: "summer", 7: "summer", 8: "summer", 9: "autumn", 10: "autumn", 11: "autumn"}


def tidy(raw: pd.DataFrame) -> pd.DataFrame:
    times = pd.to_datetime(raw["timestamp_utc"], utc=True)
    out = pd.DataFrame({"time_utc": times.dt.strftime("%Y-%m-%dT%H:%M:%SZ")})
    for code, fuel in FUELS.items():
        out[f"{fuel}_mw"] = raw[f"{code}_mwh"]  # MWh in one hour = average MW
    gen = out[[f"{f}_mw" for f in FUELS.values()]]
    positive = gen.clip(lower=0)
    total = positive.sum(axis=1, min_count=len(FUELS))
    out["total_mw"] = total
    emissions_kg_h = sum(positive[f"{f}_mw"] * FACTORS_G_KWH[f] for f in FUELS.values())  # MWh·g/kWh = kg
    out["ci_lifecycle_g_kwh"] = emissions_kg_h / total
    check = (out["ci_lifecycle_g_kwh"] - raw["avg_ci_gco2_per_kwh"]).abs().max()
    if check > 1e-6:
        raise SystemExit(f"recomputed average intensity differs from the source by {check} g/kWh")
    out["mef_lifecycle_g_kwh"] = marginal(times, emissions_kg_h, total)
    out["cfe_frac"] = positive[[f"{f}_mw" for f in CLEAN]].sum(axis=1) / total
    out["re_frac"] = positive[[f"{f}_mw" for f in RENEWABLE]].sum(axis=1) / total
    return out


def marginal(times: pd.Series, emissions_kg_h: pd.Series, total_mw: pd.Series) -> pd.Series:
    """Per season × hour-of-day slope dE/dG of consecutive-hour changes [g/kWh], clipped to the
    range of the fuel factors (a slope outside it is noise, not physics)."""
    d_e = emissions_kg_h.diff()
    d_g = total_mw.diff()
    consecutive = times.diff() == pd.Timedelta("1h")
    keys = pd.DataFrame({"season": times.dt.month.map(SEASONS), "hour": times.dt.hour})
    frame = pd.DataFrame({"de": d_e, "dg": d_g, **keys})[consecutive & d_e.notna() & d_g.notna()]
    slopes = {}
    for key, rows in frame.groupby(["season", "hour"]):
        x, y = rows["dg"].to_numpy(), rows["de"].to_numpy()
        x_c = x - x.mean()
        slopes[key] = float((x_c * (y - y.mean())).sum() / (x_c ** 2).sum())
    lo, hi = min(FACTORS_G_KWH.values()), max(FACTORS_G_KWH.values())
    mef = [slopes.get((s, h), np.nan) for s, h in zip(keys["season"], keys["hour"])]
    return pd.Series(np.clip(mef, lo, hi), index=times.index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("/work/shared/data/eia930-ba-fuelmix-ci-2022"))
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    for ba in BAS:
        raw = pd.read_csv(args.source / f"{ba}_2022_hourly.csv.gz")
        out = tidy(raw)
        rounded = out.round({c: 1 for c in out.columns if c.endswith("_mw")}).round(
            {"ci_lifecycle_g_kwh": 2, "mef_lifecycle_g_kwh": 1, "cfe_frac": 4, "re_frac": 4})
        target = args.out / f"{ba}_2022.csv.gz"
        # mtime=0 in the gzip header keeps the file byte-identical across runs
        with gzip.GzipFile(target, "wb", mtime=0) as handle:
            handle.write(rounded.to_csv(index=False, lineterminator="\n").encode())
        print(f"{target.name}: {len(out)} rows, {target.stat().st_size / 1e3:.0f} kB, "
              f"avg CI {out['ci_lifecycle_g_kwh'].mean():.0f}, MEF {out['mef_lifecycle_g_kwh'].mean():.0f} g/kWh")


if __name__ == "__main__":
    main()
