"""HTML of the report and compare pages: the house CSS, escaping, number formats, KPI tables.

Pages are self-contained (figures embedded as PNG), with no scripts and no external resources.
"""

from __future__ import annotations

import html
import math
from typing import Any

from cosim.folder import flatten

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#c9cfdb;font-size:14px}main{padding:16px 28px;max-width:1200px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:14px 0;padding:12px 18px}
h2{font-size:17px;margin:4px 0 10px}h3{font-size:14px;margin:12px 0 4px}img{max-width:100%;height:auto}
table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #e4e7ec;padding:3px 10px;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f0f2f5}
details{margin:6px 0}summary{cursor:pointer;font-weight:600;font-size:14px}
.status{padding:10px 14px;border-radius:6px;margin:10px 0;font-weight:600}
.ok{background:#e3f4e8;color:#1f6f3a}.failed{background:#fde7e7;color:#9b1c1c}
.degraded{background:#fff4d6;color:#8a5a00}
.absent{color:#6b7280;font-size:13px}.scope{color:#4b5563;font-size:13px;margin:2px 0 6px}
.pos{color:#b45309}.neg{color:#1d4ed8}
"""


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


def _rows(flat: dict[str, Any]) -> str:
    return "".join(f"<tr><td>{esc(k)}</td><td class='num'>{esc(fmt(v))}</td></tr>" for k, v in flat.items())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def kpi_tables(kpis: dict[str, Any], blocks: dict[str, dict[str, Any]] | None = None) -> str:
    """The KPIs as a headline table, then one collapsible table per block.

    ``blocks`` is ``metadata.json``'s ``kpi_blocks`` (title, top-level keys, headline keys of
    each block); without it every top-level key is its own group. A block's ``scope`` entries
    (what a total covers) are shown under its heading.
    """
    if not kpis:
        return "<p class='absent'>No KPIs (the run recorded nothing).</p>"
    groups = _groups(kpis, blocks)
    headline: dict[str, Any] = {}
    for _, keys, heads in groups:
        for key in keys:
            for name, value in flatten({key: kpis[key]}).items():
                if _is_number(value) and name.rsplit(".", 1)[-1] in heads:
                    headline[name] = value
    parts = []
    if headline:
        parts.append(f"<h3>Headline figures</h3><table id='kpi-headline'><tr><th>KPI</th><th>value</th></tr>"
                     f"{_rows(headline)}</table>")
    for title, keys, _ in groups:
        flat = flatten({k: kpis[k] for k in keys})
        scopes = [f"<p class='scope'>{esc(k.rsplit('.', 2)[0])}: {esc(v)}</p>" for k, v in flat.items()
                  if k.endswith(".scope")]
        rows = {k: v for k, v in flat.items() if not k.endswith(".scope")}
        parts.append(f"<details data-block='{esc(title)}'><summary>{esc(title)} ({len(rows)})</summary>"
                     f"{''.join(scopes)}<table><tr><th>KPI</th><th>value</th></tr>{_rows(rows)}</table></details>")
    return f"<div id='kpi-table'>{''.join(parts)}</div>"


def _groups(kpis: dict[str, Any], blocks: dict[str, dict[str, Any]] | None) -> list[tuple[str, list[str], set[str]]]:
    groups: list[tuple[str, list[str], set[str]]] = []
    placed: set[str] = set()
    for info in (blocks or {}).values():
        if not isinstance(info, dict):
            continue
        keys = [k for k in info.get("keys", []) if k in kpis and k not in placed]
        if keys:
            groups.append((str(info.get("title", keys[0])), keys, set(info.get("headline", []))))
            placed.update(keys)
    for key in kpis:
        if key not in placed:
            groups.append((key, [key], set()))
    return groups
