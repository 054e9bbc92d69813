"""Demand-response KPIs: pure functions of time series (delivered vs requested, baselines, rebound, cost).

Every value is held over its step of ``dt_h`` hours (as in :mod:`cosim.kpis`). Formulas:

* delivered per interval ``d_k = b_k - p_k`` (baseline minus metered draw, consumer sign);
  requested ``r_k``; shortfall ``max(r_k - d_k, 0)``.
* ``delivered_frac`` = Σ d_k / Σ r_k over the event intervals (energy delivered over energy
  requested); ``intervals_met_frac`` = share of event intervals with ``d_k >= (1 - tol) r_k``.
* ``energy_reduction_mwh`` = Σ (b_k - p_k)·Δt over the event.
* baselines: *meter before* = mean draw over the ``window_h`` before the event start;
  *10-in-10* = per time of day, the mean of the same interval on the 10 most recent
  eligible days before the event (weekdays without an event), the day-matching rule of
  the CAISO / NYISO customer baselines (CAISO "10 in 10 Day Baseline" without the
  day-of adjustment; NYISO ICAP manual's average-day CBL uses 10 weekdays likewise).
* rebound after the event over ``window_h``: ``rebound_mwh`` = Σ max(p_k - b_k, 0)·Δt and
  ``rebound_peak_mw`` = max(p_k - b_k, 0).
* per event (each run of intervals with ``r_k > 0``): its mean baseline, its settlement
  (``energy_requested_mwh``, ``energy_reduction_mwh``, ``shortfall_mwh``, ``delivered_frac``
  over its intervals) and its rebound.
* performance cost: GPU-hours delayed = growth of the cluster's cumulative ``delay_gpu_h``
  over the event and the rebound window, minus the same growth in the no-control run when
  given; SLO attainment = mean ``slo_attainment_frac`` over the event.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cosim.folder import json_safe
from cosim.kpis._block import Block, KpiInput, ending
from cosim.roles import RunRoles

#: What a DR responder reports (any entity recording ``dr_requested_mw`` is one).
RESPONDER_ATTRS = ("dr_requested_mw", "dr_delivered_mw", "p_baseline_mw", "p_metered_mw")
#: What the IT entities report of the performance cost.
COST_ATTRS = ("delay_gpu_h", "slo_attainment_frac")


def _values(series: pd.Series | np.ndarray) -> np.ndarray:
    return np.asarray(series, dtype=float)


def event_mask(requested_mw: pd.Series) -> np.ndarray:
    """Intervals in an event: requested reduction above zero. [-]"""
    return np.nan_to_num(_values(requested_mw)) > 0


def delivered_mw(p_mw: pd.Series, baseline_mw: pd.Series | float) -> np.ndarray:
    """Delivered reduction per interval: baseline minus metered draw. [MW]"""
    return _values(baseline_mw) - _values(p_mw) if not np.isscalar(baseline_mw) else baseline_mw - _values(p_mw)


def baseline_meter_before(p_mw: pd.Series, start: pd.Timestamp, window_h: float = 1.0) -> float:
    """Mean draw over ``[start - window_h, start)``. [MW]

    Raises:
        ValueError: no sample falls in the window.
    """
    window = p_mw[(p_mw.index >= start - pd.Timedelta(hours=window_h)) & (p_mw.index < start)]
    if window.empty:
        raise ValueError(f"no samples in the {window_h} h before {start}; start the run earlier "
                         "or use a shorter window")
    return float(window.mean())


def baseline_10in10(p_mw: pd.Series, start: pd.Timestamp, end: pd.Timestamp, n_days: int = 10,
                    excluded_dates: set | None = None, weekdays_only: bool = True) -> pd.Series:
    """Interval baseline over ``[start, end)``: the mean of the same time of day on the
    ``n_days`` most recent eligible days before ``start``. [MW]

    Eligible days: weekdays (when ``weekdays_only``) with data, not in ``excluded_dates``
    (other event days). Fewer eligible days than ``n_days`` use those there are.

    Raises:
        ValueError: no eligible day before the event.
    """
    excluded = set(excluded_dates or ())
    days = sorted({t.normalize() for t in p_mw.index if t < start.normalize()}, reverse=True)
    chosen = [d for d in days if (not weekdays_only or d.dayofweek < 5) and d.date() not in excluded][:n_days]
    if not chosen:
        raise ValueError(f"no eligible day before {start.date()} for a 10-in-10 baseline; "
                         "record the days before the event or use the meter-before baseline")
    step = p_mw.index[1] - p_mw.index[0] if len(p_mw) > 1 else end - start
    index = pd.date_range(start, end, freq=step, inclusive="left")
    rows = []
    for day in chosen:
        shifted = index - (start.normalize() - day)
        rows.append(p_mw.reindex(shifted).to_numpy(float))
    return pd.Series(np.nanmean(np.vstack(rows), axis=0), index=index, name="baseline_mw")


def dr_performance(p_mw: pd.Series, baseline_mw: pd.Series | float, requested_mw: pd.Series, dt_h: float,
                   tol_frac: float = 0.05) -> dict[str, float]:
    """Delivered vs requested over the event intervals (``requested_mw > 0``). [MW, MWh, -]"""
    mask = event_mask(requested_mw)
    if not mask.any():
        return {"n_event_intervals": 0}
    d = delivered_mw(p_mw, baseline_mw)[mask]
    r = _values(requested_mw)[mask]
    return {
        "n_event_intervals": int(mask.sum()),
        "requested_mean_mw": float(r.mean()),
        "delivered_mean_mw": float(np.nanmean(d)),
        "delivered_frac": float(np.nansum(d) / r.sum()),
        "intervals_met_frac": float(np.mean(d >= (1.0 - tol_frac) * r)),
        "energy_requested_mwh": float(r.sum() * dt_h),
        "energy_reduction_mwh": float(np.nansum(d) * dt_h),
        "shortfall_mwh": float(np.nansum(np.maximum(r - d, 0.0)) * dt_h),
        "shortfall_max_mw": float(np.nanmax(np.maximum(r - d, 0.0))),
    }


def settlement(p_mw: pd.Series, baseline_mw: pd.Series, requested_mw: pd.Series, dt_h: float) -> dict[str, float]:
    """One event's settlement: energy requested, delivered (baseline minus metered, summed over
    the event's intervals) and short, and the share delivered. [MWh, -]"""
    perf = dr_performance(p_mw, baseline_mw, requested_mw, dt_h)
    keys = ("energy_requested_mwh", "energy_reduction_mwh", "shortfall_mwh", "delivered_frac")
    return {key: perf[key] for key in keys if key in perf}


