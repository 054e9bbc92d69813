"""A live run as an OpenADR 2.0b VEN: an openleadr client registered with a VTN while the run steps.

``cosim serve SCENARIO --vtn [URL]`` makes the scenario's ``openadr_events`` entity (model ``Events``)
the VEN. Nothing contacts a network without ``--vtn``: the scenario may name the VTN
(``vtn_url``, ``ven_name``), but only the command line joins it.

* **Events.** Each ``oadrDistributeEvent`` is parsed, checked and answered (``optIn``/``optOut``)
  by the same code and policy as the log replay (:mod:`cosim.adapters.openadr_events`), and added
  to the entity's schedule at the run's current instant (its simulated UTC, the wall clock when
  the scenario starts now at ``rt_factor`` 1): the DR responder sees it from the next step. Every
  received event is appended to ``openadr_received.jsonl`` in the run folder, so a batch run
  replays what the live one received.
* **Telemetry.** With the entity's ``telemetry = "entity.attr"`` the VEN offers a
  ``TELEMETRY_USAGE`` report of real power [MW]; the VTN's request sets its granularity. Each
  reading is the mean of the run's values over one granule of simulated time (a granule shorter
  than the scenario's step gives one reading per step: the recorded value), stamped with the
  granule's start; a step whose value is unknown (NaN) is left out, never sent as a number. A
  reading counts as sent once the VTN answered the report carrying it; a report it did not answer
  is sent again when it answers again.
* **A VTN that does not answer.** Registration waits at most ``register_timeout_s`` and fails with
  a message naming the URL. Later, a request the VTN does not answer (refused, timed out) marks it
  ``unreachable`` from that instant; the run goes on with the events already accepted (each still
  ends at its end time) and :meth:`LiveVen.status` says so (``vtn``, ``unreachable_since_utc``),
  until a request is answered again. At the end the VEN waits at most ``flush_timeout_s`` for the
  pending telemetry and writes its status to ``ven.json`` in the run folder.

openleadr runs on an asyncio loop on a thread of its own; it touches the run only through
:attr:`LiveRun.lock` (between two steps).
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib.util
import json
import logging
import math
import threading
import time
import warnings
from collections import deque
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from cosim.adapters.openadr_events import (OpenAdrEventsSim, OpenAdrLogError, VenParams, VenSchedule,
                                           log_line, parse_event)
from cosim.errors import Problem, ScenarioError, few
from cosim.live.run import LiveRun

#: The log of received events, in the run folder (the replay format of ``openadr_events``).
RECEIVED_LOG = "openadr_received.jsonl"
STATUS_FILE = "ven.json"
_reached: contextvars.ContextVar[bool] = contextvars.ContextVar("vtn_reached", default=False)


class VenError(RuntimeError):
    """The VEN cannot join its VTN (unreachable, refused, no registration); the message says which."""


def _utc_text(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def find_ven(run: LiveRun, eid: str | None = None) -> tuple[str, VenSchedule, VenParams]:
    """The run's ``openadr_events`` entity (``eid``, or the only one): its id, schedule and params.

    Raises:
        ScenarioError: none, several without ``eid``, or ``eid`` is not one.
    """
    found = {}
    for sim in run.session.engine.sims:
        if isinstance(sim.obj, OpenAdrEventsSim):
            found.update(sim.obj.entities)
    where = str(run.scn.file)
    if eid is None and len(found) == 1:
        eid = next(iter(found))
    if eid not in found:
        message = ("no openadr_events entity (model Events) to act as the VEN; add one, e.g. "
                   "events = { sim = \"adr\", model = \"Events\", resource_ids = [\"campus\"] }") if not found else (
            f"give the VEN's entity with --ven-entity, one of {few(sorted(found))}" if eid is None
            else f"{eid!r} is not an openadr_events entity; those are {few(sorted(found))}")
        raise ScenarioError(where, [Problem("--vtn", message)])
    schedule = found[eid]
    return eid, schedule, schedule.params


def telemetry_source(run: LiveRun, eid: str, params: VenParams) -> tuple[str, str] | None:
    """``(entity, attr)`` of the entity's ``telemetry`` param, checked against the scenario."""
    if params.telemetry is None:
        return None
    entity, _, attr = params.telemetry.partition(".")
    where = str(run.scn.file)
    if entity not in run.scn.entities:
        raise ScenarioError(where, [Problem(f"entities.{eid}.telemetry", f"no entity {entity!r}; entities: "
                                            f"{few(list(run.scn.entities))}", params.telemetry)])
    if attr not in run.scn.outputs(entity):
        raise ScenarioError(where, [Problem(f"entities.{eid}.telemetry", f"{entity} has no output {attr!r}; its "
                                            f"outputs: {few(run.scn.outputs(entity))}", params.telemetry)])
    return entity, attr


