"""KPIs: pure functions of a run's time series (columns ``<entity>.<attr>``, UTC index).

Every value is held over its step (the recorder samples at the start of each step), so
an energy is ``sum(p_mw) * step_s / 3600``. Formulas:

* ``energy_mwh`` of an entity = Σ p_mw·Δt; ``peak_mw`` = max p_mw (consumer sign for loads).
* grid ``import_mwh`` = Σ max(p_import_mw, 0)·Δt; ``export_mwh`` = Σ max(−p_import_mw, 0)·Δt.
* ``voltage_violation_s`` = Δt · #steps with vm_min_pu < v_low or vm_max_pu > v_high
  (band [0.95, 1.05] pu, ANSI C84.1 range A / EN 50160 ±5 %).
* ``carbon_t`` = Σ max(p_import_mw, 0)·Δt·ci_g_kwh / 1000 (1 MWh × 1 g/kWh = 1 kg), from a
  recorded ``<entity>.ci_g_kwh`` signal.
* ``accounting``: the site behind its meter (import/export, cost with energy and demand
  charges, carbon, hourly 24/7 CFE, curtailment, battery cycles): see ``cosim/accounting.py``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from cosim import accounting

V_LOW_PU = 0.95
V_HIGH_PU = 1.05


def step_hours(index: pd.DatetimeIndex, default_s: float) -> float:
    """The sampling interval in hours (the recorder's step)."""
    if len(index) > 1:
        return float((index[1] - index[0]).total_seconds()) / 3600.0
    return default_s / 3600.0


def energy_mwh(p_mw: pd.Series, dt_h: float) -> float:
    """Energy of a power series held over each step. [MWh]"""
    return float(np.nansum(p_mw.to_numpy(dtype=float)) * dt_h)


def positive_energy_mwh(p_mw: pd.Series, dt_h: float) -> float:
    """Energy of the positive part only (e.g. import, not export). [MWh]"""
    return float(np.nansum(np.clip(p_mw.to_numpy(dtype=float), 0.0, None)) * dt_h)


def violation_s(vm_min_pu: pd.Series, vm_max_pu: pd.Series, dt_h: float,
                v_low: float = V_LOW_PU, v_high: float = V_HIGH_PU) -> float:
    """Seconds during which some bus is outside [v_low, v_high]. [s]"""
    bad = (vm_min_pu.to_numpy(dtype=float) < v_low) | (vm_max_pu.to_numpy(dtype=float) > v_high)
    return float(bad.sum() * dt_h * 3600.0)


def carbon_t(p_import_mw: pd.Series, ci_g_kwh: pd.Series, dt_h: float) -> float:
    """Location-based emissions of grid imports. [t CO2]"""
    p = np.clip(p_import_mw.to_numpy(dtype=float), 0.0, None)
    return float(np.nansum(p * ci_g_kwh.to_numpy(dtype=float)) * dt_h / 1000.0)


#: Column patterns the KPIs read; everything else stays on disk (a year of per-bus voltages
#: is hundreds of MB that no KPI needs).
KPI_COLUMN_SUFFIXES = (".p_mw", ".p_import_mw", ".losses_mw", ".vm_min_pu", ".vm_max_pu",
                       ".max_loading_pct", ".n_nonconverged", "_g_kwh")


def needed_columns(columns: list[str]) -> list[str]:
    """The recorded columns :func:`compute` uses (its own and the site accounting's)."""
    keep = {c for c in columns if c.endswith(KPI_COLUMN_SUFFIXES)} | set(accounting.needed_columns(columns))
    return [c for c in columns if c in keep]


def _finite(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), 9)


def compute(ts: pd.DataFrame, step_s: float, models: dict[str, str] | None = None) -> dict[str, Any]:
    """All KPIs that the recorded columns allow.

    Args:
        ts: the run's time series.
        step_s: the recording step, used when the series has a single row. [s]
        models: entity id -> model name, to tell loads from generators (optional).
    """
    dt_h = step_hours(ts.index, step_s)
    kpis: dict[str, Any] = {"duration_h": round(len(ts) * dt_h, 9)}
    loads: dict[str, Any] = {}
    for column in ts.columns:
        entity, _, attr = column.partition(".")
        if attr == "p_mw":
            loads[entity] = {"model": (models or {}).get(entity), "energy_mwh": _finite(energy_mwh(ts[column], dt_h)),
                             "peak_mw": _finite(ts[column].max()), "mean_mw": _finite(ts[column].mean())}
    if loads:
        kpis["entities"] = loads
    grids = sorted({c.partition(".")[0] for c in ts.columns if c.endswith(".p_import_mw")})
    for grid in grids:
        kpis[grid] = _grid_kpis(ts, grid, dt_h)
    ci = [c for c in ts.columns if c.endswith(".ci_g_kwh")]
    if ci and grids:
        kpis["carbon"] = {"signal": ci[0], "grid": grids[0],
                          "carbon_t": _finite(carbon_t(ts[f"{grids[0]}.p_import_mw"], ts[ci[0]], dt_h)),
                          "mean_ci_g_kwh": _finite(ts[ci[0]].mean())}
    site = accounting.compute(ts, {"step_s": step_s, "models": models or {}})
    if site:
        kpis["accounting"] = site
    return kpis


def _grid_kpis(ts: pd.DataFrame, grid: str, dt_h: float) -> dict[str, Any]:
    col = lambda attr: f"{grid}.{attr}"  # noqa: E731
    p_import = ts[col("p_import_mw")]
    out: dict[str, Any] = {
        "import_mwh": _finite(positive_energy_mwh(p_import, dt_h)),
        "export_mwh": _finite(positive_energy_mwh(-p_import, dt_h)),
        "import_peak_mw": _finite(p_import.max()),
    }
    if col("losses_mw") in ts:
        out["losses_mwh"] = _finite(energy_mwh(ts[col("losses_mw")], dt_h))
    if col("vm_min_pu") in ts and col("vm_max_pu") in ts:
        out["vm_min_pu"] = _finite(ts[col("vm_min_pu")].min())
        out["vm_max_pu"] = _finite(ts[col("vm_max_pu")].max())
        out["voltage_violation_s"] = _finite(violation_s(ts[col("vm_min_pu")], ts[col("vm_max_pu")], dt_h))
    if col("max_loading_pct") in ts:
        out["max_loading_pct"] = _finite(ts[col("max_loading_pct")].max())
    if col("n_nonconverged") in ts:
        out["n_nonconverged"] = int(np.nan_to_num(ts[col("n_nonconverged")].max()))
    return out
