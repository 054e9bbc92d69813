"""The direct engine: an in-process loop over the adapters' own mosaik API, giving mosaik's results.

The adapters are ``mosaik_api_v3.Simulator`` objects; this engine calls their own ``init``,
``create``, ``setup_done``, ``step``, ``get_data`` and ``finalize`` in the order mosaik 3.6 would
for time-based simulators (``world.run(until=duration_s, lazy_stepping=True)``, the rules and
their places in mosaik's source are in DESIGN's engine notes):

* every simulator steps first at 0, then at the time its ``step`` returned; one that returns a
  time at or past the end never steps again (its last outputs stay readable). Nothing steps at
  the end time itself;
* the simulators due at a time T step in an order in which every undelayed connection points
  forward (:func:`cosim.run.graph.sim_order`), the recorder last;
* a simulator's inputs at T are, per connection, its source's output from the source's latest
  step at a time <= T (undelayed and weak connections; a weak source downstream of its
  destination has not stepped at T yet, so it gives its previous output) or <= T - 1
  (time-shifted); ``initial_data`` is the source's output before its first step (at -1 for
  time-shifted, at 0 for weak), kept in an insertion-ordered cache read backwards as mosaik's
  is. Inputs are delivered again at every step, also when the source did not step;
* several sources into one input arrive in mosaik's order (by source simulator and delay in
  order of first connection, then connection order), so ``sum_inputs`` adds them in the same
  order and the floats agree to the last bit;
* ``get_data`` follows every step of a simulator with outgoing connections, asking for each
  connected attribute (duplicates kept), and ``max_advance`` is the end time;
* a weak loop is not iterated: mosaik steps time-based simulators once per time (same-time
  re-steps come only from trigger inputs, which time-based models do not have).

No mosaik is imported here. A simulator that raises ends the run as ``failed`` with what was
recorded kept (``ok``, with the reason, when it raises :class:`cosim.sdk.EndRun`); SIGTERM or
Ctrl-C stops it at the next recorded step (:mod:`.stopping`).
"""

from __future__ import annotations

import bisect
import collections
import copy
import functools
import gc
import math
import operator
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosim import registry
from cosim.run import ahead as ahead_module
from cosim.folder import RunFolder
from cosim.run import recorder as recorder_module
from cosim.run.graph import Graph
from cosim.run.graph import build as build_graph
from cosim.run.outcome import Outcome, check_complete
from cosim.run.recorder import RecorderSim
from cosim.run.stopping import STOP, StopRequested
from cosim.scenario import Scenario
from cosim.sdk import ENGINE_C, PLAIN_TYPES, CosimSim, EndRun, run_accelerations, said_accelerations

RECORDER_SID = "_recorder"
RECORDER_EID = "recorder"
#: Read limit offset of each connection kind: a time-shifted input reads the source's output <= T - 1.
SHIFT = {"direct": 0, "weak": 0, "time_shifted": 1}
_MISSING = object()
_STALE = object()  # DirectEngine.next_time not known since the last step
#: Outputs a simulator's cache holds before :meth:`DirectEngine._prune` scans it.
PRUNE_AT = 32
#: Steps between two looks at the caches' sizes (a cache holds at most PRUNE_AT + PRUNE_EVERY);
#: a scan's cost grows with the entries it walks, so scanning rarely costs less per step.
PRUNE_EVERY = 64
#: Steps of a look-ahead block (:class:`_Blocks`): a day at 1-minute steps.
BLOCK_STEPS = 1_440


class SimulationError(RuntimeError):
    """A simulator broke the mosaik API (a step time that is not a later int, an output time in the past)."""


@dataclass
class _Pull:
    """Inputs one simulator takes from one source simulator over one kind of connection."""

    src: "_Sim"
    kind: str  # weak and undelayed connections read alike but are separate groups in mosaik
    shift: int
    #: (source eid, source attr, destination eid, destination attr, "sid.eid" of the source)
    entries: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    _by_entity: list[tuple[str, list[tuple[str, int]]]] | None = None

    def slots(self, slot_of: dict[str, int]) -> list[tuple[str, list[tuple[str, int]]]]:
        """``[(source eid, [(attr, recorder column position), ...]), ...]`` of the entries."""
        if self._by_entity is None:
            grouped: dict[str, list[tuple[str, int]]] = {}
            for src_eid, src_attr, _, _, _ in self.entries:
                grouped.setdefault(src_eid, []).append((src_attr, slot_of[f"{src_eid}.{src_attr}"]))
            self._by_entity = list(grouped.items())
        return self._by_entity


@dataclass
class _Sim:
    sid: str
    obj: Any
    next_t: int | None = 0
    last_t: int = -1
    #: output time -> get_data result, in insertion order (read backwards, as mosaik's cache)
    cache: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)
    request: dict[str, list[str]] = field(default_factory=dict)
    pulls: list[_Pull] = field(default_factory=list)
    #: (destination eid, attr) -> value set from outside (a Session), replacing connected inputs
    held: dict[tuple[str, str], Any] = field(default_factory=dict)
    #: its step is CosimSim's (sum_inputs, then step_entities): the engine may hand it collapsed inputs
    collapsible: bool = False
    input_plan: Any = None  # built on first use (_input_plan)
    read: Any = None  # ``obj.get_data(request)`` as a function of no arguments, made at the first step (_data_reader)
    #: stepped ahead in a worker process: its steps are taken from there (:mod:`cosim.run.ahead`)
    feed: Any = None
    #: in that worker: called with each step's record to send (``tap(sim, t, next_t, out_t, data)``)
    tap: Any = None
    #: the time of the cache's last entry in insertion order (None: not known), and its output
    newest_t: int | None = None
    newest: Any = None

    def keep(self, out_t: int, data: dict[str, dict[str, Any]]) -> None:
        """Cache the output of a step (at output time ``out_t``)."""
        # a time already cached keeps its place in the order: the last entry is then another one
        self.newest_t, self.newest = (None, None) if out_t in self.cache else (out_t, data)
        self.cache[out_t] = data

    def output_at(self, limit: int) -> dict[str, dict[str, Any]]:
        """The cached output of the latest entry with time <= ``limit`` (mosaik's backwards scan)."""
        if self.newest_t is not None and self.newest_t <= limit:  # the scan's first look, without the scan
            return self.newest
        for when in reversed(self.cache):
            if when <= limit:
                return self.cache[when]
        return {}


