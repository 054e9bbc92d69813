"""Curtailment-enabled headroom for flexible load (Norris et al., Duke 2025) of every system load series.

Any entity recording ``p_system_load_mw`` (a balancing authority's hourly demand, read by the
signals adapter from any CSV/Parquet file) is a system. Method of Norris, Profeta,
Patino-Echeverri & Cowie-Haskell, *Rethinking Load Growth*, Nicholas Institute, Duke University,
NI R 25-01 (2025), §2 and Appendix C:

* thresholds: the summer threshold governs April-October, the winter one November-March (the
  paper's summer Jun-Aug and winter Dec-Feb with their shoulder months); each is the highest
  load of the months it governs over the whole record. Taking the maximum over the months
  governed, not over Jun-Aug / Dec-Feb alone, keeps every hour the system served at or below its
  own threshold: CAISO's record is 51.1 GW on 6 September 2022, above its Jun-Aug maximum of
  47.3 GW, and a Jun-Aug threshold would curtail the new load at L = 0 (its 0.5 % headroom
  2.96 GW instead of the paper's 5.0; the window maxima give 4.99, scenarios/published/duke_headroom.toml);
* a new load of ``L`` MW is added to every hour; the curtailment it needs in hour t is
  ``c_t = max(0, D_t + L - T_t)``;
* the rate of a calendar year is ``Σ_year c_t / (L · hours of that year)``; the headroom at a limit
  is the ``L`` whose rate, averaged over the years of the record (each year counts once, a
  partial year too), equals the limit (bisection; the mean rate grows with ``L``).

Per limit also the event statistics of the paper's §3: curtailed hours per year (``c_t > 0``,
``curtailed_h`` the mean over the years, ``curtailed_h_max_year`` the worst year), the number
of events (runs of curtailed hours) per year, their mean and longest length, the curtailed energy,
the shares of curtailed hours keeping >= 50 / 75 / 90 % of ``L``; and
``headroom_event_capped_mw``: the largest ``L`` (at most the limit's headroom) whose longest
event lasts at most ``max_event_h`` hours, for a flexible load that can ride through events of
that length only (the longest event grows with ``L``: the curtailed hours of a larger load
include those of a smaller one).

Parameters, ``[kpis.headroom]`` (defaults in brackets; validated in the scenario schema):

* ``limits_pct`` — the curtailment limits [0.25, 0.5, 1, 5] in % of the new load's energy; each
  gives the entry ``at_<limit with '_' for '.'>_pct`` (0.5 → ``at_0_5_pct``);
* ``max_event_h`` — the longest event the flexible load accepts [4] h.

Entries ``headroom.<entity>``: ``peak_mw``, ``summer_peak_mw`` and ``winter_peak_mw`` (the two
thresholds), ``load_factor_frac``, ``n_years``, ``max_event_h`` and per limit ``headroom_mw``,
``headroom_frac`` (of the peak), ``curtailed_h``, ``curtailed_h_max_year``, ``curtailed_mwh``
(per year), ``events_per_year``, ``event_mean_h``, ``event_max_h``, ``retained_50_frac``,
``retained_75_frac``, ``retained_90_frac``, ``headroom_event_capped_mw``.

Use on your own demand file: a scenario with one ``signals`` simulator per system mapping the
demand column to ``p_system_load_mw`` (``scenarios/published/duke_headroom.toml`` is one), or in
Python ``system_headroom(series_mw, dt_h, limits_pct=[...], max_event_h=...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
import pandas as pd
from pydantic import AfterValidator, BeforeValidator, Field

from cosim.kpis._block import Block, KpiInput, KpiParams, ending, finite
from cosim.roles import RunRoles
from cosim.sdk import as_tuple

#: default curtailment limits (Norris et al. 2025, Duke NI R 25-01). [% of the new load's energy]
HEADROOM_LIMITS_PCT = (0.25, 0.5, 1.0, 5.0)
#: default longest curtailment event a flexible load accepts (the event-capped headroom). [h]
HEADROOM_MAX_EVENT_H = 4.0


def _distinct_limits(value: tuple[float, ...]) -> tuple[float, ...]:
    if not value or any(not 0 < v < 100 for v in value) or len({f"{v:g}" for v in value}) != len(value):
        raise ValueError("give distinct curtailment limits in % of the new load's energy, each above 0 and below "
                         "100, e.g. [0.25, 0.5, 1]")
    return value


class HeadroomParams(KpiParams):
    """``[kpis.headroom]``: the curtailment limits and the longest accepted event.

    Attributes:
        limits_pct: curtailment limits, the mean annual share of the new load's energy curtailed. [%]
        max_event_h: the longest curtailment event the new load accepts (``headroom_event_capped_mw``). [h]
    """

    limits_pct: Annotated[tuple[float, ...], BeforeValidator(as_tuple), AfterValidator(_distinct_limits)] = \
        HEADROOM_LIMITS_PCT
    max_event_h: float = Field(default=HEADROOM_MAX_EVENT_H, gt=0)

ATTR = "p_system_load_mw"
#: Months whose threshold is the summer one (Jun-Aug and the shoulder months Apr, May, Sep, Oct).
SUMMER_WINDOW = (4, 5, 6, 7, 8, 9, 10)
#: Months whose threshold is the winter one (Dec-Feb and the shoulder months Nov, Mar).
WINTER_WINDOW = (11, 12, 1, 2, 3)
_BISECT_STEPS = 60


def label(limit_pct: float) -> str:
    """The KPI key of a limit: 0.25 → ``at_0_25_pct``, 1 → ``at_1_pct``."""
    return "at_" + f"{limit_pct:g}".replace(".", "_") + "_pct"


#: The default limits [fraction of the new load's energy] by KPI label.
LIMITS = {label(p): p / 100.0 for p in HEADROOM_LIMITS_PCT}


def thresholds(load_mw: pd.Series) -> tuple[np.ndarray, float, float]:
    """Per-hour threshold and the summer and winter thresholds (window maxima). [MW]

    Raises:
        ValueError: the record has no month of one of the two windows.
    """
    months = load_mw.index.month
    summer_like = np.isin(months, SUMMER_WINDOW)
    summer = load_mw[summer_like].max()
    winter = load_mw[~summer_like].max()
    if not (np.isfinite(summer) and np.isfinite(winter)):
        raise ValueError("the headroom method needs months of both seasons (Apr-Oct and Nov-Mar) in the record")
    return np.where(summer_like, summer, winter), float(summer), float(winter)


def _year_index(years: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(index of each hour's year, hours per year)``."""
    _, idx, counts = np.unique(years, return_inverse=True, return_counts=True)
    return idx, counts


