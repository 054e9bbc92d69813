"""Compare runs: their KPIs side by side with the differences to the first (the baseline).

:func:`compare` returns the table (one row per KPI, ``section.key``), :func:`format_table`
prints it for a terminal and :func:`write_compare_html` writes it as a self-contained page.
A KPI one run lacks shows as missing, never as zero; text KPIs (a signal's name) are
shown but not differenced. A sweep folder (one holding ``sweep.parquet``) stands for its runs,
in the sweep's order, labelled with the variants' names (:func:`expand_runs`); ``only`` keeps the
KPIs under the given prefixes; :func:`spectrum_png` overlays one column's power spectrum of
every run (the page's "before/after" figure for a swing mitigation).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cosim.errors import Problem, ScenarioError
from cosim.folder import RunFolder, flatten, read_json_checked, read_parquet
from cosim.kpis.swing import MAX_STEP_S, SHARE_BAND_HZ, TRAINING_BAND_HZ, welch_psd
from cosim.report import esc, fmt, html_page
from cosim.report.figures import _png, new_figure

STATUS_ROW = "(status)"


def _label(run_dir: Path, taken: set[str]) -> str:
    label = run_dir.name or str(run_dir)
    n = 1
    while label in taken:
        n += 1
        label = f"{run_dir.name}#{n}"
    taken.add(label)
    return label


def _labelled(label: str, taken: set[str]) -> str:
    out, n = label, 1
    while out in taken:
        n += 1
        out = f"{label}#{n}"
    taken.add(out)
    return out


def spectrum_png(run_dirs: list[Path], labels: list[str], column: str) -> str | None:
    """One column's Welch power spectrum of every run, overlaid (base64 PNG; None when no run
    recorded the column at steps of 0.5 s or less). The swing band of ``band_share_frac`` shaded."""
    curves = []
    for run_dir, label in zip(run_dirs, labels):
        folder = RunFolder(run_dir)
        if not folder.series_path.is_file() or column not in folder.column_names():
            continue
        ts = folder.numeric_columns([column])
        if len(ts) < 8:
            continue
        dt_s = (ts.index[1] - ts.index[0]).total_seconds()
        x = ts[column].to_numpy(float)
        if dt_s > MAX_STEP_S + 1e-9 or not np.isfinite(x).all():
            continue
        curves.append((label, *welch_psd(x, dt_s)))
    if not curves:
        return None
    fig, ax = new_figure(figsize=(11, 3.8))
    ax.set_title(f"Power spectrum of {column} (Welch), run by run; 0.2-3 Hz (training swings) shaded", fontsize=11,
                 loc="left")
    for label, freqs, psd in curves:
        if np.any(psd[1:] > 0):
            ax.semilogy(freqs[1:], psd[1:], lw=1.2, label=label)
    ax.axvspan(*TRAINING_BAND_HZ, color="tab:orange", alpha=0.15, lw=0)
    ax.set_xlim(SHARE_BAND_HZ[0] / 2, None)
    ax.set_xlabel("frequency [Hz]")
    ax.set_ylabel("PSD [MW²/Hz]")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return _png(fig)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(float(value)) else float(value)


def expand_runs(paths: list[str | Path]) -> tuple[list[Path], list[str | None]]:
    """Run folders and their labels: a sweep folder becomes its runs (labelled by ``name``, else
    ``variant``), any other folder itself (labelled later by its folder name).

    Raises:
        ScenarioError: a sweep folder's table cannot be read.
    """
    dirs: list[Path] = []
    labels: list[str | None] = []
    for raw in paths:
        path = Path(raw)
        table_path = path / "sweep.parquet"
        if not table_path.is_file():
            dirs.append(path)
            labels.append(None)
            continue
        try:
            table = read_parquet(table_path)
        except Exception as exc:  # a damaged or foreign file: named, no traceback
            raise ScenarioError("compare", [Problem(str(table_path), f"not a readable sweep table ({exc}); re-run "
                                                    "the sweep or give the run folders")]) from None
        names = table["name"] if "name" in table.columns else table["variant"]
        for name, run_dir in zip(names, table["run_dir"]):
            dirs.append(Path(run_dir))
            labels.append(str(name))
    return dirs, labels


def compare(run_dirs: list[str | Path], labels: list[str | None] | None = None,
            only: list[str] | None = None) -> pd.DataFrame:
    """KPIs of the runs side by side; the first run is the baseline.

    Args:
        run_dirs: the run folders, baseline first.
        labels: each run's column name (None: its folder's name).
        only: keep the KPIs whose ``section.key`` starts with one of these (None: all).

    Returns:
        A frame indexed by KPI (first row ``(status)``) with one column per run (named
        after its label or folder) and, for every other run, ``Δ <run>`` (run − baseline) and
        ``Δ% <run>`` (relative to |baseline|; missing when the baseline is 0).

    Raises:
        FileNotFoundError: a folder is missing (each is named).
        ScenarioError: a ``kpis.json`` or ``metadata.json`` is damaged (not JSON, not an object).
    """
    dirs = [Path(d) for d in run_dirs]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        raise FileNotFoundError(f"no such run folder: {', '.join(missing)}")
    if not dirs:
        raise ValueError("give at least one run folder")
    taken: set[str] = set()
    columns: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for k, run_dir in enumerate(dirs):
        kpis = _read_json(RunFolder(run_dir), "kpis.json", problems)
        meta = _read_json(RunFolder(run_dir), "metadata.json", problems)
        label = labels[k] if labels and k < len(labels) and labels[k] else None
        flat = {key: v for key, v in flatten(kpis).items() if not only or any(key.startswith(o) for o in only)}
        columns[_labelled(label, taken) if label else _label(run_dir, taken)] = {
            STATUS_ROW: meta.get("status", "unknown"), **flat}
    if problems:
        raise ScenarioError("compare", problems)
    keys = list(dict.fromkeys(k for values in columns.values() for k in values))
    if only and len(keys) == 1:
        raise ScenarioError("compare", [Problem("--kpis", f"no KPI starts with {', '.join(only)}; see a run's "
                                                "kpis.json for the sections (e.g. swing.campus)", only)])
    table = pd.DataFrame({label: [values.get(k) for k in keys] for label, values in columns.items()}, index=keys,
                         dtype=object)
    labels = list(columns)
    base = labels[0]
    for label in labels[1:]:
        deltas, percents = [], []
        for key in keys:
            a, b = _number(table.at[key, base]), _number(table.at[key, label])
            delta = None if a is None or b is None else b - a
            deltas.append(delta)
            percents.append(None if delta is None or a == 0 else 100.0 * delta / abs(a))
        table[f"Δ {label}"] = pd.Series(deltas, index=keys, dtype=object)
        table[f"Δ% {label}"] = pd.Series(percents, index=keys, dtype=object)
    table.index.name = "kpi"
    return table


def _read_json(folder: RunFolder, name: str, problems: list[Problem]) -> dict[str, Any]:
    """A JSON object of the folder (``{}`` when absent: a run that did not finish); a damaged
    file adds a problem."""
    path = folder.path / name
    value, problem = read_json_checked(path)
    if problem and "not an object" in problem:
        raw = json.loads(path.read_text())
        problems.append(Problem(str(path), f"expected a JSON object (sections of KPIs), found a "
                                           f"{type(raw).__name__}", raw))
    elif problem:
        problems.append(Problem(str(path), problem))
    return value


def _cell(value: Any, percent: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if percent:
        return f"{value:+.1f} %"
    return fmt(value)


def format_table(table: pd.DataFrame) -> str:
    """The comparison as aligned text for a terminal."""
    headers = ["kpi", *table.columns]
    rows = [[str(key), *(_cell(v, str(c).startswith("Δ%")) for c, v in zip(table.columns, table.loc[key]))]
            for key in table.index]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def write_compare_html(table: pd.DataFrame, path: str | Path, figures: dict[str, str] | None = None) -> Path:
    """The comparison as a self-contained HTML page (higher in orange, lower in blue: not judged);
    ``figures``: title -> base64 PNG, shown under the table."""
    head = "".join(f"<th>{esc(c)}</th>" for c in ["KPI", *table.columns])
    body = []
    for key in table.index:
        cells = [f"<td>{esc(key)}</td>"]
        for column in table.columns:
            value = table.at[key, column]
            delta = str(column).startswith("Δ")
            css = "num"
            if delta and isinstance(value, (int, float)) and value:
                css += " pos" if value > 0 else " neg"
            cells.append(f"<td class='{css}'>{esc(_cell(value, str(column).startswith('Δ%')))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    runs = [c for c in table.columns if not str(c).startswith("Δ")]
    section = (f"<section id='compare'><h2>KPIs side by side (baseline: {esc(runs[0])})</h2>"
               "<p class='absent'>Δ = run − baseline, Δ% relative to |baseline|; orange: higher, blue: lower "
               "(whether that is better depends on the KPI); — : missing or not a number.</p>"
               f"<table id='compare-table'><tr>{head}</tr>{''.join(body)}</table></section>")
    for title, png in (figures or {}).items():
        section += (f"<section class='figure'><h2>{esc(title)}</h2>"
                    f"<img alt='{esc(title)}' src='data:image/png;base64,{png}'></section>")
    path = Path(path)
    if path.is_dir():
        raise ScenarioError("--html", [Problem("--html", f"{path} is a folder; give the HTML file to write, e.g. "
                                                         f"{path / 'compare.html'}")])
    path.write_text(html_page("cosim compare", f"{len(runs)} runs: " + ", ".join(runs), section), encoding="utf-8")
    return path
