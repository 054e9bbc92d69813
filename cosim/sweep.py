"""Sweeps: many variants of one scenario, each an independent run on Dask distributed.

A *variant* is a dict of dotted overrides (``{"entities.pcc.bus": "6", "scenario.seed": 3}``)
applied to the scenario before validation (:func:`cosim.scenario.load_scenario`). Variants
come from a grid of values (every combination), from seeded Monte Carlo draws, or both
(each grid point gets the same draws: common random numbers make variants comparable).

Where they run:

* ``scheduler=None`` (default): a :class:`distributed.LocalCluster` of ``workers`` processes
  with one thread each (a run is single-threaded; mosaik's recorder is per process). It
  spawns processes, so a script that calls :func:`run_sweep` needs the
  ``if __name__ == "__main__":`` guard.
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

Output folder ``out_dir``: ``runs/<variant id>/`` (an ordinary run folder each) and
``sweep.parquet``, one row per variant: ``variant``, the parameters (one column per key),
``status`` (``ok`` / ``failed``), ``reason``, ``wall_s``, ``run_dir`` and the KPIs
flattened to ``section.key`` columns. A variant's id hashes the scenario file's text and
its overrides, so a re-run of the same sweep skips the variants already finished ``ok``
(failed ones run again) and an edited scenario runs afresh (edited data files or code do
not change the id: use a new ``out_dir`` then). An interrupted sweep still writes the
table, with ``not run`` rows for what did not finish.

Sweep file (TOML; the scenario file itself stays a plain scenario)::

    [sweep]
    scenario = "default.toml"          # relative to this file
    [sweep.set]                        # fixed overrides for every variant (optional)
    "scenario.duration_s" = 3600
    [sweep.grid]                       # every combination of these values
    "entities.pcc.bus" = ["3", "6", "18"]
    "entities.campus.peak_mw" = [1.0, 2.0]
    [sweep.montecarlo]                 # n seeded draws (optional)
    n = 20
    seed = 42
    [sweep.montecarlo.draws]
    "entities.campus.peak_mw" = { uniform = [1.0, 3.0] }
    "scenario.seed" = { integers = [0, 1_000_000] }    # high end exclusive
    # also: { normal = [mean, sd] }, { choice = [v1, v2, ...] }
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import itertools
import json
import logging
import math
import os
import shutil
import sys
import time
import tomllib
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from cosim.scenario import Problem, ScenarioError

DISTRIBUTIONS = ("uniform", "normal", "integers", "choice")
TABLE_NAME = "sweep.parquet"


# -- defining variants -----------------------------------------------------------------
@dataclass
class SweepSpec:
    """A sweep: the scenario file and the variants to run from it."""

    scenario: Path
    fixed: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    montecarlo_n: int = 0
    montecarlo_seed: int = 0
    draws: dict[str, dict[str, Any]] = field(default_factory=dict)

    def variants(self) -> list[dict[str, Any]]:
        """Every variant's overrides, grid points times draws, fixed keys included."""
        points = grid_variants(self.grid)
        draws = montecarlo_variants(self.draws, self.montecarlo_n, self.montecarlo_seed) if self.draws else [{}]
        return [{**self.fixed, **point, **draw} for point in points for draw in draws]


