"""``reproduce.html``: every published case's figures beside the papers' numbers, one page, no scripts.

Each figure row has the published value (with its source), ours, the tolerance and the
verdict, and a small bar: the accepted range in green, the published value as a black tick,
ours as a dot (blue inside, red outside). Each case also gets a chart (matplotlib PNG, embedded):
every figure of the case as ours / published with its accepted range, so the whole case reads at a
glance; and a case whose runs computed the headroom KPI block (Norris et al. 2025) gets the
load-duration curves of its systems before and after the new load at 0.5 % (else its first limit).
"""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from cosim.folder import RunFolder
from cosim.kpis import headroom
from cosim.report import esc, html_page
from cosim.report.figures import new_figure

EXTRA_CSS = ("<style>.pass{color:#1f6f3a;font-weight:600}.fail{color:#9b1c1c;font-weight:600}"
             ".skip{color:#6b7280}td.src{max-width:340px;font-size:12px;color:#4b5563}</style>")


def _range(fig: dict[str, Any]) -> tuple[float, float]:
    published, tol = fig["published"], _tol(fig)
    if fig["check"] == "at_most":
        return (min(0.0, published - tol) if published >= 0 else published - 3 * abs(tol) - 1e-9, published + tol)
    if fig["check"] == "at_least":
        return published - tol, max(published + 2 * abs(published - tol), published - tol + 1e-9)
    return published - tol, published + tol


def _tol(fig: dict[str, Any]) -> float:
    text = fig["tolerance"]
    if text.endswith("%"):
        return abs(fig["published"]) * float(text.lstrip("±").rstrip(" %")) / 100.0
    return float(text.lstrip("±")) if text != "0" else 0.0


def bar(fig: dict[str, Any], width: int = 180, height: int = 16) -> str:
    """An inline SVG: accepted range, published tick, our dot."""
    low, high = _range(fig)
    values = [low, high, fig["published"]] + ([fig["ours"]] if fig["ours"] is not None else [])
    lo, hi = min(values), max(values)
    span = (hi - lo) or max(abs(hi), 1.0)
    lo, hi = lo - 0.1 * span, hi + 0.1 * span

    def x(v: float) -> float:
        return 4 + (width - 8) * (v - lo) / (hi - lo)

    parts = [f"<rect x='{x(low):.1f}' y='5' width='{max(x(high) - x(low), 1.5):.1f}' height='6' fill='#bfe3c9'/>",
             f"<line x1='{x(fig['published']):.1f}' x2='{x(fig['published']):.1f}' y1='1' y2='15' stroke='#111'/>"]
    if fig["ours"] is not None:
        colour = "#1d4ed8" if fig["passed"] else "#dc2626"
        parts.append(f"<circle cx='{x(fig['ours']):.1f}' cy='8' r='4' fill='{colour}'/>")
    return f"<svg width='{width}' height='{height}' role='img'>{''.join(parts)}</svg>"


def _verdict(fig: dict[str, Any]) -> str:
    if fig["passed"] is None:
        return "<span class='skip'>not checked (full run only)</span>"
    return "<span class='pass'>pass</span>" if fig["passed"] else "<span class='fail'>FAIL</span>"


def _img(fig, alt: str) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=80)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f"<p><img alt='{esc(alt)}' src='data:image/png;base64,{data}'></p>"


#: ours / published beyond these is drawn at the edge of the chart (an arrow)
RATIO_VIEW = (-0.5, 3.0)


def ratio_rows(case: dict[str, Any]) -> list[dict[str, Any]]:
    """Per figure: ours, the accepted range and the published value as ratios to the published value
    (absolute values when it is 0); None for ours not computed."""
    rows = []
    for fig in case["figures"]:
        scale = abs(fig["published"]) or 1.0
        low, high = _range(fig)
        ours = None if fig["ours"] is None else fig["ours"] / scale
        rows.append({"name": fig["name"], "ours": ours, "low": low / scale, "high": high / scale,
                     "published": fig["published"] / scale, "passed": fig["passed"]})
    return rows


