"""Curtailment-enabled headroom for flexible load (Norris et al., Duke 2025) of every system load series.

Any entity recording ``p_system_load_mw`` (a balancing authority's hourly demand, read by the
signals adapter) is a system. Method of Norris, Profeta, Patino-Echeverri & Cowie-Haskell,
*Rethinking Load Growth*, Nicholas Institute, Duke University, NI R 25-01 (2025), §2 and
Appendix C, as stated in its text:

* thresholds: the highest load of summer (Jun-Aug) and of winter (Dec-Feb) over the record;
  Apr, May, Sep and Oct take the summer threshold, Nov and Mar the winter one;
* a new load of ``L`` MW is added to every hour; the curtailment it needs in hour t is
  ``c_t = max(0, D_t + L - T_t)``;
* the rate of a year is ``Σ_year c_t·Δt / (L · hours of that year)``; the headroom at a limit is
  the ``L`` whose rate, averaged over the years of the record, equals the limit (bisection);
* per limit also: the mean curtailed hours per year (``c_t > 0``), the mean length of runs of
  curtailed hours, and the shares of curtailed hours keeping >= 50 / 75 / 90 % of ``L``.

Entries ``headroom.<entity>``: ``peak_mw``, ``summer_peak_mw``, ``winter_peak_mw``,
``load_factor_frac``, ``n_years``, and per limit ``at_0_25_pct``, ``at_0_5_pct``, ``at_1_pct``,
``at_5_pct``: ``headroom_mw``, ``headroom_frac`` (of the peak), ``curtailed_h`` (per year),
``curtailed_mwh`` (per year), ``event_mean_h``, ``retained_50_frac``, ``retained_75_frac``,
``retained_90_frac``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cosim.kpis._block import Block, KpiInput, ending, finite
from cosim.roles import RunRoles

ATTR = "p_system_load_mw"
#: Curtailment limits of the report [fraction of the new load's energy] and their KPI labels.
LIMITS = {"at_0_25_pct": 0.0025, "at_0_5_pct": 0.005, "at_1_pct": 0.01, "at_5_pct": 0.05}
SUMMER = (6, 7, 8)
WINTER = (12, 1, 2)
#: Shoulder months and the season whose threshold they take.
SHOULDER_SUMMER = (4, 5, 9, 10)
_BISECT_STEPS = 60


def thresholds(load_mw: pd.Series) -> tuple[np.ndarray, float, float]:
    """Per-hour threshold and the summer and winter peaks. [MW]

    Raises:
        ValueError: the record has no summer or no winter month.
    """
    months = load_mw.index.month
    summer = load_mw[np.isin(months, SUMMER)].max()
    winter = load_mw[np.isin(months, WINTER)].max()
    if not (np.isfinite(summer) and np.isfinite(winter)):
        raise ValueError("the headroom method needs a summer (Jun-Aug) and a winter (Dec-Feb) in the record")
    summer_like = np.isin(months, SUMMER + SHOULDER_SUMMER)
    return np.where(summer_like, summer, winter), float(summer), float(winter)


def mean_annual_rate(load_mw: np.ndarray, threshold_mw: np.ndarray, years: np.ndarray, new_mw: float) -> float:
    """The curtailment rate of a constant new load, averaged over the years. [-]"""
    curt = np.maximum(load_mw + new_mw - threshold_mw, 0.0)
    rates = [curt[years == y].sum() / (new_mw * np.count_nonzero(years == y)) for y in np.unique(years)]
    return float(np.mean(rates))


def headroom_mw(load_mw: np.ndarray, threshold_mw: np.ndarray, years: np.ndarray, limit_frac: float) -> float:
    """The new constant load whose mean annual curtailment rate equals ``limit_frac`` (bisection). [MW]"""
    low, high = 0.0, float(np.nanmax(load_mw))
    while mean_annual_rate(load_mw, threshold_mw, years, high) < limit_frac:
        high *= 2.0
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (low + high)
        if mid <= 0.0:
            break
        low, high = (mid, high) if mean_annual_rate(load_mw, threshold_mw, years, mid) < limit_frac else (low, mid)
    return 0.5 * (low + high)


def curtailment_stats(load_mw: np.ndarray, threshold_mw: np.ndarray, years: np.ndarray, new_mw: float,
                      dt_h: float) -> dict[str, float]:
    """Hours, energy, event length and depth of the curtailment of ``new_mw``. [h, MWh, h, -]"""
    curt = np.maximum(load_mw + new_mw - threshold_mw, 0.0)
    hit = curt > 0
    n_years = len(np.unique(years))
    edges = np.diff(np.concatenate([[0], hit.astype(int), [0]]))
    runs = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    served = 1.0 - curt[hit] / new_mw
    share = (lambda q: float(np.mean(served >= q))) if hit.any() else (lambda q: 1.0)
    return {"curtailed_h": float(hit.sum()) * dt_h / n_years, "curtailed_mwh": float(curt.sum()) * dt_h / n_years,
            "event_mean_h": float(runs.mean()) * dt_h if len(runs) else 0.0,
            "retained_50_frac": share(0.5), "retained_75_frac": share(0.75), "retained_90_frac": share(0.9)}


def system_headroom(load_mw: pd.Series, dt_h: float) -> dict[str, Any]:
    """The block of one system (see the module docstring); gaps are bridged linearly, as the report does."""
    series = load_mw.astype(float).interpolate(limit_direction="both")
    threshold, summer, winter = thresholds(series)
    values, years = series.to_numpy(), series.index.year.to_numpy()
    peak = float(values.max())
    out: dict[str, Any] = {"peak_mw": finite(peak), "summer_peak_mw": finite(summer), "winter_peak_mw": finite(winter),
                           "load_factor_frac": finite(values.mean() / peak), "n_years": len(np.unique(years))}
    for label, limit in LIMITS.items():
        new = headroom_mw(values, threshold, years, limit)
        stats = curtailment_stats(values, threshold, years, new, dt_h)
        out[label] = {"headroom_mw": finite(new), "headroom_frac": finite(new / peak),
                      **{k: finite(v) for k, v in stats.items()}}
    return out


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    return ending(columns, "." + ATTR)


def _compute(inp: KpiInput) -> dict[str, Any]:
    out = {}
    for column in ending(inp.ts.columns, "." + ATTR):
        series = inp.ts[column]
        if series.notna().any():
            try:
                out[column.rpartition(".")[0]] = system_headroom(series, inp.dt_h)
            except ValueError:
                continue  # a record without both seasons has no thresholds: nothing to report
    return {"headroom": out} if out else {}


BLOCK = Block("headroom", "Headroom for flexible load (Duke method)", 85, _columns, _compute,
              headline=("peak_mw", "load_factor_frac"))
