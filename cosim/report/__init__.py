"""A run's report: one self-contained ``report.html`` (figures embedded as PNG), no scripts.

The page has the run's status (a failed run says why and shows what it recorded), the scenario's
validation warnings (``metadata.json`` "warnings": the guards a planner should read first), the
figures of :data:`cosim.report.figures.FIGURES` (those the run has columns for; the others
are named with the reason), the KPIs (headline figures first, then one table per block) and
the run's metadata. Long runs are drawn from at most ``MAX_POINTS`` points per series.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from cosim.folder import RunFolder, read_parquet
from cosim.report.figures import (
    BAND_HIGH,
    BAND_LOW,
    FIGURES,
    Absent,
    FigureInput,
    build_figures,
    event_spans,
    is_bus_voltage,
    swing_band,
    is_loading,
    power_parts,
    used,
)
from cosim.report.page import esc, fmt, html_page, kpi_tables

__all__ = ["FIGURES", "build_figures", "esc", "fmt", "html_page", "kpi_tables", "power_parts", "read_series",
           "render", "write_report"]


def read_series(run_dir: Path, top_lines: int = 5, batch_rows: int = 16_384) -> pd.DataFrame | None:
    """The columns the figures use, indexed by UTC time; None without a readable time series.

    Per-bus voltages and per-line loadings are many columns (a year of a 300-bus grid is
    GBs): they are streamed in batches and kept as the band over buses
    (``(buses).vm_band_low_pu``/``_high_pu``) and the ``top_lines`` most loaded lines only.
    """
    return read_series_checked(run_dir, top_lines, batch_rows)[0]


def read_series_checked(run_dir: Path, top_lines: int = 5, batch_rows: int = 16_384
                        ) -> tuple[pd.DataFrame | None, str | None]:
    """:func:`read_series` and, when there is no series, why (None: the file is absent)."""
    path = RunFolder(run_dir).series_path
    if not path.exists():
        return None, None
    try:
        series = _read_series(path, top_lines, batch_rows)
    except Exception as exc:  # noqa: BLE001 — corrupt file (OSError, ArrowException), odd columns: the report goes on
        return None, f"timeseries.parquet is unreadable: {type(exc).__name__}: {exc}"
    if series is None:
        return None, "timeseries.parquet has no rows"
    return series, None


def _read_series(path: Path, top_lines: int, batch_rows: int) -> pd.DataFrame | None:
    parquet = pq.ParquetFile(path)
    names = parquet.schema_arrow.names
    if "time_utc" not in names:
        raise ValueError("no time_utc column")
    buses = [c for c in names if is_bus_voltage(c)]
    lines = [c for c in names if is_loading(c)]
    banded = {*buses, *lines}
    small = [c for c in names if c != "time_utc" and used(c) and c not in banded]
    parts, peaks = [], None
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=["time_utc", *small, *buses, *lines]):
        frame = batch.to_pandas()
        part = frame[["time_utc", *small]].copy()
        if buses:
            part[BAND_LOW] = frame[buses].min(axis=1)
            part[BAND_HIGH] = frame[buses].max(axis=1)
        if lines:
            batch_peaks = frame[lines].max()
            peaks = batch_peaks if peaks is None else np.fmax(peaks, batch_peaks)
        parts.append(part)
    if not parts or not sum(len(p) for p in parts):
        return None
    series = pd.concat(parts, ignore_index=True).set_index("time_utc")
    if lines:
        top = list(peaks.sort_values(ascending=False).index[:top_lines])
        top_frame = read_parquet(path, columns=["time_utc", *top]).set_index("time_utc")
        series = series.join(top_frame)
    return series


def _meta_table(meta: dict[str, Any]) -> str:
    keys = ("scenario", "status", "reason", "engine", "start_utc", "duration_s", "step_s", "tick_s", "seed", "steps", "wall_s",
            "steps_per_s", "started_utc", "git_commit")
    rows = "".join(f"<tr><td>{k}</td><td>{esc(fmt(meta.get(k)))}</td></tr>" for k in keys if k in meta)
    versions = meta.get("versions") or {}
    if isinstance(versions, dict) and versions:
        text = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
        rows += f"<tr><td>versions</td><td>{esc(text)}</td></tr>"
    return f"<table id='metadata'>{rows}</table>"


def _status_banner(meta: dict[str, Any], meta_problem: str | None, has_series: bool) -> str:
    status = meta.get("status", "unknown")
    if status == "ok":
        return "<div class='status ok' id='status'>Run finished: ok</div>"
    reason = meta.get("reason") or meta_problem or "no metadata.json: the run did not finish"
    if status == "degraded":  # finished, but partly unknown: as loud as a failure
        tail = " — those steps are drawn as gaps"
    elif status == "running":
        reason, tail = ("metadata.json still says running: the run was killed or is still going "
                        "(`cosim repair RUN` assembles what a killed run recorded)"), ""
    else:
        tail = " — figures show what was recorded until then" if has_series else ""
    return f"<div class='status failed' id='status'>Run {esc(status)}: {esc(reason)}{tail}</div>"


def mask_unsolved(ts: pd.DataFrame, entities: dict[str, dict[str, Any]], roles) -> pd.DataFrame:
    """NaN where a grid did not converge, in its own and its elements' columns (the grid adapter
    writes NaN there itself, but an element's asked ``p_mw`` stays, and older run folders hold the last
    solved values): the figures draw gaps instead."""
    out = ts
    for grid in roles.entities_with("grid"):
        flag = f"{grid}.converged"
        if flag not in ts.columns:
            continue
        bad = ts[flag].astype(float).to_numpy() < 0.5
        if not bad.any():
            continue
        sim = (entities.get(grid) or {}).get("sim")
        mates = {e for e, info in entities.items() if sim is not None and info.get("sim") == sim} | {grid}
        columns = [c for c in ts.columns if c.partition(".")[0] in mates and c != flag]
        columns += [c for c in (BAND_LOW, BAND_HIGH) if c in ts.columns]
        out = out.copy() if out is ts else out
        out.loc[bad, columns] = np.nan
    return out


def render(run_dir: Path) -> str:
    """The report page of a run folder as HTML text.

    A damaged folder (corrupt series, malformed ``scenario.toml``, a ``metadata.json`` or
    ``kpis.json`` that is not an object) still gives a page, naming what could not be read.
    """
    folder = RunFolder(run_dir)
    meta, meta_problem = folder.metadata_checked()
    kpis, kpis_problem = folder.kpis_checked()
    ts, ts_problem = read_series_checked(folder.path)
    scenario, scenario_problem = folder.scenario_checked()
    unreadable = [p for p in (meta_problem, kpis_problem, ts_problem, scenario_problem) if p]
    parts = [_status_banner(meta, meta_problem, ts is not None)]
    warned = meta.get("warnings") if isinstance(meta.get("warnings"), list) else []
    if warned:  # the guards' caveats (cosim validate said them too): read before the figures
        items = "".join(f"<li>{esc(w)}</li>" for w in warned)
        parts.append(f"<section id='warnings'><h2>Warnings ({len(warned)})</h2><ul class='warnings'>{items}</ul></section>")
    if unreadable:
        items = "".join(f"<li>{esc(u)}</li>" for u in unreadable)
        parts.append(f"<section id='unreadable'><h2>Unreadable parts of this run folder</h2>"
                     f"<ul class='absent'>{items}</ul></section>")
    figures: dict[str, Any] = {}
    if ts is not None:
        try:
            roles, entities = folder.roles(), folder.entity_info()
            ts = mask_unsolved(ts, entities, roles)
            figures = build_figures(FigureInput(ts, roles, entities, event_spans(ts), band_hz=swing_band(meta),
                                                  kpis=kpis if isinstance(kpis, dict) else {}))
        except Exception as exc:  # noqa: BLE001 — odd values in a damaged series: the page still says what there is
            parts.append(f"<section id='unreadable-figures'><h2>Figures not drawn</h2><p class='absent'>"
                         f"{esc(type(exc).__name__)}: {esc(exc)}</p></section>")
    absent = []
    for fig in FIGURES:
        drawn = figures.get(fig.name)
        if isinstance(drawn, str):
            parts.append(f"<section id='fig-{fig.name}' data-figure='{fig.name}'><h2>{fig.title}</h2>"
                         f"<img alt='{fig.title} figure' src='data:image/png;base64,{drawn}'></section>")
        elif ts is not None and not fig.optional:
            absent.append(drawn.reason if isinstance(drawn, Absent) else fig.absent)
    if ts is None:
        absent = ["no readable timeseries.parquet: no figures"]
    if absent:
        items = "".join(f"<li>{esc(a)}</li>" for a in absent)
        parts.append(f"<section id='absent'><h2>Not in this run</h2><ul class='absent'>{items}</ul></section>")
    parts.append(f"<section id='kpis'><h2>KPIs</h2>{kpi_tables(kpis, meta.get('kpi_blocks'))}</section>")
    parts.append(f"<section id='run'><h2>Run</h2>{_meta_table(meta)}</section>")
    name = str(meta.get("scenario") or folder.path.name)
    section = scenario.get("scenario", {}) if isinstance(scenario.get("scenario", {}), dict) else {}
    description = str(section.get("description", ""))
    subtitle = f"{folder.path.name}" + (f" — {description}" if description else "")
    return html_page(f"cosim report: {name}", subtitle, "\n".join(parts))


def write_report(run_dir: str | Path, path: str | Path | None = None) -> Path:
    """Write ``report.html`` into the run folder (or to ``path``) and return its path.

    Works on any run folder, failed or partial ones included: what is missing is named.

    Raises:
        FileNotFoundError: ``run_dir`` is not a folder.
    """
    folder = RunFolder(run_dir)
    if not folder.path.is_dir():
        raise FileNotFoundError(f"{folder.path}: no such run folder (give the folder `cosim run` printed)")
    target = Path(path) if path else folder.report_path
    target.write_text(render(folder.path), encoding="utf-8")
    return target