@dataclass
class _Twin(_Sim):
    """A simulator's stand-in in a look-ahead block (:class:`_Blocks`): the run's own adapter
    object (served blocks) or a copy of it (hints only; None for a hinted simulator, only read),
    its own cache, read by bisection (a block's cache holds a whole block of outputs)."""

    times: list[int] = field(default_factory=list)  # the cache's times, in insertion order
    ordered: bool = True  # ... and that order is increasing (else read as mosaik's scan)

    def reindex(self) -> None:
        self.times = list(self.cache)
        self.ordered = all(a < b for a, b in zip(self.times, self.times[1:]))

    def output_at(self, limit: int) -> dict[str, dict[str, Any]]:
        if not self.ordered:
            return super().output_at(limit)
        k = bisect.bisect_right(self.times, limit)
        return self.cache[self.times[k - 1]] if k else {}


class DirectEngine:
    """Runs (or steps) one validated scenario in this process.

    Args:
        scn: the scenario; every simulator must be in-process (validation refuses
            ``process = "subprocess"``, ``cmd`` and ``connect`` with ``engine = "direct"``).
        run_dir: where the recorder writes ``timeseries.parquet``; None records nothing.
        progress: show the recorder's progress bar.
    """

    RECORDER_SID = RECORDER_SID

    def __init__(self, scn: Scenario, run_dir: Path | None, progress: bool = False):
        self.scn = scn
        self.until = scn.until_ticks  # mosaik time: ticks of scenario.tick_s
        self.graph: Graph = build_graph(scn)
        self.run_dir = run_dir
        self.progress = progress
        self.sims: list[_Sim] = []  # in mosaik's start order (also the finalize order)
        self.order: list[_Sim] = []  # in stepping order at one time
        self.by_sid: dict[str, _Sim] = {}
        self.entity_sim: dict[str, _Sim] = {}
        self.time = 0  # the last stepped time [ticks]
        self.started = False
        self._readers: dict[int, list[tuple[_Sim, int]]] | None = None  # source -> (reader, shift)
        self._row_plan = None  # how the recorder's row is gathered (_plan_row)
        self._n_steps = 0  # times stepped (caches are pruned every PRUNE_EVERY)
        self._next_time: Any = _STALE  # next_time, kept until a step changes it
        self.ahead: ahead_module.Ahead | None = None  # the head's worker process, when one runs
        self.blocks: _Blocks | None = None  # look-ahead blocks (run_blocks), when stepped

    # -- building --------------------------------------------------------------------------
    def start(self, built: dict[str, Any] | None = None) -> None:
        """Start every simulator, create the entities, wire the connections and the recorder.

        ``built``: simulators already initialised, created and set up for this scenario (copies
        of started ones, :mod:`cosim.gym.snapshot`), taken as they are, by sim id.
        """
        scn = self.scn
        built = built or {}
        common = {"start_utc": scn.scenario.start.isoformat(), "duration_s": scn.scenario.duration_s,
                  "seed": scn.scenario.seed}
        grouped = [sid for group in self.graph.weak_groups for sid in sorted(group)]
        for sid in [*grouped, *(s for s in scn.sims if s not in grouped)]:
            obj = built.get(sid)
            if obj is None:
                obj = registry.adapter_class(scn.sims[sid].adapter)()
                obj.init(sid, time_resolution=scn.scenario.tick_s, step_s=scn.sim_step_s(sid), **common,
                         **scn.sim_params[sid])
            self._add(sid, obj)
        for eid, spec in scn.entities.items():
            if spec.sim not in built:
                self.by_sid[spec.sim].obj.create(1, spec.model, eid=eid, **scn.entity_params[eid])
            self.entity_sim[eid] = self.by_sid[spec.sim]
        for edge in self.graph.edges:
            self._connect(edge.src, edge.dst, edge.pairs, edge.kind, edge.initial_data)
        if self.run_dir is not None:
            self._start_recorder(common)
        self.order = [self.by_sid[s] for s in self.graph.sim_order]
        if RECORDER_SID in self.by_sid:
            self.order.append(self.by_sid[RECORDER_SID])
        for sim in self.sims:
            if sim.sid not in built:
                sim.obj.setup_done()
        self.started = True

    def _add(self, sid: str, obj: Any) -> None:
        sim = _Sim(sid, obj, collapsible=getattr(type(obj), "step", None) is CosimSim.step)
        self.sims.append(sim)
        self.by_sid[sid] = sim

    def _start_recorder(self, common: dict[str, Any]) -> None:
        scn = self.scn
        rec = RecorderSim()
        rec.init(RECORDER_SID, time_resolution=scn.scenario.tick_s, step_s=scn.record_step_s, **common,
                 path=str(self.run_dir / "timeseries.parquet"), columns=self.graph.columns,
                 chunk_rows=scn.record.chunk_rows, flush_s=scn.record.flush_s, progress=self.progress,
                 label=scn.scenario.name,
                 **({"rt_factor": scn.scenario.rt_factor} if scn.scenario.rt_factor else {}))
        rec.create(1, "Recorder", eid=RECORDER_EID)
        self._add(RECORDER_SID, rec)
        self._column_slot = {column: pos for pos, column in enumerate(self.graph.columns)}
        self._n_columns = len(self.graph.columns)
        for eid, attrs in self.graph.recorded.items():
            self._connect(eid, RECORDER_EID, tuple((a, a) for a in attrs), "direct", {},
                          self.by_sid[RECORDER_SID])

    def _connect(self, src_eid: str, dst_eid: str, pairs, kind: str, initial_data: dict[str, Any],
                 dst: _Sim | None = None) -> None:
        """One connection, as mosaik's ``World.connect`` records it (pull entry, request, seed)."""
        src = self.entity_sim[src_eid]
        dst = dst or self.entity_sim[dst_eid]
        pull = next((p for p in dst.pulls if p.src is src and p.kind == kind), None)
        if pull is None:
            pull = _Pull(src, kind, SHIFT[kind])
            dst.pulls.append(pull)
        for src_attr, dst_attr in pairs:
            pull.entries.append((src_eid, src_attr, dst_eid, dst_attr, f"{src.sid}.{src_eid}"))
            src.request.setdefault(src_eid, []).append(src_attr)
            if kind != "direct" and initial_data.get(src_attr) is not None:
                seed_time = -1 if kind == "time_shifted" else 0
                src.cache.setdefault(seed_time, {}).setdefault(src_eid, {})[src_attr] = initial_data[src_attr]

    # -- stepping --------------------------------------------------------------------------
    @property
    def next_time(self) -> int | None:
        """The next time any simulator steps at, in ticks (None: the run is over)."""
        nxt = self._next_time
        if nxt is _STALE:  # read several times between two steps (a Session's done, time_s): found once
            times = [s.next_t for s in self.sims if s.next_t is not None]
            nxt = self._next_time = min(times) if times else None
        return nxt

    def step(self, t: int | None = None) -> int | None:
        """Step every simulator due at the next time; return that time in ticks (None when finished).

        ``t``: that next time, when the caller has just read :attr:`next_time` (it is not read again).
        """
        if t is None:
            t = self.next_time
        if t is None:
            return None
        self._next_time = _STALE  # (also when a step below raises)
        if self.blocks is not None and t >= self.blocks.stop_ticks:
            self.blocks.fill(t)
        if _step_due is not None and type(self)._step_sim is _STEP_SIM:
            _step_due(self, self.order, t)  # the loop below in C (cosim/run/_engine.c), the same steps
        else:
            for sim in self.order:
                if sim.next_t == t:
                    self._step_sim(sim, t)
        self.time = t
        self._n_steps += 1
        if not self._n_steps % PRUNE_EVERY:
            self._prune()
        return t

    def _inputs(self, sim: _Sim, t: int) -> dict[str, dict[str, dict[str, Any]]]:
        inputs: dict[str, dict[str, dict[str, Any]]] = {}
        empty: dict[str, Any] = {}
        for pull in sim.pulls:
            data = pull.src.output_at(t - pull.shift)
            for src_eid, src_attr, dst_eid, dst_attr, full_id in pull.entries:
                value = data.get(src_eid, empty).get(src_attr, _MISSING)
                if value is _MISSING:
                    warnings.warn(f"Simulator {pull.src.sid}'s entity {src_eid} did not produce output on its "
                                  f"persistent attribute {src_attr} during its last step.", UserWarning)
                    value = None
                # setdefault without its default dicts: they would be built for every entry
                dst = inputs.get(dst_eid)
                if dst is None:
                    dst = inputs[dst_eid] = {}
                sources = dst.get(dst_attr)
                if sources is None:
                    sources = dst[dst_attr] = {}
                sources[full_id] = value
        for (dst_eid, dst_attr), value in sim.held.items():
            inputs.setdefault(dst_eid, {})[dst_attr] = {"session": value}
        return inputs

    def _recorded_refs(self, sim: _Sim, t: int) -> list[dict[str, Any]]:
        """The recorder's row as the source entities' output dicts (one per source entity, in
        pull order), read into columns by the recorder at once (:meth:`_plan_row`): a dict its
        source changes later is recorded as it was at this step."""
        if self._row_plan is None:
            self._row_plan = self._plan_row(sim)
        return _recorded_refs(self._row_plan, t)

    def _plan_row(self, sim: _Sim):
        """``[(source, read shift, source eids), ...]`` by pull, and the recorder told which dict and attribute each
        column is read from (the last one when two fill it, as cell by cell)."""
        plan, fills = [], [None] * self._n_columns
        n = 0
        for pull in sim.pulls:
            eids = []
            for src_eid, attrs in pull.slots(self._column_slot):
                eids.append(src_eid)
                for attr, slot in attrs:
                    fills[slot] = (n, attr)
                n += 1
            plan.append((pull.src, pull.shift, eids))
        rec = sim.obj
        rec.recorder.set_plan(fills, rec.start_utc, rec.ticks_per_s)
        return plan

    def _collapsed_inputs(self, sim: _Sim, t: int) -> dict[str, dict[str, Any]] | None:
        """``sum_inputs(self._inputs(sim, t))`` without the per-source dicts; None when this
        step needs :meth:`_inputs` itself (an output missing: its warnings come in its order).

        The values are read per source entity in pull order into one flat list, then each
        destination attribute takes its sources' values from it (a source connected twice to
        one attribute: the last connection's, as the dict keyed by source keeps) and skips
        None / sums several in order, as :func:`cosim.sdk.sum_inputs` does. An input held from
        outside (``sim.held``) takes the held value in its connected place (also when every
        source gave None); one no connection feeds comes after the rest, in the held order:
        where ``_inputs`` puts the held values, which ``sum_inputs`` then passes on as they are.
        """
        plan = sim.input_plan
        if plan is None:
            plan = sim.input_plan = _input_plan(sim)
        return _collapse(plan[0], plan[1], sim.held, t)

    def _step_sim(self, sim: _Sim, t: int, collapsed: dict[str, dict[str, Any]] | None = None) -> None:
        """Step ``sim`` at ``t`` (``collapsed``: its collapsed inputs at ``t`` when already built)."""
        if sim.feed is not None:  # stepped in the worker process (cosim.run.ahead): take its record
            sim.next_t, out_t, data = sim.feed.take(sim, t)
            if data is not None:
                sim.keep(out_t, data)
            sim.last_t = t
            return
        obj = sim.obj
        if collapsed is not None:
            nxt = obj.step_collapsed(t, collapsed)
        elif sim.collapsible and (
                inputs := self._collapsed_inputs(sim, t) if sim.pulls or sim.held else {}) is not None:
            nxt = obj.step_collapsed(t, inputs)
        elif sim.sid == RECORDER_SID:  # (not collapsible: its step is its own)
            nxt = obj.record_refs(t, self._recorded_refs(sim, t))
        else:
            nxt = obj.step(t, self._inputs(sim, t), self.until)
        if type(nxt) is not int or nxt <= t:  # (one test for the usual case; the checks in order below)
            _check_next(sim, t, nxt)
        out_t = data = None
        if sim.request:
            read = sim.read
            if read is None:
                read = sim.read = _data_reader(obj, sim.request)
            data = read()
            out_t = data.pop("time", t)
            if out_t < t:
                _bad_output_time(sim, out_t, t)
            cache = sim.cache  # sim.keep(out_t, data), without the call
            sim.newest_t, sim.newest = (None, None) if out_t in cache else (out_t, data)
            cache[out_t] = data
        sim.last_t = t
        sim.next_t = nxt if nxt < self.until else None
        if sim.tap is not None:
            sim.tap(sim, t, sim.next_t, out_t, data)

    def _prune(self) -> None:
        """Drop cached outputs no reader can ask for again (keeps memory flat; never needed data).

        A cache is scanned once it holds more than :data:`PRUNE_AT` outputs, not every step:
        reads scan it backwards from the newest, so a few older entries cost nothing, and the
        scan (the readers' earliest read limit) is what cost ~20 µs a step.
        """
        for sim in self.sims:
            if len(sim.cache) > PRUNE_AT:
                self._prune_sim(sim)

    def _prune_sim(self, sim: _Sim) -> None:
        if self._readers is None:
            self._readers = {id(s): [] for s in self.sims}
            for reader in self.sims:
                for pull in reader.pulls:
                    self._readers[id(pull.src)].append((reader, pull.shift))
        limits = [r.next_t - shift for r, shift in self._readers[id(sim)] if r.next_t is not None]
        if not limits:
            sim.cache.clear()
            sim.newest_t = sim.newest = None
            return
        limit = min(limits)
        readable = [w for w in sim.cache if w <= limit]
        if readable:
            keep = max(readable)
            for when in [w for w in sim.cache if w < keep]:
                del sim.cache[when]

    def subset(self, sims: list[_Sim]) -> "DirectEngine":
        """An engine over ``sims`` only (their inputs all come from among them; no recorder),
        sharing their state: what the worker process of :mod:`cosim.run.ahead` steps."""
        sub = DirectEngine.__new__(DirectEngine)
        sub.__dict__.update(self.__dict__)
        keep = {id(s) for s in sims}
        sub.sims = list(sims)
        sub.order = [s for s in self.order if id(s) in keep]
        sub.by_sid = {s.sid: s for s in sims}
        sub.entity_sim = {eid: s for eid, s in self.entity_sim.items() if id(s) in keep}
        sub.run_dir, sub.progress, sub.ahead, sub.blocks = None, False, None, None
        sub._readers, sub._row_plan, sub._n_steps, sub._next_time = None, None, 0, _STALE
        return sub

    def run_ahead(self) -> None:
        """Fork a worker process that steps the scenario's head ahead (:mod:`cosim.run.ahead`),
        when ``[scenario] ahead`` and this machine say so. Call after :meth:`start`."""
        head = ahead_module.head_sims(self)
        if ahead_module.wanted(self, head):
            try:
                self.ahead = ahead_module.Ahead(self, head)
            except OSError as exc:  # no process to be had (EAGAIN, ENOMEM): the same run in this one
                warnings.warn(f"the worker process for {', '.join(s.sid for s in head)} could not be started "
                              f"({exc}); the run steps them in this process (same results)", RuntimeWarning)

    def run_blocks(self, served: bool = True) -> None:
        """Step the simulators that take a look-ahead hint (:meth:`cosim.sdk.CosimSim.look_ahead`),
        and their sources, block by block ahead of the rest (:class:`_Blocks`), when none of them
        is stepped in a worker process. ``served``: the run's own simulators are stepped ahead
        and their steps served from there (a run nobody steps or reads between its steps); else
        copies of the sources are, for the hints only (a :class:`cosim.Session`). Call after
        :meth:`start` (and :meth:`run_ahead`), before the first step; not in a run paced in real
        time (a source read from the wall clock must be read on it)."""
        if self.scn.scenario.rt_factor:
            return
        sims = block_sims(self, copied=not served)
        if sims:
            self.blocks = _Blocks(self, sims, served)

    def accelerations(self) -> dict[str, dict]:
        """The faster paths this run's simulators say they took (:func:`cosim.sdk.run_accelerations`); those
        stepped in a worker process (:mod:`.ahead`) said theirs at its end."""
        here = said_accelerations((sim.sid, sim.obj) for sim in self.sims
                                  if sim.feed is None or sim.feed is self.blocks)  # (blocks: the run's own objects)
        return run_accelerations(here + (self.ahead.accelerations if self.ahead is not None else []))

    def finalize(self, complete: bool = True) -> None:
        """``finalize`` every simulator in start order (the recorder last), even when one raises.

        ``complete``: the run reached its end (else a worker process stepping ahead is told to
        stop; its simulators are finalized there)."""
        elsewhere = self.ahead.finish(complete) if self.ahead is not None else {}
        first: BaseException | None = None
        for sim in self.sims:
            try:
                if sim.feed is not None:
                    if sim.sid in elsewhere:
                        raise elsewhere[sim.sid]
                    continue
                sim.obj.finalize()
            except Exception as exc:  # noqa: BLE001 — the others still get to close their files
                first = first or exc
        if first is not None:
            raise first


