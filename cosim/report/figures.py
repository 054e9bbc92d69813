"""The report's figures: one table (:data:`FIGURES`), each entry a name, a title, what to say
when the run has nothing for it, and the function drawing it.

Columns are found by role (``metadata.json``'s roles) and by attribute name (DESIGN.md:
columns are ``<entity>.<attr>``, the unit in the name), so any scenario gets whatever its
run recorded:

* ``power`` — the site's power by role: demand stacked up (IT and its losses, other loads,
  cooling plants, air handlers, storage charging), own supply stacked down (clean and
  fossil generation, storage discharging), the grid import and a DR cap as lines;
* ``voltage`` — band of bus voltages (min to max over ``bus_*_vm_pu``, or the grid's
  ``vm_min_pu``/``vm_max_pu``), one line per bus where site elements connect, and the limits;
* ``loading`` — highest line/transformer loading and the five most loaded ones (or a note
  that the network has no line ratings);
* ``temperature`` — one panel each for air, water/coolant, weather and other temperatures;
* ``soc`` — every ``*soc_frac``; ``signals`` — carbon intensity and prices;
* ``frequency`` — every ``f_hz`` (a balancing area) with its ``f_nadir_hz``/``f_zenith_hz``
  and ±0.2 Hz around its start, and ``rocof_hz_s`` below (only when recorded);
* ``spectrum`` — at recording steps ≤ 0.5 s, the Welch power spectral density of every
  ``p_mw`` column with the 0.1–2 Hz band of :mod:`cosim.kpis.swing` shaded (only then);
* ``ride_through`` — each envelope judged by :mod:`cosim.kpis.ride_through_verdict`: its boundary
  in time since a disturbance began and every disturbance's voltage (positive sequence, worst
  phase) or frequency drawn over it, with the verdict (only then);
* DR events (``event_active``) shaded on every time plot.

Adding a figure is one entry of :data:`FIGURES` (and its draw function).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cosim.kpis import V_HIGH_PU, V_LOW_PU
from cosim.kpis import ride_through_verdict as rtv
from cosim.kpis.swing import BAND_HZ, MAX_STEP_S, welch_psd
from cosim.scenario.envelopes import load as load_envelope
from cosim.roles import RunRoles

MAX_POINTS = 3000
#: A peak loading below this means the network carries no real ratings (placeholders). [%]
NO_RATINGS_PCT = 0.1
BAND_LOW, BAND_HIGH = "(buses).vm_band_low_pu", "(buses).vm_band_high_pu"


@dataclass
class FigureInput:
    """What a figure is drawn from: the series (see :func:`cosim.report.read_series`), the roles,
    the entities' info from ``metadata.json``, the DR event spans and the voltage band."""

    ts: pd.DataFrame
    roles: RunRoles
    entities: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[tuple[Any, Any]] = field(default_factory=list)
    v_low: float = V_LOW_PU
    v_high: float = V_HIGH_PU
    band_hz: tuple[float, float] = BAND_HZ  # the swing band the run's KPIs screened ([kpis.swing] band_hz)
    kpis: dict[str, Any] = field(default_factory=dict)  # the run's kpis.json (the ride-through verdicts)


@dataclass(frozen=True)
class Absent:
    """A figure not drawn, and why (overrides the figure's default text)."""

    reason: str


@dataclass(frozen=True)
class Figure:
    """One figure of the report: ``draw`` returns a base64 PNG, None (nothing to draw: the
    ``absent`` text is shown) or :class:`Absent` with a reason of its own."""

    name: str
    title: str
    absent: str
    draw: Callable[[FigureInput], "str | Absent | None"]
    #: drawn only when the run has its outputs, never listed as missing (sub-second studies)
    optional: bool = False


# -- picking columns ---------------------------------------------------------------------------
def attr_of(column: str) -> str:
    return column.partition(".")[2]


def entity_of(column: str) -> str:
    return column.partition(".")[0]


def is_bus_voltage(column: str) -> bool:
    attr = attr_of(column)
    return attr.startswith("bus_") and attr.endswith("_vm_pu")


def is_loading(column: str) -> bool:
    attr = attr_of(column)
    return attr.startswith(("line_", "trafo_")) and attr.endswith("_loading_pct")


def used(column: str) -> bool:
    """A column some figure may draw."""
    attr = attr_of(column)
    return attr.endswith(("_mw", "_pu", "_pct", "_c", "_frac", "_g_kwh", "_usd_mwh", "_hz", "_hz_s")) or attr in (
        "event_active", "converged")


