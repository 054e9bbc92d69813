"""Tap schedule: hold a feeder's voltage regulators at planned tap positions from given times.

OpenG2G's ``TapScheduleController`` (gpu2grid/openg2g, ``openg2g/controller/tap_schedule.py``):
open loop, entries ``(t, taps)``; at each step every entry with ``t <= now`` has fired, later
entries overriding earlier ones per regulator. Its IEEE 13 schedule, for example, moves
reg1a/b/c to +16/+6/+17 at 1,500 s and to +10/+6/+10 at 3,300 s (steps of 0.00625 pu) —
+17 is past the IEEE 13 regulators' MaxTap of 1.1 pu (±16 steps), which OpenDSS sets without a
check; here a count outside ±16 is refused (and the grid refuses one outside the feeder's own range).

Connect each output ``reg_<id>_tap_set_count`` to the grid's input of the same name (OpenDSS
engine): from the step it arrives the regulator is held there (its RegControl disabled); NaN
(before the first entry for it) leaves the regulator to its RegControl. The regulator ids are
the sim's ``regulators`` (the grid's ids, e.g. ``reg1a``), so the outputs are known before
any entity exists.

Model ``TapSchedule``. Outputs ``reg_<id>_tap_set_count`` [steps from neutral] per regulator
and ``n_entries_fired``.

Example::

    [sims.taps]
    adapter = "tap_schedule"
    regulators = ["reg1a", "reg1b", "reg1c"]

    [entities.schedule]
    sim = "taps"
    model = "TapSchedule"
    entries = [{ at_s = 1500, taps = { reg1a = 16, reg1b = 6, reg1c = 17 } }]
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, model_validator

from cosim.sdk import Params, SingleModelSim


class SimParams(Params):
    """Params of one tap_schedule simulator: the ids of the regulators it drives."""

    regulators: list[str] = Field(min_length=1)


class Entry(Params):
    """One planned change: from ``at_s`` (seconds from the run's start) these taps. [s, steps]"""

    at_s: float = Field(ge=0)
    taps: dict[str, int]


class TapScheduleParams(Params):
    """Params of one ``TapSchedule`` entity: the entries, in any order."""

    entries: list[Entry] = []

    @model_validator(mode="after")
    def _in_range(self):
        for entry in self.entries:
            for reg, tap in entry.taps.items():
                if not -16 <= tap <= 16:  # the feeder's own range is checked by the grid when it is set
                    raise ValueError(f"entries: tap {reg} = {tap} is outside a standard regulator's ±16 steps "
                                     "(32 steps over 0.9-1.1 pu, OpenDSS's default)")
        return self


def _attr(reg: str) -> str:
    return f"reg_{reg}_tap_set_count"


def taps_at(entries: list[Entry], time_s: float) -> tuple[dict[str, int], int]:
    """The held tap per regulator at ``time_s`` (later entries win) and how many entries fired."""
    held: dict[str, int] = {}
    fired = 0
    for entry in sorted(entries, key=lambda e: e.at_s):
        if entry.at_s <= time_s + 1e-9:
            held.update(entry.taps)
            fired += 1
    return held, fired


class TapScheduleSim(SingleModelSim):
    """Scheduled regulator taps (model ``TapSchedule``)."""

    MODEL, PARAMS, ROLE = "TapSchedule", TapScheduleParams, "controller"
    INPUTS, OUTPUTS = (), ("n_entries_fired",)
    SimParams = SimParams
    EXAMPLE = {"sim": {"regulators": ["reg1a"]},
               "models": {"TapSchedule": {"entries": [{"at_s": 0, "taps": {"reg1a": 12}}]}}}

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        return cls.single_meta(outputs=["n_entries_fired", *(_attr(r) for r in sim_params.regulators)])

    @classmethod
    def check_entity(cls, model, params, ctx, sim_params=None) -> list[str]:
        known = set(sim_params.regulators) if sim_params is not None else set()
        unknown = sorted({r for e in params.entries for r in e.taps} - known) if known else []
        return [f"entries name regulators {unknown} not in the sim's regulators {sorted(known)}"] if unknown else []

    def build(self, eid: str, params: TapScheduleParams) -> TapScheduleParams:
        return params

    def advance(self, p: TapScheduleParams, time_s: int, inputs: dict[str, Any]) -> dict[str, Any]:
        held, fired = taps_at(p.entries, time_s)
        out: dict[str, Any] = {"n_entries_fired": fired}
        out.update({_attr(r): float(held[r]) if r in held else math.nan for r in self.params.regulators})
        return out
