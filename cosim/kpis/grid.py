"""Grid KPIs (one entry per ``grid`` entity) and the grid-coordination functions they use:
voltage band, overloads, load factor, and what a controller costs against a baseline run.

Per grid: ``import_mwh`` = Σ max(p_import_mw, 0)·Δt, ``export_mwh`` = Σ max(−p_import_mw, 0)·Δt,
``import_peak_mw``, ``losses_mwh``, ``vm_min_pu``/``vm_max_pu`` over the run,
``voltage_violation_s`` (and ``undervoltage_s``/``overvoltage_s``), ``voltage_violation_pu_s``,
``max_loading_pct``, ``line_overload_s``, ``n_nonconverged``, and over every *monitored*
bus-phase (OpenG2G's all-bus metric; the grid adapter leaves out the source bus and the
regulator terminals unless its ``exclude_buses`` says otherwise): ``allbus_violation_s``,
``allbus_violation_pu_s``, ``allbus_undervoltage_s``, ``allbus_overvoltage_s``,
``allbus_vm_min_pu``/``allbus_vm_max_pu``. The same per point of connection is the
``points_of_connection`` block (:mod:`cosim.kpis.pcc`).

Steps whose power flow did not converge report NaN in the grid's outputs (run folders written
before the adapter did so hold the last solved values there): they say nothing about the grid. When there are any (from the recorded ``converged`` flag,
else the ``n_nonconverged`` counter), every KPI above that depends on them is null — never a
silently clean 0 — and ``n_nonconverged_steps``, ``nonconverged_frac`` and
``first_nonconverged_utc`` say how many and since when; ``over_converged_steps`` gives the same
KPIs over the converged steps alone, for reference.

Every value is held over its step, so a duration is ``#steps * dt_s`` and an integral is
``sum(value) * dt_s``. Formulas (``dt`` the step in seconds):

* ``voltage_violation_s`` = dt · #steps where the lowest bus < ``v_low`` or the highest > ``v_high``.
* ``voltage_violation_pu_s`` = Σ [max(v_low − vm_min, 0) + max(vm_max − v_high, 0)] · dt:
  how far outside the band, for how long (the worst bus of each step). [pu·s]
* ``allbus_violation_s`` = dt · #steps where some monitored bus-phase is strictly outside the
  grid's band (its ``allbus_violation_pu`` > 0); ``allbus_violation_pu_s`` = Σ_t Σ_(bus-phase j)
  [max(v_low − v_j, 0) + max(v_j − v_high, 0)] · dt, the distance outside the band summed over
  *every* monitored bus-phase (not only the worst), as OpenG2G's ``compute_allbus_voltage_stats``
  defines its violation time and integral (gpu2grid/openg2g, ``openg2g/metrics/voltage.py``).
* ``line_overload_s`` = dt · #steps where the most loaded branch exceeds ``limit_pct``.
* ``load_factor_frac`` = mean(p) / max(p) (1 is a flat draw).
* ``throughput_loss_frac`` = 1 − Σ tokens / Σ tokens_baseline (same steps; positive = lost).
* ``slo_loss_frac`` = mean(slo_baseline) − mean(slo) (attainment points lost).
* ``jct_slowdown_ratio`` = final mean JCT / final baseline mean JCT (the cluster reports a
  running mean; > 1 = jobs take longer).
* ``energy_in_window_mwh`` = Σ p · dt over the steps inside a window (UTC hours of day).
* ``delay_added_gpu_h`` = final ``delay_gpu_h`` − the baseline's (training GPU-hours delayed).

The band [0.95, 1.05] pu is ANSI C84.1 range A / EN 50160 ±5 %.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cosim.kpis._block import Block, KpiInput, energy_mwh, finite, positive_energy_mwh
from cosim.roles import RunRoles

V_LOW_PU = 0.95
V_HIGH_PU = 1.05


def _values(series) -> np.ndarray:
    return np.asarray(series, dtype=float)


def _check_dt(dt_s: float) -> None:
    if not dt_s > 0:
        raise ValueError(f"dt_s = {dt_s!r}: the step must be positive seconds")


def voltage_violation_s(vm_min_pu, vm_max_pu, dt_s: float, v_low: float = V_LOW_PU,
                        v_high: float = V_HIGH_PU) -> float:
    """Seconds during which some bus is outside ``[v_low, v_high]``. [s]

    Args:
        vm_min_pu, vm_max_pu: the lowest and highest bus voltage per step (pass the same
            series twice for one bus). [pu]
        dt_s: the step. [s]
    """
    _check_dt(dt_s)
    low, high = _values(vm_min_pu), _values(vm_max_pu)
    return float(((low < v_low) | (high > v_high)).sum() * dt_s)


def voltage_violation_pu_s(vm_min_pu, vm_max_pu, dt_s: float, v_low: float = V_LOW_PU,
                           v_high: float = V_HIGH_PU) -> float:
    """Integral of the distance outside the band over time (NaN steps count 0). [pu·s]"""
    _check_dt(dt_s)
    under = np.clip(v_low - _values(vm_min_pu), 0.0, None)
    over = np.clip(_values(vm_max_pu) - v_high, 0.0, None)
    return float(np.nansum(under + over) * dt_s)


def line_overload_s(max_loading_pct, dt_s: float, limit_pct: float = 100.0) -> float:
    """Seconds during which the most loaded line (or transformer) exceeds ``limit_pct``. [s]"""
    _check_dt(dt_s)
    return float((_values(max_loading_pct) > limit_pct).sum() * dt_s)


def load_factor_frac(p_mw) -> float:
    """Mean over peak of a draw; NaN for a series that never draws. [-]"""
    p = _values(p_mw)
    peak = np.nanmax(p) if np.isfinite(p).any() else np.nan  # all NaN (a degraded grid): no factor
    return float(np.nanmean(p) / peak) if peak > 0 else float("nan")


def throughput_loss_frac(tokens_per_s, baseline_tokens_per_s) -> float:
    """Share of the baseline's tokens not served (same steps in both runs). [-]"""
    run, base = _values(tokens_per_s), _values(baseline_tokens_per_s)
    if run.shape != base.shape:
        raise ValueError(f"the run has {run.size} steps and the baseline {base.size}; compare equal windows")
    total = np.nansum(base)
    return float(1.0 - np.nansum(run) / total) if total > 0 else float("nan")


