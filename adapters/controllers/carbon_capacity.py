"""Carbon-aware capacity curves: hourly limits on flexible work from a day-ahead carbon forecast.

Google's virtual capacity curves (VCC; Radovanović et al., "Carbon-Aware Computing for
Datacenters", IEEE Trans. Power Systems 38(2), 2023, arXiv:2106.11750): a day ahead, from
the forecast carbon intensity, each cluster gets an hourly limit on the capacity its
flexible (delay-tolerant) work may use, such that the day's flexible work still fits. The
published system optimises carbon together with peak-power cost and risk; here the limits
solve the carbon part exactly::

    minimise  Σ_h ci_h · x_h   subject to  Σ_h x_h · 1 h = E_flex,  x_min <= x_h <= headroom_h

(a linear programme with one coupling constraint: the greedy fill of the cleanest hours
first is optimal). ``x_min`` (``p_flex_min_mw``) keeps a floor in every hour, as VCC keeps
capacity for flexible work that cannot wait a whole day.

Baseline policy ``explorer``, the simpler shifting rule of Carbon Explorer (Acun et al.,
"Carbon Explorer: A Holistic Framework for Designing Carbon Aware Datacenters", ASPLOS
2023): no flexible work in the hours whose forecast carbon intensity is above the day's
median; the day's flexible energy is spread evenly over the other hours (up to their
headroom; what does not fit goes to the remaining hours, cleanest first). Policy ``none``
runs the flexible work flat at ``E_flex / 24 h`` (no control).

Forecast: the carbon signal read ahead from its data file (``forecast`` params: the same
file and column as the scenario's carbon signal), i.e. a perfect day-ahead forecast.
Plans are made at the run start and every 24 h after it.

Models:

* ``Capacity`` (the controller): input ``p_inflexible_mw`` (optional, persistence forecast
  of the inflexible load for the headroom ``capacity_mw - p_inflexible``); outputs
  ``p_flex_limit_mw`` (the hour's limit), ``ci_forecast_g_kwh``.
* ``FlexLoad`` (a stand-in plant for delay-tolerant batch compute): each day, at the
  planning time, ``e_day_mwh`` of work is submitted, due within 24 h; it is served at the
  input ``p_limit_mw`` (flat ``e_day_mwh / 24`` when none arrives), never more than the
  backlog. Outputs ``p_mw`` (consumer sign), ``e_backlog_mwh``, ``e_served_mwh`` (this day).

Example ``[entities]`` entries::

    vcc = { sim = "ctl", model = "Capacity", policy = "vcc", e_flex_day_mwh = 12.0, capacity_mw = 1.5,
            forecast = { file = "data/carbon/US-CAL-CISO_2024.csv.gz", column = "ci_lifecycle_g_kwh",
                         align_year = true } }
    batch = { sim = "ctl", model = "FlexLoad", e_day_mwh = 12.0 }
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from cosim.sdk import CosimSim, Params, ScenarioContext, meta, model_meta
from cosim.adapters.signals import ColumnSpec, DataError, SeriesOptions, TimeSeries
from cosim.sdk import DataFile

HOURS = 24


# -- the policies (pure functions) --------------------------------------------------------------
def _headroom(headroom_mw, n: int) -> np.ndarray:
    room = np.broadcast_to(np.asarray(headroom_mw, float), (n,)).copy()
    return np.maximum(room, 0.0)


def vcc_limits(ci_g_kwh, e_flex_mwh: float, headroom_mw, p_flex_min_mw: float = 0.0) -> np.ndarray:
    """Hourly flexible limits minimising forecast carbon with the daily total kept. [MW]

    Args:
        ci_g_kwh: forecast carbon intensity of each hour. [g/kWh]
        e_flex_mwh: the day's flexible work. [MWh]
        headroom_mw: capacity left for flexible work in each hour (scalar or per hour). [MW]
        p_flex_min_mw: floor in every hour. [MW]

    Raises:
        ValueError: the work does not fit under the headroom, or the floor alone exceeds it.
    """
    ci = np.asarray(ci_g_kwh, float)
    room = _headroom(headroom_mw, len(ci))
    floor = np.minimum(np.full(len(ci), p_flex_min_mw), room)
    _check_fits(e_flex_mwh, room, floor)
    x = floor.copy()
    left = e_flex_mwh - x.sum()
    for h in np.argsort(ci, kind="stable"):
        add = min(room[h] - x[h], left)
        x[h] += add
        left -= add
        if left <= 1e-12:
            break
    return x


def explorer_limits(ci_g_kwh, e_flex_mwh: float, headroom_mw) -> np.ndarray:
    """Carbon Explorer's simpler rule: nothing above the median hour, even spread below. [MW]"""
    ci = np.asarray(ci_g_kwh, float)
    room = _headroom(headroom_mw, len(ci))
    _check_fits(e_flex_mwh, room, np.zeros(len(ci)))
    clean = ci <= np.median(ci)
    x = np.zeros(len(ci))
    left = e_flex_mwh
    while left > 1e-12:  # even spread over the clean hours with room, water-filling on the caps
        open_ = clean & (x < room - 1e-12)
        if not open_.any():
            break
        add = np.minimum(room[open_] - x[open_], left / open_.sum())
        x[open_] += add
        left -= add.sum()
    for h in np.argsort(ci, kind="stable"):  # what did not fit: cleanest remaining hours first
        if left <= 1e-12:
            break
        add = min(room[h] - x[h], left)
        x[h] += add
        left -= add
    return x


