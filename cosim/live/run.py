"""A live run: a :class:`cosim.Session` stepped in real time on a thread, read and steered from others.

The stepping thread takes the step at simulation time ``t`` at wall time
``t0 + rt_factor * t`` (``t0``: when stepping began), as ``cosim run --rt-factor`` paces; a step
that takes longer than its slot makes the run late (``lag_s``), never skips a step. Every
access to the session holds :attr:`LiveRun.lock`, so a request sees the state between two
steps, never half of one.

Setting an input (:meth:`LiveRun.set_inputs`) holds it from the next step on, until it is set
again (``None`` releases it: the scenario's connections and params apply again), as
:meth:`cosim.Session.set` does. A request is checked whole first (entity, input names, numbers,
the adapter's bounds) and applied whole or not at all.

The status is ``running`` until a grid's step does not solve (its ``converged`` output false: that
step's voltages, flows and served powers are NaN, served as null) or leaves buses without voltage
(``n_buses_unsupplied`` > 0): from that step on it is ``degraded``, with the reason, and stays so (the
run goes on and takes inputs; the run folder ends ``degraded`` too, :mod:`cosim.run.runner`).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cosim.errors import Problem, ScenarioError, few
from cosim.live.site import LIMIT_INPUT, POWER_OUTPUT, SiteTargets
from cosim.run.outcome import Outcome
from cosim.run.runner import finish_run
from cosim.run.session import Session, input_bounds, refused_inputs
from cosim.run.settable import value_problem
from cosim.scenario import Scenario, load_scenario, read_toml

#: Outputs by which an entity tells its value is a held, stale reading (``adapters/live_signal.py``).
STALENESS_OUTPUTS = ("n_failed_polls", "age_s")


class UnknownEntity(LookupError):
    """A request named an entity the scenario does not have."""


class RunOver(RuntimeError):
    """A request to steer a run that has ended."""


@dataclass(frozen=True)
class InputSpec:
    """One input an entity accepts from outside, with the adapter's bounds (None: any finite number)."""

    name: str
    bounds: tuple[float, float] | None
    refused: str | None = None  # why the entity must not be given this input from outside (None: it may)

    def to_json(self) -> dict[str, Any]:
        """``name``, ``low``, ``high``; an open end (none known, or infinite) is null: JSON has no infinity."""
        low, high = self.bounds if self.bounds is not None else (None, None)
        return {"name": self.name, "low": _finite_or_none(low), "high": _finite_or_none(high)}


def _finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def load_live(path: str | Path, overrides: dict[str, Any] | None, rt_factor: float | None) -> Scenario:
    """The scenario of ``path`` for a live run: direct engine, ``rt_factor`` (else the file's, else 1.0).

    Raises:
        ScenarioError: the scenario has problems.
    """
    overrides = {**(overrides or {}), "scenario.engine": "direct"}
    if rt_factor is not None:
        overrides["scenario.rt_factor"] = rt_factor
    elif overrides.get("scenario.rt_factor") is None:
        raw = read_toml(Path(path)).get("scenario", {})
        if not isinstance(raw, dict) or raw.get("rt_factor") is None:  # a malformed one: load_scenario says so
            overrides["scenario.rt_factor"] = 1.0
    return load_scenario(path, overrides)


