"""A run's report: one self-contained ``report.html`` (figures embedded as PNG), no scripts.

The figures are found by attribute names (DESIGN.md: columns are ``<entity>.<attr>``, the
unit in the name), so any scenario gets whatever of them its run recorded:

* ``power`` — power stack: site loads stacked up (``p_it_mw`` and its ``p_loss_mw``; a
  ``FacilityLoad``'s ``p_mw``; ``p_cooling_mw``; ``p_fans_mw``; battery charging), supply
  stacked down (PV ``p_mw``, battery discharging), grid import (``p_import_mw``) and a DR
  cap (``dr_cap_mw``) as lines; grid copies of these (``Load``/``Sgen``/``Storage``) are skipped;
* ``voltage`` — band of bus voltages (min to max over ``bus_*_vm_pu``, or the grid's
  ``vm_min_pu``/``vm_max_pu``), the points of connection's ``vm_pu`` and the limits;
* ``loading`` — highest line/transformer loading and the five most loaded ones, 100 % line;
* ``temperature`` — every ``*_c`` column; ``soc`` — every ``*soc_frac`` column;
* ``signals`` — carbon intensity (``*_g_kwh``) and prices (``*price_usd_mwh``);
* DR events (``event_active``) shaded on every time plot; the KPI table; the run's metadata.

A part that is absent is named in a note; a failed run says why at the top and shows what
it recorded. Long runs are drawn from at most ``MAX_POINTS`` points per series (means; the
voltage band and loadings keep their extremes).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cosim import kpis as kpi_module

MAX_POINTS = 3000
FIGURES = ("power", "voltage", "loading", "temperature", "soc", "signals")
GRID_ELEMENT_MODELS = ("Load", "Sgen", "Storage")
#: Stacking order (bottom first) and colours of the power stack's roles.
ROLE_ORDER = ("IT", "losses", "facility", "cooling", "fans", "charging", "PV", "discharging")
ROLE_COLOURS = {"IT": "tab:orange", "losses": "tab:brown", "facility": "tab:orange", "cooling": "tab:cyan",
                "fans": "tab:purple", "charging": "tab:blue", "PV": "gold", "discharging": "tab:green"}
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c9cfdb;font-size:14px}main{padding:16px 28px;max-width:1200px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:14px 0;padding:12px 18px}
h2{font-size:17px;margin:4px 0 10px}img{max-width:100%;height:auto}
table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #e4e7ec;padding:3px 10px;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f0f2f5}
.status{padding:10px 14px;border-radius:6px;margin:10px 0;font-weight:600}
.ok{background:#e3f4e8;color:#1f6f3a}.failed{background:#fde7e7;color:#9b1c1c}
.absent{color:#6b7280;font-size:13px}.pos{color:#b45309}.neg{color:#1d4ed8}
"""


# -- reading a run folder --------------------------------------------------------------
def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; ``{}`` when missing, unreadable or not an object."""
    return _read_json_checked(path)[0]


def _read_json_checked(path: Path) -> tuple[dict[str, Any], str | None]:
    """``(object, problem)``: the JSON object, or ``{}`` and why it cannot be used (None: absent)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"{path.name} is unreadable: {exc}"
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {}, f"{path.name} is not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {}, f"{path.name} holds a JSON {type(value).__name__}, not an object: ignored"
    return value, None


