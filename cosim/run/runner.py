"""One run: validate the scenario, make the run folder, run an engine, write KPIs and metadata."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import pandas as pd

from cosim import kpis as kpi_module
from cosim import sdk
from cosim.kpis import guards, supply
from cosim.errors import RunInterrupted
from cosim.folder import RunFolder
from cosim.report import write_report
from cosim.run import blas, graph
from cosim.run.direct import run_direct
from cosim.run.outcome import Outcome
from cosim.run.stopping import STOP
from cosim.scenario import Scenario
from cosim.scenario import load_scenario as validate_file

__all__ = ["RunInterrupted", "RunResult", "run", "run_scenario"]

PACKAGES = ("cosim", "mosaik", "mosaik-api-v3", "pandapower", "lightsim2grid", "simbench", "pvlib",
            "numpy", "scipy", "pandas", "pyarrow", "pydantic", "opendssdirect.py", "dss-python", "fmpy", "andes",
            "helics")


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

    @property
    def degraded(self) -> bool:
        """Finished, but part of it is unknown (a grid that did not converge at some steps)."""
        return self.status == "degraded"

    @property
    def folder(self) -> RunFolder:
        return RunFolder(self.run_dir)

    def timeseries(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The recorded time series, indexed by UTC time."""
        return self.folder.timeseries(columns)


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def versions_line() -> str:
    """The installed versions of :data:`PACKAGES` on one line (``python 3.11.7, mosaik 3.6.0, ...``), for a
    benchmark's header: a figure measured on other versions of the solvers is another figure."""
    return ", ".join(f"{name} {version}" for name, version in package_versions().items() if version)