def slo_loss_frac(slo_attainment_frac, baseline_slo_attainment_frac) -> float:
    """Mean SLO attainment lost against the baseline (positive = worse). [-]"""
    return float(np.nanmean(_values(baseline_slo_attainment_frac)) - np.nanmean(_values(slo_attainment_frac)))


def jct_slowdown_ratio(jct_mean_h, baseline_jct_mean_h) -> float:
    """Final running-mean job completion time over the baseline's. [-]"""
    run, base = _values(jct_mean_h), _values(baseline_jct_mean_h)
    last_run, last_base = run[~np.isnan(run)], base[~np.isnan(base)]
    if not last_run.size or not last_base.size or last_base[-1] <= 0:
        return float("nan")
    return float(last_run[-1] / last_base[-1])


def energy_in_window_mwh(p_mw: pd.Series, start_h_utc: float, end_h_utc: float, dt_s: float) -> float:
    """Energy drawn while the UTC hour of day is in ``[start_h_utc, end_h_utc)``. [MWh]

    Args:
        p_mw: power indexed by UTC time. [MW]
        start_h_utc, end_h_utc: the window as hours of day (``end < start`` wraps midnight). [h]
        dt_s: the step. [s]
    """
    _check_dt(dt_s)
    index = pd.DatetimeIndex(p_mw.index)
    hour = index.hour + index.minute / 60.0 + index.second / 3600.0
    inside = (hour >= start_h_utc) & (hour < end_h_utc) if start_h_utc <= end_h_utc else \
        (hour >= start_h_utc) | (hour < end_h_utc)
    return float(np.nansum(_values(p_mw)[np.asarray(inside)]) * dt_s / 3600.0)


def voltage_kpis(vm_min_pu, vm_max_pu, dt_s: float, v_low: float = V_LOW_PU, v_high: float = V_HIGH_PU) -> dict:
    """The voltage block of a run: violation seconds and integral, min and max voltage."""
    return {"violation_s": voltage_violation_s(vm_min_pu, vm_max_pu, dt_s, v_low, v_high),
            "violation_pu_s": voltage_violation_pu_s(vm_min_pu, vm_max_pu, dt_s, v_low, v_high),
            "vm_min_pu": float(np.nanmin(_values(vm_min_pu))), "vm_max_pu": float(np.nanmax(_values(vm_max_pu)))}


