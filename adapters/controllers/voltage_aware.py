"""Voltage-aware coordination (OpenG2G-style): throttle a datacenter while its feeder sags.

The idea of GPU-to-Grid (arXiv:2602.05116, 2026) and its simulation platform OpenG2G
(arXiv:2605.05519, 2026): inference batch size is a fast knob on GPU power, so a datacenter
can regulate the voltages its own draw depresses; less power relieves under-voltage, more
power relieves over-voltage. They solve it by online feedback optimization; this is a
simpler rule with the same inputs and knobs, stated here in full.

A feedback controller reads bus voltages from the grid and turns the datacenter's compute
down only as far as needed to keep them inside ``[v_low_pu, v_high_pu]`` (default
[0.95, 1.05] pu, ANSI C84.1 range A). Its state is one number, the *allowance*
``u in [u_min_frac, 1]`` (1 = unthrottled), moved each step by an integral law with a
deadband:

    e = vm_min - (v_low + margin)
    e < 0 (too low):               u <- u + gain_down * e
    e > deadband (room to spare):  u <- u + gain_up * (e - deadband)
    vm_max > v_high:               u <- u + gain_up * (vm_max - v_high)

(less load raises voltages, so an over-voltage releases the throttle; it never pushes the
draw above the unthrottled workload's). Gains are in
allowance per pu of error per step: with a bus that moves ``s`` pu over the whole throttle
range the loop gain is ``gain * s``, stable below 2 and smooth below ~0.5.

The allowance maps linearly onto the knobs the datacenter takes (connect the ones wanted,
time shifted): ``n_batch_max`` between ``n_batch_min`` and ``n_batch_max`` (inference batch
size, the OpenG2G lever), ``p_cap_w`` between ``p_cap_min_w`` and ``p_cap_max_w`` (per-GPU
power), and ``p_limit_mw`` between ``p_limit_min_mw`` and ``p_limit_max_mw`` (facility
limit; NaN = no limit when those are not set).

Model ``VoltageAware``. Inputs ``vm_min_pu`` (connect the grid's ``vm_min_pu``, or one bus's
``bus_<id>_vm_pu`` renamed) and optional ``vm_max_pu``; one source each (several would be
summed). Outputs the knobs, ``allowance_frac`` and ``throttle_frac = 1 - allowance_frac``.

Example ``[entities]`` entry::

    vctl = { sim = "ctl", model = "VoltageAware", p_cap_min_w = 250.0, n_batch_min = 8 }
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from cosim.adapters.controllers._campus_knobs import CampusKnobParams
from cosim.sdk import SingleModelSim

INPUTS = ("vm_min_pu", "vm_max_pu")
OUTPUTS = ("n_batch_max", "p_cap_w", "p_limit_mw", "allowance_frac", "throttle_frac")


class VoltageAwareParams(CampusKnobParams):
    """Params of one ``VoltageAware`` entity.

    Attributes:
        v_low_pu, v_high_pu: the band to hold. [pu]
        margin_pu: aim this far inside the lower edge. [pu]
        deadband_pu: no release until the voltage is this far above the aim. [pu]
        gain_down_per_pu, gain_up_per_pu: integral gains, throttling and releasing. [1/pu]
        u_min_frac: the lowest allowance (keeps a floor of service). [-]
        n_batch_min, n_batch_max: batch cap at allowance 0 and 1. [-]
        p_cap_min_w, p_cap_max_w: per-GPU cap at allowance 0 and 1 (H100: 200-700 W). [W]
        p_limit_min_mw, p_limit_max_mw: facility limit at allowance 0 and 1; unset = none. [MW]
        enabled: ``false`` holds the allowance at 1 (the no-control baseline).
    """

    margin_pu: float = Field(default=0.003, ge=0)
    deadband_pu: float = Field(default=0.005, ge=0)
    gain_down_per_pu: float = Field(default=40.0, gt=0)
    gain_up_per_pu: float = Field(default=10.0, gt=0)
    enabled: bool = True


class VoltageController:
    """The integral law on the allowance (plain Python).

    Args:
        params: band, gains and knob ranges.
    """

    def __init__(self, params: VoltageAwareParams):
        self.p = params
        self.allowance = 1.0

    def update(self, vm_min_pu: float | None, vm_max_pu: float | None = None) -> float:
        """Move the allowance for the measured voltages and return it. [pu -> -]"""
        p = self.p
        if not p.enabled:
            self.allowance = 1.0
            return 1.0
        if vm_min_pu is not None and not math.isnan(vm_min_pu):
            error = vm_min_pu - (p.v_low_pu + p.margin_pu)
            if error < 0:
                self.allowance += p.gain_down_per_pu * error
            elif error > p.deadband_pu:
                self.allowance += p.gain_up_per_pu * (error - p.deadband_pu)
        if vm_max_pu is not None and not math.isnan(vm_max_pu) and vm_max_pu > p.v_high_pu:
            self.allowance += p.gain_up_per_pu * (vm_max_pu - p.v_high_pu)
        self.allowance = min(max(self.allowance, p.u_min_frac), 1.0)
        return self.allowance

    def knobs(self) -> dict[str, float]:
        """The datacenter knobs at the current allowance."""
        p, u = self.p, self.allowance
        limit = math.nan if p.p_limit_min_mw is None else p.p_limit_min_mw + u * (p.p_limit_max_mw - p.p_limit_min_mw)
        return {"n_batch_max": float(round(p.n_batch_min + u * (p.n_batch_max - p.n_batch_min))),
                "p_cap_w": p.p_cap_min_w + u * (p.p_cap_max_w - p.p_cap_min_w),
                "p_limit_mw": limit, "allowance_frac": u, "throttle_frac": 1.0 - u}


class VoltageAwareSim(SingleModelSim):
    """Voltage-aware datacenter throttling (model ``VoltageAware``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "VoltageAware", VoltageAwareParams, "controller", VoltageController
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {"models": {"VoltageAware": {"p_cap_min_w": 250.0}}}

    def advance(self, ctl: VoltageController, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        ctl.update(_number(inputs.get("vm_min_pu")), _number(inputs.get("vm_max_pu")))
        return ctl.knobs()


def _number(value: Any) -> float | None:
    return None if value is None else float(value)