def annual_rates(load_mw: np.ndarray, threshold_mw: np.ndarray, years: np.ndarray, new_mw: float) -> np.ndarray:
    """The curtailment rate of a constant new load in each calendar year. [-]"""
    idx, counts = _year_index(years)
    curt = np.maximum(load_mw + new_mw - threshold_mw, 0.0)
    return np.bincount(idx, weights=curt) / (new_mw * counts)


def mean_annual_rate(load_mw: np.ndarray, threshold_mw: np.ndarray, years: np.ndarray, new_mw: float) -> float:
    """The curtailment rate of a constant new load, averaged over the years. [-]"""
    return float(np.mean(annual_rates(load_mw, threshold_mw, years, new_mw)))


def _bisect(ok, low: float, high: float) -> float:
    """The largest x in [low, high] with ok(x), for ok true below and false above a point."""
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if ok(mid) else (low, mid)
    return 0.5 * (low + high)


def headroom_mw(load_mw: np.ndarray, threshold_mw: np.ndarray, years: np.ndarray, limit_frac: float) -> float:
    """The new constant load whose mean annual curtailment rate equals ``limit_frac`` (bisection). [MW]"""
    high = float(np.nanmax(load_mw))
    while mean_annual_rate(load_mw, threshold_mw, years, high) < limit_frac:
        high *= 2.0
    return _bisect(lambda new: mean_annual_rate(load_mw, threshold_mw, years, new) < limit_frac, 0.0, high)


def run_lengths(hit: np.ndarray) -> np.ndarray:
    """Lengths of the runs of consecutive true values. [steps]"""
    edges = np.diff(np.concatenate([[0], hit.astype(np.int8), [0]]))
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


def longest_event_h(load_mw: np.ndarray, threshold_mw: np.ndarray, new_mw: float, dt_h: float) -> float:
    """The longest run of hours in which ``new_mw`` is curtailed. [h]"""
    runs = run_lengths(load_mw + new_mw > threshold_mw)
    return float(runs.max()) * dt_h if len(runs) else 0.0


def event_capped_headroom_mw(load_mw: np.ndarray, threshold_mw: np.ndarray, max_event_h: float, dt_h: float,
                             at_most_mw: float) -> float:
    """The largest new load up to ``at_most_mw`` whose longest curtailment event is at most ``max_event_h``. [MW]"""
    if longest_event_h(load_mw, threshold_mw, at_most_mw, dt_h) <= max_event_h:
        return at_most_mw
    return _bisect(lambda new: longest_event_h(load_mw, threshold_mw, new, dt_h) <= max_event_h, 0.0, at_most_mw)