def _read_scenario(run_dir: Path) -> dict[str, Any]:
    """The run's ``scenario.toml`` as a table; ``{}`` when missing or unreadable."""
    try:
        raw = tomllib.loads((run_dir / "scenario.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _scenario_problem(run_dir: Path) -> str | None:
    """Why ``scenario.toml`` cannot be used for the report, or None (fine or absent)."""
    path = run_dir / "scenario.toml"
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return f"scenario.toml is unreadable: {exc}"
    bad = [k for k in ("scenario", "sims", "entities") if k in raw and not isinstance(raw[k], dict)]
    if bad:
        return f"scenario.toml is malformed ({', '.join(bad)} not a table): entity roles guessed from names only"
    return None


def _table(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key, {})
    return value if isinstance(value, dict) else {}


def entity_models(run_dir: Path) -> dict[str, tuple[str, str]]:
    """``{entity: (adapter, model)}`` from the run's ``scenario.toml`` (empty when unreadable)."""
    raw = _read_scenario(run_dir)
    sims = {sid: str(body.get("adapter", "")) for sid, body in _table(raw, "sims").items() if isinstance(body, dict)}
    return {eid: (sims.get(body.get("sim"), "") if isinstance(body.get("sim"), str) else "",
                  str(body.get("model", "")))
            for eid, body in _table(raw, "entities").items() if isinstance(body, dict)}


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
    path = run_dir / "timeseries.parquet"
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
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    names = parquet.schema_arrow.names
    if "time_utc" not in names:
        raise ValueError("no time_utc column")
    buses = [c for c in names if _is_bus_voltage(c)]
    lines = [c for c in names if _is_loading(c)]
    small = [c for c in names if c != "time_utc" and _used(c) and c not in buses and c not in lines]
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
        top_frame = pd.read_parquet(path, columns=["time_utc", *top]).set_index("time_utc")
        series = series.join(top_frame)
    return series


BAND_LOW, BAND_HIGH = "(buses).vm_band_low_pu", "(buses).vm_band_high_pu"


def _is_bus_voltage(column: str) -> bool:
    attr = _attr(column)
    return attr.startswith("bus_") and attr.endswith("_vm_pu")


def _is_loading(column: str) -> bool:
    attr = _attr(column)
    return attr.startswith(("line_", "trafo_")) and attr.endswith("_loading_pct")


def _used(column: str) -> bool:
    attr = column.partition(".")[2]
    return (attr.endswith(("_mw", "_pu", "_pct", "_c", "_frac", "_g_kwh", "_usd_mwh")) or attr == "event_active")


# -- picking columns by attribute --------------------------------------------------------
def _attr(column: str) -> str:
    return column.partition(".")[2]


def _entity(column: str) -> str:
    return column.partition(".")[0]


def power_parts(ts: pd.DataFrame, models: dict[str, tuple[str, str]]) -> dict[str, dict[str, pd.Series]]:
    """Site power by role: ``demand`` (stacked up), ``supply`` (stacked down), ``lines``. [MW]"""
    cols = set(ts.columns)
    grid_elements = {e for e, (adapter, model) in models.items() if adapter == "grid" and model in GRID_ELEMENT_MODELS}
    with_soc = {_entity(c) for c in cols if _attr(c).endswith("soc_frac")}
    pv = {_entity(c) for c in cols if _attr(c) == "poa_w_m2"} | {e for e, (_, m) in models.items() if m == "PvPlant"}
    demand: dict[str, pd.Series] = {}
    supply: dict[str, pd.Series] = {}
    lines: dict[str, pd.Series] = {}
    for column in sorted(cols):
        entity, attr = _entity(column), _attr(column)
        if entity in grid_elements:
            continue  # the grid's copy of a site power: drawn once, from its source
        if attr == "p_it_mw":
            demand[f"{entity} IT"] = ts[column]
        elif attr == "p_loss_mw" and f"{entity}.p_it_mw" in cols:
            demand[f"{entity} losses"] = ts[column]
        elif attr == "p_cooling_mw":
            demand[f"{entity} cooling"] = ts[column]
        elif attr == "p_fans_mw":
            demand[f"{entity} fans"] = ts[column]
        elif attr == "p_mw" and entity in with_soc:
            demand[f"{entity} charging"] = ts[column].clip(lower=0)
            supply[f"{entity} discharging"] = (-ts[column]).clip(lower=0)
        elif attr == "p_mw" and entity in pv:
            supply[f"{entity} PV"] = ts[column].clip(lower=0)
        elif attr == "p_mw" and f"{entity}.p_it_mw" not in cols and models.get(entity, ("", ""))[1] in (
                "FacilityLoad", "Cluster", "GpuCluster"):
            demand[f"{entity} facility"] = ts[column]
        elif attr == "p_import_mw":
            lines[f"{entity} import"] = ts[column]
        elif attr == "dr_cap_mw":
            lines[f"{entity} DR cap"] = ts[column]
    return {"demand": demand, "supply": supply, "lines": lines}


def loading_columns(ts: pd.DataFrame) -> list[str]:
    return [c for c in ts.columns if _is_loading(c)]


# -- drawing ---------------------------------------------------------------------------
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _thin(frame: pd.DataFrame | pd.Series, how: str = "mean"):
    """At most MAX_POINTS rows: block means (or min/max) of consecutive rows."""
    n = len(frame)
    if n <= MAX_POINTS:
        return frame
    block = math.ceil(n / MAX_POINTS)
    groups = np.arange(n) // block
    thinned = getattr(frame.groupby(groups), how)()
    thinned.index = frame.index[::block][: len(thinned)]
    return thinned


def _events(ts: pd.DataFrame) -> list[tuple[Any, Any]]:
    """(start, end) of every span where some ``event_active`` column is on."""
    cols = [c for c in ts.columns if _attr(c) == "event_active"]
    if not cols:
        return []
    active = ts[cols].fillna(0).astype(float).max(axis=1).to_numpy() > 0.5
    spans, start = [], None
    step = ts.index[1] - ts.index[0] if len(ts) > 1 else pd.Timedelta(0)
    for when, on in zip(ts.index, active):
        if on and start is None:
            start = when
        elif not on and start is not None:
            spans.append((start, when))
            start = None
    if start is not None:
        spans.append((start, ts.index[-1] + step))
    return spans


def _new_axes(plt, title: str, ylabel: str):
    fig, ax = plt.subplots(figsize=(11, 3.6))
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_ylabel(ylabel)
    ax.set_xlabel("time [UTC]")
    ax.grid(alpha=0.3)
    return fig, ax


def _finish(plt, fig, ax, events: list[tuple[Any, Any]], legend_x: float = 1.01) -> str:
    from matplotlib.patches import Patch

    for i, (start, end) in enumerate(events):
        ax.axvspan(start, end, color="tab:orange", alpha=0.15, lw=0)
    handles, labels = ax.get_legend_handles_labels()
    if events:
        handles.append(Patch(color="tab:orange", alpha=0.3))
        labels.append("DR event")
    if handles:
        ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(legend_x, 1.0), frameon=False)
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def fig_power(ts, models, events) -> str | None:
    parts = power_parts(ts, models)
    if not any(parts.values()):
        return None
    plt = _plt()
    fig, ax = _new_axes(plt, "Power stack: site demand up, own supply down, grid import", "power [MW]")
    x = _thin(ts.iloc[:, :1]).index
    for role in ("demand", "supply"):
        labels = sorted(parts[role], key=lambda label: ROLE_ORDER.index(label.rsplit(" ", 1)[1]))
        if labels:
            sign = 1.0 if role == "demand" else -1.0
            ys = [sign * _thin(parts[role][label].fillna(0)).to_numpy() for label in labels]
            ax.stackplot(x, *ys, labels=labels, alpha=0.75,
                         colors=[ROLE_COLOURS[label.rsplit(" ", 1)[1]] for label in labels])
    for label, series in parts["lines"].items():
        style = {"color": "black", "lw": 1.2} if label.endswith("import") else {"color": "tab:red", "ls": "--"}
        ax.plot(x, _thin(series).to_numpy(), label=label, **style)
    ax.axhline(0, color="0.4", lw=0.6)
    return _finish(plt, fig, ax, events)


def fig_voltage(ts, models, events, v_low: float, v_high: float) -> str | None:
    band = BAND_LOW in ts.columns and BAND_HIGH in ts.columns
    mins = [c for c in ts.columns if _attr(c) == "vm_min_pu"]
    maxs = [c for c in ts.columns if _attr(c) == "vm_max_pu"]
    points = [c for c in ts.columns if _attr(c) == "vm_pu"]
    if not (band or (mins and maxs) or points):
        return None
    plt = _plt()
    fig, ax = _new_axes(plt, "Bus voltages: band over all buses, points of connection, limits", "voltage [pu]")
    if band:
        low, high = ts[BAND_LOW], ts[BAND_HIGH]
    elif mins and maxs:
        low, high = ts[mins].min(axis=1), ts[maxs].max(axis=1)
    else:
        low = high = None
    if low is not None:
        lo, hi = _thin(low, "min"), _thin(high, "max")
        ax.fill_between(lo.index, lo.to_numpy(), hi.to_numpy(), color="tab:blue", alpha=0.25,
                        label="min-max over buses")
    for column in points:
        series = _thin(ts[column])
        ax.plot(series.index, series.to_numpy(), lw=1, label=column)
    ax.axhline(v_low, color="tab:red", ls="--", lw=1, label=f"limits {v_low:g} / {v_high:g} pu")
    ax.axhline(v_high, color="tab:red", ls="--", lw=1)
    return _finish(plt, fig, ax, events)


def fig_loading(ts, models, events) -> str | None:
    lines = loading_columns(ts)
    overall = [c for c in ts.columns if _attr(c) == "max_loading_pct"]
    if not (lines or overall):
        return None
    plt = _plt()
    fig, ax = _new_axes(plt, "Line and transformer loading: highest, and the five most loaded", "loading [%]")
    if overall:
        top = _thin(ts[overall].max(axis=1), "max")
        ax.plot(top.index, top.to_numpy(), color="black", lw=1.4, label="highest of all")
    if lines:
        peaks = ts[lines].max().sort_values(ascending=False)
        for column in peaks.index[:5]:
            series = _thin(ts[column], "max")
            ax.plot(series.index, series.to_numpy(), lw=1, label=_attr(column).removesuffix("_loading_pct"))
    ax.axhline(100.0, color="tab:red", ls="--", lw=1, label="100 % rating")
    return _finish(plt, fig, ax, events)


def _lines_figure(ts, columns, events, title, ylabel, ylim=None) -> str | None:
    if not columns:
        return None
    plt = _plt()
    fig, ax = _new_axes(plt, title, ylabel)
    for column in columns[:12]:
        series = _thin(ts[column])
        ax.plot(series.index, series.to_numpy(), lw=1, label=column)
    if ylim:
        ax.set_ylim(*ylim)
    return _finish(plt, fig, ax, events)


def fig_temperature(ts, models, events) -> str | None:
    cols = [c for c in ts.columns if _attr(c).endswith("_c")]
    return _lines_figure(ts, cols, events, "Temperatures", "temperature [°C]")


def fig_soc(ts, models, events) -> str | None:
    cols = [c for c in ts.columns if _attr(c).endswith("soc_frac")]
    return _lines_figure(ts, cols, events, "Battery state of charge", "SoC [-]", (0, 1.02))


def fig_signals(ts, models, events) -> str | None:
    carbon = [c for c in ts.columns if _attr(c).endswith("_g_kwh")]
    price = [c for c in ts.columns if _attr(c).endswith("price_usd_mwh")]
    if not (carbon or price):
        return None
    plt = _plt()
    ylabel = "carbon intensity [g/kWh]" if carbon else "price [USD/MWh]"
    fig, ax = _new_axes(plt, "Carbon intensity and price signals", ylabel)
    for column in carbon:
        series = _thin(ts[column])
        ax.plot(series.index, series.to_numpy(), lw=1.2, label=column)
    colours = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4)
    for line in ax.get_lines():
        next(colours)  # carbon lines took the first colours
    target = ax.twinx() if carbon and price else ax
    if target is not ax:
        target.set_ylabel("price [USD/MWh]")
    for column in price:
        series, colour = _thin(ts[column]), next(colours)
        target.step(series.index, series.to_numpy(), where="post", lw=1.2, ls="-.", color=colour)
        ax.plot([], [], color=colour, ls="-.", label=column)  # one legend for both axes
    return _finish(plt, fig, ax, events, legend_x=1.09 if target is not ax else 1.01)


