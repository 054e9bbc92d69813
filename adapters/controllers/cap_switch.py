"""Capacitor switching: a voltage-controlled (or scheduled) switched shunt capacitor bank.

The rule is OpenDSS's ``CapControl`` in voltage mode (EPRI, OpenDSS documentation,
``CapControl``: ``Type=voltage``, ``ON``/``OFF`` settings and ``Delay``/``DelayOFF``), kept
outside the grid so the decision is a signal in the co-simulation (recorded, replaceable by
another controller):

    v < on_below_pu  for delay_s:    close one more step  (a capacitor raises its bus voltage)
    v > off_above_pu for delay_off_s: open one step
    otherwise the timers restart

with ``on_below_pu < off_above_pu`` (the dead band that stops hunting). With ``schedule``
given the bank follows it instead (entries ``{at_s, n_steps}``, later entries win; the
voltage input is then ignored), e.g. a bank switched in for an evening peak.

Connect the output ``n_steps_closed`` to the grid's ``cap_<id>_set_count`` (OpenDSS engine;
renamed, time-shifted since the voltage comes back from the grid) and a bus voltage
(``bus_<id>_vm_pu``, a phase ``bus_<id>_<a|b|c>_vm_pu`` or the feeder's ``allbus_vm_min_pu``)
to ``vm_pu``.

Model ``CapSwitch``. Input ``vm_pu``. Outputs ``n_steps_closed`` and ``n_switchings``
(step operations so far; a switching is wear on the bank, so studies count them).

Example ``[entities]`` entry::

    cap = { sim = "caps", model = "CapSwitch", n_steps = 1, on_below_pu = 0.96, off_above_pu = 1.04 }
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, model_validator

from cosim.sdk import Params, SingleModelSim


class ScheduleEntry(Params):
    """From ``at_s`` (seconds from the run's start), ``n_steps`` closed. [s, -]"""

    at_s: float = Field(ge=0)
    n_steps: int = Field(ge=0)


class CapSwitchParams(Params):
    """Params of one ``CapSwitch`` entity.

    Attributes:
        n_steps: steps of the bank (1 = a single switched bank). [-]
        n_steps_initial: steps closed at the start. [-]
        on_below_pu, off_above_pu: switch a step in below / out above. [pu]
        delay_s, delay_off_s: how long the voltage must stay past a setting first. [s]
        schedule: switch on a timetable instead of the voltage.
        enabled: ``false`` holds ``n_steps_initial`` (the no-switching baseline).
    """

    n_steps: int = Field(default=1, ge=1)
    n_steps_initial: int = Field(default=0, ge=0)
    on_below_pu: float = Field(default=0.96, gt=0)
    off_above_pu: float = Field(default=1.04, gt=0)
    delay_s: float = Field(default=15.0, ge=0)
    delay_off_s: float = Field(default=15.0, ge=0)
    schedule: list[ScheduleEntry] = []
    enabled: bool = True

    @model_validator(mode="after")
    def _ranges(self):
        if self.on_below_pu >= self.off_above_pu:
            raise ValueError(f"on_below_pu = {self.on_below_pu:g} must be below off_above_pu = "
                             f"{self.off_above_pu:g} (the dead band between them stops hunting)")
        for name, value in [("n_steps_initial", self.n_steps_initial),
                            *((f"schedule n_steps at {e.at_s:g} s", e.n_steps) for e in self.schedule)]:
            if value > self.n_steps:
                raise ValueError(f"{name} = {value} is above the bank's n_steps = {self.n_steps}")
        return self


class CapBank:
    """The switching logic of one bank (plain Python).

    Args:
        params: settings, delays and schedule.
    """

    def __init__(self, params: CapSwitchParams):
        self.p = params
        self.closed = params.n_steps_initial
        self.n_switchings = 0
        self._low_since: float | None = None
        self._high_since: float | None = None

    def update(self, time_s: float, vm_pu: float | None) -> int:
        """The steps closed for ``time_s`` after reading ``vm_pu``. [s, pu -> -]"""
        p = self.p
        if not p.enabled:
            return self.closed
        if p.schedule:
            due = [e for e in sorted(p.schedule, key=lambda e: e.at_s) if e.at_s <= time_s + 1e-9]
            self._move(due[-1].n_steps if due else p.n_steps_initial)
            return self.closed
        if vm_pu is None or not math.isfinite(vm_pu):
            self._low_since = self._high_since = None
            return self.closed
        self._low_since = (self._low_since if self._low_since is not None else time_s) if vm_pu < p.on_below_pu else None
        self._high_since = ((self._high_since if self._high_since is not None else time_s)
                            if vm_pu > p.off_above_pu else None)
        if self._low_since is not None and time_s - self._low_since >= p.delay_s - 1e-9 and self.closed < p.n_steps:
            self._move(self.closed + 1)
            self._low_since = None
        elif self._high_since is not None and time_s - self._high_since >= p.delay_off_s - 1e-9 and self.closed > 0:
            self._move(self.closed - 1)
            self._high_since = None
        return self.closed

    def _move(self, closed: int) -> None:
        self.n_switchings += abs(closed - self.closed)
        self.closed = closed


class CapSwitchSim(SingleModelSim):
    """Voltage-controlled or scheduled capacitor bank (model ``CapSwitch``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "CapSwitch", CapSwitchParams, "controller", CapBank
    INPUTS, OUTPUTS = ("vm_pu",), ("n_steps_closed", "n_switchings")
    EXAMPLE = {"models": {"CapSwitch": {"on_below_pu": 0.96, "off_above_pu": 1.04}}}

    def advance(self, bank: CapBank, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        value = inputs.get("vm_pu")
        bank.update(time_s, None if value is None else float(value))
        return {"n_steps_closed": float(bank.closed), "n_switchings": bank.n_switchings}
