"""``cosim repair RUN``: make a killed run's folder whole from what it recorded.

A run killed by SIGKILL, the out-of-memory killer or a power loss leaves its crash-safe
segments (:mod:`cosim.run.recorder`) and a ``metadata.json`` that still says ``running``.
Repair assembles the readable segments into ``timeseries.parquet``, marks the run ``failed``
with what was kept, and writes ``kpis.json`` and ``report.html`` from the folder alone (the
roles, connections and recording step are in ``metadata.json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cosim import kpis as kpi_module
from cosim.errors import Problem, ScenarioError
from cosim.folder import RunFolder
from cosim.report import write_report
from cosim.run.recorder import assemble, segment_files


@dataclass
class Repaired:
    """What a repair did."""

    run_dir: Path
    rows: int
    status: str
    notes: list[str]


def repair(run_dir: str | Path, report: bool = True) -> Repaired:
    """Repair the run folder ``run_dir`` (see the module docstring); safe on a whole folder (it
    says there was nothing to do).

    A folder whose run recorded nothing (killed while it started) is marked ``failed`` with that
    reason: no folder is left ``running``.

    Raises:
        ScenarioError: not a run folder.
    """
    folder = RunFolder(run_dir)
    if not folder.path.is_dir():
        raise ScenarioError("repair", [Problem(str(folder.path), "no such run folder")])
    meta, problem = folder.metadata_checked()
    segments = segment_files(folder.series_path)
    if not segments and meta.get("status") != "running":
        return Repaired(folder.path, folder.n_rows(), meta.get("status", "unknown"), ["nothing to repair"])
    rows, notes = assemble(folder.series_path) if segments else (folder.n_rows(), [])
    if meta.get("status") in (None, "running"):
        last = _last_time(folder)
        killed = "the run was killed before it finished (SIGKILL, the out-of-memory killer or a power loss?)"
        if rows:
            reason = f"{killed}; repaired from its recording: {rows} rows kept" + (f", up to {last}" if last else "")
        else:
            reason = (f"{killed}; it recorded no row before it stopped"
                      + (" (the one segment on disk was cut while being written)" if segments else "")
                      + ": nothing to keep; run it again")
        meta = {**meta, "status": "failed", "reason": reason}
    meta["repaired"] = {"rows": rows, "notes": notes}
    kpis = _kpis(folder, meta) if rows else {}
    folder.write_kpis(kpis)
    folder.write_metadata(meta)
    if report and folder.series_path.exists():
        write_report(folder.path)
    return Repaired(folder.path, rows, meta["status"], notes)


def _last_time(folder: RunFolder) -> str | None:
    if not folder.n_rows():
        return None
    ts = folder.timeseries([])
    return ts.index[-1].isoformat() if len(ts) else None


def _kpis(folder: RunFolder, meta: dict[str, Any]) -> dict[str, Any]:
    roles = folder.roles()
    links = {src: set(dst) for src, dst in (meta.get("links") or {}).items()}
    step_s = meta.get("record_step_s") or meta.get("step_s") or 60
    params = meta.get("kpi_params") if isinstance(meta.get("kpi_params"), dict) else {}
    kpis, blocks = kpi_module.compute_reading(folder.numeric_reader(), folder.column_names(), step_s, roles, links, params)
    meta["kpi_blocks"] = blocks
    return kpis
