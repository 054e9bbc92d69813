"""Imposed disturbances at a point of connection: voltage steps and sags/swells, frequency steps with a ramp.

Where a grid engine cannot change its own source (a balanced power flow, an OpenDSS feeder's
stiff source, an ANDES case without a voltage-step event), the disturbance a model-quality test
needs is imposed on the campus's own terminals instead: ``vm_sag_pu`` is a factor on the bus
voltage the ride-through logic sees (``adapters/ride_through.py`` multiplies its voltage input by
it; above 1 for a swell, unlike ``adapters/faults.py`` whose sags stay below 1), and ``f_hz`` is
the frequency it sees (connect it in place of the grid's). The grid itself does not see the
disturbance, only the campus's response to it. ``cosim battery`` builds these entities.

Params of a ``PocEvents`` entity:

* ``voltage = [[t_s, duration_s, factor], ...]``: from ``t_s`` for ``duration_s`` the voltage is
  ``factor`` times the bus voltage (``0 <= factor``, not 1). [s, s, -] With the input ``vm_pu``
  connected (the bus voltage, as the ride-through entity gets it) the value is a *level* instead:
  the output factor is ``level / vm_pu``, so the campus sees the level itself. [pu]
* ``frequency = [[t_s, duration_s, delta_hz, ramp_s], ...]``: from ``t_s`` the frequency ramps
  linearly by ``delta_hz`` over ``ramp_s``, holds, and at ``t_s + duration_s`` ramps back over
  ``ramp_s``. [s, s, Hz, s]
* ``f_nominal_hz``: the frequency outside the events. [Hz]

Over a step ``[t, t + step_s)``: ``vm_sag_pu`` is the factor farthest from 1 of the voltage events
overlapping the step (1.0 without one; ``level / vm_pu`` with the input) and ``t_sag_s`` how long it
lasts inside the step;
``f_hz`` is the frequency at the step's start.

Example ``[entities]`` entry (a 5 % voltage step down for 10 s at 1 s)::

    dist = { sim = "events", model = "PocEvents", voltage = [[1.0, 10.0, 0.95]] }
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, model_validator

from cosim.sdk import Params, SingleModelSim, as_tuple

INPUTS = ("vm_pu",)
OUTPUTS = ("vm_sag_pu", "t_sag_s", "f_hz")


def _rows(value: Any) -> Any:
    return tuple(as_tuple(v) for v in value) if isinstance(value, list) else value


class PocEventsParams(Params):
    """Params of one ``PocEvents`` entity.

    Attributes:
        voltage: ``[[t_s, duration_s, factor], ...]``. [s, s, -]
        frequency: ``[[t_s, duration_s, delta_hz, ramp_s], ...]``. [s, s, Hz, s]
        f_nominal_hz: frequency outside the events. [Hz]
    """

    voltage: Annotated[tuple[tuple[float, float, float], ...], BeforeValidator(_rows)] = ()
    frequency: Annotated[tuple[tuple[float, float, float, float], ...], BeforeValidator(_rows)] = ()
    f_nominal_hz: float = 60.0

    @model_validator(mode="after")
    def _check(self):
        for t_s, duration_s, factor in self.voltage:
            if t_s < 0 or duration_s <= 0 or factor < 0 or factor == 1.0:
                raise ValueError(f"voltage event ({t_s}, {duration_s}, {factor}): give t_s >= 0, duration_s > 0 and "
                                 "a factor >= 0 other than 1 (0.95: a 5 % step down; 1.1: a swell)")
        for t_s, duration_s, delta_hz, ramp_s in self.frequency:
            if t_s < 0 or duration_s <= 0 or ramp_s < 0 or ramp_s > duration_s:
                raise ValueError(f"frequency event ({t_s}, {duration_s}, {delta_hz}, {ramp_s}): give t_s >= 0, "
                                 "duration_s > 0 and 0 <= ramp_s <= duration_s")
        return self


class PocEvents:
    """The imposed voltage factor and frequency over each step (plain Python)."""

    def __init__(self, p: PocEventsParams):
        self.p = p

    def voltage_over(self, t0: float, dt: float) -> tuple[float, float]:
        """The factor farthest from 1 overlapping ``[t0, t0 + dt)`` and its overlap. [-, s]"""
        factor, t_sag = 1.0, 0.0
        for start, length, value in self.p.voltage:
            overlap = min(t0 + dt, start + length) - max(t0, start)
            if overlap > 1e-9 and abs(value - 1.0) > abs(factor - 1.0):
                factor, t_sag = value, overlap
        return factor, t_sag

    def frequency_at(self, t: float) -> float:
        """The imposed frequency at ``t``. [Hz]"""
        f = self.p.f_nominal_hz
        for start, length, delta, ramp in self.p.frequency:
            f += delta * (_ramp(t - start, ramp) - _ramp(t - start - length, ramp))
        return f


def _ramp(tau: float, ramp_s: float) -> float:
    """0 before, 1 after a linear ramp of ``ramp_s`` starting at ``tau = 0``."""
    if tau < 0:
        return 0.0
    return 1.0 if ramp_s <= 0 or tau >= ramp_s else tau / ramp_s


class PocEventsSim(SingleModelSim):
    """Imposed point-of-connection disturbances (model ``PocEvents``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "PocEvents", PocEventsParams, "signal", PocEvents
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {"models": {"PocEvents": {"voltage": [[2.0, 1.0, 0.95]], "frequency": [[4.0, 2.0, -0.5, 0.5]]}}}

    def advance(self, events: PocEvents, time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        factor, t_sag = events.voltage_over(float(time_s), float(self.step_s))
        vm_pu = inputs.get("vm_pu")
        if vm_pu is not None and factor != 1.0 and float(vm_pu) > 0:
            factor = factor / float(vm_pu)  # a level: the factor that brings the bus voltage to it
        return {"vm_sag_pu": factor, "t_sag_s": t_sag, "f_hz": events.frequency_at(float(time_s))}
