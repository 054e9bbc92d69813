"""One run: validate the scenario, make the run folder, run the world, write KPIs and metadata."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from cosim import kpis as kpi_module
from cosim.scenario import Scenario, load_scenario

PACKAGES = ("cosim", "mosaik", "mosaik-api-v3", "pandapower", "lightsim2grid", "simbench", "pvlib",
            "numpy", "pandas", "pyarrow", "pydantic")


@dataclass
class RunResult:
    """What a run left behind; the folder is the source of truth."""

    run_dir: Path
    status: str
    reason: str | None
    kpis: dict[str, Any]
    metadata: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def timeseries(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The recorded time series, indexed by UTC time."""
        return read_timeseries(self.run_dir / "timeseries.parquet", columns)


def read_timeseries(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """Read ``timeseries.parquet`` with ``time_utc`` as the index."""
    wanted = None if columns is None else ["time_utc", *columns]
    return pd.read_parquet(path, columns=wanted).set_index("time_utc")


def read_numeric_columns(path: Path, columns: list[str]) -> pd.DataFrame:
    """Read numeric columns of ``timeseries.parquet`` one row group at a time into one
    preallocated float block (flags become 0/1, nulls NaN), indexed by UTC time.

    For long runs: ``pd.read_parquet`` of a year's KPI columns peaked at ~5x their size
    (multi-threaded decode, then conversion); this stays near 2x.
    """
    pf = pq.ParquetFile(path)
    n_rows = pf.metadata.num_rows
    times = np.empty(n_rows, "datetime64[ns]")
    block = np.empty((n_rows, len(columns)), float, order="F")
    at = 0
    for group in range(pf.num_row_groups):
        table = pf.read_row_group(group, columns=["time_utc", *columns], use_threads=False)
        rows = table.num_rows
        times[at:at + rows] = table.column(0).cast(pa.timestamp("ns")).to_numpy()
        for i in range(len(columns)):
            block[at:at + rows, i] = table.column(i + 1).cast(pa.float64()).to_numpy(zero_copy_only=False)
        at += rows
    index = pd.DatetimeIndex(times, name="time_utc").tz_localize("UTC")
    return pd.DataFrame(block, index=index, columns=list(columns), copy=False)


def new_run_dir(out_dir: Path, name: str) -> Path:
    """``<out_dir>/<name>-<UTC timestamp>``, made unique with a counter."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    candidate = out_dir / f"{name}-{stamp}"
    n = 1
    while candidate.exists():
        n += 1
        candidate = out_dir / f"{name}-{stamp}-{n}"
    candidate.mkdir(parents=True)
    return candidate


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(where: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def run_scenario(scn: Scenario, out_dir: str | Path = "runs", progress: bool = True,
                 run_dir: Path | None = None, report: bool = False) -> RunResult:
    """Run a validated scenario into a new run folder (see DESIGN.md, "A run folder")."""
    from cosim.world import run_world  # mosaik is imported only when a run starts

    run_dir = run_dir or new_run_dir(Path(out_dir), scn.scenario.name)
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(scn.file, run_dir / "scenario.toml")  # the file as given; overrides are in metadata.json
    started = datetime.now(timezone.utc)
    outcome = run_world(scn, run_dir, progress=progress)
    kpis: dict[str, Any] = {}
    kpi_error = None
    if outcome.rows_recorded:
        try:
            kpis = _kpis(scn, run_dir / "timeseries.parquet")
        except Exception as exc:  # noqa: BLE001 — the series is on disk; metadata must still say what happened
            kpi_error = f"{type(exc).__name__}: {exc}"
    meta = {
        "scenario": scn.scenario.name,
        "scenario_file": str(scn.file.resolve()),
        "overrides": {k: v if isinstance(v, (str, int, float, bool)) else str(v) for k, v in scn.overrides.items()},
        "status": outcome.status,
        "reason": outcome.reason,
        "seed": scn.scenario.seed,
        "start_utc": scn.scenario.start.isoformat(),
        "duration_s": scn.scenario.duration_s,
        "step_s": scn.scenario.step_s,
        "started_utc": started.isoformat(timespec="seconds"),
        "wall_s": round(outcome.wall_s, 3),
        "steps": outcome.n_steps,
        "steps_per_s": round(outcome.steps_per_s, 2),
        "versions": package_versions(),
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "kpi_error": kpi_error,
        "platform": platform.platform(),
    }
    (run_dir / "kpis.json").write_text(json.dumps(kpis, indent=2) + "\n")
    (run_dir / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    if report and outcome.status != "interrupted":
        _write_report_quietly(run_dir)
    if outcome.status == "interrupted":
        raise RunInterrupted(run_dir)
    return RunResult(run_dir, outcome.status, outcome.reason, kpis, meta)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run, after its folder (series so far, metadata) was written."""

    def __init__(self, run_dir: Path):
        super().__init__(f"interrupted; what was recorded is in {run_dir}")
        self.run_dir = run_dir


def _kpis(scn: Scenario, path: Path) -> dict[str, Any]:
    models = {eid: spec.model for eid, spec in scn.entities.items()}
    ts = read_numeric_columns(path, kpi_module.needed_columns(pq.ParquetFile(path).schema_arrow.names))
    links: dict[str, set[str]] = {}
    for conn in scn.connect:
        links.setdefault(conn.src, set()).add(conn.dst)
    return kpi_module.compute(ts, scn.record.step_s or scn.scenario.step_s, models, links)


def _write_report_quietly(run_dir: Path) -> None:
    """report.html is a view of the run folder: a plotting error must not fail the run."""
    from cosim.report import write_report

    try:
        write_report(run_dir)
    except Exception as exc:  # noqa: BLE001 — the run's data is already safe on disk
        print(f"warning: report.html not written: {type(exc).__name__}: {exc}", file=sys.stderr)


def run(path: str | Path, out_dir: str | Path = "runs", progress: bool = False,
        overrides: dict[str, Any] | None = None, report: bool = False) -> RunResult:
    """Validate and run a scenario file; the Python face of ``cosim run``.

    Raises:
        ScenarioError: the scenario has problems (nothing was started).
    """
    return run_scenario(load_scenario(path, overrides), out_dir, progress, report=report)