#: role -> (label in the legend, colour, stacked side)
ROLE_STYLE = {
    "it": ("IT", "tab:orange", "demand"), "losses": ("UPS/PDU losses", "tab:brown", "demand"),
    "load": ("load", "tab:pink", "demand"), "cooling": ("cooling", "tab:cyan", "demand"),
    "air_handler": ("fans", "tab:purple", "demand"), "charging": ("charging", "tab:blue", "demand"),
    "clean_gen": ("clean generation", "gold", "supply"), "fossil_gen": ("fossil generation", "dimgray", "supply"),
    "discharging": ("discharging", "tab:green", "supply"),
    "backup": ("backup (UPS, generator)", "tab:red", "supply"),
}
STACK_ORDER = tuple(ROLE_STYLE)


def power_parts(ts: pd.DataFrame, roles: RunRoles) -> dict[str, dict[str, pd.Series]]:
    """Site power by role: ``demand`` (stacked up), ``supply`` (stacked down), ``lines``. [MW]

    Keys of ``demand``/``supply`` are ``"<entity> <part>"`` where ``<part>`` is a key of
    :data:`ROLE_STYLE`. Grid elements (the grid's copies of site powers) are never drawn.
    """
    cols = list(ts.columns)
    demand: dict[str, pd.Series] = {}
    supply: dict[str, pd.Series] = {}
    lines: dict[str, pd.Series] = {}
    for role in ("it", "load", "cooling", "air_handler", "clean_gen", "fossil_gen", "storage", "backup"):
        for column in roles.power_columns(role, cols):
            entity = entity_of(column)
            if role == "it" and f"{entity}.p_it_mw" in ts and column == f"{entity}.p_mw":
                demand[f"{entity} it"] = ts[f"{entity}.p_it_mw"]
                if f"{entity}.p_loss_mw" in ts:
                    demand[f"{entity} losses"] = ts[f"{entity}.p_loss_mw"]
            elif role == "storage":
                demand[f"{entity} charging"] = ts[column].clip(lower=0)
                supply[f"{entity} discharging"] = (-ts[column]).clip(lower=0)
            elif role == "backup":  # generator sign; negative while the grid recharges the UPS
                supply[f"{entity} backup"] = ts[column].clip(lower=0)
                demand[f"{entity} charging"] = (-ts[column]).clip(lower=0)
            elif role in ("clean_gen", "fossil_gen"):
                supply[f"{entity} {role}"] = ts[column].clip(lower=0)
            else:
                demand[f"{entity} {role}"] = ts[column]
    for grid in roles.entities_with("grid"):
        if f"{grid}.p_import_mw" in ts:
            lines[f"{grid} import"] = ts[f"{grid}.p_import_mw"]
    for column in cols:
        if attr_of(column) == "dr_cap_mw":
            lines[f"{entity_of(column)} DR cap"] = ts[column]
    return {"demand": demand, "supply": supply, "lines": lines}


def loading_columns(ts: pd.DataFrame) -> list[str]:
    return [c for c in ts.columns if is_loading(c)]


def temperature_groups(ts: pd.DataFrame, roles: RunRoles) -> dict[str, list[str]]:
    """Temperature columns by panel: ``air``, ``water``, ``weather``, ``other`` (by role, then name)."""
    groups: dict[str, list[str]] = {"air": [], "water": [], "weather": [], "other": []}
    for column in ts.columns:
        attr = attr_of(column)
        if not attr.endswith("_c"):
            continue
        role = roles.of(entity_of(column))
        if role == "signal" or attr in ("t_dry_c", "t_wet_c", "t_dew_c"):
            groups["weather"].append(column)
        elif role == "air_handler" or any(k in attr for k in ("air", "inlet", "rack", "room")):
            groups["air"].append(column)
        elif role == "cooling" or any(k in attr for k in ("chw", "cw_", "water", "coolant", "tank", "facility")):
            groups["water"].append(column)
        else:
            groups["other"].append(column)
    return {k: v for k, v in groups.items() if v}


