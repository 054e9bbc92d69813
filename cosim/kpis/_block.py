"""What a KPI block is, and the helpers every block shares.

A block is one module of :mod:`cosim.kpis` defining ``BLOCK = Block(...)``: the columns it
reads (from the recorded names and the run's roles) and a function computing its entries
of ``kpis.json``. Every value is held over its step (the recorder samples at the start of
each step), so an energy is ``sum(p_mw) * dt_h``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cosim.roles import RunRoles


@dataclass(frozen=True)
class KpiInput:
    """What a block computes from.

    Attributes:
        ts: the columns the blocks asked for, UTC index, one row per recorded step.
        dt_h: the recording step. [h]
        step_s: the recording step as configured (used when the series has one row). [s]
        roles: the run's roles.
        links: entity -> the entities it feeds (the scenario's connections).
        params: block name -> its parameters (the scenario's ``[kpis.<block>]``, defaults filled in).
    """

    ts: pd.DataFrame
    dt_h: float
    step_s: float
    roles: RunRoles
    links: dict[str, set[str]] = field(default_factory=dict)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    def col(self, entity: str, attr: str) -> str | None:
        """``<entity>.<attr>`` when recorded, else None."""
        name = f"{entity}.{attr}"
        return name if name in self.ts.columns else None


@dataclass(frozen=True)
class Block:
    """One KPI block.

    Attributes:
        name: the block's name (its module).
        title: how the report heads it.
        order: position in ``kpis.json`` (lower first).
        columns: ``(recorded column names, roles) -> the columns it reads``.
        compute: ``KpiInput -> {top-level key: value}`` (empty: the run has nothing for it).
        headline: keys, inside each of its top-level entries, the report shows first.
    """

    name: str
    title: str
    order: int
    columns: Callable[[list[str], RunRoles], Iterable[str]]
    compute: Callable[[KpiInput], dict[str, Any]]
    headline: tuple[str, ...] = ()


def step_hours(index: pd.Index, default_s: float) -> float:
    """Sampling interval [h]: from the index when it has two rows, else ``default_s``."""
    if len(index) > 1:
        return float((index[1] - index[0]).total_seconds()) / 3600.0
    return default_s / 3600.0


def finite(value: Any) -> float | None:
    """A KPI number: rounded to 9 digits, None when missing, NaN or infinite."""
    if value is None:
        return None
    value = float(value)
    return round(value, 9) if math.isfinite(value) else None


def values(series: pd.Series | np.ndarray) -> np.ndarray:
    return np.asarray(series, dtype=float)


def energy_mwh(p_mw: pd.Series, dt_h: float) -> float:
    """Energy of a power series held over each step. [MWh]"""
    return float(np.nansum(values(p_mw)) * dt_h)


def positive_energy_mwh(p_mw: pd.Series, dt_h: float) -> float:
    """Energy of the positive part only (e.g. import, not export). [MWh]"""
    return float(np.nansum(np.clip(values(p_mw), 0.0, None)) * dt_h)


def carbon_t(p_import_mw: pd.Series, ci_g_kwh: pd.Series, dt_h: float) -> float:
    """Location-based emissions of imports: Σ max(p, 0)·Δt·ci / 1000 (MWh × g/kWh = kg). [t CO2e]"""
    p = np.clip(values(p_import_mw), 0.0, None)
    return float(np.nansum(p * values(ci_g_kwh)) * dt_h / 1000.0)


def ending(columns: Iterable[str], *suffixes: str) -> list[str]:
    """The columns ending with any of ``suffixes``."""
    return [c for c in columns if c.endswith(suffixes)]


def last_value(series: pd.Series) -> float | None:
    """The last non-missing value (cumulative counters), or None."""
    present = series.dropna()
    return finite(present.iloc[-1]) if len(present) else None