def run_direct(scn: Scenario, run_dir: Path, progress: bool = True) -> Outcome:
    """Run ``scn`` on the direct engine into ``run_dir`` (``timeseries.parquet``); see the module docstring."""
    engine = DirectEngine(scn, run_dir, progress)
    n_steps = scn.n_record_steps
    rt_factor = scn.scenario.rt_factor
    started_at = time.perf_counter()
    STOP.install()
    status, reason, error_type = "ok", None, None
    frozen = None
    try:
        engine.start()
        engine.run_ahead()
        engine.run_blocks()
        frozen = freeze_heap()
        while (t := engine.next_time) is not None:
            if rt_factor:
                _sleep_until(started_at + rt_factor * t / scn.ticks_per_s)
            engine.step(t)
        engine.finalize()
    except StopRequested as exc:
        status, reason = "interrupted", str(exc)
        _finalize_quietly(engine)
    except KeyboardInterrupt:
        status, reason = "interrupted", "interrupted (Ctrl-C or SIGTERM, twice)"
        _finalize_quietly(engine)
    except EndRun as exc:  # a simulator ended the run on purpose: what was recorded is the result
        status, reason = "ok", str(exc)
        _finalize_quietly(engine)
    except Exception as exc:  # a simulator failed mid-run: keep what was recorded
        status, reason, error_type = "failed", f"{type(exc).__name__}: {exc}", type(exc).__name__
        _finalize_quietly(engine)
    finally:
        thaw_heap(frozen)
        recorder_module.close_all(run_dir / "timeseries.parquet")
        STOP.restore()
    wall_s = time.perf_counter() - started_at
    rows = _rows(run_dir)
    status, reason = check_complete(status, reason, rows, n_steps)
    behind = recorder_module.RT_BEHIND_MAX_S.pop(str(run_dir / "timeseries.parquet"), None)
    return Outcome(status, reason, wall_s, rows, rows, behind,
                   engine.ahead.describe() if engine.ahead is not None else None, error_type, engine.accelerations())