def voltage_points(ts: pd.DataFrame, entities: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Point-of-connection voltages, one per bus: ``{label: [columns at that bus]}``.

    Elements at the same bus report the same voltage; they are drawn once, labelled with the
    bus and every element there (from ``metadata.json``'s entity info; identical series are
    merged when the buses are not known).
    """
    points = [c for c in ts.columns if attr_of(c) == "vm_pu"]
    by_bus: dict[str, list[str]] = {}
    for column in points:
        bus = (entities.get(entity_of(column)) or {}).get("bus")
        key = f"bus {bus}" if bus is not None else None
        if key is None:
            for label, group in by_bus.items():
                if ts[group[0]].equals(ts[column]):
                    key = label
                    break
        by_bus.setdefault(key or column, []).append(column)
    return {(f"{label} ({', '.join(entity_of(c) for c in group)})" if label.startswith("bus ") or len(group) > 1
             else label): group for label, group in by_bus.items()}


# -- drawing helpers ---------------------------------------------------------------------------
def new_figure(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **subplots):
    """A figure and its axes on matplotlib's object API: a :class:`~matplotlib.figure.Figure` on its
    own Agg canvas. No backend is selected and pyplot holds no reference to it, so a notebook (or any
    program) that imports cosim keeps its own backend and inline figures."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # ~0.5 s to import: only a page that draws pays it
    from matplotlib.figure import Figure  # matplotlib: as above

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **subplots)


def thin(frame: pd.DataFrame | pd.Series, how: str = "mean"):
    """At most MAX_POINTS rows: block means (or min/max) of consecutive rows."""
    n = len(frame)
    if n <= MAX_POINTS:
        return frame
    block = math.ceil(n / MAX_POINTS)
    groups = np.arange(n) // block
    thinned = getattr(frame.groupby(groups), how)()
    thinned.index = frame.index[::block][: len(thinned)]
    return thinned


def event_spans(ts: pd.DataFrame) -> list[tuple[Any, Any]]:
    """(start, end) of every span where some ``event_active`` column is on."""
    cols = [c for c in ts.columns if attr_of(c) == "event_active"]
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


def _axes(title: str, ylabel: str, rows: int = 1):
    fig, axes = new_figure(rows, 1, figsize=(11, 3.6 if rows == 1 else 2.6 * rows), sharex=True, squeeze=False)
    axes = [a[0] for a in axes]
    axes[0].set_title(title, fontsize=11, loc="left")
    for ax in axes:
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("time [UTC]")
    return fig, axes


def _shade_and_legend(ax, events: list[tuple[Any, Any]], legend_x: float = 1.01) -> None:
    from matplotlib.patches import Patch  # matplotlib: see new_figure

    for start, end in events:
        ax.axvspan(start, end, color="tab:orange", alpha=0.15, lw=0)
    handles, labels = ax.get_legend_handles_labels()
    if events:
        handles.append(Patch(color="tab:orange", alpha=0.3))
        labels.append("DR event")
    if handles:
        ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(legend_x, 1.0), frameon=False)


def _png(fig) -> str:
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode("ascii")


# -- the figures -------------------------------------------------------------------------------
def fig_power(f: FigureInput) -> str | None:
    parts = power_parts(f.ts, f.roles)
    if not any(parts.values()):
        return None
    fig, (ax,) = _axes("Power stack: site demand up, own supply down, grid import", "power [MW]")
    x = thin(f.ts.iloc[:, :1]).index
    for side, sign in (("demand", 1.0), ("supply", -1.0)):
        labels = sorted(parts[side], key=lambda label: STACK_ORDER.index(label.rsplit(" ", 1)[1]))
        if labels:
            ys = [sign * thin(parts[side][label].fillna(0)).to_numpy() for label in labels]
            names = [f"{label.rsplit(' ', 1)[0]} {ROLE_STYLE[label.rsplit(' ', 1)[1]][0]}" for label in labels]
            ax.stackplot(x, *ys, labels=names, alpha=0.75,
                         colors=[ROLE_STYLE[label.rsplit(" ", 1)[1]][1] for label in labels])
    for label, series in parts["lines"].items():
        style = {"color": "black", "lw": 1.2} if label.endswith("import") else {"color": "tab:red", "ls": "--"}
        ax.plot(x, thin(series).to_numpy(), label=label, **style)
    ax.axhline(0, color="0.4", lw=0.6)
    _shade_and_legend(ax, f.events)
    return _png(fig)


