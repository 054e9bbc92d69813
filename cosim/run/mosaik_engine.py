"""The mosaik engine: builds a mosaik world from a validated scenario and runs it.

The only module of cosim that imports mosaik (the orchestrator of record; the default engine,
and the only one for simulators in another process or on another host).
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mosaik
from loguru import logger

from cosim import registry
from cosim.folder import RunFolder
from cosim.run import recorder as recorder_module
from cosim.run.graph import Graph
from cosim.run.graph import build as build_graph
from cosim.run.outcome import Outcome, check_complete
from cosim.run.processes import SimProcesses, Watchdog
from cosim.run.stopping import STOP, RunStopped
from cosim.scenario import Scenario
from cosim.sdk import EndRun, run_accelerations, said_accelerations

RECORDER_SID = "_recorder"
BRIDGE_SIDS = ("_bridge_receive", "_bridge_send")


@dataclass
class Bridge:
    """Two simulators outside the scenario that exchange values with its entities at every scenario
    step (a HELICS federate: :class:`cosim.run.federate.BridgeSim`).

    At each time, ``Receive`` steps before the entities it sets (``writes``: its output
    ``"<entity>.<attr>"`` into that input) and ``Send`` after the entities it reads (``reads``: each
    output into its input ``"<entity>.<attr>"``); ``Send`` follows ``Receive`` at the same time and the
    next ``Receive`` follows ``Send`` (a time-shifted link), so the two alternate as the direct
    engine's loop around :meth:`Session.step` does.
    """

    target: str  # "module:Class" of a CosimSim with the models Receive and Send
    params: dict[str, Any]
    reads: list[tuple[str, str]] = field(default_factory=list)
    writes: list[tuple[str, str]] = field(default_factory=list)


def _configure_logging() -> None:
    """cosim is the application: warnings go to stderr; mosaik's own log is captured per run."""
    try:
        logger.remove(0)  # loguru's default DEBUG handler
    except ValueError:
        return  # already configured (by us or by the embedding program)
    logger.add(sys.stderr, level="WARNING", format="{level}: {message}",
               filter=lambda record: not record["name"].startswith("mosaik"))


_configure_logging()
# After a failure the world is shut down by hand (_shutdown_quietly); when a dead remote simulator
# makes that fail, mosaik's AsyncWorld warns at garbage collection that it "was never shut down":
# the run's status already says what happened.
warnings.filterwarnings("ignore", message="AsyncWorld was never shut down", category=UserWarning)


def _sim_config(scn: Scenario, processes: SimProcesses, bridge: Bridge | None = None) -> dict[str, dict[str, Any]]:
    """mosaik's sim config; ``process = "subprocess"`` sims are started here, by cosim (which then
    owns and watches them), and mosaik connects to them."""
    config: dict[str, dict[str, Any]] = {}
    for sid, spec in scn.sims.items():
        if spec.connect:
            config[sid] = {"connect": spec.connect}
        elif spec.cmd:
            config[sid] = {"cmd": spec.cmd, "cwd": str(scn.base_dir)}
        elif spec.process == "subprocess":
            config[sid] = {"connect": processes.start(sid, registry.target(spec.adapter))}
        else:
            config[sid] = {"python": registry.target(spec.adapter)}
    config[RECORDER_SID] = {"python": "cosim.run.recorder:RecorderSim"}
    if bridge is not None:
        config.update({sid: {"python": bridge.target} for sid in BRIDGE_SIDS})
    return config