#: The token of the run of this process that froze the heap (:func:`freeze_heap`) and has not thawed it yet.
_HEAP_HOLDER: object | None = None
_QUIET_FILL = threading.RLock()  # _Blocks.fill: one process-wide warnings filter at a time
_HEAP_LOCK = threading.RLock()  # re-entrant: a Session collected inside freeze_heap thaws through weakref.finalize


def freeze_heap() -> object | None:
    """Keep the objects alive now (the built models, data, libraries) out of the garbage
    collector's full collections until :func:`thaw_heap` (``gc.freeze``): a full collection
    walks the whole heap (~0.1 s with the showcase's models) and a long run makes one every few
    simulated days. Collection only frees unreachable objects: results do not change. A token
    when frozen here (the caller thaws with it at its end); None when the heap is frozen already,
    by another run of this process or by someone else (a pre-forking server), and then left as it
    is. Another run's freeze is known by its token, without ``gc.get_freeze_count()``, which walks
    every frozen object (~20 ms with a vector env's eight Sessions alive)."""
    global _HEAP_HOLDER
    with _HEAP_LOCK:  # runs in threads of one process (a Dask worker's) start at once
        if _HEAP_HOLDER is not None or gc.get_freeze_count():
            return None
        gc.freeze()
        _HEAP_HOLDER = object()
        return _HEAP_HOLDER


