"""Running many independent tasks on Dask distributed (sweeps, hosting studies), or in this process.

Where tasks run:

* ``scheduler=None`` (default): a :class:`distributed.LocalCluster` of ``workers`` processes
  with one thread each (a run is single-threaded). It spawns processes, so a script that
  starts one needs the ``if __name__ == "__main__":`` guard.
* ``scheduler="tcp://host:8786"``: any running Dask scheduler. On an HPC batch system start
  one with dask-jobqueue, e.g. for SLURM::

      from dask_jobqueue import SLURMCluster          # pip install dask-jobqueue
      cluster = SLURMCluster(cores=1, processes=1, memory="4GB", walltime="02:00:00")
      cluster.scale(jobs=32)                          # 32 batch jobs, one worker each
      run_sweep("study.toml", variants, "runs/sweep", scheduler=cluster.scheduler_address)

  (``PBSCluster``, ``SGECluster``, ``LSFCluster`` work the same way.) The workers must see
  the scenario file, its data and the output folder (a shared file system) and have cosim
  installed.
* ``workers=0``: in this process, one after another (no Dask; for debugging).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

from cosim.errors import Problem, ScenarioError
from cosim.run.processes import usable_cores

#: Dask settings for the workers cosim starts. The worker's statistical profiler samples the
#: task thread every 10 ms; for pure-Python co-simulation runs it cost ~7 % per run and took
#: the 2-worker speed-up from 1.85x to 1.74x (bench/bench_sweep.py). Workers you start
#: yourself (dask-jobqueue, a remote scheduler) take the same setting from the environment:
#: DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False.
WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


@contextlib.contextmanager
def worker_config():
    """Apply :data:`WORKER_CONFIG` to clusters started inside (and their spawned workers)."""
    import dask  # Dask is imported only by studies that start a cluster

    env = {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: v for k, v in env.items() if saved[k] is None})
    try:
        with dask.config.set(WORKER_CONFIG):
            yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)


def run_tasks(func: Callable[..., Any], calls: list[tuple], workers: int | None = None, scheduler: str | None = None,
              keys: list[str] | None = None) -> Iterator[tuple[int, Any, str | None]]:
    """Run ``func(*call)`` for every call on Dask and yield ``(index, result, error)`` as they finish.

    ``error`` is ``None`` or a one-line description when the task raised or its worker was
    lost. ``workers``/``scheduler`` as in :func:`run_sweep` (``workers=0``: in this process).
    ``func`` must be importable by the workers (a module-level function).

    Raises:
        ScenarioError: ``workers`` is negative or not a whole number (checked before anything runs).
    """
    check_workers(workers)
    if scheduler is None and workers == 0:
        for i, call in enumerate(calls):
            try:
                yield i, func(*call), None
            except Exception as exc:
                yield i, None, f"{type(exc).__name__}: {exc}"
        return
    from distributed import Client, LocalCluster, as_completed  # heavy: only when a cluster is used

    cluster = None
    if scheduler is None:
        # Quiet logs: a worker that ran mosaik can take > 4 s to exit and the nanny then warns
        # that it kills it; the results are already back, nothing is lost.
        with worker_config():
            cluster = LocalCluster(n_workers=workers or default_workers(), threads_per_worker=1, processes=True,
                                   dashboard_address=":0", silence_logs=logging.ERROR)
    client = Client(scheduler or cluster)
    try:
        futures = {}
        for i, call in enumerate(calls):
            key = keys[i] if keys else None
            futures[client.submit(func, *call, key=key, pure=False)] = i
        for future in as_completed(futures):
            try:
                yield futures[future], future.result(), None
            except Exception as exc:
                yield futures[future], None, f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def check_workers(workers: Any) -> None:
    """Refuse a worker count Dask cannot use (``-1`` would start a cluster that never runs a task).

    Raises:
        ScenarioError: ``workers`` is not ``None`` or a whole number >= 0.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 0):
        raise ScenarioError("workers", [Problem("workers", "give a whole number >= 0 (0 runs in this process, "
                                                           "none the default of 2)", workers)])


def default_workers() -> int:
    """Two local workers, or fewer when the machine has one core."""
    return max(1, min(2, usable_cores()))
