"""Sweeps: many variants of one scenario, each an independent run (on Dask, see :mod:`.executor`).

Output folder ``out_dir``: ``runs/<variant id>/`` (an ordinary run folder each) and
``sweep.parquet``, one row per variant: ``variant``, ``name`` (with named variants), the parameters (one column per key),
``status`` (``ok`` / ``failed``), ``reason``, ``wall_s``, ``run_dir`` and the KPIs
flattened to ``section.key`` columns. A variant's id hashes the scenario file's text and
its overrides, so a re-run of the same sweep skips the variants already finished ``ok``
(failed ones run again) and an edited scenario runs afresh (edited data files or code do
not change the id: use a new ``out_dir`` then). An interrupted sweep still writes the
table, with ``not run`` rows for what did not finish. Variants are made by
:mod:`.variants` (grids, Monte Carlo draws, sweep files).
"""

from __future__ import annotations

import math
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from tqdm import tqdm

from cosim.errors import Problem, ScenarioError
from cosim.folder import RunFolder, read_parquet
from cosim.run import run_scenario
from cosim.scenario import load_scenario, read_toml
from cosim.studies.executor import check_workers, run_tasks
from cosim.studies.variants import variant_id

TABLE_NAME = "sweep.parquet"


# -- one variant (runs on a worker) ------------------------------------------------------
def run_variant(scenario_path: str, overrides: dict[str, Any], run_dir: str, report: bool = False,
                allow_commands: bool = False) -> dict[str, Any]:
    """Run one variant into ``run_dir`` and return its row (never raises).

    An invalid variant (the overrides break validation) or a crash is recorded in the
    folder's ``metadata.json`` as ``failed`` with the reason, like a run that failed mid-way.
    """
    folder = RunFolder(run_dir)
    folder.set_aside()
    folder.path.mkdir(parents=True)
    try:
        scn = load_scenario(scenario_path, overrides, allow_commands)
    except ScenarioError as exc:
        folder.write_failed("invalid scenario: " + "; ".join(str(p) for p in exc.problems))
        return folder.sweep_row()
    except Exception as exc:  # e.g. an adapter that does not import on this worker
        folder.write_failed(f"scenario not loaded: {type(exc).__name__}: {exc}")
        return folder.sweep_row()
    # A report per variant costs ~1 s of plotting; sweeps ask for it explicitly (``reports``).
    try:
        run_scenario(scn, folder.path.parent, progress=False, run_dir=folder.path, report=report)
    except Exception as exc:  # a bug in a simulator or the core: recorded, the sweep goes on
        last = traceback.extract_tb(exc.__traceback__)[-1]
        folder.write_failed(f"{type(exc).__name__}: {exc} (at {Path(last.filename).name}:{last.lineno})")
    return folder.sweep_row()


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


def run_sweep(scenario: str | Path, variants: list[dict[str, Any]], out_dir: str | Path,
              workers: int | None = None, scheduler: str | None = None, progress: bool = True,
              retry_failed: bool = True, on_result: Callable[[dict[str, Any], Progress], None] | None = None,
              reports: bool = False, allow_commands: bool = False, names: list[str] | None = None) -> pd.DataFrame:
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
        allow_commands: let the scenario start programs (a sim's ``cmd``), as ``--allow-commands``.
        names: the variants' names (a sweep file's ``[sweep.variants]``), in order: the ``name`` column.

    Returns:
        The table written to ``sweep.parquet`` (one row per variant, in variant order).

    Raises:
        ScenarioError: the scenario file cannot be read, two variants are identical, or
            ``workers`` is negative.
    """
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
        folder = RunFolder(out / "runs" / vid)
        if folder.is_finished() or (folder.status == "failed" and not retry_failed):
            rows[vid] = folder.sweep_row()
        else:
            todo.append((vid, overrides, folder.path))
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
            _execute(str(scenario), todo, workers, scheduler, record, reports, allow_commands)
    finally:  # interrupted or not, the table holds every row there is ("not run" for the rest)
        if bar is not None:
            bar.close()
        table = _table(ids, variants, rows, out, names)
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
    return tqdm(total=counts.total, initial=counts.skipped, unit="run", desc="sweep", file=sys.stderr,
                dynamic_ncols=True)


def _execute(scenario: str, todo: list[tuple[str, dict[str, Any], Path]], workers: int | None,
             scheduler: str | None, record: Callable[[str, dict[str, Any]], None], reports: bool = False,
             allow_commands: bool = False) -> None:
    calls = [(scenario, overrides, str(folder), reports, allow_commands) for _, overrides, folder in todo]
    for i, row, error in run_tasks(run_variant, calls, workers, scheduler, [f"run-{vid}" for vid, _, _ in todo]):
        if error is not None:  # the worker died (out of memory, killed): recorded, the others go on
            row = {"status": "failed", "reason": f"task failed: {error}", "wall_s": None, "run_dir": calls[i][2]}
        record(todo[i][0], row)


def _table(ids: list[str], variants: list[dict[str, Any]], rows: dict[str, dict[str, Any]], out: Path,
           names: list[str] | None = None) -> pd.DataFrame:
    records = []
    for k, (vid, overrides) in enumerate(zip(ids, variants)):
        row = rows.get(vid) or {"status": "not run", "reason": "the sweep stopped before this variant finished",
                                "wall_s": None, "run_dir": str(out / "runs" / vid)}
        records.append({"variant": vid, **({"name": names[k]} if names else {}), **overrides, **row})
    table = pd.DataFrame.from_records(records)
    first = ["variant", "name", *dict.fromkeys(k for v in variants for k in v), "status", "reason", "wall_s", "run_dir"]
    kpis = sorted(c for c in table.columns if c not in first)
    return table[[c for c in first if c in table.columns] + kpis]


def _write_table(table: pd.DataFrame, path: Path) -> None:
    """Parquet needs one type per column: a column mixing types (``3`` and ``"6"``), holding tables
    (a whole ``smoothing = {...}`` override) or lists Arrow cannot type is written as text."""
    fixed = table.copy()
    for column in fixed.columns:
        given = [v for v in fixed[column] if v is not None and not (isinstance(v, float) and math.isnan(v))]
        kinds = {type(v) for v in given}
        # a list column Arrow cannot type (the battery's ``connect``, set by some variants only) is text too
        if (len(kinds) > 1 and not kinds <= {int, float}) or dict in kinds or (list in kinds
                                                                             and not _arrow_ok(fixed[column])):
            fixed[column] = [None if v is None else str(v) for v in fixed[column]]
    fixed.to_parquet(path, index=False)


def _arrow_ok(column: pd.Series) -> bool:
    """Whether Arrow takes this column of lists as one typed column (``[[2.0, "GENROU_9"]]`` mixes types: no)."""
    try:
        pa.array(column, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    return True


def read_sweep(out_dir: str | Path) -> pd.DataFrame:
    """The merged table of a sweep folder."""
    return read_parquet(Path(out_dir) / TABLE_NAME)
