"""Battery dispatch: peak shaving against a demand-charge threshold, and price-/carbon-aware arbitrage.

Writes ``p_set_mw`` (consumer sign: > 0 charges) to a ``battery`` entity in
``mode = "setpoint"`` over a time-shifted edge, so the setpoint computed at ``t`` is the one
the battery follows over ``[t + step_s, t + 2 step_s)``.

Mode ``peak_shave``. Inputs ``p_load_mw`` (site consumption, consumer sign; several sources
are summed) and ``p_gen_mw`` (on-site generation, generator sign) give the net draw
``net = load - gen``, taken as the forecast of the next step (persistence). With the target
``p_target = p_threshold_mw - margin_mw``:

* ``net > p_target``: discharge ``net - p_target`` (the battery clips to its limits);
* otherwise, below ``soc_target_frac``: recharge from the grid with the room left,
  ``min(p_charge_max_mw, p_target - net)``, so charging never sets a new peak.

Demand charges bill the highest 15-minute average import of the month; keeping every step
under the threshold keeps that average under it. Reported: ``p_net_mw`` (the net draw
before the battery), ``p_over_threshold_mw = max(net + p_battery - p_threshold, 0)`` with the
battery's actual ``p_battery_mw`` (what the threshold could not hold, e.g. an empty
battery) and its running energy ``e_over_threshold_mwh``.

Mode ``arbitrage``. At the run start and every 24 h after (hourly slots from the run's
start), from a signal read ahead from
its data file (``forecast``; a perfect day-ahead forecast of a price [USD/MWh] or a carbon
intensity [g/kWh]) and the battery's SoC, a linear programme (scipy ``linprog``, HiGHS)
plans hourly charge ``c_h`` and discharge ``d_h``::

    minimise   Σ_h s_h (c_h - d_h) · 1 h
    subject to e_h = e_{h-1} + η_c c_h - d_h / η_d,   e_min <= e_h <= e_max,
               0 <= c_h <= P_c,  0 <= d_h <= P_d,   e_23 >= e_start

(cell energy ``e``; ending the day no emptier than it started keeps the plan from selling
the stored energy once). With ``s`` the price the battery buys low and sells high; with
``s`` the carbon intensity it moves the site's draw to clean hours. A ``p_threshold_mw``,
when set, also caps charging in real time so arbitrage never makes a new peak.

The battery's ratings are repeated in the params (the controller cannot read the other
simulator's params): keep them equal to the battery entity's.

Example ``[entities]`` entry::

    dispatch = { sim = "ctl", model = "Dispatcher", mode = "peak_shave", p_threshold_mw = 2.2,
                 e_capacity_mwh = 2.0, p_charge_max_mw = 0.5, p_discharge_max_mw = 0.5 }
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator
from scipy.optimize import linprog

from cosim.sdk import Params, ScenarioContext, SingleModelSim
from cosim.adapters.battery import BatteryRatings
from cosim.adapters.controllers.carbon_capacity import (
    HOURS, ForecastParams, forecast_problems, forecast_series, hourly_forecast,
)

INPUTS = ("p_load_mw", "p_gen_mw", "p_battery_mw", "soc_frac")
OUTPUTS = ("p_set_mw", "p_net_mw", "p_over_threshold_mw", "e_over_threshold_mwh", "price_forecast_usd_mwh",
           "ci_forecast_g_kwh")
#: Output reporting the planned hour's signal, by ``signal`` kind.
SIGNAL_OUTPUT = {"price": "price_forecast_usd_mwh", "carbon": "ci_forecast_g_kwh"}


class DispatchParams(BatteryRatings):
    """Params of one ``Dispatcher``: the battery's ratings (:class:`adapters.battery.BatteryRatings`,
    give the same values as the Battery entity) plus

    Attributes:
        mode: ``peak_shave`` or ``arbitrage``.
        p_threshold_mw: peak-shaving threshold on the site's import (also caps arbitrage charging). [MW]
        margin_mw: aim this far under the threshold (the load moves within a step). [MW]
        soc_target_frac: peak shaving recharges up to this SoC. [-]
        forecast: the arbitrage signal (price in USD/MWh or carbon intensity in g/kWh).
        signal: what the forecast is, ``price`` or ``carbon`` (names the reported output).
    """

    mode: Literal["peak_shave", "arbitrage"] = "peak_shave"
    p_threshold_mw: float | None = None
    margin_mw: float = Field(default=0.0, ge=0)
    soc_target_frac: float = Field(default=0.9, ge=0, le=1)
    forecast: ForecastParams | None = None
    signal: Literal["price", "carbon"] = "price"

    @model_validator(mode="after")
    def _needs(self):
        if self.mode == "peak_shave" and self.p_threshold_mw is None:
            raise ValueError("mode = 'peak_shave' needs p_threshold_mw (the import to stay under) [MW]")
        if self.mode == "arbitrage" and self.forecast is None:
            raise ValueError("mode = 'arbitrage' needs forecast = { file = ..., column = ... } (price or carbon)")
        return self


def arbitrage_plan(signal, e_start_mwh: float, p: DispatchParams) -> np.ndarray:
    """Hourly setpoints (consumer sign) minimising Σ signal·(charge - discharge). [MW]

    Raises:
        ValueError: the programme has no solution (cannot happen with a feasible start).
    """
    s = np.asarray(signal, float)
    n = len(s)
    e_min, e_max = p.soc_min_frac * p.e_capacity_mwh, p.soc_max_frac * p.e_capacity_mwh
    e_start = min(max(e_start_mwh, e_min), e_max)
    # variables x = [c_0..c_n-1, d_0..d_n-1]; e_h = e_start + Σ_{k<=h} (η_c c_k - d_k / η_d)
    lower = np.tril(np.ones((n, n)))
    gain = np.hstack([lower * p.eta_charge_frac, -lower / p.eta_discharge_frac])
    a_ub = np.vstack([gain, -gain, -gain[-1:]])
    b_ub = np.concatenate([np.full(n, e_max - e_start), np.full(n, e_start - e_min), [0.0]])
    cost = np.concatenate([s, -s]) + 1e-6  # a hair of cost on throughput: no charging while discharging
    bounds = [(0, p.p_charge_max_mw)] * n + [(0, p.p_discharge_max_mw)] * n
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if not res.success:
        raise ValueError(f"arbitrage plan failed: {res.message}")
    return res.x[:n] - res.x[n:]


def peak_shave_setpoint(net_mw: float, soc_frac: float | None, p: DispatchParams) -> float:
    """The peak-shaving setpoint for a net draw ``net_mw`` (consumer sign). [MW]"""
    target = p.p_threshold_mw - p.margin_mw
    if net_mw > target:
        return -min(net_mw - target, p.p_discharge_max_mw)
    if soc_frac is not None and soc_frac >= p.soc_target_frac:
        return 0.0
    return min(p.p_charge_max_mw, target - net_mw)


class Dispatcher:
    """Battery dispatch state (no mosaik). See the module docstring."""

    def __init__(self, params: DispatchParams, step_s: float, series=None):
        self.p, self.step_s, self.series = params, float(step_s), series
        self.plan_mw = np.zeros(HOURS)
        self.signal = np.zeros(HOURS)
        self.plan_start_s: float | None = None
        self.e_over_mwh = 0.0

    def step(self, time_s: float, when, m: dict[str, Any]) -> dict[str, Any]:
        """One step at ``time_s`` [s] (UTC ``when``; peak shaving does not read it, None will do)
        with the measurements ``m``: the setpoint and what it was computed from."""
        p = self.p
        net = float(m.get("p_load_mw", 0.0)) - float(m.get("p_gen_mw", 0.0))
        soc = m.get("soc_frac")
        over = None
        if p.p_threshold_mw is not None:
            over = max(net + float(m.get("p_battery_mw", 0.0)) - p.p_threshold_mw, 0.0)
            self.e_over_mwh += over * self.step_s / 3600.0
        signal = None
        if p.mode == "peak_shave":
            p_set = peak_shave_setpoint(net, soc, p)
        else:
            apply_s = time_s + self.step_s  # the setpoint applies over the next step
            if self.plan_start_s is None or apply_s - self.plan_start_s >= HOURS * 3600:
                start_s = time_s if self.plan_start_s is None else self.plan_start_s + HOURS * 3600
                self._plan(start_s, when - timedelta(seconds=time_s - start_s), soc)
            hour = int((apply_s - self.plan_start_s) // 3600)
            p_set, signal = float(self.plan_mw[hour]), float(self.signal[hour])
            if p.p_threshold_mw is not None and p_set > 0:
                p_set = max(min(p_set, p.p_threshold_mw - p.margin_mw - net), 0.0)
        out = {"p_set_mw": p_set, "p_net_mw": net, "p_over_threshold_mw": over,
               "e_over_threshold_mwh": self.e_over_mwh if over is not None else None,
               "price_forecast_usd_mwh": None, "ci_forecast_g_kwh": None}
        out[SIGNAL_OUTPUT[p.signal]] = signal
        return out

    def _plan(self, start_s: float, start_utc, soc: float | None) -> None:
        """Plan the 24 h from ``start_s`` (clock hours of the run) from the SoC now."""
        self.plan_start_s = start_s
        self.signal = hourly_forecast(self.series, start_utc)
        soc = self.p.soc_init_frac if soc is None else float(soc)
        self.plan_mw = arbitrage_plan(self.signal, soc * self.p.e_capacity_mwh, self.p)


class BatteryDispatchSim(SingleModelSim):
    """Battery dispatchers (model ``Dispatcher``)."""

    MODEL, PARAMS, ROLE = "Dispatcher", DispatchParams, "controller"
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {"models": {"Dispatcher": {"p_threshold_mw": 2.0, "e_capacity_mwh": 2.0, "p_charge_max_mw": 0.5,
                                         "p_discharge_max_mw": 0.5}}}

    @classmethod
    def check_entity(cls, model: str, params: BaseModel | None, ctx: ScenarioContext,
                     sim_params: BaseModel | None = None) -> list[str]:
        if params is None or params.forecast is None:
            return []
        return forecast_problems(params.forecast, "signal", ctx)

    def build(self, eid: str, params: DispatchParams) -> Dispatcher:
        series = forecast_series(params.forecast, "signal") if params.forecast else None
        return Dispatcher(params, self.step_s, series)

    def advance(self, dispatcher: Dispatcher, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        # peak shaving reads no clock time: no datetime to build at its steps
        when = None if dispatcher.p.mode == "peak_shave" else self.utc(time_s)
        return dispatcher.step(time_s, when, inputs)
