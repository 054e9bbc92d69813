"""Stepping a scenario from Python (notebooks, learning agents, an optimiser in the loop).

A :class:`Session` runs a scenario on the direct engine one time at a time::

    import cosim

    with cosim.Session("scenarios/default.toml", overrides={"scenario.duration_s": 7200}) as s:
        s.run_until(3600)                        # one hour
        print(s.utc, s.get("campus.p_mw"))       # 01:00 UTC, the cluster's draw [MW]
        s.set("campus", "p_cap_w", 500.0)        # cap every GPU at 500 W from now on
        s.run_until(7200)
    result = s.result                            # the run folder, as `cosim run` writes it

``set`` holds an input until it is set again (``None`` releases it): the held value replaces
whatever connections feed that input. Same scenario, seed and sequence of ``set`` calls give
identical results. ``close`` (or leaving the ``with`` block) writes the run folder: time
series, KPIs, metadata (``status = "ok"`` when the run reached its end, ``"stopped"`` with the
time otherwise) and the report.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cosim.errors import Problem, ScenarioError
from cosim.run import recorder as recorder_module
from cosim.run.direct import DirectEngine
from cosim.run.outcome import Outcome
from cosim.run.runner import RunResult, finish_run, open_run_folder
from cosim.scenario import Scenario, load_scenario
from cosim.sdk import EndRun


class Session:
    """One scenario, stepped from Python on the direct engine.

    Args:
        scenario: a scenario file (or a validated :class:`~cosim.scenario.Scenario`).
        overrides: dotted keys replaced before validation (as ``--set``).
        out_dir: where the run folder goes (``<out_dir>/<name>-<UTC time>/``).
        record: write the time series and the run folder; without, nothing is written
            (faster, for training loops) and :meth:`close` returns None.
        report: write ``report.html`` when closing.

    Raises:
        ScenarioError: the scenario has problems, or needs mosaik (a remote simulator).
    """

    def __init__(self, scenario: str | Path | Scenario, overrides: dict[str, Any] | None = None,
                 out_dir: str | Path = "runs", record: bool = True, report: bool = True):
        self.scn = scenario if isinstance(scenario, Scenario) else load_scenario(
            scenario, {**(overrides or {}), "scenario.engine": "direct"})
        self._report = report
        self.folder = None
        self._started = None
        if record:
            self.folder, self._started = open_run_folder(self.scn, out_dir)
        self.engine = DirectEngine(self.scn, self.folder.path if self.folder else None)
        self._wall0 = time.perf_counter()
        self.engine.start()
        self.result: RunResult | None = None
        self.ended: str | None = None  # why a simulator ended the run early (EndRun), if one did
        self._closed = False

    # -- where the run is ------------------------------------------------------------------
    @property
    def time_s(self) -> int | float:
        """Simulation time of the next step (an int at whole seconds); the scenario's duration once
        it is over. [s]"""
        nxt = self.engine.next_time
        if nxt is None:
            return self.scn.scenario.duration_s
        whole, part = divmod(nxt, self.scn.ticks_per_s)
        return whole if not part else nxt / self.scn.ticks_per_s

    @property
    def utc(self) -> datetime:
        """UTC time of :attr:`time_s`."""
        return self.scn.scenario.start + timedelta(seconds=self.time_s)

    @property
    def done(self) -> bool:
        """The run reached the scenario's end, or a simulator ended it (:attr:`ended`)."""
        return self.ended is not None or self.engine.next_time is None

    # -- moving ----------------------------------------------------------------------------
    def step(self) -> int | float:
        """Step every simulator due at :attr:`time_s`; the new :attr:`time_s`.

        A simulator that ends the run on purpose (:class:`cosim.sdk.EndRun`, e.g. an FMU that
        asks to terminate) makes :attr:`done` true and :attr:`ended` its message; stepping
        further does nothing, and :meth:`close` writes an ``ok`` run with that reason."""
        self._check_open()
        if self.done:
            return self.time_s
        try:
            self.engine.step()
        except EndRun as exc:
            self.ended = str(exc)
        return self.time_s

    def run_until(self, t_s: float) -> int | float:
        """Step until :attr:`time_s` >= ``t_s`` (or the end); the new :attr:`time_s`. [s]"""
        self._check_open()
        while not self.done and self.time_s < t_s:
            self.step()
        return self.time_s

    # -- reading and setting ---------------------------------------------------------------
    def get(self, name: str) -> Any:
        """The latest value of ``"<entity>.<output>"`` (after the entity's last step)."""
        eid, attr = self._split(name, "output", self.scn.outputs)
        return self.engine.entity_sim[eid].obj.get_data({eid: [attr]})[eid][attr]

    def outputs(self) -> dict[str, Any]:
        """Every output of every entity: ``{"<entity>.<attr>": value}``."""
        values: dict[str, Any] = {}
        for eid in self.scn.entities:
            attrs = self.scn.outputs(eid)
            data = self.engine.entity_sim[eid].obj.get_data({eid: attrs})[eid]
            values.update({f"{eid}.{a}": data.get(a) for a in attrs})
        return values

    def set(self, entity: str, attr: str, value: float | bool | None) -> None:
        """Hold input ``attr`` of ``entity`` at ``value`` from the next step on (None releases it).

        Raises:
            ScenarioError: the entity has no such input, or the value is not a finite number.
        """
        self._check_open()
        eid, attr = self._split(f"{entity}.{attr}", "input", self.scn.inputs)
        held = self.engine.entity_sim[eid].held
        if value is None:
            held.pop((eid, attr), None)
            return
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ScenarioError("Session.set", [Problem(f"{eid}.{attr}", "give a finite number (in the unit of the "
                                                                      "name's suffix), or None to release it", value)])
        held[(eid, attr)] = float(value)

    def _split(self, name: str, kind: str, known) -> tuple[str, str]:
        eid, _, attr = name.partition(".")
        if eid not in self.scn.entities:
            raise ScenarioError("Session", [Problem(name, f"no entity {eid!r}; entities: "
                                                          f"{', '.join(self.scn.entities)}")])
        names = known(eid)
        if attr not in names:
            raise ScenarioError("Session", [Problem(name, f"{eid} has no {kind} {attr!r}; {kind}s: "
                                                          f"{', '.join(names) or 'none'}")])
        return eid, attr

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Session is closed; start a new one")

    # -- closing ---------------------------------------------------------------------------
    def close(self) -> RunResult | None:
        """Finalize the simulators and write the run folder; the :class:`RunResult` (None
        without ``record``). Safe to call twice."""
        if self._closed:
            return self.result
        self._closed = True
        failure = None
        try:
            self.engine.finalize(complete=self.done)
        except Exception as exc:  # noqa: BLE001 — the series is kept; metadata says what failed
            failure = f"{type(exc).__name__}: {exc}"
        finally:
            recorder_module.close_all()
        if self.folder is None:
            return None
        rows = self.folder.n_rows()
        if failure:
            status, reason = "failed", failure
        elif self.done:
            status, reason = "ok", self.ended
        else:
            status, reason = "stopped", f"session closed at t = {self.time_s} s of {self.scn.scenario.duration_s} s"
        outcome = Outcome(status, reason, time.perf_counter() - self._wall0, rows, rows)
        self.result = finish_run(self.scn, self.folder, outcome, self._started, self._report)
        return self.result

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