class _LostConnections:
    """Fails a run at once when a simulator's connection is reset.

    mosaik's channel fails its pending requests when the socket reaches a clean end, but not when
    it is reset (``ConnectionResetError`` in its reader task): the request then waits out the start
    timeout, or forever mid-run. Every task of the world's loop gets a callback; the first that
    ends with a connection error cancels the loop's tasks (``world.start``/``world.run`` return
    with ``CancelledError``) and is kept as the reason."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.error: BaseException | None = None
        self.armed = True
        loop.set_task_factory(self._task)

    def _task(self, loop, coro, **kwargs):
        task = asyncio.Task(coro, loop=loop, **kwargs)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        if not self.armed or task.cancelled() or self.error is not None:
            return
        exc = task.exception()
        if isinstance(exc, ConnectionError):
            self.error = exc
            for other in asyncio.all_tasks(self.loop):
                other.cancel()

    def disarm(self) -> None:
        self.armed = False


class SimulatorStartFailed(RuntimeError):
    """A simulator's connection failed while it was being started (its message is the run's reason)."""


def _start_sims(world: mosaik.World, scn: Scenario, graph: Graph, lost: _LostConnections) -> dict[str, Any]:
    common = {"start_utc": scn.scenario.start.isoformat(), "duration_s": scn.scenario.duration_s,
              "seed": scn.scenario.seed}
    started: dict[str, Any] = {}

    def start(sid: str) -> None:
        try:
            started[sid] = world.start(sid, sim_id=sid, step_s=scn.sim_step_s(sid), **common, **scn.sim_params[sid])
        except (OSError, SystemExit, asyncio.CancelledError) as exc:  # refused, reset or closed while it starts
            if isinstance(exc, asyncio.CancelledError):
                if lost.error is None:
                    raise
                exc = lost.error
            spec = scn.sims[sid]
            where = f" at {spec.connect}" if spec.connect else ""
            detail = str(exc.code if isinstance(exc, SystemExit) else exc) or type(exc).__name__
            raise SimulatorStartFailed(f"simulator {sid!r}{where} could not be started: {detail}"
                                       f"{'' if isinstance(exc, SystemExit) else f' ({type(exc).__name__})'}") from exc

    for group in graph.weak_groups:
        with world.group():
            for sid in sorted(group):
                start(sid)
    for sid in scn.sims:
        if sid not in started:
            start(sid)
    return started


def _connect_all(world: mosaik.World, graph: Graph, entities: dict[str, Any]) -> None:
    for edge in graph.edges:
        kwargs: dict[str, Any] = {}
        if edge.delayed:
            kwargs = {edge.kind: True, "initial_data": edge.initial_data}
        world.connect(entities[edge.src], entities[edge.dst], *edge.pairs, **kwargs)


def _start_bridge(world: mosaik.World, scn: Scenario, bridge: Bridge, entities: dict[str, Any]) -> None:
    common = {"start_utc": scn.scenario.start.isoformat(), "duration_s": scn.scenario.duration_s,
              "seed": scn.scenario.seed, "step_s": scn.scenario.step_s, **bridge.params}
    receive = world.start(BRIDGE_SIDS[0], sim_id=BRIDGE_SIDS[0], **common).Receive.create(1, eid="receive")[0]
    send = world.start(BRIDGE_SIDS[1], sim_id=BRIDGE_SIDS[1], **common).Send.create(1, eid="send")[0]
    world.connect(receive, send, "t_granted_s")
    world.connect(send, receive, "n_sent", time_shifted=True, initial_data={"n_sent": 0})
    for eid in dict.fromkeys(eid for eid, _ in bridge.writes):
        world.connect(receive, entities[eid], *[(f"{eid}.{attr}", attr) for e, attr in bridge.writes if e == eid])
    for eid in dict.fromkeys(eid for eid, _ in bridge.reads):
        world.connect(entities[eid], send, *[(attr, f"{eid}.{attr}") for e, attr in bridge.reads if e == eid])


def run_world(scn: Scenario, run_dir: Path, progress: bool = True, bridge: Bridge | None = None) -> Outcome:
    """Build the world of ``scn``, run it, and stream outputs to ``run_dir/timeseries.parquet``.

    A simulator that raises mid-run ends the run with status ``failed`` (``ok`` with the reason
    when an in-process one raises :class:`cosim.sdk.EndRun`); what was recorded up to then is
    written and readable. A simulator process that dies (or a run that stops making progress
    with remote simulators) ends it within a second (:mod:`.processes`). ``bridge``: two more
    simulators stepped with the scenario's (:class:`Bridge`); one that raises
    :class:`~cosim.run.stopping.RunStopped` ends the run ``interrupted``.
    """
    errors: list[str] = []
    sink_id = logger.add(lambda msg: errors.append(msg.record["message"]), level="ERROR",
                         filter=lambda record: record["name"].startswith("mosaik"))
    logger.enable("mosaik")
    graph = build_graph(scn)
    columns = graph.columns
    record_step = scn.record_step_s
    n_steps = scn.n_record_steps
    processes = SimProcesses(run_dir / "simulators.log", scn.scenario.start_timeout_s)
    watchdog: Watchdog | None = None
    world = None
    lost: _LostConnections | None = None
    started_at = time.perf_counter()
    STOP.install()
    status, reason, error_type = "ok", None, None
    try:
        world = mosaik.World(_sim_config(scn, processes, bridge), time_resolution=scn.scenario.tick_s, skip_greetings=True,
                             configure_logging=False, mosaik_config={"start_timeout": processes.start_timeout_s})
        lost = _LostConnections(world.loop)
        sims = _start_sims(world, scn, graph, lost)
        entities = {
            eid: getattr(sims[spec.sim], spec.model).create(1, eid=eid, **scn.entity_params[eid])[0]
            for eid, spec in scn.entities.items()
        }
        _connect_all(world, graph, entities)
        if bridge is not None:
            _start_bridge(world, scn, bridge, entities)
        rt_factor = scn.scenario.rt_factor
        rec_sim = world.start(RECORDER_SID, sim_id=RECORDER_SID, start_utc=scn.scenario.start.isoformat(),
                              step_s=record_step, duration_s=scn.scenario.duration_s, seed=scn.scenario.seed,
                              path=str(run_dir / "timeseries.parquet"), columns=columns,
                              chunk_rows=scn.record.chunk_rows, flush_s=scn.record.flush_s, progress=progress,
                              label=scn.scenario.name,
                              **({"rt_factor": rt_factor} if rt_factor else {}))
        rec = rec_sim.Recorder.create(1, eid="recorder")[0]
        for eid, attrs in graph.recorded.items():
            world.connect(entities[eid], rec, *attrs)
        if any(s.process == "subprocess" or s.cmd or s.connect for s in scn.sims.values()):
            watchdog = _watch(world, processes, scn.scenario.stall_timeout_s)
        _keep_output_checks(world)
        with warnings.catch_warnings():
            # with rt_factor mosaik warns after every step that falls behind: the lag is measured
            # once, by the recorder, and reported in metadata.json instead
            warnings.filterwarnings("ignore", message="Simulation too slow for real-time factor")
            world.run(until=scn.until_ticks, print_progress=False, lazy_stepping=True,
                      **({"rt_factor": rt_factor} if rt_factor else {}))
        lost.disarm()  # the simulators' connections close at the end of a run
        if errors:
            status, reason = _remote_outcome(errors[0], run_dir / "simulators.log")
            _shutdown_quietly(world)  # mosaik logged the error and returned: its other tasks still wait
    except RunStopped as exc:  # SIGTERM / Ctrl-C at a step, a federation that stopped: keep what was recorded
        status, reason = "interrupted", str(exc)
        _shutdown_quietly(world)
    except KeyboardInterrupt:  # a second signal: stopped wherever it was
        status, reason = "interrupted", "interrupted (Ctrl-C or SIGTERM, twice)"
        _shutdown_quietly(world)
    except SimulatorStartFailed as exc:
        status, reason = "failed", _death_of(processes) or str(exc)
        _shutdown_quietly(world)
    except SystemExit as exc:  # mosaik exits when a simulator closes its connection or is silent during init
        status, reason = "failed", str(exc.code if exc.code is not None else exc) or "a simulator could not start"
        died = _death_of(processes)
        if died:
            reason = died
        _shutdown_quietly(world)
    except asyncio.CancelledError:  # the watchdog cancelled the run: a simulator process died or stalled
        status, reason = "failed", watchdog.reason if watchdog and watchdog.reason else "the run was cancelled"
        if lost is not None and lost.error is not None and not (watchdog and watchdog.reason):
            reason = _death_of(processes) or f"a simulator's connection was lost mid-run: {lost.error!r}"
        _shutdown_quietly(world)
    except EndRun as exc:  # an in-process simulator ended the run on purpose: what was recorded is the result
        status, reason = "ok", str(exc)
        _shutdown_quietly(world)
    except Exception as exc:  # a simulator failed mid-run: keep what was recorded
        status, reason, error_type = "failed", f"{type(exc).__name__}: {exc}", type(exc).__name__
        died = _death_of(processes)  # mosaik may see the broken socket before the watchdog polls
        if watchdog and watchdog.reason or died:
            reason = (watchdog.reason if watchdog and watchdog.reason else None) or died
            error_type = None  # the process died: not the exception's verdict
        _shutdown_quietly(world)
    finally:
        if watchdog is not None:
            watchdog.stop()
        recorder_module.close_all(run_dir / "timeseries.parquet")
        processes.stop()
        STOP.restore()
        logger.remove(sink_id)
    wall_s = time.perf_counter() - started_at
    rows = _rows_in(run_dir / "timeseries.parquet")
    status, reason = check_complete(status, reason, rows, n_steps)  # e.g. a remote simulator that quit silently
    behind = recorder_module.RT_BEHIND_MAX_S.pop(str(run_dir / "timeseries.parquet"), None)
    return Outcome(status, reason, wall_s, rows, rows, behind, error_type=error_type,
                   accelerations=_local_accelerations(world))


def _death_of(processes: SimProcesses) -> str | None:
    """Why a simulator process is gone (waiting a moment for the OS to report it), or None."""
    for _ in range(20):
        dead = processes.dead()
        if dead:
            return Watchdog.death_reason(processes, *dead)
        if not processes.procs:
            return None
        time.sleep(0.05)
    return None


def _watch(world: mosaik.World, processes: SimProcesses, stall_timeout_s: float | None) -> Watchdog:
    """Start the watchdog; on a failure it cancels every task of mosaik's loop (world.run returns)."""
    def cancel_everything(reason: str) -> None:
        loop = world.loop

        def cancel() -> None:
            for task in asyncio.all_tasks(loop):
                task.cancel()

        loop.call_soon_threadsafe(cancel)

    recorder_module.LAST_STEP_MONOTONIC[0] = time.monotonic()
    watchdog = Watchdog(processes, lambda: recorder_module.LAST_STEP_MONOTONIC[0], stall_timeout_s,
                        cancel_everything)
    watchdog.start()
    return watchdog


