"""``reproduce.html``: every published case's figures beside the papers' numbers, one page, no scripts.

Each figure row has the published value (with its source), ours, the tolerance and the
verdict, and a small bar: the accepted range in green, the published value as a black tick,
ours as a dot (blue inside, red outside).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cosim.report import esc, html_page

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
    return (f"<section id='{esc(case['name'])}'><h2>{esc(case['title'])} — {verdict}</h2>"
            f"<p class='scope'>{esc(case['source'])}<br>case: {esc(case['file'])}; runs: {', '.join(runs)}</p>"
            f"<table><tr>{head}</tr>{''.join(rows)}</table></section>")


def write_html(data: dict[str, Any], path: Path) -> Path:
    """The page of a ``reproduce.json`` object."""
    cases = data["cases"]
    n_pass = sum(c["passed"] for c in cases)
    mode = "quick (shortened runs)" if data["quick"] else "full"
    subtitle = f"{n_pass} of {len(cases)} cases reproduce; {mode}; {data['created_utc']}"
    body = EXTRA_CSS + "".join(_case(c, path.parent) for c in cases)
    path.write_text(html_page("cosim reproduce", subtitle, body), encoding="utf-8")
    return path