def thaw_heap(token: object | None) -> None:
    """Thaw the heap frozen by the run that holds ``token`` (:func:`freeze_heap`'s); nothing for
    another token or None."""
    global _HEAP_HOLDER
    with _HEAP_LOCK:
        if token is not None and token is _HEAP_HOLDER:
            _HEAP_HOLDER = None
            gc.unfreeze()


def block_sims(engine: DirectEngine, copied: bool = False) -> list[_Sim]:
    """The simulators :class:`_Blocks` works with, in stepping order: each one that takes the
    look-ahead hint and is in the scenario's closed head (none of its inputs, direct or
    indirect, comes from the rest; none held), with its sources. None when a worker process
    steps any of them, or when one reads a simulator that steps after it at the same time
    (a time-shifted or weak loop: blocks step simulator by simulator), or when one's
    ``get_data`` is not :class:`cosim.sdk.CosimSim`'s (its outputs could change after a step),
    or (``copied``: the blocks step copies of the sources) when a source is not one a deep copy
    of which starts anew (``CosimSim.built_from``).
    """
    head = {id(s) for s in ahead_module.closed_head(engine)}
    wants = [s for s in engine.sims if id(s) in head and s.collapsible and _takes_hint(s.obj)]
    keep: set[int] = set()
    stack = list(wants)
    while stack:
        sim = stack.pop()
        if id(sim) not in keep:
            keep.add(id(sim))
            stack.extend(pull.src for pull in sim.pulls)
    chosen = [s for s in engine.order if id(s) in keep]
    position = {id(s): k for k, s in enumerate(chosen)}
    read = {id(pull.src) for sim in chosen for pull in sim.pulls}
    for sim in chosen:
        if sim.feed is not None or sim.held or getattr(type(sim.obj), "get_data", None) is not CosimSim.get_data:
            return []
        if any(position[id(pull.src)] >= position[id(sim)] for pull in sim.pulls):
            return []
        if copied and id(sim) in read and sim.obj.built_from() is None:
            return []
    return chosen


