"""Faults: grid-side disturbances as a voltage sag of given depth and duration (events).

A balanced power flow cannot compute the voltage during a fault, so here faults come as events
(on an OpenDSS feeder the grid adapter solves SLG, LL, LLG and three-phase faults in the circuit
itself, per phase: ``faults = [...]`` of the grid sim, ``adapters/grid/opendss_faults.py``):
each is ``(t_s, duration_s, vm_pu)``, the retained voltage at the point of connection while the
fault lasts (from a short-circuit study, or a PMU record). Give them in the entity param
``events = [[t_s, duration_s, vm_pu], ...]`` or in a CSV file with the columns ``t_s,
duration_s, vm_pu`` (seconds from the scenario start; ``#`` lines are comments).

Over a step ``[t, t + step_s)`` the outputs are the deepest sag that overlaps the step,
``vm_sag_pu`` (1.0 without one), and how long it lasts inside the step, ``t_sag_s``, so a
ride-through check (``adapters/ride_through.py``) measures a 100 ms sag as 100 ms also at 1 s
steps. ``n_faults`` counts the faults begun so far.

Example ``[entities]`` entry (three auto-reclose attempts onto a permanent fault)::

    line = { sim = "faults", model = "Faults", events = [[5.0, 0.1, 0.75], [20.0, 0.1, 0.75], [35.0, 0.1, 0.75]] }
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, model_validator

from cosim.sdk import DataFile, Params, SingleModelSim, as_tuple
from cosim.adapters._event_csv import read_events

OUTPUTS = ("vm_sag_pu", "t_sag_s", "n_faults")


def _triples(value: Any) -> Any:
    return tuple(as_tuple(v) for v in value) if isinstance(value, list) else value


class FaultsParams(Params):
    """Params of one ``Faults`` entity.

    Attributes:
        events: ``[[t_s, duration_s, vm_pu], ...]``: start, length and retained voltage. [s, s, pu]
        file: a CSV with the columns ``t_s,duration_s,vm_pu`` (added to ``events``).
    """

    events: Annotated[tuple[tuple[float, float, float], ...], BeforeValidator(_triples)] = ()
    file: DataFile | None = None

    @model_validator(mode="after")
    def _check(self):
        for t_s, duration_s, vm_pu in self.all_events():
            if t_s < 0 or duration_s <= 0 or not 0 <= vm_pu < 1:
                raise ValueError(f"fault ({t_s}, {duration_s}, {vm_pu}): give t_s >= 0, duration_s > 0 and "
                                 "0 <= vm_pu < 1 (the retained voltage)")
        return self

    def all_events(self) -> list[tuple[float, float, float]]:
        return sorted([*self.events, *(read_faults(self.file) if self.file else [])])


def read_faults(path: Path) -> list[tuple[float, float, float]]:
    """The faults of a CSV file (``t_s,duration_s,vm_pu``).

    Raises:
        ValueError: naming the file and row.
    """
    return read_events(path, "vm_pu", float, "t_s, duration_s and vm_pu must be numbers")  # type: ignore[return-value]


class Faults:
    """The sag seen over each step (plain Python)."""

    def __init__(self, p: FaultsParams):
        self.events = p.all_events()

    def over(self, t0: float, dt: float) -> dict[str, float]:
        vm, t_sag = 1.0, 0.0
        for start, length, retained in self.events:
            overlap = min(t0 + dt, start + length) - max(t0, start)
            if overlap > 1e-9 and retained < vm:
                vm, t_sag = retained, overlap
        begun = sum(1 for start, _, _ in self.events if start < t0 + dt - 1e-9)
        return {"vm_sag_pu": vm, "t_sag_s": t_sag, "n_faults": begun}


class FaultsSim(SingleModelSim):
    """Fault events (model ``Faults``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "Faults", FaultsParams, "signal", Faults
    OUTPUTS = OUTPUTS
    EXAMPLE = {"models": {"Faults": {"events": [[2.0, 0.1, 0.5], [5.0, 0.2, 0.8]]}}}

    def advance(self, faults: Faults, time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        return faults.over(float(time_s), float(self.step_s))