def fig_voltage(f: FigureInput) -> str | None:
    ts = f.ts
    band = BAND_LOW in ts.columns and BAND_HIGH in ts.columns
    mins = [c for c in ts.columns if attr_of(c) == "vm_min_pu"]
    maxs = [c for c in ts.columns if attr_of(c) == "vm_max_pu"]
    points = voltage_points(ts, f.entities)
    if not (band or (mins and maxs) or points):
        return None
    fig, (ax,) = _axes("Bus voltages: band over all buses, points of connection, limits", "voltage [pu]")
    if band:
        low, high = ts[BAND_LOW], ts[BAND_HIGH]
    elif mins and maxs:
        low, high = ts[mins].min(axis=1), ts[maxs].max(axis=1)
    else:
        low = high = None
    if low is not None:
        lo, hi = thin(low, "min"), thin(high, "max")
        ax.fill_between(lo.index, lo.to_numpy(), hi.to_numpy(), color="tab:blue", alpha=0.25, label="min-max over buses")
    for label, group in points.items():
        series = thin(ts[group[0]])
        ax.plot(series.index, series.to_numpy(), lw=1, label=label)
    ax.axhline(f.v_low, color="tab:red", ls="--", lw=1, label=f"limits {f.v_low:g} / {f.v_high:g} pu")
    ax.axhline(f.v_high, color="tab:red", ls="--", lw=1)
    _shade_and_legend(ax, f.events)
    return _png(fig)


def fig_loading(f: FigureInput) -> str | Absent | None:
    ts = f.ts
    lines = loading_columns(ts)
    overall = [c for c in ts.columns if attr_of(c) == "max_loading_pct"]
    if not (lines or overall):
        return None
    values = ts[lines + overall].to_numpy(float)
    peak = float(np.nanmax(values)) if np.isfinite(values).any() else math.nan
    if not peak >= NO_RATINGS_PCT:  # pandapower's case33bw: every line rated 99,999 kA, a placeholder
        shown = f"{peak:.2g} %" if math.isfinite(peak) else "not a number"
        return Absent(f"no line ratings in this network: the highest line or transformer loading was {shown}, "
                      "so thermal limits are not checked (give the lines max_i_ka to check them)")
    fig, (ax,) = _axes("Line and transformer loading: highest, and the five most loaded", "loading [%]")
    if overall:
        top = thin(ts[overall].max(axis=1), "max")
        ax.plot(top.index, top.to_numpy(), color="black", lw=1.4, label="highest of all")
    if lines:
        for column in ts[lines].max().sort_values(ascending=False).index[:5]:
            series = thin(ts[column], "max")
            ax.plot(series.index, series.to_numpy(), lw=1, label=attr_of(column).removesuffix("_loading_pct"))
    ax.axhline(100.0, color="tab:red", ls="--", lw=1, label="100 % rating")
    _shade_and_legend(ax, f.events)
    return _png(fig)


TEMPERATURE_TITLES = {"air": "air (supply, return, rack inlet)", "water": "water and coolant",
                      "weather": "weather", "other": "equipment and setpoints"}


def fig_temperature(f: FigureInput) -> str | None:
    groups = temperature_groups(f.ts, f.roles)
    if not groups:
        return None
    fig, axes = _axes("Temperatures", "[°C]", rows=len(groups))
    for ax, (name, columns) in zip(axes, groups.items()):
        for column in columns[:12]:
            series = thin(f.ts[column])
            ax.plot(series.index, series.to_numpy(), lw=1, label=column)
        ax.set_ylabel(f"{name} [°C]")
        ax.text(0.005, 0.95, TEMPERATURE_TITLES[name], transform=ax.transAxes, fontsize=9, va="top")
        _shade_and_legend(ax, f.events)
    return _png(fig)


def fig_soc(f: FigureInput) -> str | None:
    cols = [c for c in f.ts.columns if attr_of(c).endswith("soc_frac")]
    if not cols:
        return None
    fig, (ax,) = _axes("Battery state of charge", "SoC [-]")
    for column in cols[:12]:
        series = thin(f.ts[column])
        ax.plot(series.index, series.to_numpy(), lw=1, label=column)
    ax.set_ylim(0, 1.02)
    _shade_and_legend(ax, f.events)
    return _png(fig)


