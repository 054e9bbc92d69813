"""Cooling-compute coordination: pre-cool before a peak, cap compute when racks run hot.

Two rules in one controller (the ideas of coordinated cooling and compute management,
e.g. ETCInfer and DataCenterGym; the rules here are this project's, simple and stated):

* **Pre-cooling** before a peak that is known ahead: a daily price peak in
  ``peak_windows_h_utc``, or a demand-response event from the ``dr_events`` adapter
  (connect its ``event_active`` and ``dr_notice_s``: an event in force is a peak, one
  announced to start within ``precool_h`` is a pre-cooling window; the two sources combine,
  a peak winning). In the ``precool_h`` hours before a peak the chilled-water tank charges at ``q_charge_mw``
  and the hall's supply-air setpoint drops by ``dt_precool_k`` (the room and its mass store a
  little cold too). During the peak the tank discharges the hall's measured coil load (up to
  ``q_discharge_max_mw``), so the chillers see little load, and the supply air may float up by
  ``dt_peak_k``. Outside both windows the tank idles at the nominal setpoint.
* **Thermal-aware capping**: when the rack inlet nears ``t_inlet_limit_c`` (ASHRAE TC 9.9's
  recommended 27 °C for class A1), an allowance ``u in [0, 1]`` falls by ``gain_per_k`` per K
  above ``t_inlet_limit_c - margin_k`` each step, and rises by ``release_per_step`` once the
  inlet is ``hysteresis_k`` below that. ``u`` maps linearly onto the per-GPU cap ``p_cap_w``
  and, when ``p_limit_min_mw``/``p_limit_max_mw`` are set, the facility limit ``p_limit_mw``
  (the cluster meets a limit by capping and pausing training). The supply-air setpoint never
  floats up while the capping is active.

Model ``CoolingCoordination``. Inputs ``q_coil_mw`` (the hall's coil load),
``t_rack_inlet_c`` and optionally ``event_active`` and ``dr_notice_s``. Outputs (connect
time shifted): ``q_charge_cmd_mw`` to a ChilledWaterTank, ``t_air_supply_setpoint_c`` to a
DataHall, ``p_cap_w``/``p_limit_mw`` to a Cluster, plus ``allowance_frac`` and ``n_mode``
(0 idle, 1 pre-cooling, 2 peak).

Example ``[entities]`` entry::

    coord = { sim = "ctl", model = "CoolingCoordination", peak_windows_h_utc = [[17.0, 21.0]] }
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, field_validator, model_validator

from cosim.sdk import Params, SingleModelSim, as_tuple

INPUTS = ("q_coil_mw", "t_rack_inlet_c", "event_active", "dr_notice_s")
OUTPUTS = ("q_charge_cmd_mw", "t_air_supply_setpoint_c", "p_cap_w", "p_limit_mw", "allowance_frac", "n_mode")
IDLE, PRECOOL, PEAK = 0, 1, 2


class CoolingCoordinationParams(Params):
    """Params of one ``CoolingCoordination`` entity.

    Attributes:
        peak_windows_h_utc: daily peak windows as ``[start, end)`` UTC hours of day (end <
            start wraps midnight); ``[]`` to follow DR events only. [h]
        precool_h: length of the charging window before each peak. [h]
        q_charge_mw: tank charging rate while pre-cooling. [MW]
        q_discharge_max_mw: largest tank discharge during a peak. [MW]
        t_supply_nominal_c: the hall's normal supply-air setpoint. [°C]
        dt_precool_k, dt_peak_k: setpoint lowered while pre-cooling, raised during a peak. [K]
        precool: run the pre-cooling rule (``false``: tank idle, nominal setpoint).
        t_inlet_limit_c: rack inlet limit. [°C]
        margin_k: start capping this far below the limit. [K]
        hysteresis_k: release once this far below the capping threshold. [K]
        gain_per_k: allowance lost per K above the threshold, per step. [1/K]
        release_per_step: allowance regained per step once cool. [-]
        p_cap_min_w, p_cap_max_w: per-GPU cap at allowance 0 and 1. [W]
        p_limit_min_mw, p_limit_max_mw: facility limit at allowance 0 and 1; unset = none. [MW]
        thermal_capping: run the capping rule (``false``: allowance held at 1).
    """

    peak_windows_h_utc: list[Annotated[tuple[float, float], BeforeValidator(as_tuple)]] = [(17.0, 21.0)]
    precool_h: float = Field(default=4.0, ge=0, le=24)
    q_charge_mw: float = Field(default=1.0, ge=0)
    q_discharge_max_mw: float = Field(default=2.0, ge=0)
    t_supply_nominal_c: float = 22.0
    dt_precool_k: float = Field(default=2.0, ge=0)
    dt_peak_k: float = Field(default=2.0, ge=0)
    precool: bool = True
    t_inlet_limit_c: float = 27.0
    margin_k: float = Field(default=1.0, ge=0)
    hysteresis_k: float = Field(default=1.0, ge=0)
    gain_per_k: float = Field(default=0.1, gt=0)
    release_per_step: float = Field(default=0.02, gt=0, le=1)
    p_cap_min_w: float = Field(default=200.0, gt=0)
    p_cap_max_w: float = Field(default=700.0, gt=0)
    p_limit_min_mw: float | None = Field(default=None, ge=0)
    p_limit_max_mw: float | None = Field(default=None, gt=0)
    thermal_capping: bool = True

    @field_validator("peak_windows_h_utc")
    @classmethod
    def _hours(cls, windows):
        for start, end in windows:
            if not (0 <= start < 24 and 0 <= end <= 24) or start == end:
                raise ValueError(f"peak window [{start:g}, {end:g}]: hours must lie in [0, 24] and differ")
        return windows

    @model_validator(mode="after")
    def _ranges(self):
        if self.p_cap_min_w > self.p_cap_max_w:
            raise ValueError(f"p_cap_min_w = {self.p_cap_min_w:g} is above p_cap_max_w = {self.p_cap_max_w:g}")
        if (self.p_limit_min_mw is None) != (self.p_limit_max_mw is None):
            raise ValueError("set both p_limit_min_mw and p_limit_max_mw, or neither (no facility limit)")
        if self.p_limit_min_mw is not None and self.p_limit_min_mw > self.p_limit_max_mw:
            raise ValueError(f"p_limit_min_mw = {self.p_limit_min_mw:g} is above p_limit_max_mw = "
                             f"{self.p_limit_max_mw:g}")
        return self


def _inside(hour: float, start: float, end: float) -> bool:
    return start <= hour < end if start < end else (hour >= start or hour < end)


def event_mode(event_active: Any, dr_notice_s: float | None, precool_h: float) -> int:
    """``PEAK`` while a DR event is in force, ``PRECOOL`` once one is announced within ``precool_h``."""
    if event_active:
        return PEAK
    if dr_notice_s is not None and not math.isnan(dr_notice_s) and 0 < dr_notice_s <= precool_h * 3600.0:
        return PRECOOL
    return IDLE


def mode_at(hour_utc: float, windows: list[tuple[float, float]], precool_h: float) -> int:
    """``PEAK`` inside a window, ``PRECOOL`` in the ``precool_h`` hours before one, else ``IDLE``."""
    if any(_inside(hour_utc, s, e) for s, e in windows):
        return PEAK
    if precool_h > 0 and any(_inside(hour_utc, (s - precool_h) % 24.0, s) for s, _ in windows):
        return PRECOOL
    return IDLE


class CoolingCoordinator:
    """Both rules, stepped with the hour of day and the measurements (plain Python).

    Args:
        params: schedule, tank rates, setpoints and capping settings.
    """

    def __init__(self, params: CoolingCoordinationParams):
        self.p = params
        self.allowance = 1.0

    def update_allowance(self, t_inlet_c: float | None) -> float:
        """Move the capping allowance for the rack inlet temperature and return it. [°C -> -]"""
        p = self.p
        if not p.thermal_capping:
            self.allowance = 1.0
        elif t_inlet_c is not None and not math.isnan(t_inlet_c):
            excess_k = t_inlet_c - (p.t_inlet_limit_c - p.margin_k)
            if excess_k > 0:
                self.allowance -= p.gain_per_k * excess_k
            elif excess_k < -p.hysteresis_k:
                self.allowance += p.release_per_step
            self.allowance = min(max(self.allowance, 0.0), 1.0)
        return self.allowance

    def step(self, hour_utc: float, q_coil_mw: float | None, t_inlet_c: float | None,
             event_active: Any = None, dr_notice_s: float | None = None) -> dict[str, Any]:
        """Setpoints for one step at UTC hour ``hour_utc`` (DR inputs optional)."""
        p = self.p
        u = self.update_allowance(t_inlet_c)
        mode = IDLE
        if p.precool:
            mode = max(mode_at(hour_utc, p.peak_windows_h_utc, p.precool_h),
                       event_mode(event_active, dr_notice_s, p.precool_h))
        charge, setpoint = 0.0, p.t_supply_nominal_c
        if mode == PRECOOL:
            charge, setpoint = p.q_charge_mw, p.t_supply_nominal_c - p.dt_precool_k
        elif mode == PEAK:
            charge = -min(max(q_coil_mw or 0.0, 0.0), p.q_discharge_max_mw)
            if u >= 1.0:  # never float the air up while racks are being protected
                setpoint = p.t_supply_nominal_c + p.dt_peak_k
        limit = math.nan if p.p_limit_min_mw is None else p.p_limit_min_mw + u * (p.p_limit_max_mw - p.p_limit_min_mw)
        return {"q_charge_cmd_mw": charge, "t_air_supply_setpoint_c": setpoint,
                "p_cap_w": p.p_cap_min_w + u * (p.p_cap_max_w - p.p_cap_min_w), "p_limit_mw": limit,
                "allowance_frac": u, "n_mode": mode}


class CoolingCoordinationSim(SingleModelSim):
    """Pre-cooling and thermal-aware capping (model ``CoolingCoordination``)."""

    MODEL, PARAMS, ROLE, PHYSICS = ("CoolingCoordination", CoolingCoordinationParams, "controller",
                                    CoolingCoordinator)
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {"models": {"CoolingCoordination": {"peak_windows_h_utc": [[17.0, 21.0]]}}}

    def advance(self, coord: CoolingCoordinator, time_s: int, inputs: dict[str, Any]) -> dict[str, Any]:
        when = self.utc(time_s)
        hour = when.hour + when.minute / 60.0 + when.second / 3600.0
        q_coil, t_inlet = inputs.get("q_coil_mw"), inputs.get("t_rack_inlet_c")
        notice = inputs.get("dr_notice_s")
        return coord.step(hour, None if q_coil is None else float(q_coil),
                          None if t_inlet is None else float(t_inlet),
                          inputs.get("event_active"), None if notice is None else float(notice))