def curtailment_stats(load_mw: np.ndarray, threshold_mw: np.ndarray, years: np.ndarray, new_mw: float,
                      dt_h: float) -> dict[str, float]:
    """Hours, energy, events and depth of the curtailment of ``new_mw``. [h, MWh, 1/yr, h, -]"""
    curt = np.maximum(load_mw + new_mw - threshold_mw, 0.0)
    hit = curt > 0
    idx, counts = _year_index(years)
    n_years = len(counts)
    runs = run_lengths(hit)
    served = 1.0 - curt[hit] / new_mw if new_mw > 0 else np.ones(0)
    share = (lambda q: float(np.mean(served >= q))) if hit.any() else (lambda q: 1.0)
    return {"curtailed_h": float(hit.sum()) * dt_h / n_years,
            "curtailed_h_max_year": float(np.bincount(idx, weights=hit).max()) * dt_h,
            "curtailed_mwh": float(curt.sum()) * dt_h / n_years,
            "events_per_year": len(runs) / n_years,
            "event_mean_h": float(runs.mean()) * dt_h if len(runs) else 0.0,
            "event_max_h": float(runs.max()) * dt_h if len(runs) else 0.0,
            "retained_50_frac": share(0.5), "retained_75_frac": share(0.75), "retained_90_frac": share(0.9)}


def system_headroom(load_mw: pd.Series, dt_h: float, limits_pct: Sequence[float] = HEADROOM_LIMITS_PCT,
                    max_event_h: float = HEADROOM_MAX_EVENT_H) -> dict[str, Any]:
    """The block of one system (see the module docstring); gaps are bridged linearly, as the paper cleans them.

    Args:
        load_mw: the system's demand, UTC index. [MW]
        dt_h: its step. [h]
        limits_pct: the curtailment limits. [% of the new load's energy]
        max_event_h: the longest curtailment event the new load accepts. [h]
    """
    series = load_mw.astype(float).interpolate(limit_direction="both")
    threshold, summer, winter = thresholds(series)
    values, years = series.to_numpy(), series.index.year.to_numpy()
    peak = float(values.max())
    out: dict[str, Any] = {"peak_mw": finite(peak), "summer_peak_mw": finite(summer), "winter_peak_mw": finite(winter),
                           "load_factor_frac": finite(values.mean() / peak), "n_years": len(np.unique(years)),
                           "max_event_h": finite(max_event_h)}
    for limit_pct in limits_pct:
        new = headroom_mw(values, threshold, years, limit_pct / 100.0)
        stats = curtailment_stats(values, threshold, years, new, dt_h)
        capped = event_capped_headroom_mw(values, threshold, max_event_h, dt_h, new)
        out[label(limit_pct)] = {"headroom_mw": finite(new), "headroom_frac": finite(new / peak),
                                 **{k: finite(v) for k, v in stats.items()},
                                 "headroom_event_capped_mw": finite(capped)}
    return out


def load_duration_mw(load_mw: pd.Series, new_mw: float) -> dict[str, np.ndarray]:
    """Load-duration curves (sorted high to low) before and after adding ``new_mw`` curtailed to the
    thresholds: ``before``, ``after`` (demand + served new load) and ``threshold`` (sorted with ``after``). [MW]"""
    series = load_mw.astype(float).interpolate(limit_direction="both")
    threshold, _, _ = thresholds(series)
    values = series.to_numpy()
    after = np.minimum(values + new_mw, np.maximum(threshold, values))
    order = np.argsort(-after, kind="stable")
    return {"before": np.sort(values)[::-1], "after": after[order], "threshold": threshold[order]}


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    return ending(columns, "." + ATTR)


def _compute(inp: KpiInput) -> dict[str, Any]:
    params = inp.params.get("headroom") or {}
    limits = params.get("limits_pct") or HEADROOM_LIMITS_PCT
    max_event = params.get("max_event_h", HEADROOM_MAX_EVENT_H)
    out = {}
    for column in ending(inp.ts.columns, "." + ATTR):
        series = inp.ts[column]
        if series.notna().any():
            try:
                out[column.rpartition(".")[0]] = system_headroom(series, inp.dt_h, limits, max_event)
            except ValueError:
                continue  # a record without both seasons has no thresholds: nothing to report
    return {"headroom": out} if out else {}


BLOCK = Block("headroom", "Headroom for flexible load (Duke method)", 85, _columns, _compute,
              headline=("peak_mw", "load_factor_frac"), params=HeadroomParams)