def fig_signals(f: FigureInput) -> str | None:
    ts = f.ts
    carbon = [c for c in ts.columns if attr_of(c).endswith("_g_kwh")]
    price = [c for c in ts.columns if attr_of(c).endswith("price_usd_mwh")]
    if not (carbon or price):
        return None
    fig, (ax,) = _axes("Carbon intensity and price signals",
                       "carbon intensity [g/kWh]" if carbon else "price [USD/MWh]")
    for column in carbon:
        series = thin(ts[column])
        ax.plot(series.index, series.to_numpy(), lw=1.2, label=column)
    from matplotlib import rcParams  # matplotlib: see new_figure

    colours = iter(rcParams["axes.prop_cycle"].by_key()["color"] * 4)
    for _ in ax.get_lines():
        next(colours)  # carbon lines took the first colours
    target = ax.twinx() if carbon and price else ax
    if target is not ax:
        target.set_ylabel("price [USD/MWh]")
    for column in price:
        series, colour = thin(ts[column]), next(colours)
        target.step(series.index, series.to_numpy(), where="post", lw=1.2, ls="-.", color=colour)
        ax.plot([], [], color=colour, ls="-.", label=column)  # one legend for both axes
    _shade_and_legend(ax, f.events, legend_x=1.09 if target is not ax else 1.01)
    return _png(fig)


def fig_frequency(f: FigureInput) -> str | None:
    ts = f.ts
    cols = [c for c in ts.columns if attr_of(c) == "f_hz"]
    if not cols:
        return None
    rocof = [c for c in ts.columns if attr_of(c) == "rocof_hz_s"]
    fig, axes = _axes("System frequency (balancing areas)", "frequency [Hz]", rows=2 if rocof else 1)
    for column in cols[:8]:
        series = thin(ts[column])
        axes[0].plot(series.index, series.to_numpy(), lw=1.2, label=column)
    f0 = float(ts[cols[0]].iloc[0])
    for level in (f0 - 0.2, f0 + 0.2):
        axes[0].axhline(level, color="tab:red", ls="--", lw=0.8)
    axes[0].plot([], [], color="tab:red", ls="--", lw=0.8, label=f"{f0:g} ± 0.2 Hz")
    _shade_and_legend(axes[0], f.events)
    if rocof:
        for column in rocof[:8]:
            series = thin(ts[column])
            axes[1].plot(series.index, series.to_numpy(), lw=1, label=column)
        axes[1].set_ylabel("RoCoF [Hz/s]")
        _shade_and_legend(axes[1], f.events)
    return _png(fig)


def swing_band(meta: dict[str, Any] | None) -> tuple[float, float]:
    """The swing band of a run's ``metadata.json`` (``kpi_params.swing.band_hz``), else the default. [Hz]"""
    params = (meta or {}).get("kpi_params")
    band = params.get("swing", {}).get("band_hz") if isinstance(params, dict) and isinstance(params.get("swing"), dict) \
        else None
    if isinstance(band, (list, tuple)) and len(band) == 2 and all(isinstance(x, (int, float)) for x in band):
        return float(band[0]), float(band[1])
    return BAND_HZ


def fig_spectrum(f: FigureInput) -> str | None:
    ts = f.ts
    if len(ts) < 8:
        return None
    dt_s = (ts.index[1] - ts.index[0]).total_seconds()
    cols = [c for c in ts.columns if attr_of(c) == "p_mw" and np.isfinite(ts[c].to_numpy(float)).all()]
    if dt_s > MAX_STEP_S + 1e-9 or not cols:
        return None
    fig, ax = new_figure(figsize=(11, 3.6))
    low, high = f.band_hz
    ax.set_title(f"Power spectrum of every p_mw (Welch), the swing band {low:g}-{high:g} Hz shaded", fontsize=11,
                 loc="left")
    for column in cols[:8]:
        x = ts[column].to_numpy(float)
        freqs, psd = welch_psd(x, dt_s)
        if np.any(psd[1:] > 0):
            ax.semilogy(freqs[1:], psd[1:], lw=1, label=column)
    ax.axvspan(low, high, color="tab:orange", alpha=0.15, lw=0)
    ax.set_xlabel("frequency [Hz]")
    ax.set_ylabel("PSD [MW²/Hz]")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode("ascii")


#: the most envelope panels the ride-through figure draws
MAX_ENVELOPE_PANELS = 4
DEFINITION_STYLE = {"positive_sequence": ("tab:blue", "-"), "worst_phase": ("tab:red", "-"),
                    "frequency": ("tab:purple", "-")}


