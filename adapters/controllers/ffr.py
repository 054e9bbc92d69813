"""Fast frequency response (FFR) from a datacenter and its battery, on the system frequency.

Reads ``f_hz`` (connect it time-shifted from a balancing ``Area``, adapters/frequency.py) and
the site's power ``p_mw`` (the Cluster's), and commands a response ``p_ffr_mw`` from the
battery first (``p_set_mw`` = −response up to ``battery_mw``: discharge, consumer sign) and the
rest from the datacenter (``p_limit_mw`` = its power at the trigger minus the rest, up to
``dc_mw``: the cluster caps its GPUs within the step; ``p_limit_idle_mw`` while idle).

* ``mode = "trigger"`` (ERCOT-style FFR, NPRR 863): below ``f_trigger_hz`` the full response
  ramps in over ``ramp_s`` (0.25 s = 15 cycles at 60 Hz: ERCOT's FFR responds within 15 cycles
  and holds 15 minutes) and is held ``hold_s`` (900 s), then released; it re-arms once the
  frequency is back above the trigger. The default trigger 59.85 Hz is ERCOT's current FFR
  setting *as we recall it* (the rejected NPRR 828 proposed 59.8 Hz); check the Nodal Protocols.
* ``mode = "droop"``: proportional, ``p_ffr_mw · clip((f0 − deadband_hz − f) / droop_full_hz, 0, 1)``:
  full response ``droop_full_hz`` below the deadband (no hold).

The cost of the datacenter's part is the work its capped GPUs do not do (the Cluster's
``slowdown_gpu_h``); the battery's is its energy. Outputs: ``p_ffr_mw`` (commanded),
``p_set_mw``, ``p_limit_mw``, ``event_active``.

Example ``[entities]`` entry::

    ffr = { sim = "ctl", model = "Ffr", battery_mw = 50.0, dc_mw = 100.0 }
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from cosim.sdk import Params, SingleModelSim

OUTPUTS = ("p_ffr_mw", "p_set_mw", "p_limit_mw", "event_active")


class FfrParams(Params):
    """Params of one ``Ffr`` (see the module docstring).

    Attributes:
        mode: ``trigger`` or ``droop``.
        battery_mw: response from the battery (first). [MW]
        dc_mw: response from the datacenter's power cap (the rest). [MW]
        f_nominal_hz: nominal frequency. [Hz]
        f_trigger_hz: trigger of ``trigger`` mode. [Hz]
        ramp_s: time to the full response after the trigger. [s]
        hold_s: how long the response is held. [s]
        deadband_hz, droop_full_hz: ``droop`` mode. [Hz]
        p_limit_idle_mw: ``p_limit_mw`` while no response is asked (never binding). [MW]
        enabled: false: never responds.
    """

    TIME_CONSTANTS = ('ramp_s',)

    mode: Literal["trigger", "droop"] = "trigger"
    battery_mw: float = Field(default=0.0, ge=0)
    dc_mw: float = Field(default=0.0, ge=0)
    f_nominal_hz: float = Field(default=60.0, gt=0)
    f_trigger_hz: float = Field(default=59.85, gt=0)
    ramp_s: float = Field(default=0.25, ge=0)
    hold_s: float = Field(default=900.0, gt=0)
    deadband_hz: float = Field(default=0.036, ge=0)
    droop_full_hz: float = Field(default=0.5, gt=0)
    p_limit_idle_mw: float = Field(default=1e6, gt=0)
    enabled: bool = True


class Ffr:
    """The response state (plain Python)."""

    def __init__(self, p: FfrParams):
        self.p = p
        self.t_trigger_s: float | None = None
        self.p_ref_mw: float | None = None
        self.armed = True

    def _share(self, time_s: float, f_hz: float) -> float:
        """The response as a share of ``battery_mw + dc_mw``. [-]"""
        p = self.p
        if p.mode == "droop":
            return min(max((p.f_nominal_hz - p.deadband_hz - f_hz) / p.droop_full_hz, 0.0), 1.0)
        if self.t_trigger_s is None and self.armed and f_hz < p.f_trigger_hz:
            self.t_trigger_s, self.armed = time_s, False
        if self.t_trigger_s is None:
            self.armed = self.armed or f_hz >= p.f_trigger_hz
            return 0.0
        since = time_s - self.t_trigger_s
        if since >= p.hold_s:
            self.t_trigger_s = None
            return 0.0
        return 1.0 if p.ramp_s <= 0 else min(1.0, since / p.ramp_s)

    def step(self, time_s: float, f_hz: float | None, p_mw: float | None) -> dict[str, Any]:
        p = self.p
        share = self._share(time_s, f_hz) if (p.enabled and f_hz is not None) else 0.0
        total = share * (p.battery_mw + p.dc_mw)
        battery = min(total, p.battery_mw)
        dc = total - battery
        if dc <= 0:
            self.p_ref_mw = p_mw  # the datacenter's power before its response
            limit = p.p_limit_idle_mw
        else:
            limit = max((self.p_ref_mw if self.p_ref_mw is not None else p_mw or 0.0) - dc, 0.0)
        return {"p_ffr_mw": total, "p_set_mw": -battery, "p_limit_mw": limit, "event_active": total > 0}


class FfrSim(SingleModelSim):
    """Fast-frequency-response controllers (model ``Ffr``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "Ffr", FfrParams, "controller", Ffr
    INPUTS, OUTPUTS = ("f_hz", "p_mw"), OUTPUTS
    EXAMPLE = {"models": {"Ffr": {"battery_mw": 1.0, "dc_mw": 2.0}}}

    def advance(self, ffr: Ffr, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        f_hz, p_mw = inputs.get("f_hz"), inputs.get("p_mw")
        return ffr.step(float(time_s), None if f_hz is None else float(f_hz), None if p_mw is None else float(p_mw))