def rebound(p_mw: pd.Series, baseline_mw: float, end: pd.Timestamp, window_h: float, dt_h: float) -> dict[str, float]:
    """Draw above the baseline in ``[end, end + window_h)``. [MWh, MW]"""
    after = p_mw[(p_mw.index >= end) & (p_mw.index < end + pd.Timedelta(hours=window_h))]
    excess = np.maximum(after.to_numpy(float) - baseline_mw, 0.0)
    return {"rebound_mwh": float(np.nansum(excess) * dt_h),
            "rebound_peak_mw": float(np.nanmax(excess)) if len(excess) else 0.0}


def performance_cost(delay_gpu_h: pd.Series, start: pd.Timestamp, end: pd.Timestamp,
                     slo_attainment_frac: pd.Series | None = None,
                     delay_gpu_h_baseline: pd.Series | None = None) -> dict[str, float]:
    """GPU-hours delayed over ``[start, end)`` (beyond the baseline run's, when given) and the
    mean SLO attainment over the same span. [GPU·h, -]"""
    def growth(series: pd.Series) -> float:
        span = series[(series.index >= start) & (series.index < end)].dropna()
        before = series[series.index < start].dropna()
        first = float(before.iloc[-1]) if len(before) else float(span.iloc[0])
        return float(span.iloc[-1]) - first if len(span) else 0.0

    out = {"delay_gpu_h": growth(delay_gpu_h)}
    if delay_gpu_h_baseline is not None:
        out["delay_gpu_h_extra"] = out["delay_gpu_h"] - growth(delay_gpu_h_baseline)
    if slo_attainment_frac is not None:
        span = slo_attainment_frac[(slo_attainment_frac.index >= start) & (slo_attainment_frac.index < end)]
        out["slo_attainment_mean_frac"] = float(span.mean())
    return out