_REMOTE_END = re.compile(r"Simulator (?P<sid>\S+) aborted the simulation with error EndRun\((?P<msg>.*?)\)\."
                         r"(?: Further information provided:|$)", re.DOTALL)


def _remote_outcome(message: str, log: Path) -> tuple[str, str]:
    """Status and reason from the error mosaik logs when a simulator in another process raised.

    A simulator process that ended the run on purpose (:class:`cosim.sdk.EndRun`, sent under that
    name by :mod:`cosim.run.remote`) ends it ``ok`` with its message, as an in-process one does.
    The remote traceback goes to ``simulators.log``; the reason keeps the error's one line."""
    ended = _REMOTE_END.match(message)
    if ended:
        return "ok", ended["msg"]
    head, sep, details = message.partition(" Further information provided:")
    if sep:
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{head}\n{details.strip()}\n")
        head = f"{head} (its traceback is in simulators.log)"
    return "failed", head


def _local_accelerations(world: mosaik.World | None) -> dict[str, dict]:
    """What the run's in-process simulators say of their faster paths (:func:`cosim.sdk.run_accelerations`):
    mosaik holds each in its proxy (``LocalProxy.sim``); one in another process says nothing here."""
    proxies = getattr(getattr(world, "_async_world", None), "_proxies", None) or {}
    return run_accelerations(said_accelerations((sid, getattr(proxy, "sim", None)) for sid, proxy in proxies.items()))