class LiveRun:
    """One scenario stepped in real time on a thread (see the module docstring).

    Args:
        scn: a validated scenario with ``engine = "direct"`` and an ``rt_factor`` (:func:`load_live`).
        out_dir: where the run folder goes.
        report: write ``report.html`` at the end.
        on_end: called (on the stepping thread) once the run folder is written.
    """

    def __init__(self, scn: Scenario, out_dir: str | Path = "runs", report: bool = True, on_end=None):
        self.scn = scn
        self.rt_factor = float(scn.scenario.rt_factor or 1.0)
        self.lock = threading.Lock()
        self.session = Session(scn, out_dir=out_dir, report=report)
        self.run_dir = self.session.folder.path
        self.status, self.reason = "running", None
        self._grids = scn.roles().entities_with("grid")
        self.n_steps = 0
        self.last_step_s: float | None = None  # simulation time of the latest step [s]
        self.lag_s = 0.0  # how late the latest step started [s]
        self.outputs: dict[str, dict[str, Any]] = {eid: {} for eid in scn.entities}
        self.inputs = {eid: self._input_specs(eid) for eid in scn.entities}
        self.sites = self._sites()
        self.on_end = on_end
        #: called after each step, under :attr:`lock`, with its time [s] and the outputs (an OpenADR VEN's telemetry)
        self.step_hooks: list = []
        self.ven = None  # a cosim.live.ven.LiveVen when the run acts as an OpenADR VEN
        self._stop = threading.Event()
        self._ended = threading.Event()
        self._wall0 = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="cosim-live-stepper", daemon=True)

    # -- running ---------------------------------------------------------------------------
    def start(self) -> None:
        self._wall0 = time.perf_counter()
        self._thread.start()

    def stop(self, reason: str = "stopped") -> None:
        """End the run now (at a step boundary) and write the run folder; waits for it."""
        with self.lock:
            if self.status in ("running", "degraded"):
                self.reason = reason
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        elif not self._ended.is_set():  # never started
            self._finish(None)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until the run folder is written; True if it is."""
        return self._ended.wait(timeout_s)

    def _loop(self) -> None:
        failure = None
        try:
            while not self._stop.is_set():
                with self.lock:
                    if self.session.done:
                        break
                    next_s = self.session.time_s
                delay = self._wall0 + self.rt_factor * next_s - time.perf_counter()
                if delay > 0 and self._stop.wait(delay):
                    break
                self._step(next_s, max(0.0, -delay))
        except Exception as exc:  # noqa: BLE001 — a simulator failed: the run folder says so, the server stays up
            failure = f"{type(exc).__name__}: {exc}"
        self._finish(failure)

    def _step(self, next_s: float, lag_s: float) -> None:
        with self.lock:
            self.session.step()
            self.n_steps += 1
            self.last_step_s = next_s
            self.lag_s = lag_s
            self._read_outputs()
            for hook in self.step_hooks:
                hook(next_s, self.outputs)
            for eid, limit_mw in self.sites.after_step(next_s, self.scn.scenario.step_s, self.outputs).items():
                if not self.session.done:
                    self.session.set(eid, LIMIT_INPUT, limit_mw)
            if self.status == "running":
                self._check_grids(next_s)

    def _check_grids(self, step_s: float) -> None:
        """``degraded`` from the first step a grid did not solve or left buses without voltage."""
        for grid in self._grids:
            out = self.outputs.get(grid, {})
            if out.get("converged") is False:
                self.status, self.reason = "degraded", (
                    f"grid {grid!r}: the power flow did not converge at t = {step_s:g} s; its voltages, flows "
                    "and served powers are NaN (null) while it does not")
                return
            if (out.get("n_buses_unsupplied") or 0) > 0:
                self.status, self.reason = "degraded", (
                    f"grid {grid!r}: {out['n_buses_unsupplied']:g} buses without voltage from t = {step_s:g} s "
                    "(a line or switch cut them from every source); their loads are not served")
                return

    def _read_outputs(self) -> None:
        fresh: dict[str, dict[str, Any]] = {eid: {} for eid in self.scn.entities}
        for name, value in self.session.outputs().items():
            eid, _, attr = name.partition(".")
            fresh[eid][attr] = plain(value)
        self.outputs = fresh

    def _finish(self, failure: str | None) -> None:
        with self.lock:
            self.status = "finishing"  # writing the run folder (KPIs, report): requests are answered meanwhile
        status, reason = "failed", None
        try:
            result = self.session.close()
            if failure is not None:  # Session.close calls a run that did not end "stopped"; it failed
                started = datetime.fromisoformat(result.metadata["started_utc"])
                rows = result.folder.n_rows()
                outcome = Outcome("failed", failure, time.perf_counter() - self._wall0, rows, rows,
                                  accelerations=result.metadata.get("accelerations"))  # (the Session's, kept)
                result = finish_run(self.scn, result.folder, outcome, started, False)
            elif result.status == "stopped" and self.reason:  # say why it stopped (Session says "closed")
                result.reason = f"{self.reason} at t = {self.session.time_s} s of {self.scn.scenario.duration_s} s"
                result.metadata["reason"] = result.reason
                result.folder.write_metadata(result.metadata)
            status, reason = result.status, result.reason
        except Exception as exc:  # noqa: BLE001 — keep serving; say what broke
            reason = f"{type(exc).__name__}: {exc}"
            print(f"cosim serve: writing the run folder failed: {reason}", file=sys.stderr)
        with self.lock:
            self.status, self.reason = status, reason
        self._ended.set()
        if self.on_end is not None:
            self.on_end(self)

    # -- reading -----------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The run's state: where it is, how it keeps time, where it writes."""
        with self.lock:
            s = self.scn.scenario
            sim_s = self.session.time_s
            wall_s = time.perf_counter() - self._wall0
            return {
                "scenario": s.name, "status": self.status, "reason": self.reason,
                "time_s": sim_s, "utc": self.session.utc.isoformat(), "last_step_s": self.last_step_s,
                "duration_s": s.duration_s, "step_s": s.step_s, "n_steps": self.n_steps,
                "rt_factor": self.rt_factor, "wall_s": round(wall_s, 3), "lag_s": round(self.lag_s, 3),
                "wall_per_sim_ratio": wall_s / sim_s if sim_s else None,
                "run_dir": str(self.run_dir.resolve()),
                **({"ven": self.ven.status()} if self.ven is not None else {}),
            }

    def entities(self) -> list[dict[str, Any]]:
        """Every entity: id, model, role and the inputs it takes from outside with their bounds."""
        info = self.scn.entity_info()
        with self.lock:
            held = self._held()
        return [{"id": eid, **info[eid], "inputs": [spec.to_json() for spec in self.inputs[eid].values()],
                 "held": held.get(eid, {}), "outputs": self.scn.outputs(eid)} for eid in self.scn.entities]

    def entity(self, eid: str) -> dict[str, Any]:
        """One entity's latest outputs (after its latest step) and the inputs held on it."""
        self._known(eid)
        with self.lock:
            return {"id": eid, "last_step_s": self.last_step_s, "outputs": dict(self.outputs[eid]),
                    "held": self._held().get(eid, {})}

    def snapshot(self) -> dict[str, Any]:
        """State and every entity's outputs in one consistent read (for /metrics)."""
        state = self.state()
        with self.lock:
            return {"state": state, "outputs": {eid: dict(v) for eid, v in self.outputs.items()}}

    def stale_entities(self) -> list[str]:
        """Entities that report whether their value is a stale, held reading."""
        return [eid for eid in self.scn.entities if set(STALENESS_OUTPUTS) <= set(self.scn.outputs(eid))]

    # -- steering ----------------------------------------------------------------------------
    def set_inputs(self, eid: str, values: Any) -> dict[str, Any]:
        """Hold ``values`` (``{input: number or None}``) on ``eid`` from the next step on.

        Raises:
            UnknownEntity: no such entity.
            ScenarioError: a name, value or bound is wrong (each problem with its key path); nothing is set.
            RunOver: the run has ended.
        """
        self._known(eid)
        checked = self.check_inputs(eid, values)
        with self.lock:
            if self.status not in ("running", "degraded") or self.session.done:
                raise RunOver(f"the run is over (status {self.status}); its final state is still served")
            for attr, value in checked.items():
                self.session.set(eid, attr, value)
            return {"id": eid, "set": checked, "applies_from_s": self.session.time_s,
                    "applies_from_utc": self.session.utc.isoformat(), "held": self._held().get(eid, {})}

    def check_inputs(self, eid: str, values: Any) -> dict[str, float | None]:
        """``values`` checked against the entity's inputs and their bounds (see :meth:`set_inputs`)."""
        where = f"entities.{eid}"
        if not isinstance(values, dict) or not values:
            raise ScenarioError("request", [Problem(where, 'give a JSON object of inputs and values, e.g. '
                                                           f'{{"{next(iter(self.inputs[eid]), "p_cap_w")}": 500}}',
                                                    values)])
        problems, checked = [], {}
        specs = self.inputs[eid]
        for attr, value in values.items():
            spec = specs.get(attr)
            if spec is None:
                problems.append(Problem(f"{where}.{attr}", f"{eid} has no input {attr!r}; inputs: "
                                                           f"{few(list(specs)) or 'none'}", value))
                continue
            problem = None if value is None else value_problem(eid, attr, value, spec.bounds, spec.refused, "null")
            if problem:
                problems.append(Problem(f"{where}.{attr}", problem, value))
            else:
                checked[attr] = None if value is None else float(value)
        if problems:
            raise ScenarioError("request", problems)
        return checked

    def set_target(self, eid: str, body: Any) -> dict[str, Any]:
        """Start a load target on a site (:mod:`cosim.live.site`); its status.

        Raises:
            UnknownSite: no such site.
            ScenarioError: a bad body or a target outside the site's range; nothing is set.
            RunOver: the run has ended.
        """
        target_p_mw, ramp_mw_per_min, hold_s = self.sites.check(eid, body)
        with self.lock:
            self._running()
            now_s = self.session.time_s
            limit_mw = self.sites.set_target(eid, target_p_mw, ramp_mw_per_min, hold_s, now_s,
                                             self.scn.scenario.step_s)
            self.session.set(eid, LIMIT_INPUT, limit_mw)
            return {**self.sites.status(eid), "applies_from_s": now_s,
                    "applies_from_utc": self.session.utc.isoformat()}

    def release_target(self, eid: str) -> dict[str, Any]:
        """End a site's target: its ``p_limit_mw`` is released from the next step on; its status."""
        self.sites.site(eid)
        with self.lock:
            self._running()
            if self.sites.release(eid, self.session.time_s):
                self.session.set(eid, LIMIT_INPUT, None)
            return self.sites.status(eid)

    def site_status(self, eid: str) -> dict[str, Any]:
        self.sites.site(eid)
        with self.lock:
            return {**self.sites.status(eid), "run_status": self.status}

    def site_events(self, eid: str, after_seq: int) -> tuple[list[dict[str, Any]], bool]:
        """The site's events after ``after_seq``, and whether the run is over (no more will come)."""
        with self.lock:
            return self.sites.events_after(eid, after_seq), self._ended.is_set()

    def _running(self) -> None:
        if self.status not in ("running", "degraded") or self.session.done:
            raise RunOver(f"the run is over (status {self.status}); its final state is still served")

    def _sites(self) -> SiteTargets:
        """Every IT load (role ``it``) that takes ``p_limit_mw`` and reports ``p_mw``, with its range and
        facility limit (the smaller of its ``p_limit_mw`` and ``rated_mw`` params; None: neither given)."""
        bounds, static = {}, {}
        for eid in self.scn.roles().entities_with("it"):
            spec = self.inputs[eid].get(LIMIT_INPUT)
            if spec is None or POWER_OUTPUT not in self.scn.outputs(eid):
                continue
            bounds[eid] = spec.bounds if spec.bounds is not None else (0.0, math.inf)
            params = self.scn.entities[eid].params
            given = [float(params[k]) for k in (LIMIT_INPUT, "rated_mw") if isinstance(params.get(k), (int, float))]
            static[eid] = min(given) if given else None
        return SiteTargets(bounds, static)

    def _input_specs(self, eid: str) -> dict[str, InputSpec]:
        bounds, refused = input_bounds(self.scn, eid), refused_inputs(self.scn, eid)
        return {attr: InputSpec(attr, bounds.get(attr), refused.get(attr)) for attr in self.scn.inputs(eid)}

    def _held(self) -> dict[str, dict[str, float]]:
        held: dict[str, dict[str, float]] = {}
        for sim in self.session.engine.sims:
            for (eid, attr), value in sim.held.items():
                held.setdefault(eid, {})[attr] = value
        return held

    def _known(self, eid: str) -> None:
        if eid not in self.scn.entities:
            raise UnknownEntity(f"no entity {eid!r}; entities: {few(list(self.scn.entities))}")


def plain(value: Any) -> Any:
    """An output as JSON-ready data: bool, float or None (numpy scalars as floats, NaN and inf as None)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if hasattr(value, "dtype") and value.dtype == bool:
        return bool(value)
    return number if math.isfinite(number) else None