def fig_ride_through(f: FigureInput) -> str | None:
    """Each judged envelope of :mod:`cosim.kpis.ride_through_verdict`: its boundary (time since the
    disturbance's start) and every disturbance's trajectory over it, one line per voltage definition."""
    verdict = f.kpis.get(rtv.NAME) if isinstance(f.kpis, dict) else None
    if not isinstance(verdict, dict):
        return None
    panels = []
    for entity, entries in verdict.items():
        if entity == "cessations" or not isinstance(entries, dict):
            continue
        for entry in entries.values():
            if isinstance(entry, dict) and entry.get("judged") and isinstance(entry.get("envelope"), str):
                try:
                    panels.append((entity, entry, load_envelope(entry["envelope"])))
                except (ValueError, OSError):  # the file moved since the run: no panel
                    continue
    if not panels:
        return None
    panels = panels[:MAX_ENVELOPE_PANELS]
    fig, axes = new_figure(len(panels), 1, figsize=(11, 3.2 * len(panels)), squeeze=False)
    start = f.ts.index[0]
    for ax, (entity, entry, envelope) in zip(axes[:, 0], panels):
        columns = rtv.series_columns(list(f.ts.columns), entity, envelope)
        longest = max([d["duration_s"] for definition in columns for d in
                       entry.get(definition, {}).get("disturbances", {}).values()] or [0.0])
        span = max(3.0 * longest, 0.5, min(envelope.points[-1][0] * 1.2, 4.0 * longest + 0.5))
        times = [t for t, _ in envelope.points] + [span]
        levels = [v for _, v in envelope.points] + [envelope.points[-1][1]]
        ax.step(times, levels, where="post", color="black", lw=1.6, label=f"{envelope.name} boundary")
        for definition, column in columns.items():
            colour, style = DEFINITION_STYLE[definition]
            for k, d in enumerate(entry.get(definition, {}).get("disturbances", {}).values()):
                t0 = start + pd.Timedelta(seconds=d["t_start_s"])
                window = f.ts[column][(f.ts.index >= t0 - pd.Timedelta(seconds=0.1 * span))
                                      & (f.ts.index <= t0 + pd.Timedelta(seconds=span))]
                x = (window.index - t0).total_seconds()
                ax.step(x, window.to_numpy(float), where="post", color=colour, ls=style, lw=1.2, alpha=0.9,
                        label=f"{definition} ({column})" if k == 0 else None)
        verdict_text = "pass" if entry.get("pass") else "FAIL"
        applies = entry.get("applies_to_judged_on") or entry.get("applies_to") or envelope.quantity
        ax.set_title(f"{entity}: {envelope.title} — {verdict_text} on {applies}", fontsize=10, loc="left")
        ax.set_xlabel("time since the disturbance began [s]")
        ax.set_ylabel(f"{envelope.quantity} [{envelope.unit}]")
        ax.set_xlim(-0.1 * span, span)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()  # not _png: its date formatting would hide the upper panels' (own) time axes
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode("ascii")


FIGURES: tuple[Figure, ...] = (
    Figure("power", "Power", "no site powers (IT, loads, cooling, generation, storage by role) or grid import "
           "recorded", fig_power),
    Figure("voltage", "Voltage", "no bus voltages (bus_*_vm_pu, vm_min_pu/vm_max_pu, vm_pu) recorded", fig_voltage),
    Figure("loading", "Line loading", "no line or transformer loadings (line_*_loading_pct, max_loading_pct) "
           "recorded", fig_loading),
    Figure("temperature", "Temperatures", "no temperatures (*_c) recorded", fig_temperature),
    Figure("soc", "State of charge", "no state of charge (*soc_frac) recorded", fig_soc),
    Figure("signals", "Carbon and price", "no carbon intensity (*_g_kwh) or price (*price_usd_mwh) recorded",
           fig_signals),
    Figure("frequency", "System frequency", "no system frequency (f_hz) recorded", fig_frequency, optional=True),
    Figure("spectrum", "Power spectrum", "no power (p_mw) recorded at steps of 0.5 s or less", fig_spectrum,
           optional=True),
    Figure("ride_through", "Ride-through envelopes", "no ride-through verdicts ([kpis.ride_through_verdict])",
           fig_ride_through, optional=True),
)


def build_figures(f: FigureInput) -> dict[str, str | Absent | None]:
    """Every figure of :data:`FIGURES` by name: base64 PNG, :class:`Absent` or None."""
    return {fig.name: fig.draw(f) for fig in FIGURES}