def flat_limits(e_flex_mwh: float, n: int = HOURS) -> np.ndarray:
    """No control: the flexible work at a flat rate. [MW]"""
    return np.full(n, e_flex_mwh / n)


def _check_fits(e_flex_mwh: float, room: np.ndarray, floor: np.ndarray) -> None:
    if e_flex_mwh < 0:
        raise ValueError(f"e_flex_mwh = {e_flex_mwh:g} is negative")
    if room.sum() + 1e-9 < e_flex_mwh:
        raise ValueError(f"the day's flexible work ({e_flex_mwh:g} MWh) does not fit under the headroom "
                         f"({room.sum():g} MWh over {len(room)} h); raise capacity_mw or lower the work")
    if floor.sum() > e_flex_mwh + 1e-9:
        raise ValueError(f"p_flex_min_mw alone gives {floor.sum():g} MWh, above the day's {e_flex_mwh:g} MWh; "
                         "lower p_flex_min_mw")


def plan(policy: str, ci_g_kwh, e_flex_mwh: float, headroom_mw, p_flex_min_mw: float = 0.0) -> np.ndarray:
    """The hourly limits of ``policy`` (``vcc``, ``explorer`` or ``none``). [MW]"""
    if policy == "vcc":
        return vcc_limits(ci_g_kwh, e_flex_mwh, headroom_mw, p_flex_min_mw)
    if policy == "explorer":
        return explorer_limits(ci_g_kwh, e_flex_mwh, headroom_mw)
    if policy == "none":
        return flat_limits(e_flex_mwh, len(np.asarray(ci_g_kwh)))
    raise ValueError(f"policy = {policy!r}: unknown; choose vcc, explorer or none")


# -- the forecast ---------------------------------------------------------------------------------
class ForecastParams(SeriesOptions):
    """A signal read ahead from its data file (a perfect forecast).

    Attributes:
        file: the data file; relative paths resolve from the scenario folder.
        column: the column to read. [its unit]
        scale: multiply the column by this (e.g. 1000 for a price in USD/kWh read as USD/MWh). [-]
        time_column, tz, interpolation, align_year, repeat: as in the signals adapter.
    """

    file: DataFile
    column: str
    scale: float = 1.0


def forecast_series(params: ForecastParams, name: str) -> TimeSeries:
    """A :class:`TimeSeries` of the one forecast column, named ``name``."""
    options = SeriesOptions(**params.model_dump(exclude={"file", "column", "scale"}))
    return TimeSeries(params.file, {name: ColumnSpec(column=params.column, scale=params.scale)}, options)


def hourly_forecast(series: TimeSeries, start: datetime, hours: int = HOURS) -> np.ndarray:
    """The forecast at the start of each of the next ``hours`` hours from ``start``."""
    return np.array([float(series.values_at(start + timedelta(hours=h))[0]) for h in range(hours)])


def forecast_problems(params: ForecastParams, name: str, ctx: ScenarioContext) -> list[str]:
    """Why the forecast cannot cover the run plus a day of look-ahead; empty when it can."""
    try:
        series = forecast_series(params, name)
    except (DataError, OSError, ValueError) as exc:
        return [f"forecast: {exc}"]
    return [f"forecast: {p}" for p in series.problems(ctx.start_utc, ctx.end_utc + timedelta(hours=HOURS))]


# -- models ---------------------------------------------------------------------------------
class CapacityParams(Params):
    """Params of one ``Capacity`` controller.

    Attributes:
        policy: ``vcc``, ``explorer`` or ``none`` (see module docstring).
        e_flex_day_mwh: the day's flexible work. [MWh]
        capacity_mw: power the site may draw in any hour. [MW]
        p_inflexible_mw: inflexible load assumed when no ``p_inflexible_mw`` input arrives. [MW]
        p_flex_min_mw: floor of the hourly limit (vcc). [MW]
        forecast: the carbon forecast (see :class:`ForecastParams`).
    """

    policy: Literal["vcc", "explorer", "none"] = "vcc"
    e_flex_day_mwh: float = Field(gt=0)
    capacity_mw: float = Field(gt=0)
    p_inflexible_mw: float = Field(default=0.0, ge=0)
    p_flex_min_mw: float = Field(default=0.0, ge=0)
    forecast: ForecastParams