def versus_baseline(ts: pd.DataFrame, baseline: pd.DataFrame) -> dict:
    """What a controlled run costs against its baseline, per entity reporting the columns.

    ``throughput_loss_frac`` from ``tokens_per_s``, ``slo_loss_frac`` from
    ``slo_attainment_frac``, ``jct_slowdown_ratio`` from ``jct_mean_h``, and the change of
    ``delay_gpu_h`` at the end of the run (GPU-hours of training delayed). [-, -, -, GPU·h]
    """
    pairs = {"tokens_per_s": ("throughput_loss_frac", throughput_loss_frac),
             "slo_attainment_frac": ("slo_loss_frac", slo_loss_frac),
             "jct_mean_h": ("jct_slowdown_ratio", jct_slowdown_ratio)}
    out: dict = {}
    for column in ts.columns:
        entity, _, attr = column.rpartition(".")
        if column not in baseline:
            continue
        if attr in pairs:
            name, func = pairs[attr]
            out.setdefault(entity, {})[name] = func(ts[column], baseline[column])
        elif attr == "delay_gpu_h":
            out.setdefault(entity, {})["delay_added_gpu_h"] = float(ts[column].iloc[-1] - baseline[column].iloc[-1])
    return out


#: ``KpiInput.params`` key of the voltage band per entity (the grid sim's ``v_low_pu``/``v_high_pu``,
#: filled in by the run stage; entities without one use ``V_LOW_PU``/``V_HIGH_PU``). [pu]
BAND_PARAM = "voltage_band_pu"


def voltage_band(inp: KpiInput, entity: str) -> tuple[float, float]:
    """The band ``entity``'s grid judged its voltages against (its all-bus and element outputs). [pu]"""
    band = inp.params.get(BAND_PARAM, {}).get(entity)
    return (float(band[0]), float(band[1])) if band else (V_LOW_PU, V_HIGH_PU)


def band_kpis(vm_min_pu, vm_max_pu, violation_pu, dt_s: float, v_low: float = V_LOW_PU,
              v_high: float = V_HIGH_PU) -> dict[str, float | None]:
    """Violation KPIs from per-step lowest and highest voltage and the summed distance outside the
    band over a set of bus-phases (the grid's all-bus outputs, or one element's phases).

    Returns ``violation_s`` (steps with ``violation_pu`` > 0, times dt), ``violation_pu_s``
    (Σ violation_pu·dt), ``undervoltage_s``/``overvoltage_s`` (lowest below ``v_low``, highest
    above ``v_high``) and the extremes over the run. [s, pu·s, s, s, pu, pu]
    """
    _check_dt(dt_s)
    viol, low, high = _values(violation_pu), _values(vm_min_pu), _values(vm_max_pu)
    return {"violation_s": finite(float((viol > 0).sum() * dt_s)),
            "violation_pu_s": finite(float(np.nansum(viol) * dt_s)),
            "undervoltage_s": finite(float((low < v_low).sum() * dt_s)),
            "overvoltage_s": finite(float((high > v_high).sum() * dt_s)),
            "vm_min_pu": finite(np.nanmin(low)) if np.isfinite(low).any() else None,
            "vm_max_pu": finite(np.nanmax(high)) if np.isfinite(high).any() else None}


#: The Grid's all-bus outputs the block reads.
ALLBUS_ATTRS = ("allbus_vm_min_pu", "allbus_vm_max_pu", "allbus_violation_pu")
#: The Grid outputs the block reads.
GRID_ATTRS = ("p_import_mw", "losses_mw", "vm_min_pu", "vm_max_pu", "max_loading_pct", "n_nonconverged", "converged",
              *ALLBUS_ATTRS)
#: The KPIs a non-converged step makes unknown.
SOLVED_KPIS = ("import_mwh", "export_mwh", "import_peak_mw", "losses_mwh", "vm_min_pu", "vm_max_pu",
               "voltage_violation_s", "undervoltage_s", "overvoltage_s", "voltage_violation_pu_s", "max_loading_pct",
               "line_overload_s", *(f"allbus_{k}" for k in ("violation_s", "violation_pu_s", "undervoltage_s",
                                                             "overvoltage_s", "vm_min_pu", "vm_max_pu")))


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    return [f"{g}.{a}" for g in roles.entities_with("grid") for a in GRID_ATTRS if f"{g}.{a}" in names]


