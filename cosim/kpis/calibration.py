"""Calibration statistics of ASHRAE Guideline 14-2014: a model's series against a reference.

A recorded column ``<ref>.ref_<attr>`` (a measured or reference series, e.g. read by the signals
adapter as ``ref_p_chillers_mw``) is the reference for ``<attr>`` of every entity ``<ref>`` feeds
(the scenario's connections) that records ``<attr>``. Both are averaged to hours first (the
guideline's hourly criteria are for hourly data; a run recorded at 5 min is compared on its
hourly means, an hour needs every one of its samples present), and the statistics of
ASHRAE Guideline 14-2014, *Measurement of Energy, Demand, and Water Savings*, §5.2.11.3
(the calibrated-simulation indices), with y the reference, ŷ the model and ȳ the reference mean:

    NMBE     = Σ (y_i − ŷ_i) / ((n − p) · ȳ)            (positive: the model reads low)
    CV(RMSE) = sqrt(Σ (y_i − ŷ_i)² / (n − p)) / ȳ

with p = 1. The same over calendar-month totals (only months the run covers whole, at least
two of them) gives the monthly indices. Guideline 14 accepts a calibrated model at
CV(RMSE) ≤ 30 % and |NMBE| ≤ 10 % on hourly data, ≤ 15 % and ≤ 5 % on monthly data
(:data:`HOURLY_BOUNDS`, :data:`MONTHLY_BOUNDS`; the report shows whether each is met).

Entries ``calibration.<entity>.<attr>``: ``n_hours``, ``ref_mean_<attr>``, ``model_mean_<attr>``
(hourly means, in the attribute's unit), ``cv_rmse_frac``, ``nmbe_frac``, ``within_hourly_bounds`` (bool),
``n_months``, ``monthly_cv_rmse_frac``, ``monthly_nmbe_frac``, ``within_monthly_bounds``
(None without two whole months), and ``reference`` (the column compared against).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cosim.kpis._block import Block, KpiInput, finite
from cosim.roles import RunRoles

PREFIX = "ref_"
#: Number of model parameters in the guideline's (n − p) denominators.
P_PARAMS = 1
#: ASHRAE Guideline 14-2014 acceptance of a calibrated simulation: (CV(RMSE), |NMBE|). [-]
HOURLY_BOUNDS = (0.30, 0.10)
MONTHLY_BOUNDS = (0.15, 0.05)


def _references(columns: list[str]) -> list[tuple[str, str]]:
    """``(reference column, compared attribute)`` for every recorded ``<entity>.ref_<attr>``."""
    out = []
    for col in columns:
        _, _, attr = col.rpartition(".")
        if attr.startswith(PREFIX) and len(attr) > len(PREFIX):
            out.append((col, attr[len(PREFIX):]))
    return out


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    refs = _references(columns)
    attrs = {a for _, a in refs}
    return [c for c in columns if any(c == r for r, _ in refs) or c.rpartition(".")[2] in attrs]


def g14_indices(ref: np.ndarray, model: np.ndarray, p: int = P_PARAMS) -> tuple[float, float]:
    """``(CV(RMSE), NMBE)`` of ``model`` against ``ref`` (Guideline 14, module docstring). [-]

    Raises:
        ValueError: fewer than ``p + 1`` points, or a reference whose mean is not positive.
    """
    ref, model = np.asarray(ref, dtype=float), np.asarray(model, dtype=float)
    n = len(ref)
    mean = float(np.mean(ref)) if n else float("nan")
    if n <= p or not mean > 0:
        raise ValueError(f"Guideline 14 indices need more than {p} points and a positive reference mean "
                         f"(got {n} points, mean {mean:g})")
    err = ref - model
    return float(np.sqrt(np.sum(err ** 2) / (n - p)) / mean), float(np.sum(err) / ((n - p) * mean))


def _hourly(pair: pd.DataFrame) -> pd.DataFrame:
    """Hourly means of both columns, hours with every sample present only.

    An hour is complete when the run covers all of it and every sample time of the run's
    regular grid that falls in it has both values (a step that does not divide the hour, 420 s,
    puts 8 or 9 samples in an hour: each hour is held to its own count).
    """
    if len(pair) < 2:
        return pair.dropna()
    step = pair.index[1] - pair.index[0]
    grouped = pair.resample("1h")
    means, counts = grouped.mean(), grouped.count()
    grid = pd.Series(1, index=pd.date_range(pair.index[0], pair.index[-1], freq=step))
    expected = grid.resample("1h").count().reindex(means.index, fill_value=0)
    covered = (means.index >= pair.index[0]) & (means.index + pd.Timedelta(hours=1) <= pair.index[-1] + step)
    complete = counts.ge(expected, axis=0).all(axis=1) & (expected > 0) & covered
    return means[complete]


def _within(cv: float | None, nmbe: float | None, bounds: tuple[float, float]) -> bool | None:
    if cv is None or nmbe is None:
        return None
    return bool(cv <= bounds[0] and abs(nmbe) <= bounds[1])


def pair_kpis(ref: pd.Series, model: pd.Series, attr: str) -> dict[str, Any]:
    """The entry of one (reference, model) pair of recorded series (UTC index) of attribute ``attr``
    (the means are named ``ref_mean_<attr>``, ``model_mean_<attr>``: they carry its unit)."""
    hourly = _hourly(pd.DataFrame({"ref": ref, "model": model}))
    out: dict[str, Any] = {"n_hours": int(len(hourly))}
    if len(hourly) <= P_PARAMS or not hourly["ref"].mean() > 0:
        return out
    cv, nmbe = g14_indices(hourly["ref"].to_numpy(), hourly["model"].to_numpy())
    out.update({f"ref_mean_{attr}": finite(hourly["ref"].mean()), f"model_mean_{attr}": finite(hourly["model"].mean()),
                "cv_rmse_frac": finite(cv), "nmbe_frac": finite(nmbe),
                "within_hourly_bounds": _within(cv, nmbe, HOURLY_BOUNDS)})
    utc = hourly.index.tz_convert("UTC").tz_localize(None) if hourly.index.tz is not None else hourly.index
    months = hourly.groupby(utc.to_period("M"))
    whole = [(m, g) for m, g in months if len(g) == m.days_in_month * 24]
    out["n_months"] = len(whole)
    m_cv = m_nmbe = None
    totals = np.array([[g["ref"].sum(), g["model"].sum()] for _, g in whole]).reshape(-1, 2)
    if len(whole) > P_PARAMS and totals[:, 0].mean() > 0:  # (a reference idle over the whole months: none)
        m_cv, m_nmbe = g14_indices(totals[:, 0], totals[:, 1])
    out.update({"monthly_cv_rmse_frac": finite(m_cv), "monthly_nmbe_frac": finite(m_nmbe),
                "within_monthly_bounds": _within(m_cv, m_nmbe, MONTHLY_BOUNDS)})
    return out


def _compute(inp: KpiInput) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    for ref_col, attr in _references(list(inp.ts.columns)):
        source = ref_col.rpartition(".")[0]
        for dst in sorted(inp.links.get(source, ())):
            model_col = inp.col(dst, attr)
            if model_col is None:
                continue
            entry = pair_kpis(inp.ts[ref_col], inp.ts[model_col], attr)
            out.setdefault(dst, {})[attr] = {**entry, "reference": ref_col}
    return {"calibration": out} if out else {}


BLOCK = Block("calibration", "Calibration against a reference (ASHRAE Guideline 14)", 85, _columns, _compute,
              headline=("cv_rmse_frac", "nmbe_frac", "within_hourly_bounds"))