ABSENT = {
    "power": "no site powers (p_it_mw, p_cooling_mw, a FacilityLoad's p_mw, PV, battery) or grid import recorded",
    "voltage": "no bus voltages (bus_*_vm_pu, vm_min_pu/vm_max_pu, vm_pu) recorded",
    "loading": "no line or transformer loadings (line_*_loading_pct, max_loading_pct) recorded",
    "temperature": "no temperatures (*_c) recorded",
    "soc": "no state of charge (*soc_frac) recorded",
    "signals": "no carbon intensity (*_g_kwh) or price (*price_usd_mwh) recorded",
}
TITLES = {"power": "Power", "voltage": "Voltage", "loading": "Line loading", "temperature": "Temperatures",
          "soc": "State of charge", "signals": "Carbon and price"}


def build_figures(ts: pd.DataFrame, models: dict[str, tuple[str, str]],
                  v_low: float = kpi_module.V_LOW_PU, v_high: float = kpi_module.V_HIGH_PU) -> dict[str, str | None]:
    """Every figure as base64 PNG, or None when the run has no columns for it."""
    events = _events(ts)
    return {"power": fig_power(ts, models, events), "voltage": fig_voltage(ts, models, events, v_low, v_high),
            "loading": fig_loading(ts, models, events), "temperature": fig_temperature(ts, models, events),
            "soc": fig_soc(ts, models, events), "signals": fig_signals(ts, models, events)}