def _takes_hint(obj: Any) -> bool:
    return getattr(type(obj), "look_ahead", CosimSim.look_ahead) is not CosimSim.look_ahead


class _Blocks:
    """Steps some simulators block by block ahead of the rest, so that those that take the
    look-ahead hint (PV: pvlib's chain evaluated once per block, as arrays; the hint,
    :meth:`cosim.sdk.CosimSim.look_ahead`) are handed the inputs of a whole block at once.

    The simulators (:func:`block_sims`) take no input from outside the set, and each reads only
    simulators before it in stepping order. A block of :data:`BLOCK_STEPS` steps is stepped
    simulator by simulator: each takes every one of its steps in the block, in time order,
    before the next one starts. Two ways:

    * ``served`` (a run nobody steps or reads between its steps: ``cosim run``): the run's own
      simulators are stepped ahead, and the engine takes their steps from here in its own order
      (as from a worker process, :mod:`.ahead`). Each takes the same calls with the same inputs
      in the same order as stepped with the rest (its own copy of the engine's per-simulator
      state reads its sources' outputs), so the results are the same to the bit. A simulator
      that raises at a step: the engine raises that exception when it reaches the step (the
      set's later simulators are stepped only up to that time). Warnings are given when the
      block is stepped (earlier than the rest's steps of the same times).
    * hinted only (a :class:`cosim.Session`, whose ``set`` may change any input between steps
      and whose ``get`` reads any simulator): deep copies of the sources, taken before the first
      step (of simulators whose ``built_from`` says such a copy is a faithful new start), are
      stepped ahead instead, and each simulator that takes the hint is handed the inputs those
      copies give it; the run's own simulators then step with the rest as usual. Exact whatever
      happens after a block was announced: a simulator serves a step from the hint only when the
      step's inputs equal the announced ones (the hint's contract). The copies' warnings are not
      shown (the run's own steps give them); one that raises ends the block there.
    """

    def __init__(self, engine: DirectEngine, sims: list[_Sim], served: bool):
        self.engine = engine
        self.served = served
        read = {id(pull.src) for sim in sims for pull in sim.pulls}
        copies: dict[int, _Twin] = {}
        for sim in sims:  # sources first: every source has its copy when a reader's pulls are made
            obj = sim.obj if served else copy.deepcopy(sim.obj) if id(sim) in read else None
            twin = _Twin(sim.sid, obj, next_t=sim.next_t, last_t=sim.last_t, cache=dict(sim.cache),
                         request=sim.request, collapsible=sim.collapsible)
            twin.reindex()
            twin.pulls = [_Pull(copies[id(pull.src)], pull.kind, pull.shift, pull.entries) for pull in sim.pulls]
            twin.tap = self._tap
            copies[id(sim)] = twin
        #: the stand-ins stepped ahead (served: every one; else the copies of the sources)
        self.twins = [copies[id(sim)] for sim in sims if served or id(sim) in read]
        #: hinted only: (the run's simulator that takes the hint, its stand-in reading the copies)
        self.hinted = [] if served else [(sim, copies[id(sim)]) for sim in sims if _takes_hint(sim.obj)]
        self.queues: dict[str, collections.deque] = {sim.sid: collections.deque() for sim in sims}
        scn = engine.scn
        self.step_ticks = {sim.sid: max(1, scn.ticks(scn.sim_step_s(sim.sid))) for sim in sims}
        self.span_ticks = BLOCK_STEPS * min(self.step_ticks.values())
        self.stop_ticks: float = 0  # the blocks stepped reach up to here [ticks]; DirectEngine.step fills the next
        if served:
            for sim in sims:
                sim.feed = self

    def _tap(self, sim: _Twin, t: int, next_t: int | None, out_t: int | None, data: Any) -> None:
        if out_t is not None and sim.ordered:
            if not sim.times or out_t > sim.times[-1]:
                sim.times.append(out_t)
            elif out_t < sim.times[-1]:
                sim.ordered = False
        if not self.served:
            return
        if data is not None and not all(PLAIN_TYPES.issuperset(map(type, d.values())) for d in data.values()):
            data = copy.deepcopy(data)  # what a reader at this step would read, kept as it is now
        self.queues[sim.sid].append((t, next_t, out_t, data))

    def take(self, sim: _Sim, t: int) -> tuple[int | None, int | None, dict | None]:
        """``(next time, output time, outputs)`` of ``sim``'s step at ``t`` (its exception raised here)."""
        queue = self.queues[sim.sid]
        if not queue:
            self.fill(t)
        record = queue.popleft()
        if record[0] != t:
            raise RuntimeError(f"the look-ahead block stepped {sim.sid!r} at {record[0]} where the engine "
                               f"expected it at {t} (a bug: please report it)")
        if len(record) == 2:
            raise record[1]
        return record[1], record[2], record[3]

    def fill(self, t: int) -> None:
        """Step the stand-ins through their times in ``[t, t + span)``, one after the other, and
        (hinted only) hand each simulator that takes the hint the inputs of its steps up to there."""
        stop = t + self.span_ticks
        if self.served:
            stop, failed = self._step_twins(stop)
        else:  # the stand-ins' warnings unheard: their own steps warn in order. The filters are the process's,
            # so cosim's fills take turns (two Sessions' fills in two threads could otherwise leave "ignore")
            with _QUIET_FILL, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                stop, failed = self._step_twins(stop)
        for sim, twin in self.hinted:
            if sim.next_t is not None:
                self._look_ahead(sim.obj, twin, sim.next_t, stop)
        for twin in self.twins:  # after all: a twin's readers come after it
            self._prune(twin, stop)
        self.stop_ticks = math.inf if failed else stop  # after a failure: no further block

    def _step_twins(self, stop: int) -> tuple[int, bool]:
        """The stand-ins stepped up to ``stop``; ``(stop, failed)``: a failure stops the block at its step."""
        engine = self.engine
        failed = False
        for twin in self.twins:
            if twin.next_t is None or twin.next_t >= stop:
                continue
            planned = self._look_ahead(twin.obj, twin, twin.next_t, stop) if self.served else {}
            while twin.next_t is not None and twin.next_t < stop:
                when = twin.next_t
                try:
                    engine._step_sim(twin, when, planned.pop(when, None))
                except Exception as exc:  # noqa: BLE001 — raised at its step (by take(), or by the run's own step)
                    if self.served:
                        self.queues[twin.sid].append((when, exc))
                    twin.next_t = None
                    stop = when  # the engine stops at this step: the later ones need not go further
                    failed = True
                    break
        return stop, failed

    def _look_ahead(self, obj: Any, twin: _Twin, first: int, stop: int) -> dict[int, dict[str, dict[str, Any]]]:
        """Hand ``obj`` (when it takes the hint) the inputs ``twin`` reads at its steps from
        ``first`` (at its step size) before ``stop``; the inputs by time, for its steps to use."""
        if not _takes_hint(obj):
            return {}
        steps = []
        for when in range(first, min(stop, self.engine.until), self.step_ticks[twin.sid]):
            inputs = self.engine._collapsed_inputs(twin, when)
            if inputs is None:  # an output missing: stepped the usual way (its warnings in order)
                break
            steps.append((when, inputs))
        obj.look_ahead(steps)
        return dict(steps)

    @staticmethod
    def _prune(twin: _Twin, stop: int) -> None:
        """Drop the outputs no step from ``stop - 1`` on reads (the latest at or before it stays)."""
        keep = max((w for w in twin.cache if w <= stop - 1), default=None)
        if keep is not None:
            for when in [w for w in twin.cache if w < keep]:
                del twin.cache[when]
        twin.reindex()


