"""The battery's figures (P, Q, V and f at the point of connection, a test's cases overlaid) and its page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from cosim.folder import RunFolder
from cosim.report.figures import new_figure
from cosim.report.page import esc, html_page

PLOT_DIR = "plots"
CHANNELS = (("p_mw", "P [MW]"), ("q_mvar", "Q [Mvar]"), ("v_pu", "V [pu]"), ("f_hz", "f [Hz]"))


def write_plots(record: dict[str, Any], out: Path, titles: dict[str, str],
                channels: Callable[[pd.DataFrame, str, str | None], pd.DataFrame]) -> dict[str, str]:
    """One PNG per test with runs (``plots/<test>.png``): its cases' ``channels`` overlaid. Returns test -> path."""
    done = {}
    for test in titles:
        cases = [c for c in record["cases"] if c["test"] == test and c.get("status") == "ok"]
        if not cases:
            continue
        fig, axes = new_figure(len(CHANNELS), 1, figsize=(10, 8), sharex=True)
        for case in cases:
            ch = channels(RunFolder(out / case["run_dir"]).timeseries(), record["poc"], record["ride_through"])
            for ax, (name, _label) in zip(axes, CHANNELS):
                ax.plot(ch["t_s"], ch[name], lw=1.2, drawstyle="steps-post",
                        label=f"{case['case']} ({case['verdict']})")
        for ax, (_name, label) in zip(axes, CHANNELS):
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            ax.ticklabel_format(axis="y", useOffset=False)
        axes[0].set_title(f"{titles[test]}: point of connection {record['poc']} ({record['engine']})",
                          fontsize=11, loc="left")
        axes[0].legend(fontsize=8, loc="best")
        axes[-1].set_xlabel("time since the run's start [s]")
        fig.tight_layout()
        path = out / PLOT_DIR / f"{test}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=90)
        done[test] = str(path.relative_to(out))
    return done


def _cell(verdict: str) -> str:
    css = {"pass": "ok", "fail": "failed", "error": "failed"}.get(verdict, "absent")
    return f"<td class='{css}'>{esc(verdict)}</td>"


def write_page(record: dict[str, Any], out: Path, titles: dict[str, str], sources: dict[str, str],
               engines: tuple[str, ...]) -> Path:
    """``battery.html``: the verdict table, the support table and every test's figure."""
    rows = "".join(f"<tr><td>{esc(c['test'])}</td><td>{esc(c['case'])}</td><td>{esc(c['how'])}</td>"
                   f"{_cell(c['verdict'])}<td>{esc(c['criterion'])}</td><td>{esc(c['measured'])}</td>"
                   f"<td>{esc(c.get('note', ''))}</td></tr>" for c in record["cases"])
    verdicts = ("<section><h2>Verdicts</h2><table><tr><th>test</th><th>case</th><th>how applied</th><th>verdict</th>"
                f"<th>criterion</th><th>measured</th><th>note</th></tr>{rows}</table></section>")
    support = "".join(f"<tr><td>{esc(test)}</td>" + "".join(f"<td>{esc(by[e])}</td>" for e in engines) + "</tr>"
                      for test, by in record["support"].items())
    support = ("<section><h2>Which engine runs which test</h2><p class='scope'>native: the engine's own event; "
               "imposed: at the campus's terminals through adapters/poc_events.py (the grid sees only the campus's "
               "response). This battery ran on the " + esc(record["engine"]) + " engine.</p><table><tr><th>test</th>"
               + "".join(f"<th>{e}</th>" for e in engines) + f"</tr>{support}</table></section>")
    cited = "".join(f"<li><b>{esc(name)}</b>: {esc(text)}</li>" for name, text in sources.items())
    cited = f"<section><h2>Where each criterion comes from</h2><ul>{cited}</ul></section>"
    figures = "".join(f"<section><h2>{esc(titles[t])}</h2><img src='{PLOT_DIR}/{t}.png' alt='{esc(t)}'></section>"
                      for t in titles if (out / PLOT_DIR / f"{t}.png").is_file())
    n_pass = sum(c["verdict"] == "pass" for c in record["cases"])
    n_fail = sum(c["verdict"] in ("fail", "error") for c in record["cases"])
    n_na = sum(c["verdict"] == "not applicable" for c in record["cases"])
    banner = (f"<div class='status {'ok' if not n_fail else 'failed'}'>{n_pass} passed, {n_fail} failed, "
              f"{n_na} not applicable on this engine</div>")
    subtitle = (f"{record['scenario_name']}: point of connection {record['poc']}, engine {record['engine']}, "
                f"steps of {record['step_s']:g} s")
    path = out / "battery.html"
    path.write_text(html_page("Model-quality test battery", subtitle, banner + verdicts + support + cited + figures),
                    encoding="utf-8")
    return path