# -- HTML ------------------------------------------------------------------------------
def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value)
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def html_page(title: str, subtitle: str, body: str) -> str:
    """A complete page with the house CSS; no scripts, no external resources."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>{esc(title)}</title><style>{CSS}</style></head>\n'
            f'<body><header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header>'
            f'<main>\n{body}\n</main></body></html>\n')


def kpi_table(kpis: dict[str, Any]) -> str:
    from cosim.sweep import flatten

    rows = "".join(f"<tr><td>{esc(k)}</td><td class='num'>{esc(fmt(v))}</td></tr>" for k, v in flatten(kpis).items())
    if not rows:
        return "<p class='absent'>No KPIs (the run recorded nothing).</p>"
    return f"<table id='kpi-table'><tr><th>KPI</th><th>value</th></tr>{rows}</table>"


def _meta_table(meta: dict[str, Any]) -> str:
    keys = ("scenario", "status", "reason", "start_utc", "duration_s", "step_s", "seed", "steps", "wall_s",
            "steps_per_s", "started_utc", "git_commit")
    rows = "".join(f"<tr><td>{k}</td><td>{esc(fmt(meta.get(k)))}</td></tr>" for k in keys if k in meta)
    versions = meta.get("versions") or {}
    if isinstance(versions, dict) and versions:
        text = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
        rows += f"<tr><td>versions</td><td>{esc(text)}</td></tr>"
    return f"<table id='metadata'>{rows}</table>"


def render(run_dir: Path) -> str:
    """The report page of a run folder as HTML text.

    A damaged folder (corrupt series, malformed ``scenario.toml``, a ``metadata.json`` or
    ``kpis.json`` that is not an object) still gives a page, naming what could not be read.
    """
    meta, meta_problem = _read_json_checked(run_dir / "metadata.json")
    kpis, kpis_problem = _read_json_checked(run_dir / "kpis.json")
    ts, ts_problem = read_series_checked(run_dir)
    unreadable = [p for p in (meta_problem, kpis_problem, ts_problem, _scenario_problem(run_dir)) if p]
    status = meta.get("status", "unknown")
    parts = []
    if status == "ok":
        parts.append("<div class='status ok' id='status'>Run finished: ok</div>")
    else:
        reason = meta.get("reason") or meta_problem or "no metadata.json: the run did not finish"
        parts.append(f"<div class='status failed' id='status'>Run {esc(status)}: {esc(reason)}"
                     f"{' — figures show what was recorded until then' if ts is not None else ''}</div>")
    if unreadable:
        items = "".join(f"<li>{esc(u)}</li>" for u in unreadable)
        parts.append(f"<section id='unreadable'><h2>Unreadable parts of this run folder</h2>"
                     f"<ul class='absent'>{items}</ul></section>")
    figures: dict[str, str | None] = {}
    if ts is not None:
        try:
            figures = build_figures(ts, entity_models(run_dir))
        except Exception as exc:  # noqa: BLE001 — odd values in a damaged series: the page still says what there is
            parts.append(f"<section id='unreadable-figures'><h2>Figures not drawn</h2><p class='absent'>"
                         f"{esc(type(exc).__name__)}: {esc(exc)}</p></section>")
    for name in FIGURES:
        png = figures.get(name)
        if png:
            parts.append(f"<section id='fig-{name}' data-figure='{name}'><h2>{TITLES[name]}</h2>"
                         f"<img alt='{TITLES[name]} figure' src='data:image/png;base64,{png}'></section>")
    absent = [ABSENT[n] for n in FIGURES if not figures.get(n)]
    if ts is None:
        absent = ["no readable timeseries.parquet: no figures"]
    if absent:
        items = "".join(f"<li>{esc(a)}</li>" for a in absent)
        parts.append(f"<section id='absent'><h2>Not in this run</h2><ul class='absent'>{items}</ul></section>")
    parts.append(f"<section id='kpis'><h2>KPIs</h2>{kpi_table(kpis)}</section>")
    parts.append(f"<section id='run'><h2>Run</h2>{_meta_table(meta)}</section>")
    name = str(meta.get("scenario") or run_dir.name)
    description = _description(run_dir)
    subtitle = f"{run_dir.name}" + (f" — {description}" if description else "")
    return html_page(f"cosim report: {name}", subtitle, "\n".join(parts))


def _description(run_dir: Path) -> str:
    return str(_table(_read_scenario(run_dir), "scenario").get("description", ""))


def write_report(run_dir: str | Path, path: str | Path | None = None) -> Path:
    """Write ``report.html`` into the run folder (or to ``path``) and return its path.

    Works on any run folder, failed or partial ones included: what is missing is named.

    Raises:
        FileNotFoundError: ``run_dir`` is not a folder.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run folder (give the folder `cosim run` printed)")
    target = Path(path) if path else run_dir / "report.html"
    target.write_text(render(run_dir), encoding="utf-8")
    return target