def events(requested_mw: pd.Series) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """``[(start, end)]`` of each run of intervals with ``requested_mw > 0``."""
    mask = event_mask(requested_mw)
    edges = np.diff(np.concatenate([[0], mask.astype(int), [0]]))
    idx = requested_mw.index
    step = idx[1] - idx[0] if len(idx) > 1 else pd.Timedelta(0)
    return [(idx[s], idx[e - 1] + step) for s, e in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))]


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    responders = {c.rpartition(".")[0] for c in ending(columns, ".dr_requested_mw")}
    wanted = [f"{e}.{a}" for e in sorted(responders) for a in RESPONDER_ATTRS]
    if responders:
        wanted += [f"{e}.{a}" for e in roles.entities_with("it") for a in COST_ATTRS]
    return [c for c in wanted if c in names]


def compute(ts: pd.DataFrame, dt_h: float, roles: RunRoles, rebound_h: float = 2.0) -> dict[str, Any]:
    """DR KPIs of every responder in a run (an entity reporting ``dr_requested_mw``), from its
    own columns (``dr_requested_mw``, ``dr_delivered_mw``, ``p_baseline_mw``, ``p_metered_mw``)
    and, for the cost, every IT entity's ``delay_gpu_h`` and ``slo_attainment_frac`` over the
    event and the ``rebound_h`` after it."""
    out: dict[str, Any] = {}
    clusters = roles.entities_with("it")
    responders = [c.rpartition(".")[0] for c in ending(ts.columns, ".dr_requested_mw")]
    for eid in responders:
        requested = ts[f"{eid}.dr_requested_mw"].fillna(0.0)
        baseline = ts[f"{eid}.p_baseline_mw"]
        p_site = ts[f"{eid}.p_metered_mw"] if f"{eid}.p_metered_mw" in ts else baseline - ts[f"{eid}.dr_delivered_mw"]
        kpi = dr_performance(p_site, baseline, requested, dt_h)
        spans = events(requested)
        kpi["events"] = []
        for start, end in spans:
            base = float(baseline[(baseline.index >= start) & (baseline.index < end)].mean())
            entry: dict[str, Any] = {"start_utc": start.isoformat(), "end_utc": end.isoformat(), "baseline_mw": base}
            span = (requested.index >= start) & (requested.index < end)
            entry.update(settlement(p_site[span], baseline[span], requested[span], dt_h))
            entry.update(rebound(p_site, base, end, rebound_h, dt_h))
            for cid in clusters:
                if f"{cid}.delay_gpu_h" in ts:
                    slo = ts.get(f"{cid}.slo_attainment_frac")
                    entry[cid] = performance_cost(ts[f"{cid}.delay_gpu_h"], start,
                                                  end + pd.Timedelta(hours=rebound_h), slo)
            kpi["events"].append(entry)
        out[eid] = kpi
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    dr = compute(inp.ts, inp.dt_h, inp.roles)
    return {"dr": json_safe(dr)} if dr else {}


BLOCK = Block("dr", "Demand response", 60, _columns, _compute,
              headline=("delivered_frac", "energy_reduction_mwh", "shortfall_mwh"))