def grid_entities(inp: KpiInput) -> list[str]:
    """The run's grids that recorded their import (the ones with KPIs)."""
    return [g for g in inp.roles.entities_with("grid") if inp.col(g, "p_import_mw")]


def grid_block(ts: pd.DataFrame, grid: str, dt_h: float,
               band: tuple[float, float] = (V_LOW_PU, V_HIGH_PU)) -> dict[str, Any]:
    """The KPIs of one grid entity (see the module docstring) against its voltage ``band``, with
    non-converged steps nulled."""
    out = solved_kpis(ts, grid, dt_h, band)
    counter = f"{grid}.n_nonconverged"
    if counter in ts:
        out["n_nonconverged"] = int(np.nan_to_num(ts[counter].max()))
    flag = f"{grid}.converged"
    failed = (ts[flag].to_numpy(float) < 0.5) if flag in ts else None
    n_failed = int(failed.sum()) if failed is not None else out.get("n_nonconverged", 0)
    if n_failed:
        out.update({k: None for k in SOLVED_KPIS if k in out})
        out["n_nonconverged_steps"] = n_failed
        if failed is not None:
            out["nonconverged_frac"] = finite(n_failed / len(ts))
            out["first_nonconverged_utc"] = ts.index[int(np.argmax(failed))].isoformat()
            if (~failed).any():
                out["over_converged_steps"] = solved_kpis(ts[~failed], grid, dt_h, band)
    return out


def solved_kpis(ts: pd.DataFrame, grid: str, dt_h: float,
                band: tuple[float, float] = (V_LOW_PU, V_HIGH_PU)) -> dict[str, Any]:
    """The KPIs that need a solved power flow, over the rows of ``ts``, against the voltage ``band``."""
    v_low, v_high = band
    col = lambda attr: f"{grid}.{attr}"  # noqa: E731
    p_import = ts[col("p_import_mw")]
    out: dict[str, Any] = {
        "import_mwh": finite(positive_energy_mwh(p_import, dt_h)),
        "export_mwh": finite(positive_energy_mwh(-p_import, dt_h)),
        "import_peak_mw": finite(p_import.max()),
    }
    if col("losses_mw") in ts:
        out["losses_mwh"] = finite(energy_mwh(ts[col("losses_mw")], dt_h))
    if col("vm_min_pu") in ts and col("vm_max_pu") in ts:
        out["vm_min_pu"] = finite(ts[col("vm_min_pu")].min())
        out["vm_max_pu"] = finite(ts[col("vm_max_pu")].max())
        vmin, vmax, dt_s = ts[col("vm_min_pu")], ts[col("vm_max_pu")], dt_h * 3600.0
        out["voltage_violation_s"] = finite(voltage_violation_s(vmin, vmax, dt_s, v_low, v_high))
        out["undervoltage_s"] = finite(voltage_violation_s(vmin, vmin * 0 + 1.0, dt_s, v_low, v_high))
        out["overvoltage_s"] = finite(voltage_violation_s(vmax * 0 + 1.0, vmax, dt_s, v_low, v_high))
        out["voltage_violation_pu_s"] = finite(voltage_violation_pu_s(vmin, vmax, dt_s, v_low, v_high))
    if all(col(a) in ts for a in ALLBUS_ATTRS):
        allbus = band_kpis(ts[col("allbus_vm_min_pu")], ts[col("allbus_vm_max_pu")], ts[col("allbus_violation_pu")],
                           dt_h * 3600.0, v_low, v_high)
        out.update({f"allbus_{k}": v for k, v in allbus.items()})
    if col("max_loading_pct") in ts:
        out["max_loading_pct"] = finite(ts[col("max_loading_pct")].max())
        out["line_overload_s"] = finite(line_overload_s(ts[col("max_loading_pct")], dt_h * 3600.0))
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    return {grid: grid_block(inp.ts, grid, inp.dt_h, voltage_band(inp, grid)) for grid in grid_entities(inp)}


BLOCK = Block("grid", "Grid", 20, _columns, _compute,
              headline=("vm_min_pu", "vm_max_pu", "voltage_violation_s", "allbus_violation_s", "import_mwh",
                        "import_peak_mw"))
