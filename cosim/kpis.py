"""KPIs: pure functions of a run's time series (columns ``<entity>.<attr>``, UTC index).

Every value is held over its step (the recorder samples at the start of each step), so
an energy is ``sum(p_mw) * step_s / 3600``. Formulas:

* ``energy_mwh`` of an entity = Σ p_mw·Δt; ``peak_mw`` = max p_mw (consumer sign for loads).
* grid ``import_mwh`` = Σ max(p_import_mw, 0)·Δt; ``export_mwh`` = Σ max(−p_import_mw, 0)·Δt.
* ``voltage_violation_s`` = Δt · #steps with vm_min_pu < v_low or vm_max_pu > v_high
  (band [0.95, 1.05] pu, ANSI C84.1 range A / EN 50160 ±5 %).
* ``voltage_violation_pu_s`` = Σ [max(0, v_low − vm_min_pu) + max(0, vm_max_pu − v_high)]·Δt,
  ``undervoltage_s`` / ``overvoltage_s`` count each side alone, ``line_overload_s`` the time
  the most loaded branch is above 100 %, ``load_factor_frac`` = mean / peak (formulas and
  the controlled-vs-baseline costs in ``cosim/kpis_grid.py``).
* ``carbon_t`` = Σ max(p_import_mw, 0)·Δt·ci_g_kwh / 1000 (1 MWh × 1 g/kWh = 1 kg), from a
  recorded ``<entity>.ci_g_kwh`` signal.
* ``dr``: per DR responder, delivered vs requested per interval, energy reduction against its
  baseline, rebound and performance cost (formulas in ``cosim/kpis_dr.py``).
* ``accounting``: the site behind its meter (import/export, cost with energy and demand
  charges, carbon, hourly 24/7 CFE, curtailment, battery cycles): see ``cosim/accounting.py``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from cosim import accounting, kpis_dr, kpis_grid

V_LOW_PU, V_HIGH_PU = kpis_grid.V_LOW_PU, kpis_grid.V_HIGH_PU  # one definition of the band


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


def carbon_t(p_import_mw: pd.Series, ci_g_kwh: pd.Series, dt_h: float) -> float:
    """Location-based emissions of grid imports. [t CO2]"""
    p = np.clip(p_import_mw.to_numpy(dtype=float), 0.0, None)
    return float(np.nansum(p * ci_g_kwh.to_numpy(dtype=float)) * dt_h / 1000.0)


#: Column patterns the KPIs read; everything else stays on disk (a year of per-bus voltages
#: is hundreds of MB that no KPI needs).
KPI_COLUMN_SUFFIXES = (".p_mw", ".p_import_mw", ".losses_mw", ".vm_min_pu", ".vm_max_pu",
                       ".max_loading_pct", ".n_nonconverged", "_g_kwh", ".p_it_mw", ".p_cooling_mw",
                       ".p_fans_mw", ".water_m3", ".q_unmet_mw", ".dt_inlet_excursion_k", ".p_loss_mw",
                       ".delay_gpu_h", ".jct_mean_h", ".wait_mean_h", ".slo_attainment_frac",
                       ".tokens_per_s", ".gpu_util_frac", *kpis_dr.COLUMN_SUFFIXES)

#: Models whose ``p_mw`` is IT power, when no ``p_it_mw`` is recorded.
IT_MODELS = frozenset({"FacilityLoad"})
#: Cooling electricity: a plant's total ``p_cooling_mw``; a hall's CRAH ``p_fans_mw``.
COOLING_PLANT_MODELS = frozenset({"ChillerPlant", "LiquidCooling"})
AIR_HANDLER_MODELS = frozenset({"DataHall"})


def needed_columns(columns: list[str]) -> list[str]:
    """The recorded columns :func:`compute` uses (its own and the site accounting's)."""
    keep = {c for c in columns if c.endswith(KPI_COLUMN_SUFFIXES)} | set(accounting.needed_columns(columns))
    return [c for c in columns if c in keep]


def _json_safe(value: Any) -> Any:
    """NaN and inf become None so kpis.json stays strict JSON."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(float(value)) else round(float(value), 9)


def compute(ts: pd.DataFrame, step_s: float, models: dict[str, str] | None = None,
            links: dict[str, set[str]] | None = None) -> dict[str, Any]:
    """All KPIs that the recorded columns allow.

    Args:
        ts: the run's time series.
        step_s: the recording step, used when the series has a single row. [s]
        models: entity id -> model name, to tell loads from generators (optional).
        links: entity id -> the entities it feeds (the scenario's connections); with several
            IT entities, PUE/WUE are also reported per IT entity over the cooling it feeds.
    """
    dt_h = step_hours(ts.index, step_s)
    kpis: dict[str, Any] = {"duration_h": round(len(ts) * dt_h, 9)}
    loads: dict[str, Any] = {}
    for column in ts.columns:
        entity, _, attr = column.partition(".")
        if attr == "p_mw":
            loads[entity] = {"model": (models or {}).get(entity), "energy_mwh": _finite(energy_mwh(ts[column], dt_h)),
                             "peak_mw": _finite(ts[column].max()), "mean_mw": _finite(ts[column].mean()),
                             "load_factor_frac": _finite(kpis_grid.load_factor_frac(ts[column]))}
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
    for eid, model in (models or {}).items():
        if model in CLUSTER_MODELS and f"{eid}.p_it_mw" in ts:
            kpis.setdefault("datacenter", {})[eid] = cluster_kpis(ts, eid, dt_h)
    facility = facility_kpis(ts, dt_h, models or {})
    if facility:
        kpis["facility"] = facility
    by_it = facility_by_it(ts, dt_h, models or {}, links or {})
    if len(by_it) > 1:
        kpis["facility_by_it"] = by_it
    dr = kpis_dr.compute(ts, dt_h, models or {})
    if dr:
        kpis["dr"] = _json_safe(dr)
    site = accounting.compute(ts, {"step_s": step_s, "models": models or {}})
    if site:
        kpis["accounting"] = site
    return _json_safe(kpis)  # kpis.json stays strict JSON (no NaN or Infinity)


CLUSTER_MODELS = frozenset({"Cluster"})


def cluster_kpis(ts: pd.DataFrame, eid: str, dt_h: float) -> dict[str, Any]:
    """What the compute delivered and what the knobs cost it: the cluster's own counters at
    the end of the run (cumulative ones), means of the rates, tokens = Σ tokens_per_s·Δt."""
    col = lambda attr: f"{eid}.{attr}"  # noqa: E731
    last = lambda attr: _finite(float(ts[col(attr)].dropna().iloc[-1])) if col(attr) in ts and ts[col(attr)].notna().any() else None  # noqa: E731
    mean = lambda attr: _finite(ts[col(attr)].mean()) if col(attr) in ts else None  # noqa: E731
    out = {
        "gpu_util_mean_frac": mean("gpu_util_frac"),
        "delay_gpu_h": last("delay_gpu_h"),
        "jct_mean_h": last("jct_mean_h"),
        "wait_mean_h": last("wait_mean_h"),
        "slo_attainment_mean_frac": mean("slo_attainment_frac"),
    }
    if col("tokens_per_s") in ts:
        out["tokens"] = _finite(float(np.nansum(ts[col("tokens_per_s")].to_numpy(float))) * dt_h * 3600.0)
    return {k: v for k, v in out.items() if v is not None}


def facility_by_it(ts: pd.DataFrame, dt_h: float, models: dict[str, str],
                   links: dict[str, set[str]]) -> dict[str, dict[str, Any]]:
    """:func:`facility_kpis` per IT entity, over the entities its power or heat reaches through
    the connections (IT -> hall -> chiller plant): two halls compared in one run each get
    their own PUE and WUE instead of one that adds both halls' cooling to one IT."""
    it_entities = [e for e, m in models.items()
                   if f"{e}.p_it_mw" in ts or (m in IT_MODELS and f"{e}.p_mw" in ts)]
    out = {}
    for it in it_entities:
        group, todo = {it}, [it]
        while todo:
            for nxt in links.get(todo.pop(), ()):
                if nxt not in group and models.get(nxt) not in IT_MODELS | CLUSTER_MODELS:
                    group.add(nxt)
                    todo.append(nxt)
        columns = [c for c in ts.columns if c.partition(".")[0] in group]
        block = facility_kpis(ts[columns], dt_h, {e: m for e, m in models.items() if e in group})
        if block:
            out[it] = block
    return out


def facility_kpis(ts: pd.DataFrame, dt_h: float, models: dict[str, str]) -> dict[str, Any]:
    """IT and cooling energy, PUE and WUE (The Green Grid; ISO/IEC 30134-2 and -9).

    PUE = (IT + power-delivery losses + cooling electricity) / IT energy over the run; WUE =
    site water [L] / IT energy [kWh], and 1 m³/MWh = 1 L/kWh. IT is ``p_it_mw`` (servers),
    losses ``p_loss_mw`` (UPS/PDU); cooling electricity is the plants' ``p_cooling_mw`` plus the
    air handlers' ``p_fans_mw``; ``water_m3`` is cumulative, so its last value counts.
    """
    it_cols = [c for c in ts.columns if c.endswith(".p_it_mw")] or [
        f"{e}.p_mw" for e, m in models.items() if m in IT_MODELS and f"{e}.p_mw" in ts]
    if not it_cols:
        return {}
    of_models = lambda kinds, attr: [f"{e}.{attr}" for e, m in models.items() if m in kinds and f"{e}.{attr}" in ts]  # noqa: E731
    cooling_cols = of_models(COOLING_PLANT_MODELS, "p_cooling_mw") + of_models(AIR_HANDLER_MODELS, "p_fans_mw")
    it_mwh = sum(energy_mwh(ts[c], dt_h) for c in it_cols)
    out: dict[str, Any] = {"it_mwh": _finite(it_mwh), "it_columns": it_cols}
    if not cooling_cols or it_mwh <= 0:
        return out
    cooling_mwh = sum(energy_mwh(ts[c], dt_h) for c in cooling_cols)
    loss_mwh = sum(energy_mwh(ts[c.replace(".p_it_mw", ".p_loss_mw")], dt_h) for c in it_cols
                   if c.endswith(".p_it_mw") and c.replace(".p_it_mw", ".p_loss_mw") in ts)
    out.update({"cooling_mwh": _finite(cooling_mwh), "power_delivery_loss_mwh": _finite(loss_mwh),
                "cooling_columns": cooling_cols,
                "pue_ratio": _finite((it_mwh + loss_mwh + cooling_mwh) / it_mwh)})
    water = of_models(COOLING_PLANT_MODELS, "water_m3")
    if water:
        water_m3 = sum(float(ts[c].dropna().iloc[-1]) for c in water if ts[c].notna().any())
        out.update({"water_m3": _finite(water_m3), "wue_l_kwh": _finite(water_m3 / it_mwh)})
    unmet = of_models(COOLING_PLANT_MODELS, "q_unmet_mw")
    if unmet:
        out["unmet_cooling_mwh"] = _finite(sum(energy_mwh(ts[c], dt_h) for c in unmet))
    excursion = [c for c in of_models(AIR_HANDLER_MODELS, "dt_inlet_excursion_k")]
    if excursion:
        out["inlet_excursion_s"] = _finite(max(float((ts[c] > 0).sum()) for c in excursion) * dt_h * 3600.0)
    return out


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
        vmin, vmax, dt_s = ts[col("vm_min_pu")], ts[col("vm_max_pu")], dt_h * 3600.0
        out["voltage_violation_s"] = _finite(kpis_grid.voltage_violation_s(vmin, vmax, dt_s))
        out["undervoltage_s"] = _finite(kpis_grid.voltage_violation_s(vmin, vmin * 0 + 1.0, dt_s))
        out["overvoltage_s"] = _finite(kpis_grid.voltage_violation_s(vmax * 0 + 1.0, vmax, dt_s))
        out["voltage_violation_pu_s"] = _finite(kpis_grid.voltage_violation_pu_s(vmin, vmax, dt_s))
    if col("max_loading_pct") in ts:
        out["max_loading_pct"] = _finite(ts[col("max_loading_pct")].max())
        out["line_overload_s"] = _finite(kpis_grid.line_overload_s(ts[col("max_loading_pct")], dt_h * 3600.0))
    if col("n_nonconverged") in ts:
        out["n_nonconverged"] = int(np.nan_to_num(ts[col("n_nonconverged")].max()))
    return out