def _check_next(sim: _Sim, t: int, nxt: Any) -> None:
    """mosaik's checks of the next step time a simulator's ``step`` returned."""
    if nxt is None:
        raise AssertionError("A time-based simulator must always return a next step")
    if not isinstance(nxt, int):
        raise SimulationError(f"the next step time returned by the step method must be of type int, but is "
                              f"of type {type(nxt)} for simulator \"{sim.sid}\"")
    if nxt <= t:
        raise SimulationError(f"the next step time returned by step must be later than the current step's "
                              f"time, but {nxt} <= {t} for simulator \"{sim.sid}\"")


def _bad_output_time(sim: _Sim, out_t: int, t: int) -> None:
    """mosaik's check of the output time a simulator's data gave (raises)."""
    raise SimulationError(f"Output time ({out_t}) is not >= time ({t}) for simulator \"{sim.sid}\".")


def collapse_inputs(reads: list, collapse: list, held: dict[tuple[str, str], Any], t: int) -> dict[str, dict[str, Any]] | None:
    """:meth:`DirectEngine._collapsed_inputs` of the plan ``(reads, collapse)`` (:func:`_input_plan`) and the inputs
    ``held`` from outside at ``t``: the Python form of the C function that runs in its place when built
    (``cosim/run/_engine.c``, :data:`_collapse`)."""
    flat: list[Any] = []
    append, extend = flat.append, flat.extend
    try:
        for src, shift, groups in reads:
            limit = t - shift
            # output_at's first look, without the call
            data = src.newest if src.newest_t is not None and src.newest_t <= limit else src.output_at(limit)
            for src_eid, getter, one in groups:
                if one:
                    append(getter(data[src_eid]))
                else:
                    extend(getter(data[src_eid]))
    except KeyError:
        return None
    inputs: dict[str, dict[str, Any]] = {}
    for dst_eid, attrs, single in collapse:
        values: dict[str, Any] = {}
        if single and not held:  # every attribute from one source (the usual case)
            for dst_attr, where in attrs:
                if (value := flat[where]) is not None:
                    values[dst_attr] = value
            inputs[dst_eid] = values
            continue
        for dst_attr, where in attrs:
            if held and (dst_eid, dst_attr) in held:
                values[dst_attr] = held[dst_eid, dst_attr]
            elif where.__class__ is int:  # one source
                value = flat[where]
                if value is not None:
                    values[dst_attr] = value
            else:
                present = [flat[i] for i in where if flat[i] is not None]
                if present:
                    values[dst_attr] = present[0] if len(present) == 1 else sum(present)
        inputs[dst_eid] = values
    for (dst_eid, dst_attr), value in held.items():  # (one set in its connected place above stays there)
        inputs.setdefault(dst_eid, {})[dst_attr] = value
    return inputs