def grid_variants(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the values, first key varying slowest; ``[{}]`` for no keys."""
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def montecarlo_variants(draws: dict[str, dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` seeded draws of the keys in ``draws`` (see the module docstring for the forms).

    Each key gets its own stream (seeded from ``seed`` and the key's position), so adding a
    key does not change the draws of the others listed before it.
    """
    problems = [p for key, spec in draws.items() for p in _draw_problems(key, spec)]
    if n <= 0:
        problems.append(Problem("sweep.montecarlo.n", "give the number of draws, a positive integer", n))
    if problems:
        raise ScenarioError("sweep", problems)
    rows: list[dict[str, Any]] = [{} for _ in range(n)]
    for position, (key, spec) in enumerate(draws.items()):
        rng = np.random.default_rng([seed, position])
        for row, value in zip(rows, _draw(rng, spec, n)):
            row[key] = value
    return rows


def _draw_problems(key: str, spec: Any) -> list[Problem]:
    where = f"sweep.montecarlo.draws.{key}"
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
        return [Problem(where, f"give one of {', '.join(DISTRIBUTIONS)}, e.g. {{ uniform = [1.0, 3.0] }}", spec)]
    kind, args = next(iter(spec.items()))
    if not isinstance(args, list) or (kind != "choice" and len(args) != 2) or not args:
        form = "a non-empty list of values" if kind == "choice" else "two numbers [a, b]"
        return [Problem(where, f"{kind} takes {form}", args)]
    if kind == "integers" and not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return [Problem(where, "integers = [low, high] takes two whole numbers", args)]
    if kind in ("uniform", "normal") and not all(_is_number(a) for a in args):
        return [Problem(where, f"{kind} = [a, b] takes two numbers", args)]
    if kind == "integers" and not args[0] < args[1]:
        return [Problem(where, "integers = [low, high] needs low < high (high is exclusive)", args)]
    if kind == "normal" and args[1] < 0:
        return [Problem(where, "normal = [mean, sd] needs sd >= 0", args)]
    return []


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _draw(rng: np.random.Generator, spec: dict[str, Any], n: int) -> list[Any]:
    kind, args = next(iter(spec.items()))
    if kind == "uniform":
        values = rng.uniform(args[0], args[1], n)
    elif kind == "normal":
        values = rng.normal(args[0], args[1], n)
    elif kind == "integers":
        return [int(v) for v in rng.integers(args[0], args[1], n)]
    else:
        return [args[int(i)] for i in rng.integers(0, len(args), n)]
    return [float(v) for v in values]


def parse_set_grid(items: list[str]) -> dict[str, list[Any]]:
    """``--set`` items for a sweep: ``key=v1,v2,...`` -> ``{key: [v1, v2, ...]}``.

    Each value is a TOML literal (``3``, ``2.5``, ``true``, ``"6"``), else a bare string; a
    single value is a key fixed for every variant. Quote a string that looks like a number
    (``--set 'entities.pcc.bus="6","18"'``) or it is read as one.

    Raises:
        ScenarioError: an item is not ``KEY=VALUES``.
    """
    grid: dict[str, list[Any]] = {}
    problems = []
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key or not text:
            problems.append(Problem("--set", "expected KEY=V1,V2,..., e.g. entities.campus.peak_mw=1,2,4", item))
            continue
        grid[key.strip()] = _parse_values(text)
    if problems:
        raise ScenarioError("--set", problems)
    return grid


def _parse_values(text: str) -> list[Any]:
    try:
        return list(tomllib.loads(f"v = [{text}]")["v"])
    except tomllib.TOMLDecodeError:
        pass
    values = []
    for part in text.split(","):
        try:
            values.append(tomllib.loads(f"v = {part.strip()}")["v"])
        except tomllib.TOMLDecodeError:
            values.append(part.strip())
    return values


def load_sweep_file(path: str | Path) -> SweepSpec:
    """Read a sweep file (see the module docstring).

    Raises:
        ScenarioError: with every problem found.
    """
    path = Path(path)
    from cosim.scenario import read_toml

    raw = read_toml(path)
    problems: list[Problem] = []
    for key in raw:
        if key != "sweep":
            problems.append(Problem(key, "unknown section; a sweep file has one [sweep] section"))
    body = raw.get("sweep")
    if not isinstance(body, dict):
        raise ScenarioError(path, problems + [Problem("sweep", "section [sweep] is missing")])
    allowed = ("scenario", "set", "grid", "montecarlo")
    problems += [Problem(f"sweep.{k}", f"unknown key; allowed: {', '.join(allowed)}") for k in body if k not in allowed]
    scenario = body.get("scenario")
    if not isinstance(scenario, str):
        problems.append(Problem("sweep.scenario", "give the scenario file, relative to this file", scenario))
    fixed = _table_or_problem(body, "set", "a table of dotted keys, e.g. [sweep.set] \"scenario.seed\" = 3",
                              problems)
    grid = _table_or_problem(body, "grid", "a table of lists, e.g. [sweep.grid] \"entities.pcc.bus\" = [\"3\", \"6\"]",
                             problems)
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            problems.append(Problem(f"sweep.grid.{key}", "give a non-empty list of values, e.g. [1.0, 2.0]", values))
    mc = _table_or_problem(body, "montecarlo", "a table with n, seed and [sweep.montecarlo.draws]", problems)
    problems += [Problem(f"sweep.montecarlo.{k}", "unknown key; allowed: n, seed, draws") for k in mc
                 if k not in ("n", "seed", "draws")]
    n = mc.get("n")
    if mc and (isinstance(n, bool) or not isinstance(n, int) or n <= 0):
        problems.append(Problem("sweep.montecarlo.n", "give the number of draws, a positive integer", n))
    seed = mc.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        problems.append(Problem("sweep.montecarlo.seed", "give a whole number >= 0", seed))
    draws = _table_or_problem(mc, "draws", "a table of distributions, e.g. \"scenario.seed\" = { integers = [0, 100] }",
                              problems, where="sweep.montecarlo.draws")
    for key, spec in draws.items():
        problems += _draw_problems(key, spec)
    if problems:
        raise ScenarioError(path, problems)
    return SweepSpec(scenario=(path.resolve().parent / scenario), fixed=dict(fixed), grid=dict(grid),
                     montecarlo_n=int(mc.get("n", 0)), montecarlo_seed=int(seed), draws=dict(draws))


def _table_or_problem(body: dict[str, Any], key: str, form: str, problems: list[Problem],
                      where: str | None = None) -> dict[str, Any]:
    """``body[key]`` when it is a table (absent: empty); else a problem is added and ``{}`` returned."""
    value = body.get(key, {})
    if isinstance(value, dict):
        return value
    problems.append(Problem(where or f"sweep.{key}", f"give {form}", value))
    return {}


def variant_id(scenario_text: str, overrides: dict[str, Any]) -> str:
    """A stable id from the scenario's text and the overrides: ``v-<12 hex>``."""
    blob = json.dumps(overrides, sort_keys=True, default=str) + "\n" + scenario_text
    return "v-" + hashlib.sha1(blob.encode()).hexdigest()[:12]


# -- one variant (runs on a worker) ------------------------------------------------------
def run_variant(scenario_path: str, overrides: dict[str, Any], run_dir: str, report: bool = False) -> dict[str, Any]:
    """Run one variant into ``run_dir`` and return its row (never raises).

    An invalid variant (the overrides break validation) or a crash is recorded in the
    folder's ``metadata.json`` as ``failed`` with the reason, like a run that failed mid-way.
    """
    from cosim.runner import run_scenario
    from cosim.scenario import load_scenario

    folder = Path(run_dir)
    if folder.exists():
        set_aside(folder)
    folder.mkdir(parents=True)
    try:
        scn = load_scenario(scenario_path, overrides)
    except ScenarioError as exc:
        _write_failed(folder, "invalid scenario: " + "; ".join(str(p) for p in exc.problems))
        return read_row(folder)
    except Exception as exc:  # e.g. an adapter that does not import on this worker
        _write_failed(folder, f"scenario not loaded: {type(exc).__name__}: {exc}")
        return read_row(folder)
    # A report per variant costs ~1 s of plotting; sweeps ask for it explicitly (``reports``).
    supported = "report" in inspect.signature(run_scenario).parameters
    try:
        run_scenario(scn, folder.parent, progress=False, run_dir=folder, **({"report": report} if supported else {}))
    except Exception as exc:  # a bug in a simulator or the core: recorded, the sweep goes on
        last = traceback.extract_tb(exc.__traceback__)[-1]
        _write_failed(folder, f"{type(exc).__name__}: {exc} (at {Path(last.filename).name}:{last.lineno})")
    if report and not supported:
        from cosim.report import write_report

        try:
            write_report(folder)
        except Exception as exc:  # a figure that cannot be drawn does not undo the run
            print(f"{folder}: report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
    return read_row(folder)


def set_aside(folder: Path) -> Path | None:
    """Clear ``folder`` for a new attempt without losing an earlier failed one.

    A folder whose run finished ``ok`` is removed (it is being redone on purpose); any other
    (failed, interrupted, unreadable) is renamed to ``<name>.failed-<n>``, the first free
    ``n``, and that path returned, so its log and partial series stay for diagnosis.
    """
    if _read_json(folder / "metadata.json").get("status") == "ok":
        shutil.rmtree(folder)
        return None
    n = 1
    while (target := folder.with_name(f"{folder.name}.failed-{n}")).exists():
        n += 1
    folder.rename(target)
    return target


def _write_failed(folder: Path, reason: str) -> None:
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    meta = {"status": "failed", "reason": reason, "started_utc": started, "wall_s": None}
    (folder / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")


def read_row(run_dir: Path) -> dict[str, Any]:
    """A run folder as a row: status, reason, wall time, folder and flattened KPIs."""
    meta = _read_json(run_dir / "metadata.json")
    row: dict[str, Any] = {"status": meta.get("status", "failed"),
                           "reason": meta.get("reason") if meta else "no metadata.json (the run did not finish)",
                           "wall_s": meta.get("wall_s"), "run_dir": str(run_dir)}
    row.update({f"kpi.{k}": v for k, v in flatten(_read_json(run_dir / "kpis.json")).items()})
    return row


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; ``{}`` when missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``a.b.c`` keys."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def is_finished(run_dir: Path) -> bool:
    """A variant finished ``ok`` earlier (its KPIs are on disk)."""
    return _read_json(run_dir / "metadata.json").get("status") == "ok" and (run_dir / "kpis.json").is_file()


# -- the sweep ---------------------------------------------------------------------------
@dataclass
class Progress:
    """Counts of a sweep under way."""

    total: int
    done: int = 0
    failed: int = 0
    skipped: int = 0
    started_s: float = field(default_factory=time.perf_counter)

    @property
    def remaining(self) -> int:
        return self.total - self.done - self.failed - self.skipped

    def eta_s(self) -> float:
        """Seconds left at the pace of the runs finished in this session. [s]"""
        finished = self.done + self.failed
        if finished == 0:
            return math.nan
        return (time.perf_counter() - self.started_s) / finished * self.remaining

    def line(self) -> str:
        eta = self.eta_s()
        eta_text = "?" if math.isnan(eta) else f"{eta:.0f} s"
        return (f"{self.total} variants: {self.done} ran ok, {self.failed} failed, {self.skipped} kept from "
                f"earlier, {self.remaining} remaining, ETA {eta_text}")


#: Dask settings for the workers cosim starts. The worker's statistical profiler samples the
#: task thread every 10 ms; for pure-Python co-simulation runs it cost ~7 % per run and took
#: the 2-worker speed-up from 1.85x to 1.74x (bench/bench_sweep.py). Workers you start
#: yourself (dask-jobqueue, a remote scheduler) take the same setting from the environment:
#: DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False.
WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


@contextlib.contextmanager
def worker_config():
    """Apply :data:`WORKER_CONFIG` to clusters started inside (and their spawned workers)."""
    import dask

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


def run_sweep(scenario: str | Path, variants: list[dict[str, Any]], out_dir: str | Path,
              workers: int | None = None, scheduler: str | None = None, progress: bool = True,
              retry_failed: bool = True, on_result: Callable[[dict[str, Any], Progress], None] | None = None,
              reports: bool = False) -> pd.DataFrame:
    """Run every variant of ``scenario`` and merge the results into ``out_dir/sweep.parquet``.

    Args:
        scenario: the scenario file.
        variants: one dict of dotted overrides per run (:func:`grid_variants`,
            :func:`montecarlo_variants`, :meth:`SweepSpec.variants`).
        out_dir: the sweep folder (run folders go to ``out_dir/runs/``).
        workers: local Dask workers (processes, one thread each); default 2, or the
            cores available when fewer; ``0`` runs in this process without Dask.
        scheduler: address of a running Dask scheduler (``tcp://host:8786``); ``workers``
            is then ignored.
        progress: a tqdm bar with done/failed/remaining and the ETA, on stderr.
        retry_failed: run variants that failed last time again (else keep their rows).
        on_result: called with each new row and the counts (for callers with their own UI).
        reports: write each run's ``report.html`` (off by default: ~1 s of plotting per run).

    Returns:
        The table written to ``sweep.parquet`` (one row per variant, in variant order).

    Raises:
        ScenarioError: the scenario file cannot be read, two variants are identical, or
            ``workers`` is negative.
    """
    from cosim.scenario import read_toml

    check_workers(workers)
    scenario = Path(scenario).resolve()
    read_toml(scenario)  # a missing or broken file stops the sweep before anything starts
    text = scenario.read_text(encoding="utf-8")
    out = Path(out_dir)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    ids = [variant_id(text, v) for v in variants]
    _check_unique(ids, variants)
    rows: dict[str, dict[str, Any]] = {}
    todo = []
    for vid, overrides in zip(ids, variants):
        folder = out / "runs" / vid
        previous = _read_json(folder / "metadata.json").get("status")
        if is_finished(folder) or (previous == "failed" and not retry_failed):
            rows[vid] = read_row(folder)
        else:
            todo.append((vid, overrides, folder))
    counts = Progress(total=len(variants), skipped=len(rows))
    bar = _bar(counts, progress)

    def record(vid: str, row: dict[str, Any]) -> None:
        rows[vid] = row
        if row["status"] == "ok":
            counts.done += 1
        else:
            counts.failed += 1
        if bar is not None:
            text = f"ok {counts.done}, failed {counts.failed}, remaining {counts.remaining}"
            bar.set_postfix_str(text, refresh=False)
            bar.update(1)
        if on_result is not None:
            on_result(row, counts)

    try:
        if todo:
            _execute(str(scenario), todo, workers, scheduler, record, reports)
    finally:  # interrupted or not, the table holds every row there is ("not run" for the rest)
        if bar is not None:
            bar.close()
        table = _table(ids, variants, rows, out)
        _write_table(table, out / TABLE_NAME)
    if progress:
        print(f"sweep: {counts.line()}; table: {out / TABLE_NAME}", file=sys.stderr)
    return table


def _check_unique(ids: list[str], variants: list[dict[str, Any]]) -> None:
    seen: dict[str, int] = {}
    problems = []
    for i, vid in enumerate(ids):
        if vid in seen:
            problems.append(Problem(f"variant[{i}]", f"same overrides as variant[{seen[vid]}]; drop one", variants[i]))
        seen.setdefault(vid, i)
    if problems:
        raise ScenarioError("sweep", problems)


def _bar(counts: Progress, progress: bool):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=counts.total, initial=counts.skipped, unit="run", desc="sweep", file=sys.stderr,
                dynamic_ncols=True)


def _execute(scenario: str, todo: list[tuple[str, dict[str, Any], Path]], workers: int | None,
             scheduler: str | None, record: Callable[[str, dict[str, Any]], None], reports: bool = False) -> None:
    calls = [(scenario, overrides, str(folder), reports) for _, overrides, folder in todo]
    for i, row, error in run_tasks(run_variant, calls, workers, scheduler, [f"run-{vid}" for vid, _, _ in todo]):
        if error is not None:  # the worker died (out of memory, killed): recorded, the others go on
            row = {"status": "failed", "reason": f"task failed: {error}", "wall_s": None, "run_dir": calls[i][2]}
        record(todo[i][0], row)


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
    from distributed import Client, LocalCluster, as_completed

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
    import os

    return max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _table(ids: list[str], variants: list[dict[str, Any]], rows: dict[str, dict[str, Any]], out: Path) -> pd.DataFrame:
    records = []
    for vid, overrides in zip(ids, variants):
        row = rows.get(vid) or {"status": "not run", "reason": "the sweep stopped before this variant finished",
                                "wall_s": None, "run_dir": str(out / "runs" / vid)}
        records.append({"variant": vid, **overrides, **row})
    table = pd.DataFrame.from_records(records)
    first = ["variant", *dict.fromkeys(k for v in variants for k in v), "status", "reason", "wall_s", "run_dir"]
    kpis = sorted(c for c in table.columns if c not in first)
    return table[[c for c in first if c in table.columns] + kpis]


def _write_table(table: pd.DataFrame, path: Path) -> None:
    """Parquet needs one type per column: a column mixing types (``3`` and ``"6"``) is written as text."""
    fixed = table.copy()
    for column in fixed.columns:
        kinds = {type(v) for v in fixed[column] if v is not None and not (isinstance(v, float) and math.isnan(v))}
        if len(kinds) > 1 and not kinds <= {int, float}:
            fixed[column] = [None if v is None else str(v) for v in fixed[column]]
    fixed.to_parquet(path, index=False)


def read_sweep(out_dir: str | Path) -> pd.DataFrame:
    """The merged table of a sweep folder."""
    return pd.read_parquet(Path(out_dir) / TABLE_NAME)
