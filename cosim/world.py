"""Builds a mosaik world from a validated scenario and runs it (the only module importing mosaik)."""

from __future__ import annotations

import asyncio
import fnmatch
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mosaik
from loguru import logger

from adapters import recorder as recorder_module
from cosim import registry
from cosim.scenario import Scenario

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


@dataclass
class WorldOutcome:
    """How a run went: status, reason when it failed, and its speed."""

    status: str
    reason: str | None
    wall_s: float
    n_steps: int
    rows_recorded: int

    @property
    def steps_per_s(self) -> float:
        return self.n_steps / self.wall_s if self.wall_s > 0 else float("nan")


def recorded_columns(scn: Scenario) -> list[str]:
    """``<entity>.<attr>`` of every output matched by ``[record]`` include/exclude patterns."""
    columns = []
    for eid in scn.entities:
        for attr in scn.outputs(eid):
            name = f"{eid}.{attr}"
            if any(fnmatch.fnmatchcase(name, p) for p in scn.record.include) and not any(
                fnmatch.fnmatchcase(name, p) for p in scn.record.exclude
            ):
                columns.append(name)
    return columns


def _sim_config(scn: Scenario) -> dict[str, dict[str, Any]]:
    config: dict[str, dict[str, Any]] = {}
    for sid, spec in scn.sims.items():
        if spec.connect:
            config[sid] = {"connect": spec.connect}
        elif spec.cmd:
            config[sid] = {"cmd": spec.cmd, "cwd": str(scn.base_dir)}
        elif spec.process == "subprocess":
            config[sid] = {"cmd": f"{sys.executable} -m cosim.remote {registry.target(spec.adapter)} %(addr)s"}
        else:
            config[sid] = {"python": registry.target(spec.adapter)}
    config[RECORDER_SID] = {"python": "adapters.recorder:RecorderSim"}
    return config


def _weak_groups(scn: Scenario) -> list[set[str]]:
    """Sims joined by weak connections; mosaik needs each such set in one group."""
    parent: dict[str, str] = {}

    def root(sid: str) -> str:
        while parent.setdefault(sid, sid) != sid:
            sid = parent[sid]
        return sid

    for conn in scn.connect:
        if conn.weak:
            a, b = scn.entities[conn.src].sim, scn.entities[conn.dst].sim
            parent[root(a)] = root(b)
    groups: dict[str, set[str]] = {}
    for sid in parent:
        groups.setdefault(root(sid), set()).add(sid)
    return [g for g in groups.values() if len(g) > 1]


def _start_sims(world: mosaik.World, scn: Scenario) -> dict[str, Any]:
    common = {"start_utc": scn.scenario.start.isoformat(), "duration_s": scn.scenario.duration_s,
              "seed": scn.scenario.seed}
    started: dict[str, Any] = {}

    def start(sid: str) -> None:
        started[sid] = world.start(sid, sim_id=sid, step_s=scn.sim_step_s(sid), **common, **scn.sim_params[sid])

    grouped = _weak_groups(scn)
    for group in grouped:
        with world.group():
            for sid in sorted(group):
                start(sid)
    for sid in scn.sims:
        if sid not in started:
            start(sid)
    return started


def _connect_all(world: mosaik.World, scn: Scenario, entities: dict[str, Any]) -> None:
    for conn in scn.connect:
        kwargs: dict[str, Any] = {}
        if conn.time_shifted:
            kwargs = {"time_shifted": True, "initial_data": conn.initial_data}
        elif conn.weak:
            kwargs = {"weak": True, "initial_data": conn.initial_data}
        world.connect(entities[conn.src], entities[conn.dst], *conn.pairs(), **kwargs)


def run_world(scn: Scenario, run_dir: Path, progress: bool = True) -> WorldOutcome:
    """Build the world of ``scn``, run it, and stream outputs to ``run_dir/timeseries.parquet``.

    A simulator that raises mid-run ends the run with status ``failed``; what was recorded
    up to then is written and readable.
    """
    errors: list[str] = []
    sink_id = logger.add(lambda msg: errors.append(msg.record["message"]), level="ERROR",
                         filter=lambda record: record["name"].startswith("mosaik"))
    logger.enable("mosaik")
    columns = recorded_columns(scn)
    record_step = scn.record.step_s or scn.scenario.step_s
    n_steps = scn.scenario.duration_s // record_step
    world = mosaik.World(_sim_config(scn), time_resolution=1.0, skip_greetings=True, configure_logging=False)
    started_at = time.perf_counter()
    previous_term = _interrupt_on_sigterm()
    status, reason = "ok", None
    try:
        sims = _start_sims(world, scn)
        entities = {
            eid: getattr(sims[spec.sim], spec.model).create(1, eid=eid, **scn.entity_params[eid])[0]
            for eid, spec in scn.entities.items()
        }
        _connect_all(world, scn, entities)
        rec_sim = world.start(RECORDER_SID, sim_id=RECORDER_SID, start_utc=scn.scenario.start.isoformat(),
                              step_s=record_step, duration_s=scn.scenario.duration_s, seed=scn.scenario.seed,
                              path=str(run_dir / "timeseries.parquet"), columns=columns,
                              chunk_rows=scn.record.chunk_rows, progress=progress, label=scn.scenario.name)
        rec = rec_sim.Recorder.create(1, eid="recorder")[0]
        by_entity: dict[str, list[str]] = {}
        for column in columns:
            eid, attr = column.split(".", 1)
            by_entity.setdefault(eid, []).append(attr)
        for eid, attrs in by_entity.items():
            world.connect(entities[eid], rec, *attrs)
        world.run(until=scn.scenario.duration_s, print_progress=False, lazy_stepping=True)
        if errors:
            status, reason = "failed", errors[0]
    except KeyboardInterrupt:  # keep what was recorded; the runner re-raises after writing metadata
        status, reason = "interrupted", "interrupted (Ctrl-C or SIGTERM)"
        _shutdown_quietly(world)
    except Exception as exc:  # a simulator failed mid-run: keep what was recorded
        status, reason = "failed", f"{type(exc).__name__}: {exc}"
        _shutdown_quietly(world)
    finally:
        recorder_module.close_all()
        _restore_sigterm(previous_term)
        logger.remove(sink_id)
    wall_s = time.perf_counter() - started_at
    rows = _rows_in(run_dir / "timeseries.parquet")
    if status == "ok" and rows < n_steps:  # e.g. a remote simulator that stopped without an exception
        status, reason = "failed", f"the run stopped after {rows} of {n_steps} steps"
    return WorldOutcome(status, reason, wall_s, rows, rows)


def _interrupt_on_sigterm():
    """SIGTERM (a batch system's walltime, ``timeout``, a killed worker) ends the run like
    Ctrl-C, so the recorder still writes what it buffered and the Parquet footer."""
    def handler(signum, frame):
        raise KeyboardInterrupt("terminated (SIGTERM)")

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (a Dask worker's task thread): leave signals alone
        return None


def _restore_sigterm(previous) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


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
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (OSError, ValueError):
        return 0
