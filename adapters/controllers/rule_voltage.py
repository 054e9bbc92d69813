"""Rule-based voltage controller (OpenG2G-style): one uniform batch-size nudge from the all-bus extremes.

OpenG2G's ``RuleBasedController`` (gpu2grid/openg2g, ``openg2g/controller/rule_based.py``; the
baseline controller of GPU-to-Grid, arXiv:2602.05116): each control step it takes the worst
under-voltage ``v_low - v_min`` and the worst over-voltage ``v_max - v_high`` over the monitored
bus-phases and moves the datacenter's batch size, in log2 steps, by ``step_size`` per pu:

    under = v_low - vm_min,  over = vm_max - v_high
    under > deadband:        x <- x - step_log2_per_pu * under      (less load: voltages rise)
    elif over > deadband:    x <- x + step_log2_per_pu * over       (more load: voltages fall)
    x clamped to [log2 n_batch_min, log2 n_batch_max];  n_batch_max = 2**round(x)

(OpenG2G's class defaults: 10 log2 per pu, deadband 0.001 pu; its documented CLI defaults
0.3 / 0.005.) Two additions, both off unless set, for a site that must recover after a sag:

* ``release_above_pu``: when neither limit is violated and ``vm_min`` is above it (and
  ``vm_max`` below ``v_high - deadband``), step back up at ``release_log2_per_s`` (log2 per second).
* ``hold_s``: after a change the state holds this long before the next one (switching
  hysteresis in time, as a tap changer's delay).

``latency_guard`` (OpenG2G's): an increase is refused while the connected ``itl_p99_ms`` is
above ``itl_deadline_ms``. The same normalised level ``level_frac = (x - x_min)/(x_max - x_min)``
also sets ``p_cap_w`` between ``p_cap_min_w`` and ``p_cap_max_w`` (connect it to cap GPUs too).

Model ``RuleVoltage``. Inputs ``vm_min_pu``, ``vm_max_pu`` (connect the grid's
``allbus_vm_min_pu`` / ``allbus_vm_max_pu``, renamed) and optional ``itl_p99_ms``. Outputs
``n_batch_max``, ``p_cap_w``, ``level_frac``, ``n_changes`` (state changes so far) and
``exhausted_frac`` (1 while the commanded batch is ``n_batch_min``, or, during an over-voltage,
``n_batch_max``: OpenG2G's "saturated", the site's own control has run out in the direction it
would need; judged before the step's move; :mod:`.load_shift` reads it).

Example ``[entities]`` entry::

    rule = { sim = "ctl", model = "RuleVoltage", step_log2_per_pu = 10.0, n_batch_min = 8 }
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, model_validator

from cosim.sdk import Params, SingleModelSim

INPUTS = ("vm_min_pu", "vm_max_pu", "itl_p99_ms")
OUTPUTS = ("n_batch_max", "p_cap_w", "level_frac", "n_changes", "exhausted_frac")


class RuleVoltageParams(Params):
    """Params of one ``RuleVoltage`` entity.

    Attributes:
        v_low_pu, v_high_pu: the band. [pu]
        deadband_pu: violations up to this size are ignored. [pu]
        step_log2_per_pu: log2(batch) moved per pu of violation per step. [1/pu]
        n_batch_min, n_batch_max: the batch range (powers of two are commanded). [-]
        n_batch_initial: the starting batch cap; default ``n_batch_max``. [-]
        p_cap_min_w, p_cap_max_w: per-GPU cap at level 0 and 1. [W]
        release_above_pu: step back up while vm_min is above this and nothing violates; None = never. [pu]
        release_log2_per_s: rate of a release, log2(batch) per second. [1/s]
        hold_s: time between state changes. [s]
        latency_guard: refuse increases while itl_p99_ms > itl_deadline_ms.
        itl_deadline_ms: the ITL deadline of the guard. [ms]
        enabled: ``false`` holds the initial batch (the no-control baseline).
    """

    v_low_pu: float = Field(default=0.95, gt=0)
    v_high_pu: float = Field(default=1.05, gt=0)
    deadband_pu: float = Field(default=0.001, ge=0)
    step_log2_per_pu: float = Field(default=10.0, gt=0)
    n_batch_min: float = Field(default=8.0, ge=1)
    n_batch_max: float = Field(default=512.0, ge=1)
    n_batch_initial: float | None = Field(default=None, ge=1)
    p_cap_min_w: float = Field(default=200.0, gt=0)
    p_cap_max_w: float = Field(default=700.0, gt=0)
    release_above_pu: float | None = Field(default=None, gt=0)
    release_log2_per_s: float = Field(default=0.25, gt=0)
    hold_s: float = Field(default=0.0, ge=0)
    latency_guard: bool = True
    itl_deadline_ms: float = Field(default=100.0, gt=0)
    enabled: bool = True

    @model_validator(mode="after")
    def _ranges(self):
        for low, high in (("v_low_pu", "v_high_pu"), ("n_batch_min", "n_batch_max"), ("p_cap_min_w", "p_cap_max_w")):
            if getattr(self, low) > getattr(self, high):
                raise ValueError(f"{low} = {getattr(self, low):g} is above {high} = {getattr(self, high):g}")
        if self.release_above_pu is not None and not self.v_low_pu <= self.release_above_pu < self.v_high_pu:
            raise ValueError(f"release_above_pu = {self.release_above_pu:g} is outside [v_low_pu, v_high_pu) = "
                             f"[{self.v_low_pu:g}, {self.v_high_pu:g}): below v_low_pu it would raise the batch during "
                             "an under-voltage")
        if self.n_batch_initial is not None and not self.n_batch_min <= self.n_batch_initial <= self.n_batch_max:
            raise ValueError(f"n_batch_initial = {self.n_batch_initial:g} is outside "
                             f"[n_batch_min, n_batch_max] = [{self.n_batch_min:g}, {self.n_batch_max:g}]")
        return self


class RuleController:
    """The rule on the log2 batch state (plain Python).

    Args:
        params: band, step and ranges.
    """

    def __init__(self, params: RuleVoltageParams):
        self.p = params
        self.x_min, self.x_max = math.log2(params.n_batch_min), math.log2(params.n_batch_max)
        self.x = math.log2(params.n_batch_initial or params.n_batch_max)
        self.n_changes = 0
        self.exhausted = False
        self._last_change_s = -math.inf

    def update(self, time_s: float, vm_min_pu: float | None, vm_max_pu: float | None,
               itl_p99_ms: float | None = None, dt_s: float = 1.0) -> float:
        """Apply the rule for the measured extremes at ``time_s`` (control step ``dt_s``); return the
        log2 state. [s, pu, pu, ms, s -> -]"""
        p = self.p
        under = p.v_low_pu - vm_min_pu if _finite(vm_min_pu) else -math.inf
        over = vm_max_pu - p.v_high_pu if _finite(vm_max_pu) else -math.inf
        over_now = over > p.deadband_pu and not under > p.deadband_pu
        batch = self.batch()
        self.exhausted = batch >= p.n_batch_max if over_now else batch <= p.n_batch_min
        if not p.enabled or time_s - self._last_change_s < p.hold_s - 1e-9:
            return self.x
        if under > p.deadband_pu:
            target = self.x - p.step_log2_per_pu * under
        elif over > p.deadband_pu:
            target = self.x + p.step_log2_per_pu * over
        elif (p.release_above_pu is not None and _finite(vm_min_pu) and vm_min_pu > p.release_above_pu
              and not over > -p.deadband_pu):
            target = self.x + p.release_log2_per_s * dt_s
        else:
            return self.x
        if target > self.x and p.latency_guard and _finite(itl_p99_ms) and itl_p99_ms > p.itl_deadline_ms:
            return self.x
        target = min(max(target, self.x_min), self.x_max)
        if target != self.x:
            self.x = target
            self.n_changes += 1
            self._last_change_s = time_s
        return self.x

    def batch(self) -> float:
        """The commanded batch cap: the nearest power of two in log2, within the range. [-]"""
        return float(min(max(2.0 ** round(self.x), self.p.n_batch_min), self.p.n_batch_max))

    def knobs(self) -> dict[str, float]:
        """The datacenter knobs at the current state."""
        p = self.p
        batch = self.batch()
        level = 1.0 if self.x_max == self.x_min else (self.x - self.x_min) / (self.x_max - self.x_min)
        return {"n_batch_max": float(batch), "p_cap_w": p.p_cap_min_w + level * (p.p_cap_max_w - p.p_cap_min_w),
                "level_frac": level, "n_changes": self.n_changes, "exhausted_frac": float(self.exhausted)}


class RuleVoltageSim(SingleModelSim):
    """Rule-based all-bus voltage control of a datacenter's batch size (model ``RuleVoltage``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "RuleVoltage", RuleVoltageParams, "controller", RuleController
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {"models": {"RuleVoltage": {"n_batch_min": 8.0, "release_above_pu": 0.96}}}

    def advance(self, ctl: RuleController, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        ctl.update(time_s, _number(inputs.get("vm_min_pu")), _number(inputs.get("vm_max_pu")),
                   _number(inputs.get("itl_p99_ms")), dt_s=float(self.step_s))
        return ctl.knobs()


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