class FlexLoadParams(Params):
    """Params of one ``FlexLoad``.

    Attributes:
        e_day_mwh: flexible work submitted each day (due within 24 h). [MWh]
        p_max_mw: the most it can draw. [MW]
    """

    e_day_mwh: float = Field(gt=0)
    p_max_mw: float = Field(default=1e9, gt=0)


class CapacityController:
    """Day-ahead plan and hourly limit (no mosaik)."""

    def __init__(self, params: CapacityParams, series: TimeSeries):
        self.p, self.series = params, series
        self.limits_mw = np.zeros(HOURS)
        self.plan_start_s = None

    def step(self, time_s: float, when: datetime, p_inflexible_mw: float | None) -> dict[str, Any]:
        if self.plan_start_s is None or time_s - self.plan_start_s >= HOURS * 3600:
            self.plan_start_s = time_s
            ci = hourly_forecast(self.series, when)
            inflexible = self.p.p_inflexible_mw if p_inflexible_mw is None else p_inflexible_mw
            self.ci = ci
            self.limits_mw = plan(self.p.policy, ci, self.p.e_flex_day_mwh,
                                  self.p.capacity_mw - inflexible, self.p.p_flex_min_mw)
        hour = int((time_s - self.plan_start_s) // 3600)
        return {"p_flex_limit_mw": float(self.limits_mw[hour]), "ci_forecast_g_kwh": float(self.ci[hour]),
                "e_flex_plan_mwh": float(self.limits_mw.sum())}


class FlexLoad:
    """Delay-tolerant work: a daily batch served under a power limit (no mosaik)."""

    def __init__(self, params: FlexLoadParams):
        self.p = params
        self.backlog_mwh = 0.0
        self.served_mwh = 0.0
        self.day_start_s: int | None = None

    def step(self, time_s: float, dt_s: float, p_limit_mw: float | None) -> dict[str, float]:
        if self.day_start_s is None or time_s - self.day_start_s >= HOURS * 3600:
            self.day_start_s = time_s
            self.backlog_mwh += self.p.e_day_mwh
            self.served_mwh = 0.0
        dt_h = dt_s / 3600.0
        limit = self.p.e_day_mwh / HOURS if p_limit_mw is None else max(float(p_limit_mw), 0.0)
        p_mw = min(limit, self.p.p_max_mw, self.backlog_mwh / dt_h)
        self.backlog_mwh -= p_mw * dt_h
        self.served_mwh += p_mw * dt_h
        return {"p_mw": p_mw, "e_backlog_mwh": self.backlog_mwh, "e_served_mwh": self.served_mwh}


class CarbonCapacitySim(CosimSim):
    """Carbon-aware capacity curves (model ``Capacity``) and a flexible-work plant (``FlexLoad``)."""

    META = meta({
        "Capacity": model_meta(inputs=("p_inflexible_mw",),
                               outputs=("p_flex_limit_mw", "ci_forecast_g_kwh", "e_flex_plan_mwh"),
                               params=CapacityParams, role="controller"),
        "FlexLoad": model_meta(inputs=("p_limit_mw",), outputs=("p_mw", "e_backlog_mwh", "e_served_mwh"),
                               params=FlexLoadParams, role="load"),
    })
    ModelParams = {"Capacity": CapacityParams, "FlexLoad": FlexLoadParams}
    EXAMPLE = {"models": {
        "Capacity": {"e_flex_day_mwh": 12.0, "capacity_mw": 1.5,
                     "forecast": {"file": "data/carbon/US-CAL-CISO_2024.csv.gz", "column": "ci_lifecycle_g_kwh",
                                  "align_year": True}},
        "FlexLoad": {"e_day_mwh": 12.0},
    }}

    @classmethod
    def check_entity(cls, model: str, params: BaseModel | None, ctx: ScenarioContext,
                     sim_params: BaseModel | None = None) -> list[str]:
        if model != "Capacity":
            return []
        problems = forecast_problems(params.forecast, "ci_g_kwh", ctx)
        room = params.capacity_mw - params.p_inflexible_mw
        if room * HOURS < params.e_flex_day_mwh:
            problems.append(f"e_flex_day_mwh = {params.e_flex_day_mwh:g} does not fit under capacity_mw - "
                            f"p_inflexible_mw = {room:g} MW over 24 h; raise capacity_mw")
        return problems

    def setup(self) -> None:
        self.entities: dict[str, CapacityController | FlexLoad] = {}

    def create_entity(self, eid: str, model: str, params: BaseModel | None) -> None:
        if model == "Capacity":
            self.entities[eid] = CapacityController(params, forecast_series(params.forecast, "ci_g_kwh"))
        else:
            self.entities[eid] = FlexLoad(params)

    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        for eid, entity in self.entities.items():
            got = inputs.get(eid, {})
            if isinstance(entity, CapacityController):
                self.out[eid] = entity.step(time_s, self.utc(time_s), got.get("p_inflexible_mw"))
            else:
                self.out[eid] = entity.step(time_s, self.step_s, got.get("p_limit_mw"))
