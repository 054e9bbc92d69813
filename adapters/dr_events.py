"""Demand-response events: a utility's event calls read from an event file.

An event file is a CSV with one event per row and the columns

    program,notice_utc,start_utc,end_utc,reduction_mw,cap_mw

* ``program``: the DR program's name (a scenario may follow only one program);
* ``notice_utc``, ``start_utc``, ``end_utc``: ISO 8601 times (naive = UTC); the event is
  announced at ``notice_utc`` and in force over ``[start_utc, end_utc)``;
* ``reduction_mw``: load reduction asked, below the site's baseline [MW], or
* ``cap_mw``: the most the site may draw during the event [MW]; exactly one of the two.

Model ``Events`` reports at each step:

* ``event_active``: an event is in force;
* ``dr_reduction_mw``: the reduction asked now (the largest of overlapping events; 0 when none);
* ``dr_cap_mw``: the cap now (the smallest; ``None`` when no cap applies, which leaves a
  connected input unset);
* ``dr_notice_s``: seconds until the next announced event starts (0 while one is active,
  ``None`` when none is announced);
* ``dr_remaining_s``: seconds left in the active event (``None`` when none).

A malformed file is refused before the run starts, naming the file, row and column.

Example ``[entities]`` entry::

    dr = { sim = "dr", model = "Events", file = "data/dr_events/example_events.csv", program = "cbp" }
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cosim.sdk import Params, ScenarioContext, SingleModelSim, parse_utc, ticks_per_s, to_ticks
from cosim.sdk import DataFile
from cosim.adapters._bounded_read import TableTooLarge, check_event_file_size

COLUMNS = ("program", "notice_utc", "start_utc", "end_utc", "reduction_mw", "cap_mw")
OUTPUTS = ("event_active", "dr_reduction_mw", "dr_cap_mw", "dr_notice_s", "dr_remaining_s")


class EventFileError(ValueError):
    """An event file that cannot be read; the message names file, row and column."""


@dataclass(frozen=True)
class Event:
    """One DR event. [times as aware UTC datetimes, MW]"""

    program: str
    notice: datetime
    start: datetime
    end: datetime
    reduction_mw: float | None
    cap_mw: float | None


class EventsParams(Params):
    """Params of one ``Events`` entity.

    Attributes:
        file: the event CSV; relative paths resolve from the scenario folder.
        program: follow only this program's events (all when ``None``).
    """

    file: DataFile
    program: str | None = None


def _time(value: str, where: str) -> datetime:
    try:
        return parse_utc(value.strip())
    except ValueError:
        raise EventFileError(f"{where}: {value!r} is not an ISO 8601 time (e.g. 2024-07-16T18:00:00Z)") from None


def _mw(value: str, where: str) -> float | None:
    if value is None or not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        raise EventFileError(f"{where}: {value!r} is not a number of MW") from None
    if not math.isfinite(number) or number < 0:
        raise EventFileError(f"{where}: {value!r} must be a finite, non-negative MW value")
    return number


def read_events(path: Path) -> list[Event]:
    """Read and check an event file (see the module docstring for its columns).

    Raises:
        EventFileError: naming the file, the row (1 = header) and the column at fault.
    """
    path = Path(path)
    try:
        check_event_file_size(path)  # read whole: within a stated size
        text = path.read_text(encoding="utf-8-sig")
    except TableTooLarge as exc:
        raise EventFileError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EventFileError(f"{path.name}: cannot read: {exc}") from exc
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise EventFileError(f"{path.name}: row 1 (header): missing column(s) {', '.join(missing)}; "
                             f"expected {','.join(COLUMNS)}")
    events = []
    for number, row in enumerate(reader, start=2):
        at = lambda column: f"{path.name}: row {number}, column {column}"  # noqa: E731
        if None in row or any(row[c] is None for c in COLUMNS):
            raise EventFileError(f"{path.name}: row {number}: expected {len(header)} fields, "
                                 f"got {len([v for v in row.values() if v is not None])}")
        program = row["program"].strip()
        if not program:
            raise EventFileError(f"{at('program')}: empty; name the DR program")
        notice, start, end = (_time(row[c], at(c)) for c in ("notice_utc", "start_utc", "end_utc"))
        if not end > start:
            raise EventFileError(f"{at('end_utc')}: {row['end_utc']} is not after start_utc {row['start_utc']}")
        if notice > start:
            raise EventFileError(f"{at('notice_utc')}: {row['notice_utc']} is after start_utc {row['start_utc']}")
        reduction, cap = _mw(row["reduction_mw"], at("reduction_mw")), _mw(row["cap_mw"], at("cap_mw"))
        if (reduction is None) == (cap is None):
            raise EventFileError(f"{at('reduction_mw')}: give exactly one of reduction_mw and cap_mw "
                                 f"(got {row['reduction_mw']!r} and {row['cap_mw']!r})")
        events.append(Event(program, notice, start, end, reduction, cap))
    if not events:
        raise EventFileError(f"{path.name}: no events after the header")
    return events


class EventSchedule:
    """The events of one program as functions of time (no mosaik).

    Args:
        events: the events (from :func:`read_events`).
        program: keep only this program's events (all when ``None``).
    """

    def __init__(self, events: list[Event], program: str | None = None, name: str = "events"):
        if program is not None:
            known = sorted({e.program for e in events})
            events = [e for e in events if e.program == program]
            if not events:
                raise EventFileError(f"{name}: no events of program {program!r}; programs in the file: "
                                     f"{', '.join(known)}")
        self.events = sorted(events, key=lambda e: e.start)

    def at(self, when: datetime) -> dict[str, Any]:
        """The outputs at ``when`` (aware UTC datetime)."""
        active = [e for e in self.events if e.start <= when < e.end]
        reductions = [e.reduction_mw for e in active if e.reduction_mw is not None]
        caps = [e.cap_mw for e in active if e.cap_mw is not None]
        announced = [e for e in self.events if e.notice <= when < e.start]
        if active:
            notice_s: float | None = 0.0
            remaining_s: float | None = max((e.end - when).total_seconds() for e in active)
        else:
            notice_s = min((e.start - when).total_seconds() for e in announced) if announced else None
            remaining_s = None
        return {"event_active": bool(active), "dr_reduction_mw": max(reductions, default=0.0),
                "dr_cap_mw": min(caps) if caps else None, "dr_notice_s": notice_s, "dr_remaining_s": remaining_s}


def off_grid_problems(schedule: EventSchedule, ctx: ScenarioContext, name: str) -> list[str]:
    """Events in the run window whose start or end falls inside a step (outputs are sampled
    at each step's start, so such an edge would be missed or stretched to the step)."""
    problems = []
    n_per_s = ticks_per_s(ctx.tick_s)
    step = to_ticks(ctx.step_s, n_per_s)
    for e in schedule.events:
        if e.end <= ctx.start_utc or e.start >= ctx.end_utc:
            continue
        for label, edge in (("start", e.start), ("end", e.end)):
            offset_ms = (edge - ctx.start_utc) // timedelta(milliseconds=1)  # exact, whole milliseconds
            offset = offset_ms * n_per_s / 1000  # ticks (a whole number at whole seconds)
            if ctx.start_utc < edge < ctx.end_utc and offset % step:
                hint = math.gcd(int(offset), step) if offset == int(offset) else 0
                problems.append(f"{name}: {e.program} event {label} {edge:%Y-%m-%d %H:%M:%S} UTC falls inside a "
                                f"{ctx.step_s} s step; give this sim a step_s that divides {_s(offset_ms / 1000)} s "
                                f"(e.g. step_s = {_s(hint / n_per_s if hint else ctx.tick_s)})")
    return problems


def _s(seconds: float) -> str:
    """Seconds as the scenario would write them (``60``, ``0.1``)."""
    return str(int(seconds)) if seconds == int(seconds) else repr(round(seconds, 6))


def schedule_from_params(params: EventsParams) -> EventSchedule:
    return EventSchedule(read_events(params.file), params.program, Path(params.file).name)


class DrEventsSim(SingleModelSim):
    """Demand-response event signals from event files (model ``Events``)."""

    MODEL, PARAMS, ROLE = "Events", EventsParams, "signal"
    OUTPUTS = OUTPUTS
    EXAMPLE = {"models": {"Events": {"file": "data/dr_events/example_events.csv"}}}

    @classmethod
    def check_entity(cls, model: str, params: EventsParams, ctx: ScenarioContext,
                     sim_params: BaseModel | None = None) -> list[str]:
        # An event-free run window is a valid study (the baseline); events in it must start and
        # end on the sim's steps, or the step that holds an edge would miss or stretch it.
        try:
            schedule = schedule_from_params(params)
        except EventFileError as exc:
            return [str(exc)]
        return off_grid_problems(schedule, ctx, Path(params.file).name)

    def build(self, eid: str, params: EventsParams) -> EventSchedule:
        return schedule_from_params(params)

    def advance(self, schedule: EventSchedule, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        return schedule.at(self.utc(time_s))