def _keep_output_checks(world) -> None:
    """Check each simulator's ``get_data`` answer against its entities' outputs as mosaik does, but against sets
    taken once. mosaik (3.6) rebuilds an entity's output set, a union of two, at every check of every answer:
    ~180 µs per check for IEEE 8500's Grid, whose model declares ~18,000 outputs (~0.8 ms a step under
    cProfile over 192 steps, 2026-12-07). The entities and their models are
    fixed once the world is connected; an answer this check does not pass goes to mosaik's own check, whose
    warnings it gives."""
    for factory in world._async_world._factories.values():
        theirs = factory.validate_output_dict
        outputs = {eid: entity.model_mock.output_attrs for eid, entity in factory.entities.items()}

        def check(eid_dict, outputs=outputs, theirs=theirs) -> None:
            for eid, values in eid_dict.items():
                allowed = outputs.get(eid)
                if allowed is None or not all(attr in allowed for attr in values):
                    theirs(eid_dict)
                    return

        factory.validate_output_dict = check


def _shutdown_quietly(world: mosaik.World | None) -> None:
    """After a failure: cancel mosaik's pending simulator tasks, then shut the world down (each
    wait bounded: a dead remote simulator must not hang the shutdown either)."""
    if world is None:
        return
    loop = world.loop
    # a dead simulator's reader task fails with "connection reset": expected here, not news
    loop.set_exception_handler(lambda _loop, _context: None)
    if loop.is_closed():  # mosaik shut the world down itself (it logged a remote error and returned):
        return            # its abandoned tasks are garbage now, and say nothing when collected
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    try:
        loop.run_until_complete(asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 5.0))
        loop.run_until_complete(asyncio.wait_for(world._async_world.shutdown(), 10.0))  # world.shutdown, bounded
    except BaseException:  # noqa: BLE001 — finalize of a broken simulator may fail too; the recorder is closed after
        pass


def _rows_in(path: Path) -> int:
    return RunFolder(path.parent).n_rows()
