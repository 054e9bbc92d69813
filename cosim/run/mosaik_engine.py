"""The mosaik engine: builds a mosaik world from a validated scenario and runs it.

The only module of cosim that imports mosaik (the orchestrator of record; the default engine,
and the only one for simulators in another process or on another host).
"""

from __future__ import annotations

import asyncio
import sys
import time
import warnings
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
from cosim.run.stopping import STOP, StopRequested
from cosim.scenario import Scenario
from cosim.sdk import EndRun

RECORDER_SID = "_recorder"


def _configure_logging() -> None:
    """cosim is the application: warnings go to stderr; mosaik's own log is captured per run."""
    try:
        logger.remove(0)  # loguru's default DEBUG handler
    except ValueError:
        return  # already configured (by us or by the embedding program)
    logger.add(sys.stderr, level="WARNING", format="{level}: {message}",
               filter=lambda record: not record["name"].startswith("mosaik"))


_configure_logging()


def _sim_config(scn: Scenario) -> dict[str, dict[str, Any]]:
    config: dict[str, dict[str, Any]] = {}
    for sid, spec in scn.sims.items():
        if spec.connect:
            config[sid] = {"connect": spec.connect}
        elif spec.cmd:
            config[sid] = {"cmd": spec.cmd, "cwd": str(scn.base_dir)}
        elif spec.process == "subprocess":
            config[sid] = {"cmd": f"{sys.executable} -m cosim.run.remote {registry.target(spec.adapter)} %(addr)s"}
        else:
            config[sid] = {"python": registry.target(spec.adapter)}
    config[RECORDER_SID] = {"python": "cosim.run.recorder:RecorderSim"}
    return config


def _start_sims(world: mosaik.World, scn: Scenario, graph: Graph) -> dict[str, Any]:
    common = {"start_utc": scn.scenario.start.isoformat(), "duration_s": scn.scenario.duration_s,
              "seed": scn.scenario.seed}
    started: dict[str, Any] = {}

    def start(sid: str) -> None:
        started[sid] = world.start(sid, sim_id=sid, step_s=scn.sim_step_s(sid), **common, **scn.sim_params[sid])

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


def run_world(scn: Scenario, run_dir: Path, progress: bool = True) -> Outcome:
    """Build the world of ``scn``, run it, and stream outputs to ``run_dir/timeseries.parquet``.

    A simulator that raises mid-run ends the run with status ``failed`` (``ok`` with the reason
    when an in-process one raises :class:`cosim.sdk.EndRun`); what was recorded up to then is
    written and readable.
    """
    errors: list[str] = []
    sink_id = logger.add(lambda msg: errors.append(msg.record["message"]), level="ERROR",
                         filter=lambda record: record["name"].startswith("mosaik"))
    logger.enable("mosaik")
    graph = build_graph(scn)
    columns = graph.columns
    record_step = scn.record_step_s
    n_steps = scn.scenario.duration_s // record_step
    world = mosaik.World(_sim_config(scn), time_resolution=1.0, skip_greetings=True, configure_logging=False)
    started_at = time.perf_counter()
    STOP.install()
    status, reason = "ok", None
    try:
        sims = _start_sims(world, scn, graph)
        entities = {
            eid: getattr(sims[spec.sim], spec.model).create(1, eid=eid, **scn.entity_params[eid])[0]
            for eid, spec in scn.entities.items()
        }
        _connect_all(world, graph, entities)
        rt_factor = scn.scenario.rt_factor
        rec_sim = world.start(RECORDER_SID, sim_id=RECORDER_SID, start_utc=scn.scenario.start.isoformat(),
                              step_s=record_step, duration_s=scn.scenario.duration_s, seed=scn.scenario.seed,
                              path=str(run_dir / "timeseries.parquet"), columns=columns,
                              chunk_rows=scn.record.chunk_rows, progress=progress, label=scn.scenario.name,
                              **({"rt_factor": rt_factor} if rt_factor else {}))
        rec = rec_sim.Recorder.create(1, eid="recorder")[0]
        for eid, attrs in graph.recorded.items():
            world.connect(entities[eid], rec, *attrs)
        with warnings.catch_warnings():
            # with rt_factor mosaik warns after every step that falls behind: the lag is measured
            # once, by the recorder, and reported in metadata.json instead
            warnings.filterwarnings("ignore", message="Simulation too slow for real-time factor")
            world.run(until=scn.scenario.duration_s, print_progress=False, lazy_stepping=True,
                      **({"rt_factor": rt_factor} if rt_factor else {}))
        if errors:
            status, reason = "failed", errors[0]
    except StopRequested as exc:  # SIGTERM / Ctrl-C at a step: keep what was recorded; the runner re-raises
        status, reason = "interrupted", str(exc)
        _shutdown_quietly(world)
    except KeyboardInterrupt:  # a second signal: stopped wherever it was
        status, reason = "interrupted", "interrupted (Ctrl-C or SIGTERM, twice)"
        _shutdown_quietly(world)
    except EndRun as exc:  # an in-process simulator ended the run on purpose: what was recorded is the result
        status, reason = "ok", str(exc)
        _shutdown_quietly(world)
    except Exception as exc:  # a simulator failed mid-run: keep what was recorded
        status, reason = "failed", f"{type(exc).__name__}: {exc}"
        _shutdown_quietly(world)
    finally:
        recorder_module.close_all()
        STOP.restore()
        logger.remove(sink_id)
    wall_s = time.perf_counter() - started_at
    rows = _rows_in(run_dir / "timeseries.parquet")
    status, reason = check_complete(status, reason, rows, n_steps)  # e.g. a remote simulator that quit silently
    behind = recorder_module.RT_BEHIND_MAX_S.pop(str(run_dir / "timeseries.parquet"), None)
    return Outcome(status, reason, wall_s, rows, rows, behind)


def _shutdown_quietly(world: mosaik.World) -> None:
    """After a failure: cancel mosaik's pending simulator tasks, then shut the world down."""
    loop = world.loop
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    try:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        world.shutdown()
    except Exception:  # finalize of a broken simulator may fail too; the recorder is closed below
        pass


def _rows_in(path: Path) -> int:
    return RunFolder(path.parent).n_rows()
