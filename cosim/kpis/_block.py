"""What a KPI block is, and the helpers every block shares.

A block is one module of :mod:`cosim.kpis` defining ``BLOCK = Block(...)``: the columns it
reads (from the recorded names and the run's roles) and a function computing its entries
of ``kpis.json``. A block that takes parameters declares them itself: ``params``, a pydantic
model of its ``[kpis.<block>]`` table (checked when the scenario is validated, each problem
one message naming the key, the value and the fix), and, for what a model cannot see alone
(the record step, the run's length, its entities), ``check``. Every value is held over its step (the recorder samples at the start of
each step), so an energy is ``sum(p_mw) * dt_h``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

from cosim.errors import Problem
from cosim.roles import RunRoles
from cosim.sdk import as_tuple


class KpiParams(BaseModel):
    """Base of a block's parameter model: unknown keys are an error; numbers are numbers (a
    quoted ``"3"`` is refused) and finite."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


def _ordered_band(value: tuple[float, float]) -> tuple[float, float]:
    low, high = value
    if not 0 <= low < high <= 1e4:
        raise ValueError("give [low_hz, high_hz] with 0 <= low_hz < high_hz, e.g. [0.1, 2]")
    return value


#: A frequency band ``[low_hz, high_hz]`` of a block's parameters. [Hz]
BandHz = Annotated[tuple[float, float], BeforeValidator(as_tuple), AfterValidator(_ordered_band)]


@dataclass
class ParamsContext:
    """What a block's ``check`` may read of the scenario.

    Attributes:
        where: the table's key path, ``kpis.<block>`` (prefix of every problem's key).
        record_step_s: the recording step; None when the scenario's timing is itself wrong (said). [s]
        duration_s: the run's length; None when the timing is wrong. [s]
        base_dir: the scenario's folder (relative paths resolve from it).
        entities: the scenario's entity ids.
        recorded: the ``<entity>.<attr>`` names the run records; None when unknown (some entity invalid).
        warnings: things that run but deserve a word: a check appends to it.
    """

    where: str
    record_step_s: float | None
    duration_s: float | None
    base_dir: Path
    entities: tuple[str, ...] = ()
    recorded: frozenset[str] | None = None
    warnings: list[str] = field(default_factory=list)


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
        params: the model of its ``[kpis.<name>]`` table (a :class:`KpiParams`); None: it takes none.
        check: ``(validated params, ParamsContext) -> (params, problems)``: what the model cannot
            check alone (the problems name ``ParamsContext.where`` + the key); the params it returns
            are the ones the run uses (e.g. a relative path made absolute). Runs only on a table
            the scenario gives.
    """

    name: str
    title: str
    order: int
    columns: Callable[[list[str], RunRoles], Iterable[str]]
    compute: Callable[[KpiInput], dict[str, Any]]
    headline: tuple[str, ...] = ()
    params: type[KpiParams] | None = None
    check: Callable[[Any, ParamsContext], tuple[Any, list[Problem]]] | None = None


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