def git_commit(where: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def run_metadata(scn: Scenario) -> dict[str, Any]:
    """What ``metadata.json`` says of a scenario before it runs (the outcome is added after)."""
    s = scn.scenario
    return {
        "scenario": s.name,
        "scenario_file": str(scn.file.resolve()),
        "overrides": {k: v if isinstance(v, (str, int, float, bool)) else str(v) for k, v in scn.overrides.items()},
        "engine": scn.engine,
        "rt_factor": s.rt_factor,
        "seed": s.seed,
        "start_utc": s.start.isoformat(),
        "duration_s": s.duration_s,
        "step_s": s.step_s,
        "tick_s": s.tick_s,
        "record_step_s": scn.record_step_s,
        "roles": scn.roles().to_json(),
        "entities": scn.entity_info(),
        "links": {src: sorted(dst) for src, dst in scn.links().items()},
        "kpi_params": kpi_params(scn),
        "warnings": list(scn.warnings),
    }


def run_scenario(scn: Scenario, out_dir: str | Path = "runs", progress: bool = True,
                 run_dir: Path | None = None, report: bool = False) -> RunResult:
    """Run a validated scenario into a new run folder (see DESIGN.md, "A run folder")."""
    graph.check_record(scn)
    STOP.install()  # SIGTERM / Ctrl-C from here to the final metadata end the run with a status
    try:
        folder, started = open_run_folder(scn, out_dir, run_dir)
        wall0 = time.perf_counter()
        try:
            outcome = run_engine(scn, folder.path, progress)
        except BaseException as exc:  # whatever escapes an engine, the folder must not say "running"
            interrupted = isinstance(exc, KeyboardInterrupt)
            what = str(exc) if interrupted and str(exc) else f"{type(exc).__name__}: {exc}"
            rows = folder.n_rows()
            outcome = Outcome("interrupted" if interrupted else "failed",
                              what if interrupted else f"the engine stopped with an error: {what}",
                              time.perf_counter() - wall0, rows, rows)
            finish_run(scn, folder, outcome, started, report=False)
            raise
        try:
            result = finish_run(scn, folder, outcome, started, report)
        except BaseException as exc:  # a second Ctrl-C while KPIs are computed: still a final status
            folder.write_metadata({**run_metadata(scn), "status": "interrupted" if isinstance(exc, KeyboardInterrupt)
                                   else "failed", "reason": f"{outcome.reason or 'the run ended'}; then, while its "
                                   f"KPIs were written: {type(exc).__name__}: {exc}",
                                   "started_utc": started.isoformat(timespec="seconds")})
            raise
    finally:
        STOP.restore()
    if outcome.status == "interrupted":
        raise RunInterrupted(folder.path)
    return result


def open_run_folder(scn: Scenario, out_dir: str | Path = "runs", run_dir: Path | None = None
                    ) -> tuple[RunFolder, datetime]:
    """The run folder with the scenario copied in and ``metadata.json`` saying ``running`` (written
    before the first step and replaced at the end: a killed run is marked as started)."""
    folder = RunFolder(run_dir) if run_dir else RunFolder.new(out_dir, scn.scenario.name)
    folder.path.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(scn.file, folder.scenario_path)  # the file as given; overrides are in metadata.json
    started = datetime.now(timezone.utc)
    folder.write_metadata({**run_metadata(scn), "status": "running", "reason": None,
                           "started_utc": started.isoformat(timespec="seconds")})
    return folder, started


def finish_run(scn: Scenario, folder: RunFolder, outcome: Outcome, started: datetime,
               report: bool = False) -> RunResult:
    """KPIs, ``metadata.json`` and (optionally) the report of a run whose series is on disk."""
    kpis: dict[str, Any] = {}
    kpi_blocks: dict[str, Any] = {}
    kpi_error = None
    if outcome.rows_recorded:
        try:
            kpis, kpi_blocks = compute_kpis(scn, folder)
        except Exception as exc:  # noqa: BLE001 — the series is on disk; metadata must still say what happened
            kpi_error = f"{type(exc).__name__}: {exc}"
    status, reason = _degraded(scn, kpis, kpi_blocks, outcome)
    base = run_metadata(scn)
    base["warnings"] = [*base["warnings"], *guards.run_warnings(kpis), *supply.run_warnings(kpis)]
    meta = {
        **base,
        "status": status,
        "reason": reason,
        "error_type": outcome.error_type if status == "failed" else None,
        "started_utc": started.isoformat(timespec="seconds"),
        "wall_s": round(outcome.wall_s, 3),
        "steps": outcome.n_steps,
        "steps_per_s": round(outcome.steps_per_s, 2),
        "versions": package_versions(),
        "git_commit": git_commit(Path(__file__).resolve().parent),
        "rt_behind_max_s": None if outcome.rt_behind_max_s is None else round(outcome.rt_behind_max_s, 3),
        "ahead": outcome.ahead,
        "kpi_error": kpi_error,
        "kpi_blocks": kpi_blocks,
        "platform": platform.platform(),
        # what ran of the faster paths that give the same numbers (C parts, the kept solver analysis) in this
        # process, and what the run's own simulators took: a last-bit difference between machines starts here
        "c_parts": sdk.c_parts(),
        "accelerations": {**sdk.accelerations(), **(outcome.accelerations or {})},
    }
    folder.write_kpis(kpis)
    folder.write_metadata(meta)
    if report and outcome.status != "interrupted":
        _write_report_quietly(folder)
    return RunResult(folder.path, status, reason, kpis, meta)


def _degraded(scn: Scenario, kpis: dict[str, Any], blocks: dict[str, Any], outcome: Outcome) -> tuple[str, str | None]:
    """An ``ok`` run whose grid did not converge at more than ``nonconverged_max_frac`` of its
    steps is ``degraded``: its grid KPIs over those steps are unknown (null), and it says so; so is
    one where buses or grid elements were de-energised (:mod:`cosim.kpis.supply`)."""
    if outcome.status != "ok":
        return outcome.status, outcome.reason
    notes = []
    for grid in blocks.get("grid", {}).get("keys", []):
        n = kpis.get(grid, {}).get("n_nonconverged_steps") or 0
        frac = n / max(outcome.rows_recorded, 1)
        if n and frac > scn.scenario.nonconverged_max_frac:
            first = kpis[grid].get("first_nonconverged_utc")
            notes.append(f"grid {grid!r}: the power flow did not converge at {n} of {outcome.rows_recorded} "
                         f"steps{f' (first at {first})' if first else ''}; its voltages, loadings and import "
                         "there are unknown (their KPIs are null)")
    notes += supply.degraded_notes(kpis)  # de-energised buses or elements: part of the grid was dead
    return ("degraded", "; ".join(notes)) if notes else (outcome.status, outcome.reason)


def run_engine(scn: Scenario, run_dir: Path, progress: bool) -> Outcome:
    """Run ``scn`` on its engine (``scenario.engine``) into ``run_dir``, BLAS on one thread
    (:mod:`cosim.run.blas`: the same bits whatever the machine's cores)."""
    with blas.one_thread():
        if scn.engine == "direct":
            return run_direct(scn, run_dir, progress=progress)
        # mosaik is heavy and only needed once a mosaik run starts (validation, reports, KPIs do without)
        from cosim.run.mosaik_engine import run_world

        return run_world(scn, run_dir, progress=progress)


def compute_kpis(scn: Scenario, folder: RunFolder) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's KPIs, and the block index: each block from its own columns, read from the folder
    as it comes (:func:`cosim.kpis.compute_reading`)."""
    return kpi_module.compute_reading(folder.numeric_reader(), folder.column_names(), scn.record_step_s,
                                      scn.roles(), scn.links(), kpi_params(scn))


def kpi_params(scn: Scenario) -> dict[str, Any]:
    """The KPI blocks' parameters: the scenario's ``[kpis.<block>]`` and, per entity of a sim with a
    voltage band (``v_low_pu``/``v_high_pu``: the grid and its elements), that band, so the KPIs
    count violations against the band the grid's own outputs used."""
    params = kpi_module.default_params() | {name: m.model_dump(mode="json") for name, m in scn.kpis.items()}
    # the validated params (defaults filled in): one bound set in the file still gives the whole band
    models = {sid: scn.sim_models.get(sid) for sid in {e.sim for e in scn.entities.values()}}
    bands = {eid: [float(models[e.sim].v_low_pu), float(models[e.sim].v_high_pu)]
             for eid, e in scn.entities.items()
             if hasattr(models[e.sim], "v_low_pu") and hasattr(models[e.sim], "v_high_pu")}
    if bands:
        params[kpi_module.BAND_PARAM] = bands
    # the outputs that feed another entity (a controller's setpoints, not its diagnostics): what the guards judge
    params[guards.FED_PARAM] = sorted({f"{c.src}.{a}" for c in scn.connect if c is not None for a, _ in c.pairs()})
    return params


def _write_report_quietly(folder: RunFolder) -> None:
    """report.html is a view of the run folder: a plotting error must not fail the run."""
    try:
        write_report(folder.path)
    except Exception as exc:  # noqa: BLE001 — the run's data is already safe on disk
        print(f"warning: report.html not written: {type(exc).__name__}: {exc}", file=sys.stderr)


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None, allow_commands: bool = False) -> Scenario:
    """:func:`cosim.scenario.load_scenario` with the run's own check: a warning when ``[record]`` leaves
    out a column a KPI reads (:func:`cosim.run.graph.record_warning`)."""
    return graph.check_record(validate_file(path, overrides, allow_commands))


def run(path: str | Path, out_dir: str | Path = "runs", progress: bool = False,
        overrides: dict[str, Any] | None = None, report: bool = False, allow_commands: bool = False) -> RunResult:
    """Validate and run a scenario file; the Python face of ``cosim run``.

    Args:
        allow_commands: let the scenario start programs (a sim's ``cmd``), as ``--allow-commands``.

    Raises:
        ScenarioError: the scenario has problems (nothing was started).
    """
    return run_scenario(load_scenario(path, overrides, allow_commands), out_dir, progress, report=report)