def recorded_refs(row_plan: list, t: int) -> list[dict[str, Any]]:
    """:meth:`DirectEngine._recorded_refs` of the row's plan (:meth:`DirectEngine._plan_row`) at ``t``: the Python
    form of the C function that runs in its place when built (:data:`_recorded_refs`)."""
    refs: list[dict[str, Any]] = []
    extend = refs.extend
    empty: dict[str, Any] = {}
    for src, shift, eids in row_plan:
        limit = t - shift
        # output_at's first look, without the call
        data = src.newest if src.newest_t is not None and src.newest_t <= limit else src.output_at(limit)
        extend([data.get(eid, empty) for eid in eids])
    return refs


#: the two above in C when built (cosim.sdk.ENGINE_C), else their Python forms
_collapse = ENGINE_C.collapsed_inputs if ENGINE_C is not None else collapse_inputs
_recorded_refs = ENGINE_C.recorded_refs if ENGINE_C is not None else recorded_refs
#: DirectEngine.step's loop over the simulators due in C when built: each usual step (collapsible, not in a worker,
#: no tap) made there as :meth:`DirectEngine._step_sim` makes it (CosimSim.step_collapsed inline where an adapter
#: keeps it), the others by the method; the Python loop runs where the method is replaced (a benchmark's timers)
_STEP_SIM = DirectEngine._step_sim
_step_due = None
if ENGINE_C is not None:
    ENGINE_C.configure(CosimSim.step_collapsed, CosimSim.seconds, _check_next, _bad_output_time)
    _step_due = ENGINE_C.step_due


def _input_plan(sim: _Sim):
    """``(reads, collapse)`` for :meth:`DirectEngine._collapsed_inputs`.

    ``reads``: per pull, its source, read shift and, per source entity (first-seen order), an
    ``itemgetter`` of its entries' attributes and whether it reads one (then it gives the value,
    not a tuple): the flat list holds every entry's value. ``collapse``: per destination entity
    (first-seen order, as ``_inputs`` fills its dict), per attribute (first-seen order), the
    flat position of its one source, or a tuple of those of its distinct sources in first-seen
    order, each that of the source's last entry (a dict keyed by source keeps the first position
    and the last value); and whether every attribute has one source.
    """
    reads, collapse = [], {}
    n = 0
    for pull in sim.pulls:
        by_src: dict[str, list[int]] = {}  # source eid -> its entries' indexes
        for k, entry in enumerate(pull.entries):
            by_src.setdefault(entry[0], []).append(k)
        flat_pos = [0] * len(pull.entries)
        groups = []
        for src_eid, ks in by_src.items():
            groups.append((src_eid, operator.itemgetter(*(pull.entries[k][1] for k in ks)), len(ks) == 1))
            for k in ks:
                flat_pos[k] = n
                n += 1
        reads.append((pull.src, pull.shift, groups))
        for k, (_, _, dst_eid, dst_attr, full_id) in enumerate(pull.entries):
            collapse.setdefault(dst_eid, {}).setdefault(dst_attr, {})[full_id] = flat_pos[k]
    plan = []
    for dst_eid, attrs in collapse.items():
        wheres = [(attr, _one_or_all(tuple(sources.values()))) for attr, sources in attrs.items()]
        plan.append((dst_eid, wheres, all(where.__class__ is int for _, where in wheres)))
    return reads, plan


def _data_reader(obj: Any, request: dict[str, list[str]]):
    """``obj.get_data(request)`` as a function of no arguments: :meth:`cosim.sdk.CosimSim.data_reader`
    for CosimSim's own ``get_data`` (the same dicts, the request's getters looked up once), else the
    adapter's ``get_data`` with the request bound."""
    if getattr(type(obj), "get_data", None) is CosimSim.get_data:
        return obj.data_reader(request)
    return functools.partial(obj.get_data, request)


def _one_or_all(positions: tuple[int, ...]) -> int | tuple[int, ...]:
    return positions[0] if len(positions) == 1 else positions


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


def _finalize_quietly(engine: DirectEngine) -> None:
    try:
        engine.finalize(complete=False)
    except Exception:  # noqa: BLE001 — finalize of a broken simulator may fail too; the recorder is closed after
        pass


def _rows(run_dir: Path) -> int:
    return RunFolder(run_dir).n_rows()