def granules(readings: list[tuple[datetime, float]], start: datetime, granularity_s: float,
             step_s: float) -> list[tuple[datetime, float]]:
    """Readings averaged over granules of ``max(granularity_s, step_s)`` from ``start``, stamped with
    each granule's start; only complete granules (a later reading exists) are returned. [MW]"""
    span_s = max(granularity_s, step_s)
    if span_s <= step_s:
        return list(readings)
    bins: dict[int, list[float]] = {}
    for when, value in readings:
        bins.setdefault(int((when - start).total_seconds() // span_s), []).append(value)
    if not readings:
        return []
    last = int((readings[-1][0] - start).total_seconds() // span_s)
    complete = last if (readings[-1][0] - start).total_seconds() + step_s < (last + 1) * span_s else last + 1
    return [(start + timedelta(seconds=k * span_s), sum(v) / len(v)) for k, v in sorted(bins.items()) if k < complete]


class LiveVen:
    """The VEN of one live run (see the module docstring).

    Args:
        run: the live run (not started yet, or running).
        vtn_url: the VTN's OpenADR 2.0b endpoint, e.g. ``http://127.0.0.1:8080/OpenADR2/Simple/2.0b``.
        eid: the ``openadr_events`` entity (None: the only one).
        ven_name: the name to register under (None: the entity's ``ven_name``, else its id).
        register_timeout_s: the longest wait for the VTN's registration answer. [s]
        flush_timeout_s: the longest wait for pending telemetry at the end. [s]
        say: where state changes are told (the VTN lost or back).
    """

    def __init__(self, run: LiveRun, vtn_url: str, eid: str | None = None, ven_name: str | None = None,
                 register_timeout_s: float = 15.0, flush_timeout_s: float = 10.0,
                 say: Callable[[str], None] = print):
        self.run, self.vtn_url, self.say = run, vtn_url, say
        self.eid, self.schedule, self.params = find_ven(run, eid)
        self.ven_name = ven_name or self.params.ven_name or self.eid
        self.source = telemetry_source(run, self.eid, self.params)
        self.register_timeout_s, self.flush_timeout_s = register_timeout_s, flush_timeout_s
        self.log = Path(run.run_dir) / RECEIVED_LOG
        self.readings: list[tuple[datetime, float]] = []
        self.n_sent = 0  # readings handed to openleadr
        self.n_delivered = 0  # readings in reports the VTN answered
        self._in_flight: deque[int] = deque()  # sizes of the reports handed out, not answered yet
        self.answers: dict[str, int] = {"optIn": 0, "optOut": 0}
        self.refused: list[str] = []
        self.reachable: bool | None = None
        self.unreachable_since: datetime | None = None
        self.unreachable_since_sim: datetime | None = None
        self.last_contact: datetime | None = None
        self.last_error: str | None = None
        self.ven_id: str | None = None
        self.registration_id: str | None = None
        self.granularity_s: float | None = None
        self._lock = threading.Lock()
        self._closing = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cosim-openadr-ven", daemon=True)
        self._client = None
        self._errors = _LastError()

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Register with the VTN (bounded) and start polling; steps feed the telemetry from now on.

        Raises:
            VenError: the VTN did not register this VEN within ``register_timeout_s``.
        """
        if importlib.util.find_spec("openleadr") is None:
            raise VenError("--vtn needs the openleadr package: pip install 'cosim[protocols]'")
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._register(), self._loop)
        try:
            future.result(self.register_timeout_s + 5.0)
        except (VenError, TimeoutError) as exc:
            self._shutdown_loop()
            if isinstance(exc, VenError):
                raise
            raise VenError(self._no_registration(f"no answer within {self.register_timeout_s:g} s")) from None
        self.run.step_hooks.append(self._after_step)
        self.run.ven = self

    async def _register(self) -> None:
        openleadr = _import_openleadr()
        logger = logging.getLogger("openleadr")
        logger.addHandler(self._errors)
        logger.propagate = False  # its per-poll errors would flood the console: the status says it once
        logging.getLogger("apscheduler").setLevel(logging.ERROR)  # "skipped: instance running" per second
        client = _Client(self, ven_name=self.ven_name, vtn_url=self.vtn_url, allow_jitter=False)
        client.add_handler("on_event", self._on_event)
        client.add_handler("on_update_event", self._on_event)
        if self.source is not None:
            resource = self.params.resource_ids[0] if self.params.resource_ids else self.eid
            client.add_report(self._telemetry, resource_id=resource, measurement="real_power",
                              data_collection_mode="full", unit="W", scale="M",
                              sampling_rate=openleadr.objects.SamplingRate(
                                  min_period=timedelta(seconds=1), max_period=timedelta(days=1), on_change=False),
                              report_duration=timedelta(seconds=self.run.scn.scenario.duration_s))
        self._client = client
        try:
            await asyncio.wait_for(client.run(), self.register_timeout_s)
        except asyncio.TimeoutError:
            raise VenError(self._no_registration(f"no answer within {self.register_timeout_s:g} s")) from None
        if not client.registration_id:
            raise VenError(self._no_registration(self._errors.last or "the VTN gave no registration id"))
        self.ven_id, self.registration_id = client.ven_id, client.registration_id

    def _no_registration(self, why: str) -> str:
        return (f"--vtn {self.vtn_url}: the VEN {self.ven_name!r} could not register ({why}); check the URL "
                "(it ends in /OpenADR2/Simple/2.0b) and that the VTN runs and knows this VEN")

    def close(self) -> None:
        """Send the pending telemetry (at most ``flush_timeout_s``), stop the client, write ``ven.json``."""
        if not self._thread.is_alive():
            return
        deadline = time.monotonic() + self.flush_timeout_s
        while self.source is not None and self.reachable and self.granularity_s is not None \
                and self.n_delivered < len(self._ready()) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._closing = True
        self._shutdown_loop()
        try:
            (Path(self.run.run_dir) / STATUS_FILE).write_text(json.dumps(self.status(), indent=2) + "\n")
        except OSError as exc:
            self.say(f"cosim serve: could not write {STATUS_FILE}: {exc}")

    def _shutdown_loop(self) -> None:
        async def stop() -> None:
            if self._client is not None:
                try:
                    await self._client.stop()
                except Exception:  # noqa: BLE001 — a client that never fully started has less to stop
                    pass
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5.0)
            except Exception:  # noqa: BLE001 — stopping is best effort; the loop ends below
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5.0)
            if not self._thread.is_alive():
                self._loop.close()
        logger = logging.getLogger("openleadr")
        logger.removeHandler(self._errors)
        logger.propagate = True

    # -- what the VTN sends --------------------------------------------------------------------
    async def _on_event(self, event: dict) -> str:
        event_id = str(event.get("event_descriptor", {}).get("event_id", "?")) if isinstance(event, dict) else "?"
        with self.run.lock:  # between two steps: the next step sees the whole event or none of it
            received = self.run.session.utc
            if self.run.status not in ("running", "degraded") or self.run.session.done:
                answer, why = "optOut", f"event {event_id}: the run is over (status {self.run.status})"
            else:
                try:
                    parsed = parse_event(event, received, self.params, where=lambda key: f"event {event_id}: {key}")
                except OpenAdrLogError as exc:
                    answer, why = "optOut", str(exc)
                else:
                    self.schedule.add(parsed)
                    answer, why = ("optIn", None) if parsed.opted_in else (
                        "optOut", f"event {event_id}: refused by the VEN's policy (max_shed_mw, min_cap_mw, "
                                  "or a request to draw more)")
                    with open(self.log, "a", encoding="utf-8") as out:
                        out.write(log_line(event, received) + "\n")
        with self._lock:
            self.answers[answer] += 1
            if why:
                self.refused.append(why)
        return answer

    # -- telemetry -----------------------------------------------------------------------------
    def _after_step(self, time_s: float, outputs: dict[str, dict[str, Any]]) -> None:
        """Called by the run after each step (under its lock): keep the step's reading."""
        if self.source is None:
            return
        value = outputs.get(self.source[0], {}).get(self.source[1])
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            with self._lock:
                self.readings.append((self.run.scn.scenario.start + timedelta(seconds=time_s), float(value)))

    def _ready(self) -> list[tuple[datetime, float]]:
        with self._lock:
            readings = list(self.readings)
        return granules(readings, self.run.scn.scenario.start, self.granularity_s or 0.0,
                        float(self.run.scn.scenario.step_s))

    async def _telemetry(self, date_from: datetime, date_to: datetime, sampling_interval: timedelta) -> list:
        """openleadr's ``full`` report callback: the granules not sent yet (waits for one, and while the
        VTN is unreachable: openleadr 0.5's VTN answers an empty report with an error)."""
        self.granularity_s = sampling_interval.total_seconds() if sampling_interval else 0.0
        while len(self._ready()) <= self.n_sent or self.reachable is False:
            if self._closing:
                return []
            await asyncio.sleep(0.05)
        rows = self._ready()[self.n_sent:]
        with self._lock:
            self.n_sent += len(rows)
            self._in_flight.append(len(rows))
        return rows

    # -- the VTN's state -----------------------------------------------------------------------
    def request_done(self, reached: bool, report: bool = False) -> None:
        """One request to the VTN ended: answered (``reached``) or not (refused, timed out). A
        ``report`` not answered is sent again (from the first reading not delivered) once the VTN is back."""
        now = datetime.now(timezone.utc)
        with self._lock:
            if report and self._in_flight:
                if reached:
                    self.n_delivered += self._in_flight.popleft()
                else:
                    self.n_sent = self.n_delivered
                    self._in_flight.clear()
            was = self.reachable
            if reached:
                self.reachable, self.last_contact = True, now
                self.unreachable_since = self.unreachable_since_sim = None
            elif was is not False:
                self.reachable, self.unreachable_since = False, now
                self.unreachable_since_sim = self.run.session.utc
                self.last_error = self._errors.last
        if was is False and reached:
            self.say(f"OpenADR: the VTN at {self.vtn_url} answers again ({_utc_text(now)})")
        elif was and not reached:
            self.say(f"OpenADR: the VTN at {self.vtn_url} is unreachable since {_utc_text(now)} "
                     f"({self._errors.last or 'no answer'}); the run goes on with the events already accepted")

    def status(self) -> dict[str, Any]:
        """What the VEN knows, for ``/state`` and ``ven.json``: the VTN's state, events, telemetry."""
        n_ready = len(self._ready()) if self.source is not None else 0
        with self._lock:
            unreachable = self.reachable is False
            return {
                "entity": self.eid, "vtn_url": self.vtn_url, "ven_name": self.ven_name, "ven_id": self.ven_id,
                "registration_id": self.registration_id,
                "vtn": "unreachable" if unreachable else ("reachable" if self.reachable else "registering"),
                "unreachable_since_utc": _utc_text(self.unreachable_since),
                "unreachable_since_sim_utc": _utc_text(self.unreachable_since_sim),
                "last_contact_utc": _utc_text(self.last_contact), "last_error": self.last_error if unreachable else None,
                "schedule": ("the events accepted before the VTN became unreachable; none received since"
                             if unreachable else "live"),
                "n_events_received": len(self.schedule.events), "n_opt_in": self.answers["optIn"],
                "n_opt_out": self.answers["optOut"], "refused": list(self.refused[-10:]),
                "telemetry": self.params.telemetry, "granularity_s": self.granularity_s,
                "n_readings_sent": self.n_delivered, "n_readings_pending": max(n_ready - self.n_delivered, 0),
            }


class _LastError(logging.Handler):
    """Keeps openleadr's latest error line (it logs connection errors instead of raising them)."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if not text.startswith(("Could not connect", "No RegistrationID")):  # the line before names the error
            self.last = text.splitlines()[0][:200]


def _import_openleadr():
    """openleadr (the protocols extra: only when a live run joins a VTN), without the deprecation
    warnings its signxml dependency prints on import (cryptography's DSA): not the user's to act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*DSA is deprecated")
        import openleadr  # noqa: PLC0415
    return openleadr


def _client_class():
    openleadr = _import_openleadr()

    class Client(openleadr.OpenADRClient):
        """openleadr's client, telling the VEN whether each request reached the VTN."""

        def __init__(self, ven: LiveVen, **kwargs: Any):
            super().__init__(**kwargs)
            self._ven = ven
            self.add_hook("after_receive_xml", lambda _content: _reached.set(True))

        async def _perform_request(self, service, message):
            token = _reached.set(False)
            try:
                return await super()._perform_request(service, message)
            finally:
                self._ven.request_done(_reached.get(), report="oadrUpdateReport" in str(message))
                _reached.reset(token)

    return Client


def _Client(ven: LiveVen, **kwargs: Any):  # noqa: N802 — builds openleadr's client subclass lazily
    return _client_class()(ven, **kwargs)