def case_chart(case: dict[str, Any]) -> str:
    """The case's figures as ours / published (dot) against the accepted range (green) and 1 (the paper)."""
    rows = ratio_rows(case)
    fig, ax = new_figure(figsize=(9, 0.32 * len(rows) + 1.1))
    lo, hi = RATIO_VIEW
    for y, row in enumerate(rows):
        ax.barh(y, min(row["high"], hi) - max(row["low"], lo), left=max(row["low"], lo), height=0.6, color="#bfe3c9")
        ax.plot([row["published"]] * 2, [y - 0.35, y + 0.35], color="#111", lw=1)
        if row["ours"] is not None:
            x = min(max(row["ours"], lo), hi)
            marker = ">" if row["ours"] > hi else "<" if row["ours"] < lo else "o"
            colour = "#6b7280" if row["passed"] is None else "#1d4ed8" if row["passed"] else "#dc2626"
            ax.plot(x, y, marker=marker, color=colour, ms=6)
    ax.set_yticks(range(len(rows)), [r["name"] if len(r["name"]) <= 60 else r["name"][:57] + "..." for r in rows],
                  fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(lo - 0.05, hi + 0.05)
    ax.set_xlabel("ours / published (green: accepted; black: the paper; blue pass, red fail, grey not checked)",
                  fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"{case['name']}: published vs ours", fontsize=10, loc="left")
    return _img(fig, f"{case['name']}: published vs ours")


def load_duration_chart(run_dir: Path) -> str:
    """Load-duration curves before and after each system's new load at 0.5 % (else its first limit), with the
    summer and winter thresholds ('' for a run without headroom KPIs)."""
    kpis_path = run_dir / "kpis.json"
    if not kpis_path.is_file():
        return ""
    systems = json.loads(kpis_path.read_text(encoding="utf-8")).get("headroom") or {}
    series_path = run_dir / "timeseries.parquet"
    if not systems or not series_path.is_file():
        return ""
    ts = RunFolder(run_dir).numeric_columns([f"{s}.{headroom.ATTR}" for s in systems])
    dt_h = (ts.index[1] - ts.index[0]).total_seconds() / 3600.0 if len(ts) > 1 else 1.0
    n = len(systems)
    cols = min(4, n)
    rows = -(-n // cols)
    fig, axes = new_figure(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for ax, (system, entry) in zip(axes.flat, systems.items()):
        limits = [k for k in entry if k.startswith("at_")]
        label = "at_0_5_pct" if "at_0_5_pct" in limits else limits[0]
        new_mw = entry[label]["headroom_mw"] or 0.0
        curves = headroom.load_duration_mw(ts[f"{system}.{headroom.ATTR}"], new_mw)
        hours = np.arange(1, len(curves["before"]) + 1) * dt_h / max(entry.get("n_years") or 1, 1)
        ax.plot(hours, curves["before"] / 1000, color="#6b7280", lw=1, label="demand")
        ax.plot(hours, curves["after"] / 1000, color="#1d4ed8", lw=1, label=f"+ {new_mw / 1000:.2g} GW, curtailed")
        for key, style in (("summer_peak_mw", "--"), ("winter_peak_mw", ":")):
            ax.axhline((entry[key] or np.nan) / 1000, color="#dc2626", lw=0.8, ls=style,
                       label=f"{key.split('_')[0]} threshold")
        ax.set_xscale("log")
        ax.set_title(f"{system} ({label.removeprefix('at_').replace('_pct', ' %').replace('_', '.')})", fontsize=9)
        ax.set_xlabel("hours per year at or above", fontsize=7)
        ax.set_ylabel("GW", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6)
    return _img(fig, "load-duration curves before and after the new load")


def _case(case: dict[str, Any], page_dir: Path) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("figure", "published", "source", "ours", "tolerance", "", "result"))
    rows = []
    for f in case["figures"]:
        sign = {"within": "", "at_most": "≤ ", "at_least": "≥ "}[f["check"]]
        ours = "—" if f["ours"] is None else f"{f['ours']:.4g}"
        why = f"<br><span class='absent'>{esc(f['reason'])}</span>" if f["reason"] else ""
        note = f"<br><span class='absent'>{esc(f['note'])}</span>" if f.get("note") else ""
        rows.append(f"<tr><td>{esc(f['name'])}{note}</td><td class='num'>{esc(sign)}{f['published']:.4g} "
                    f"{esc(f['unit'])}</td><td class='src'>{esc(f['source'])}</td><td class='num'>{esc(ours)}</td>"
                    f"<td class='num'>{esc(f['tolerance'])}</td><td>{bar(f)}</td><td>{_verdict(f)}{why}</td></tr>")
    runs = []
    for variant, run in case["runs"].items():
        link = os.path.relpath(run["run_dir"], page_dir)
        runs.append(f"<a href='{esc(link)}'>{esc(variant)}</a> ({esc(run['status'])}, {run['wall_s']:.1f} s)")
    verdict = ("<span class='pass'>reproduces</span>" if case["passed"] else
               "<span class='skip'>not checked in this mode (full-run figures only)</span>"
               if case.get("verdict") == "NOT CHECKED" else "<span class='fail'>does not reproduce</span>")
    charts = case_chart(case) + "".join(load_duration_chart(Path(run["run_dir"])) for run in case["runs"].values()
                                        if run["status"] in ("ok", "degraded"))
    return (f"<section id='{esc(case['name'])}'><h2>{esc(case['title'])} — {verdict}</h2>"
            f"<p class='scope'>{esc(case['source'])}<br>case: {esc(case['file'])}; runs: {', '.join(runs)}</p>"
            f"<table><tr>{head}</tr>{''.join(rows)}</table>{charts}</section>")


def write_html(data: dict[str, Any], path: Path) -> Path:
    """The page of a ``reproduce.json`` object."""
    cases = data["cases"]
    n_pass = sum(c["passed"] for c in cases)
    mode = "quick (shortened runs)" if data["quick"] else "full"
    subtitle = f"{n_pass} of {len(cases)} cases reproduce; {mode}; {data['created_utc']}"
    body = EXTRA_CSS + "".join(_case(c, path.parent) for c in cases)
    path.write_text(html_page("cosim reproduce", subtitle, body), encoding="utf-8")
    return path
