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
time otherwise, ``"interrupted"`` when an exception left the ``with`` block early or a stop asked
for (:data:`cosim.run.stopping.STOP`) ended a step, ``"failed"`` when a simulator raised) and the report.
"""

from __future__ import annotations

import math
import time
import weakref
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cosim import registry
from cosim.errors import Problem, ScenarioError
from cosim.run import blas, graph
from cosim.run import recorder as recorder_module
from cosim.run.direct import DirectEngine, freeze_heap, thaw_heap
from cosim.run.outcome import Outcome
from cosim.run.runner import RunResult, finish_run, open_run_folder
from cosim.run.runner import load_scenario
from cosim.run.settable import real_number as _real, value_problem
from cosim.run.stopping import RunStopped
from cosim.scenario import Scenario
from cosim.sdk import CosimSim, EndRun


class Session:
    """One scenario, stepped from Python on the direct engine.

    Args:
        scenario: a scenario file (or a validated :class:`~cosim.scenario.Scenario`).
        overrides: dotted keys replaced before validation (as ``--set``).
        out_dir: where the run folder goes (``<out_dir>/<name>-<UTC time>/``).
        record: write the time series and the run folder; without, nothing is written
            (faster, for training loops) and :meth:`close` returns None.
        report: write ``report.html`` when closing.
        built: simulators already started for this scenario, by sim id (``DirectEngine.start``).

    Raises:
        ScenarioError: the scenario has problems, or needs mosaik (a remote simulator).
        Exception: a simulator failed to start (the run folder says ``failed``, with why).
    """

    def __new__(cls, scenario: str | Path | Scenario, overrides: dict[str, Any] | None = None,
                out_dir: str | Path = "runs", record: bool = True, report: bool = True,
                built: dict[str, Any] | None = None) -> "Session":
        # Set up here rather than in __init__: the heap is frozen once the engine is set up (freeze_heap),
        # and a Session frozen with it would never be collected from a reference cycle, so its finalizer
        # would never thaw the heap. The object handed out is made after the freeze, with the set-up's
        # attributes: a cycle through it is collected as any other, and the heap thawed then.
        started = object.__new__(cls)
        started._start(scenario, overrides, out_dir, record, report, built)
        if not started._frozen:
            return started
        session = object.__new__(cls)
        vars(session).update(vars(started))
        vars(started).clear()
        session._thaw = weakref.finalize(session, thaw_heap, session._frozen)  # a Session dropped without close()
        return session

    def __init__(self, scenario: str | Path | Scenario, overrides: dict[str, Any] | None = None,
                 out_dir: str | Path = "runs", record: bool = True, report: bool = True,
                 built: dict[str, Any] | None = None):
        """(Set up by ``__new__``.)"""

    def _start(self, scenario: str | Path | Scenario, overrides: dict[str, Any] | None, out_dir: str | Path,
               record: bool, report: bool, built: dict[str, Any] | None) -> None:
        self.scn = _direct(scenario, overrides)
        #: mosaik ticks in a second (the scenario's ``ticks_per_s``, a property that checks the tick: kept)
        self.ticks_per_s = self.scn.ticks_per_s
        self._report = report
        self.folder = None
        self._started = None
        self.result: RunResult | None = None
        self.ended: str | None = None  # why a simulator ended the run early (EndRun), if one did
        self._closed = False
        self._broken: BaseException | None = None  # what a simulator raised mid-step (or at start)
        self._interrupted: str | None = None  # the exception that left the with block early
        self._bounds: dict[str, dict[str, tuple[float, float]]] = {}
        self._refused: dict[str, dict[str, str]] = {}  # inputs an entity refuses from outside, with why
        self._inputs: dict[tuple[str, str], tuple[str, str, dict]] = {}  # set before -> (entity, input, its held)
        self._checks: dict[tuple[str, str], tuple[float, float, str | None]] = {}  # -> (low, high, why refused)
        self._frozen = None  # the heap kept from full garbage collections while it runs (freeze_heap's token)
        if record:
            graph.check_record(self.scn)
            self.folder, self._started = open_run_folder(self.scn, out_dir)
        self.engine = DirectEngine(self.scn, self.folder.path if self.folder else None)
        self._wall0 = time.perf_counter()
        try:
            with blas.one_thread():  # the simulators run on one BLAS thread (cosim.run.blas), as in a run
                self.engine.start(built)
                self.engine.run_blocks(served=False)  # hints only: exact under any later set() or get()
            self._frozen = freeze_heap()  # (its finalizer is made by __new__)
        except BaseException as exc:  # the folder must not say "running" forever
            self._broken = exc
            self.close()
            raise

    # -- where the run is ------------------------------------------------------------------
    @property
    def time_s(self) -> int | float:
        """Simulation time of the next step (an int at whole seconds); the scenario's duration once
        it is over. [s]"""
        nxt = self.engine.next_time
        return self.scn.scenario.duration_s if nxt is None else self._seconds(nxt)

    _seconds = CosimSim.seconds  # (of ticks_per_s)

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
        if not self.done:
            self._run(math.inf, 1)
        return self.time_s

    def run_until(self, t_s: float) -> int | float:
        """Step until :attr:`time_s` >= ``t_s`` (or the end; a time already passed does nothing);
        the new :attr:`time_s`. [s]

        Raises:
            ScenarioError: ``t_s`` is not a number (or NaN).
        """
        self._check_open()
        if type(t_s) is not int and (not _real(t_s) or math.isnan(t_s)):
            raise ScenarioError("Session.run_until", [Problem("t_s", "give the simulation time to run to, in seconds "
                                                                     "from the start (a number), e.g. 3600", t_s)])
        self._run(t_s)
        return self.time_s

    def _run(self, t_s: float, n_steps: float = math.inf) -> None:
        """Step while the run goes on and :attr:`time_s` < ``t_s``, at most ``n_steps`` times."""
        engine = self.engine
        try:
            with blas.one_thread():  # once for all the steps
                while n_steps and self.ended is None and (t := engine.next_time) is not None \
                        and self._seconds(t) < t_s:
                    engine.step(t)
                    n_steps -= 1
        except EndRun as exc:
            self.ended = str(exc)
        except BaseException as exc:  # half a step was taken: this run cannot go on (close says why)
            self._broken = exc
            raise

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
        """Hold input ``attr`` of ``entity`` at ``value`` from the next step on (None releases it: back
        to the scenario's own value, its connection or what its adapter was given, ``CosimSim.release``).

        Raises:
            ScenarioError: the entity has no such input or refuses it from outside, the value is not a finite
                number (Python's or numpy's; true/false only for an on/off input), or it is outside the bounds the
                entity's adapter gives for that input (:func:`cosim.run.settable.value_problem`).
        """
        self._check_open()
        found = self._inputs.get((entity, attr))
        if found is None:  # (an agent sets the same inputs at every decision: checked once)
            eid, name = self._split(f"{entity}.{attr}", "input", self.scn.inputs)
            found = self._inputs[entity, attr] = (eid, name, self.engine.entity_sim[eid].held)
        eid, attr, held = found
        if value is None:
            if held.pop((eid, attr), _NOT_HELD) is not _NOT_HELD:  # back to the scenario's own value
                release = getattr(self.engine.entity_sim[eid].obj, "release", None)
                if release is not None:
                    release(eid, attr)
            return
        checks = self._checks.get((eid, attr))
        if checks is None:
            if eid not in self._bounds:
                self._bounds[eid] = input_bounds(self.scn, eid)
                self._refused[eid] = refused_inputs(self.scn, eid)
            low, high = self._bounds[eid].get(attr, (-math.inf, math.inf))
            checks = self._checks[eid, attr] = (low, high, self._refused[eid].get(attr))
        low, high, refused = checks
        if type(value) is float and refused is None and low <= value <= high and math.isfinite(value):
            held[(eid, attr)] = value  # (the usual value, an agent's: value_problem finds nothing in it)
            return
        problem = value_problem(eid, attr, value, self._bounds[eid].get(attr), refused, "None")
        if problem:  # else the adapter would raise at the next step, from deep inside, or stop the run
            raise ScenarioError("Session.set", [Problem(f"{eid}.{attr}", problem, value)])
        held[(eid, attr)] = float(value)

    def interrupt(self, reason: str) -> None:
        """The caller cannot go on (``reason``: a federation that stopped answering, an error of its
        own): :meth:`close` writes the run ``interrupted`` with that reason and what was recorded."""
        self._interrupted = reason

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
        if self._broken is not None:
            raise RuntimeError(f"this Session's run broke at t = {self.time_s} s ({_describe(self._broken)}); "
                               "close it (its run folder says why) and start a new one")

    # -- closing ---------------------------------------------------------------------------
    def close(self) -> RunResult | None:
        """Finalize the simulators and write the run folder; the :class:`RunResult` (None
        without ``record``). Safe to call twice."""
        if self._closed:
            return self.result
        self._closed = True
        if self._frozen:
            self._thaw()
        failure = None
        try:
            with blas.one_thread():
                self.engine.finalize(complete=self.done and self._broken is None)
        except Exception as exc:  # noqa: BLE001 — the series is kept; metadata says what failed
            failure = f"{type(exc).__name__}: {exc}"
        finally:
            if self.folder is not None:  # this run's recorder only: another run of the process keeps its own
                recorder_module.close_all(self.folder.path / "timeseries.parquet")
        if self.folder is None:
            return None
        rows = self.folder.n_rows()
        at = f"at t = {self.time_s} s of {self.scn.scenario.duration_s} s"
        if isinstance(self._broken, RunStopped):  # a stop asked for (SIGTERM, Ctrl-C: STOP), met at a step
            status, reason = "interrupted", f"{self._broken} {at}"
        elif isinstance(self._broken, Exception):
            status, reason = "failed", f"{_describe(self._broken)} ({at})"
        elif self._broken is not None:  # Ctrl-C (KeyboardInterrupt) mid-step
            status, reason = "interrupted", f"interrupted by {_describe(self._broken)} {at}"
        elif failure:
            status, reason = "failed", failure
        elif self.done:
            status, reason = "ok", self.ended
        elif self._interrupted:
            status, reason = "interrupted", f"interrupted by {self._interrupted} {at}"
        else:
            status, reason = "stopped", f"session closed {at}"
        outcome = Outcome(status, reason, time.perf_counter() - self._wall0, rows, rows,
                          accelerations=engine.accelerations() if (engine := getattr(self, "engine", None)) else None)
        self.result = finish_run(self.scn, self.folder, outcome, self._started, self._report)
        return self.result

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and self._broken is None:  # the run folder says the block did not end normally
            self._interrupted = _describe(exc)
        self.close()


_NOT_HELD = object()


def _adapter_and_params(scn: Scenario, eid: str) -> tuple[Any, Any]:
    """The adapter class of entity ``eid`` and its validated params (None without a params model)."""
    entity = scn.entities[eid]
    cls = registry.adapter_class(scn.sims[entity.sim].adapter)
    params_cls = getattr(cls, "ModelParams", {}).get(entity.model)
    params = None if params_cls is None else params_cls.model_validate(
        scn.entity_params[eid], context={"base_dir": scn.base_dir})
    return cls, params


def input_bounds(scn: Scenario, eid: str) -> dict[str, tuple[float, float]]:
    """``{input: (low, high)}`` entity ``eid`` accepts from outside: its adapter's bounds
    (``CosimSim.settable_bounds``: those it states, else the unit's plausible range). [input units]"""
    entity = scn.entities[eid]
    cls, params = _adapter_and_params(scn, eid)
    bounds = cls.settable_bounds(entity.model, params, scn.sim_models.get(entity.sim))
    return {attr: (float(low), float(high)) for attr, (low, high) in bounds.items()}


def refused_inputs(scn: Scenario, eid: str) -> dict[str, str]:
    """``{input: why}`` entity ``eid`` must not be given from outside (``CosimSim.refused_inputs``)."""
    entity = scn.entities[eid]
    cls, params = _adapter_and_params(scn, eid)
    return dict(cls.refused_inputs(entity.model, params, scn.sim_models.get(entity.sim)))


def _direct(scenario: str | Path | Scenario, overrides: dict[str, Any] | None) -> Scenario:
    """The scenario validated for the direct engine, with ``overrides`` applied (also to a
    Scenario given as such: it is validated again from its file)."""
    if not isinstance(scenario, Scenario):
        return load_scenario(scenario, {**(overrides or {}), "scenario.engine": "direct"})
    if overrides or scenario.engine != "direct":
        return load_scenario(scenario.file, {**scenario.overrides, **(overrides or {}), "scenario.engine": "direct"})
    return scenario


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
