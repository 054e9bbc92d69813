"""OpenADR 2.0b events: a VEN's received ``oadrDistributeEvent`` payloads as DR signals.

A campus acting as an OpenADR 2.0b VEN (Virtual End Node) receives events from its utility's
VTN. In a batch run they come from a recorded VTN log; live, :func:`event_on_handler` feeds
the same code from an ``openleadr.OpenADRClient``. Either way the outputs are those of the
``dr_events`` adapter, so the same DR responder (``adapters/controllers/dr_responder.py``)
and the same DR KPIs answer them.

The log (JSON lines, UTF-8): one received event per line, as openleadr hands it to a VEN's
``on_event`` handler, with times as text::

    {"received_utc": "2024-07-01T12:00:00Z", "event": {
      "event_descriptor": {"event_id": "e1", "modification_number": 0, "event_status": "far",
                           "market_context": "oadr://utility/cbp", ...},
      "active_period": {"dtstart": "2024-07-02T18:00:00Z", "duration": "PT3H", "ramp_up_period": "PT15M"},
      "event_signals": [{"signal_name": "SIMPLE", "signal_type": "level",
                         "intervals": [{"duration": "PT3H", "signal_payload": 2, "uid": 0}]}],
      "targets": [{"resource_id": "campus"}]}}

* ``received_utc``: when the VEN received it (ISO 8601; naive = UTC): the notice;
* times are ISO 8601, durations ISO 8601 (``PT1H30M``) or seconds; an interval's ``dtstart``
  may be omitted (intervals then follow each other from the active period's start);
* signals: ``SIMPLE`` / ``level`` (payload 0..3, mapped to a reduction by ``simple_levels_mw``),
  ``LOAD_DISPATCH`` / ``delta`` (a reduction below the baseline [MW]), ``LOAD_DISPATCH`` /
  ``setpoint`` (the most the site may draw [MW]) and the four ``LOAD_CONTROL`` types (below); other
  signals are refused by name;
* a later line with the same ``event_id`` and a higher ``modification_number`` replaces the
  event from its ``received_utc`` on; ``event_status = "cancelled"`` withdraws it;
* ``targets``: ``resource_id`` / ``ven_id`` entries must name this VEN's (params).

Ramp-up (OpenADR's ``x-eiRampUp``, the time before the start at which the VEN starts
ramping): the event is active from ``dtstart - ramp_up_period``; a reduction grows linearly
from 0 to the first interval's value at ``dtstart``; a setpoint applies from ``dtstart``.

``LOAD_CONTROL`` ("set load output to relative values"; the type descriptions are those of the
OpenADR 2.0b schema, ``oadr_ei_20b.xsd``, as shipped with openleadr):

* ``x-loadControlCapacity``: "operate at a level that is some percentage of its maximum load
  consumption capacity ... 1.0 refers to 100% consumption": a cap of ``payload * capacity_mw``
  (payload 0..1; needs ``capacity_mw``);
* ``x-loadControlLevelOffset``: "discrete integer levels that are relative to normal operations
  where 0 is normal operations": a reduction of ``-payload * level_offset_mw`` below the baseline
  (needs ``level_offset_mw``);
* ``x-loadControlPercentOffset``: "percentage change from normal load control operations": a
  reduction of ``-payload`` % of the DR responder's baseline (output ``dr_reduction_frac``);
* ``x-loadControlSetpoint``: "load controller set points": the site's draw setpoint [MW], a cap
  as ``LOAD_DISPATCH`` / ``setpoint``.

A positive level or percent offset asks the site to draw *more* than normal, which the DR levers
cannot do: the VEN opts out of such an event.

Opt-in/out policy: an event whose largest reduction exceeds ``max_shed_mw``, or whose
setpoint falls below ``min_cap_mw``, is refused (``optOut``) and not applied; the VEN opts in
to the rest. An applied event whose (ramp) start or end falls inside a step stops validation with
a message naming the step that fits, as in ``dr_events``.

Model ``Events`` reports the ``dr_events`` outputs (``event_active``, ``dr_reduction_mw``,
``dr_cap_mw``, ``dr_notice_s``, ``dr_remaining_s``), ``dr_reduction_frac`` (a percent offset's
reduction as a fraction of the baseline; connect it to the responder for ``LOAD_CONTROL``) and
``n_events_refused`` (refused events whose start has passed).

Without ``file`` the entity starts with no events: a live run (``cosim serve --vtn``,
:mod:`cosim.live.ven`) adds the events its VEN receives, and names the VTN by ``vtn_url`` and
``ven_name`` (used only when the command line says ``--vtn``).

Example ``[entities]`` entry::

    events = { sim = "adr", model = "Events", file = "data/openadr/example_vtn_log.jsonl",
               resource_ids = ["campus"], max_shed_mw = 0.6 }
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from cosim.sdk import DataFile, Params, ScenarioContext, SingleModelSim, parse_utc
from cosim.adapters._bounded_read import TableTooLarge, check_event_file_size
from cosim.adapters.dr_events import OUTPUTS as DR_OUTPUTS
from cosim.adapters.dr_events import Event, EventSchedule, off_grid_problems

OUTPUTS = DR_OUTPUTS + ("dr_reduction_frac", "n_events_refused")
#: (signal_name, signal_type) -> what the payload is.
#: ISO 8601 durations as OpenADR writes them (``PT1H30M``, ``P1DT2H``, ``P0Y0M0DT3H``); negative
#: ones and non-zero years or months are refused.
ISO_DURATION = re.compile(r"^P(?:(?P<y>\d+)Y)?(?:(?P<mo>\d+)M)?(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
                          r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$")
SIGNALS = {("SIMPLE", "level"): "level", ("LOAD_DISPATCH", "delta"): "reduction_mw",
           ("LOAD_DISPATCH", "setpoint"): "cap_mw",
           ("LOAD_CONTROL", "x-loadControlCapacity"): "capacity_frac",
           ("LOAD_CONTROL", "x-loadControlLevelOffset"): "level_offset",
           ("LOAD_CONTROL", "x-loadControlPercentOffset"): "percent_offset",
           ("LOAD_CONTROL", "x-loadControlSetpoint"): "cap_mw"}


class OpenAdrLogError(ValueError):
    """A VTN log that cannot be applied; the message names file, line, value and the fix."""


class VenParams(Params):
    """Params of one ``Events`` entity (the VEN's policy).

    Attributes:
        file: the VTN log (JSON lines); relative paths resolve from the scenario folder; None:
            no recorded events (a live VEN adds what it receives).
        resource_ids: the resources this VEN answers for; an event targeting another is an error.
        ven_id: this VEN's id; an event targeting another VEN is an error (any when ``None``).
        simple_levels_mw: reduction asked by SIMPLE levels 0, 1, 2, 3. [MW]
        max_shed_mw: opt out of events asking a larger reduction (no limit when ``None``). [MW]
        min_cap_mw: opt out of events setting the site below this draw (none when ``None``). [MW]
        capacity_mw: the site's maximum draw, what ``x-loadControlCapacity`` 1.0 means. [MW]
        level_offset_mw: the reduction per level of ``x-loadControlLevelOffset`` -1. [MW]
        vtn_url: the VTN a live run registers with (``cosim serve --vtn``; nothing is contacted
            without that flag), e.g. ``http://vtn.example:8080/OpenADR2/Simple/2.0b``.
        ven_name: the name the VEN registers under (default: the entity's id).
        telemetry: the ``entity.attr`` a live VEN reports as the site's metered real power [MW]
            (e.g. ``responder.p_metered_mw``); None: no telemetry report.
    """

    file: DataFile | None = None
    resource_ids: list[str] = Field(default_factory=list)
    ven_id: str | None = None
    simple_levels_mw: list[float] = Field(default=[0.0, 0.1, 0.25, 0.5], min_length=4, max_length=4)
    max_shed_mw: float | None = Field(default=None, ge=0)
    min_cap_mw: float | None = Field(default=None, ge=0)
    capacity_mw: float | None = Field(default=None, gt=0)
    level_offset_mw: float | None = Field(default=None, gt=0)
    vtn_url: str | None = Field(default=None, pattern=r"^https?://")
    ven_name: str | None = Field(default=None, min_length=1)
    telemetry: str | None = Field(default=None, pattern=r"^[^.\s]+\.[^.\s]+$")


@dataclass(frozen=True)
class Interval:
    """One interval of an event's signal. [aware UTC datetimes, MW]"""

    start: datetime
    end: datetime
    reduction_mw: float | None
    cap_mw: float | None
    reduction_frac: float | None = None  # of the responder's baseline (a percent offset)


@dataclass(frozen=True)
class VenEvent:
    """One received event as the VEN applies it. [aware UTC datetimes]"""

    event_id: str
    modification: int
    received: datetime
    start: datetime
    ramp_start: datetime
    end: datetime
    intervals: tuple[Interval, ...]
    cancelled: bool = False
    opted_in: bool = True

    def shed_mw(self) -> float:
        return max((i.reduction_mw or 0.0 for i in self.intervals), default=0.0)

    def raises_draw(self) -> bool:
        """Whether an interval asks the site to draw more than normal (a positive offset)."""
        return any((i.reduction_mw or 0.0) < 0 or (i.reduction_frac or 0.0) < 0 for i in self.intervals)

    def lowest_cap_mw(self) -> float | None:
        return min((i.cap_mw for i in self.intervals if i.cap_mw is not None), default=None)


# -- parsing -------------------------------------------------------------------------------------

def _time(value: Any, where: Callable[[str], str], key: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    try:
        return parse_utc(str(value).strip())
    except ValueError:
        raise OpenAdrLogError(f"{where(key)} = {value!r}: not an ISO 8601 time; "
                              "write e.g. \"2024-07-02T18:00:00Z\"") from None


def iso_duration_s(text: str) -> float:
    """Seconds of an ISO 8601 duration (``PT1H30M`` -> 5400); NaN when it is not one. [s]"""
    match = ISO_DURATION.match(text.strip().upper())
    if text.strip().upper() == "P":  # openleadr writes a zero duration so
        return 0.0
    if not match or text.strip().upper().endswith("T"):
        return math.nan
    parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
    if parts.get("y") or parts.get("mo"):  # years and months have no fixed length
        return math.nan
    return (parts.get("w", 0) * 7 * 86_400 + parts.get("d", 0) * 86_400 + parts.get("h", 0) * 3_600
            + parts.get("m", 0) * 60 + parts.get("s", 0))


def iso_duration(delta: timedelta) -> str:
    """A non-negative duration as ISO 8601 (5400 s -> ``PT1H30M``)."""
    seconds = delta.total_seconds()
    hours, rest = divmod(seconds, 3_600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{int(v) if v == int(v) else v}{unit}" for v, unit in ((hours, "H"), (minutes, "M"), (secs, "S")) if v)
    return "PT" + (text or "0S")


def _duration(value: Any, where: Callable[[str], str], key: str) -> timedelta:
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        seconds = iso_duration_s(str(value))
    if not math.isfinite(seconds) or seconds < 0:
        raise OpenAdrLogError(f"{where(key)} = {value!r}: not a duration; write ISO 8601 (\"PT1H30M\") "
                              "or a number of seconds >= 0")
    return timedelta(seconds=seconds)


def _get(mapping: Any, key: str, where: Callable[[str], str]) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise OpenAdrLogError(f"{where(key)}: missing; every received event carries it "
                              "(see the log format in adapters/openadr_events.py)")
    return mapping[key]


def _targets(event: dict, params: VenParams, where: Callable[[str], str]) -> None:
    for target in event.get("targets") or []:
        for key, known in (("resource_id", params.resource_ids), ("ven_id", [params.ven_id])):
            value = target.get(key) if isinstance(target, dict) else None
            if value is not None and known and known != [None] and value not in known:
                raise OpenAdrLogError(f"{where('targets')}: {key} {value!r} is not this VEN's (known: "
                                      f"{', '.join(map(str, known))}); add it to the entity's "
                                      f"{key}s or remove the event")


def _signal(signal: dict, params: VenParams, where: Callable[[str], str]) -> str:
    name, kind = signal.get("signal_name"), signal.get("signal_type")
    what = SIGNALS.get((str(name).upper(), kind))
    if what is None:
        handled = ", ".join(f"{n}/{t}" for n, t in SIGNALS)
        raise OpenAdrLogError(f"{where('event_signals')}: signal {name}/{kind} is not handled by this VEN; "
                              f"send one of {handled}")
    return what


def _payload_mw(what: str, value: Any, params: VenParams,
                where: Callable[[str], str]) -> tuple[float | None, float | None, float | None]:
    """``(reduction_mw, cap_mw, reduction_frac)`` of one interval's payload (one of them set)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = number and value >= 0
    if what == "level":
        if not ok or value != int(value) or not 0 <= value <= 3:
            raise OpenAdrLogError(f"{where('signal_payload')} = {value!r}: a SIMPLE level is 0, 1, 2 or 3")
        return params.simple_levels_mw[int(value)], None, None
    if what in ("level_offset", "percent_offset", "capacity_frac"):
        return _load_control(what, value, params, where)
    if not ok:
        raise OpenAdrLogError(f"{where('signal_payload')} = {value!r}: must be a finite, non-negative MW value")
    return (float(value), None, None) if what == "reduction_mw" else (None, float(value), None)


def _load_control(what: str, given: Any, params: VenParams,
                  where: Callable[[str], str]) -> tuple[float | None, float | None, float | None]:
    """A LOAD_CONTROL capacity, level offset or percent offset (see the module docstring); ``given``
    is the payload as received (named as such when it is not a finite number)."""
    key = where("signal_payload")
    number = isinstance(given, (int, float)) and not isinstance(given, bool) and math.isfinite(given)
    value = given if number else None
    if what == "capacity_frac":
        if value is None or not 0 <= value <= 1:
            raise OpenAdrLogError(f"{key} = {given!r}: an x-loadControlCapacity is a fraction 0..1 of the "
                                  "site's maximum draw (1.0 = 100 %)")
        if params.capacity_mw is None:
            raise OpenAdrLogError(f"{key}: an x-loadControlCapacity needs the site's maximum draw; set the "
                                  "entity's capacity_mw [MW]")
        return None, value * params.capacity_mw, None
    if what == "level_offset":
        if value is None or value != int(value):
            raise OpenAdrLogError(f"{key} = {given!r}: an x-loadControlLevelOffset is a whole number of levels "
                                  "(0 = normal, -1 = one level less)")
        if params.level_offset_mw is None:
            raise OpenAdrLogError(f"{key}: an x-loadControlLevelOffset needs the MW of one level; set the "
                                  "entity's level_offset_mw [MW]")
        return -value * params.level_offset_mw, None, None
    if value is None or not -100 <= value <= 100:
        raise OpenAdrLogError(f"{key} = {given!r}: an x-loadControlPercentOffset is a percentage change "
                              "-100..100 from normal operation (-20 = 20 % less)")
    return None, None, -value / 100.0


def parse_event(event: dict, received: datetime, params: VenParams,
                where: Callable[[str], str] = lambda key: key) -> VenEvent:
    """One event (openleadr's ``on_event`` dict, times as text or datetimes) as the VEN applies it.

    Raises:
        OpenAdrLogError: naming the key and value at fault (prefixed by ``where``).
    """
    if not isinstance(event, dict):
        raise OpenAdrLogError(f"{where('event')}: {str(event)[:60]!r} is not an event object")
    descriptor = _get(event, "event_descriptor", where)
    period = _get(event, "active_period", where)
    start = _time(_get(period, "dtstart", where), where, "active_period.dtstart")
    duration = _duration(_get(period, "duration", where), where, "active_period.duration")
    ramp = _duration(period.get("ramp_up_period") or 0, where, "active_period.ramp_up_period")
    _targets(event, params, where)
    signals = _get(event, "event_signals", where)
    if not isinstance(signals, list) or not signals:
        raise OpenAdrLogError(f"{where('event_signals')}: empty; an event carries at least one signal")
    intervals = []
    for signal in signals:
        what = _signal(signal, params, where)
        at = start
        for interval in _get(signal, "intervals", where):
            if interval.get("dtstart") is not None:
                at = _time(interval["dtstart"], where, "intervals.dtstart")
            length = _duration(_get(interval, "duration", where), where, "intervals.duration")
            reduction, cap, frac = _payload_mw(what, _get(interval, "signal_payload", where), params, where)
            intervals.append(Interval(at, at + length, reduction, cap, frac))
            at += length
    end = max(start + duration, max(i.end for i in intervals))
    parsed = VenEvent(str(_get(descriptor, "event_id", where)), int(descriptor.get("modification_number", 0)),
                      received, start, start - ramp, end, tuple(intervals),
                      cancelled=descriptor.get("event_status") == "cancelled")
    return replace(parsed, opted_in=opt_in(parsed, params))


def opt_in(event: VenEvent, params: VenParams) -> bool:
    """The VEN's policy: refuse a shed above ``max_shed_mw``, a setpoint below ``min_cap_mw``, or a
    request to draw more than normal (a positive LOAD_CONTROL offset: no DR lever raises the draw)."""
    if event.raises_draw():
        return False
    if params.max_shed_mw is not None and event.shed_mw() > params.max_shed_mw:
        return False
    cap = event.lowest_cap_mw()
    return not (params.min_cap_mw is not None and cap is not None and cap < params.min_cap_mw)


def log_line(event: dict, received: datetime) -> str:
    """One line of the log for an event as openleadr gives it to ``on_event`` (datetimes and
    timedeltas written as ISO 8601 text)."""
    def text(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        if isinstance(value, timedelta):
            return iso_duration(value)
        if isinstance(value, dict):
            return {k: text(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [text(v) for v in value]
        return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)

    return json.dumps({"received_utc": text(received), "event": text(event)}, sort_keys=True)


def read_log(path: Path, params: VenParams) -> list[VenEvent]:
    """Every event of a VTN log, checked (see the module docstring for the format).

    Raises:
        OpenAdrLogError: naming the file, the line, the value and the fix.
    """
    path = Path(path)
    try:
        check_event_file_size(path)  # read whole: within a stated size
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except TableTooLarge as exc:
        raise OpenAdrLogError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise OpenAdrLogError(f"{path.name}: cannot read: {exc}") from None
    events = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = lambda key: f"{path.name}: line {number}: {key}"  # noqa: E731
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise OpenAdrLogError(f"{path.name}: line {number}: not JSON ({exc.msg}, column {exc.colno}); "
                                  "write one event object per line") from None
        received = _time(_get(record, "received_utc", where), where, "received_utc")
        events.append(parse_event(_get(record, "event", where), received, params, where))
    if not events:
        raise OpenAdrLogError(f"{path.name}: no events; write one received event per line")
    return events


# -- the schedule --------------------------------------------------------------------------------

class VenSchedule:
    """The events a VEN received, as DR signals over time (no mosaik)."""

    def __init__(self, events: list[VenEvent] | None = None, params: VenParams | None = None):
        self.params = params  # the VEN's policy (a live VEN applies it to what it receives)
        self.events: list[VenEvent] = []
        for event in events or []:
            self.add(event)

    def add(self, event: VenEvent) -> None:
        """A received event; a modification or cancellation of a known one takes effect from
        its reception."""
        self.events.append(event)

    def _current(self, when: datetime) -> list[VenEvent]:
        latest: dict[str, VenEvent] = {}
        for event in self.events:
            if event.received <= when:
                known = latest.get(event.event_id)
                if known is None or event.modification >= known.modification:
                    latest[event.event_id] = event
        return [e for e in latest.values() if not e.cancelled]

    def at(self, when: datetime) -> dict[str, Any]:
        """The outputs at ``when`` (aware UTC datetime)."""
        current = self._current(when)
        applied = [e for e in current if e.opted_in]
        active = [e for e in applied if e.ramp_start <= when < e.end]
        reductions, caps, fracs = [], [], []
        for event in active:
            for interval in event.intervals:
                shed = reductions if interval.reduction_mw is not None else fracs
                value = interval.reduction_mw if interval.reduction_mw is not None else interval.reduction_frac
                if value is not None and when < event.start and interval.start == event.start:
                    ramp_s = (event.start - event.ramp_start).total_seconds()
                    shed.append(value * (when - event.ramp_start).total_seconds() / ramp_s)
                elif interval.start <= when < interval.end:
                    if value is not None:
                        shed.append(value)
                    elif interval.cap_mw is not None:
                        caps.append(interval.cap_mw)
        upcoming = [e for e in applied if when < e.ramp_start]
        return {"event_active": bool(active), "dr_reduction_mw": max(reductions, default=0.0),
                "dr_cap_mw": min(caps) if caps else None, "dr_reduction_frac": max(fracs, default=0.0),
                "dr_notice_s": 0.0 if active else (min((e.ramp_start - when).total_seconds() for e in upcoming)
                                                   if upcoming else None),
                "dr_remaining_s": max((e.end - when).total_seconds() for e in active) if active else None,
                "n_events_refused": sum(1 for e in current if not e.opted_in and e.ramp_start <= when)}


def event_on_handler(schedule: VenSchedule, params: VenParams, clock: Callable[[], datetime],
                     log: Path | None = None) -> Callable[[dict], Any]:
    """An ``openleadr.OpenADRClient`` ``on_event`` handler that adds each received event to
    ``schedule`` (received at ``clock()``), appends it to ``log`` when given, and answers
    ``optIn``/``optOut`` by the policy. A payload it cannot apply is refused (``optOut``) and
    its reason kept in ``handler.refused``."""
    refused: list[str] = []

    async def on_event(event: dict) -> str:
        received = clock()
        try:
            parsed = parse_event(event, received, params, where=lambda key: f"event {_event_id(event)}: {key}")
        except OpenAdrLogError as exc:
            refused.append(str(exc))
            return "optOut"
        if log is not None:
            with open(log, "a", encoding="utf-8") as out:
                out.write(log_line(event, received) + "\n")
        schedule.add(parsed)
        return "optIn" if parsed.opted_in else "optOut"

    on_event.refused = refused  # type: ignore[attr-defined]
    return on_event


def _event_id(event: Any) -> str:
    return str(event.get("event_descriptor", {}).get("event_id", "?")) if isinstance(event, dict) else "?"


# -- the adapter ---------------------------------------------------------------------------------

class OpenAdrEventsSim(SingleModelSim):
    """OpenADR 2.0b events received by a VEN, replayed from a VTN log (model ``Events``)."""

    MODEL, PARAMS, ROLE = "Events", VenParams, "signal"
    OUTPUTS = OUTPUTS
    EXAMPLE = {"models": {"Events": {"file": "data/openadr/example_vtn_log.jsonl", "resource_ids": ["campus"]}}}

    @classmethod
    def check_entity(cls, model: str, params: VenParams, ctx: ScenarioContext,
                     sim_params: BaseModel | None = None) -> list[str]:
        # as for dr_events: an event's (ramp) start and end must fall on the sim's steps
        if params.file is None:
            return ["warning: no file: the entity starts with no events and only a live VEN (cosim serve --vtn) "
                    "adds any, so any other run sends no DR signal; give file = \"<VTN log>.jsonl\" to replay one"]
        try:
            events = read_log(params.file, params)
        except OpenAdrLogError as exc:
            return [str(exc)]
        edges = [Event(f"OpenADR {e.event_id}", e.received, e.ramp_start, e.end, 0.0, None)
                 for e in events if e.opted_in and not e.cancelled]
        return off_grid_problems(EventSchedule(edges), ctx, Path(params.file).name) if edges else []

    @classmethod
    def check_scenario(cls, scn: Any) -> list[str]:
        """A warning for each events entity whose DR outputs reach an entity that does not also get
        ``dr_reduction_frac``: a LOAD_CONTROL percent offset it receives would change nothing there."""
        adapter = __name__.rsplit(".", 1)[-1]
        found = []
        for eid, spec in scn.entities.items():
            if scn.sims[spec.sim].adapter != adapter:
                continue
            fed: dict[str, set[str]] = {}
            for conn in scn.connect:
                if conn.src == eid:
                    fed.setdefault(conn.dst, set()).update(src for src, _ in conn.pairs())
            for dst, attrs in sorted(fed.items()):
                if attrs & {"dr_cap_mw", "dr_reduction_mw"} and "dr_reduction_frac" not in attrs:
                    found.append(f"{scn.file.name}: entity {eid!r} sends DR signals to {dst!r} without "
                                 f"'dr_reduction_frac': an OpenADR percent-offset event (LOAD_CONTROL "
                                 f"x-loadControlPercentOffset) would not reach it; add \"dr_reduction_frac\" "
                                 f"to that [[connect]]'s attrs")
        return found

    def build(self, eid: str, params: VenParams) -> VenSchedule:
        return VenSchedule(read_log(params.file, params) if params.file is not None else [], params)

    def advance(self, schedule: VenSchedule, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        return schedule.at(self.utc(time_s))


def telemetry_callback(readings: Callable[[], list[tuple[datetime, float]]],
                       poll_s: float = 0.1) -> Callable[..., Any]:
    """An ``OpenADRClient.add_report(..., data_collection_mode="full")`` callback that sends the
    run's metered power: each call returns the ``(time, MW)`` readings of ``readings()`` not sent
    yet, waiting (``poll_s`` at a time) until there are some: openleadr 0.5's VTN answers an
    empty report with an error, so none is sent."""
    sent = 0

    async def callback(date_from: datetime, date_to: datetime, sampling_interval: timedelta) -> list:
        nonlocal sent
        while len(readings()) <= sent:
            await asyncio.sleep(poll_s)
        rows = readings()[sent:]
        sent += len(rows)
        return [(when, float(value)) for when, value in rows]

    return callback
