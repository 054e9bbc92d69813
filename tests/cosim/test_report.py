"""The run report: every figure when a run has every part, graceful when parts are absent,
and the page loads in headless Chromium with no console messages and draws something."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cosim import kpis as kpi_module
from cosim.report import FIGURES, power_parts, read_series, render, write_report
from cosim.kpis.swing import BAND_HZ
from cosim.report.figures import BAND_HIGH, BAND_LOW, event_spans, swing_band
from cosim.roles import RunRoles
from cosim.run import run

NAMES = [f.name for f in FIGURES if not f.optional]  # optional: drawn only when their outputs exist

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "scenarios" / "default.toml"

FULL_SCENARIO = """
[scenario]
name = "all_parts"
description = "synthetic run with every part the report draws"
start = 2024-07-15T00:00:00Z
duration_s = 86400
step_s = 600

[sims]
dc = { adapter = "datacenter" }
cooling = { adapter = "fmu" }
sun = { adapter = "pv" }
store = { adapter = "battery" }
grid = { adapter = "grid", network = "ieee33" }
dr = { adapter = "dr_events" }
tariff = { adapter = "tariff" }
carbon = { adapter = "signals" }

[entities]
campus = { sim = "dc", model = "Cluster" }
plant = { sim = "cooling", model = "ChillerPlant" }
hall = { sim = "cooling", model = "DataHall" }
pv = { sim = "sun", model = "PvPlant" }
bess = { sim = "store", model = "Battery" }
pcc = { sim = "grid", model = "Load", bus = "3" }
feeder = { sim = "grid", model = "Grid" }
calls = { sim = "dr", model = "Events" }
tou = { sim = "tariff", model = "Tariff" }
grid_ci = { sim = "carbon", model = "Series" }
"""


FULL_ROLES = RunRoles({"campus": "it", "plant": "cooling", "hall": "air_handler", "pv": "clean_gen", "bess": "storage",
                       "pcc": "grid_element", "feeder": "grid", "calls": "signal", "tou": "signal",
                       "grid_ci": "signal"})


def synthetic_run(folder: Path) -> Path:
    """A run folder with every part (values are shapes, not physics: this tests drawing)."""
    folder.mkdir(parents=True)
    index = pd.date_range("2024-07-15", periods=144, freq="10min", tz="UTC", name="time_utc")
    hours = np.arange(144) / 6.0
    sun = np.clip(np.sin((hours - 6) / 12 * np.pi), 0, None)
    cols = {
        "campus.p_it_mw": 2.0 + 0.2 * np.sin(hours), "campus.p_mw": 2.1 + 0.2 * np.sin(hours),
        "campus.p_loss_mw": np.full(144, 0.1), "hall.p_fans_mw": np.full(144, 0.05),
        "plant.p_cooling_mw": 0.4 + 0.1 * sun, "plant.t_supply_c": 14.0 + sun, "pv.p_mw": 1.5 * sun,
        "pv.poa_w_m2": 900 * sun, "pv.t_cell_c": 25 + 20 * sun, "bess.p_mw": np.where(sun > 0.5, 0.5, -0.3),
        "bess.soc_frac": np.clip(0.5 + 0.02 * np.cumsum(np.where(sun > 0.5, 1, -0.5)), 0, 1),
        "pcc.p_mw": 2.5 - 1.5 * sun, "feeder.p_import_mw": 6.0 - 1.5 * sun, "feeder.vm_min_pu": 0.93 + 0.01 * sun,
        "feeder.vm_max_pu": np.ones(144), "feeder.max_loading_pct": 60 + 10 * sun,
        "grid_ci.ci_g_kwh": 300 - 100 * sun, "tou.price_usd_mwh": np.where((hours >= 14) & (hours < 19), 180.0, 60.0),
        "calls.event_active": ((hours >= 16) & (hours < 18)) | ((hours >= 20) & (hours < 21)),
        "calls.dr_cap_mw": np.where((hours >= 16) & (hours < 18), 1.8, np.nan),
    }
    for bus in range(1, 6):
        cols[f"feeder.bus_{bus}_vm_pu"] = 1.0 - 0.015 * bus * (1 - 0.3 * sun)
    for i, line in enumerate(("1_2", "2_3", "3_4")):
        cols[f"feeder.line_{line}_loading_pct"] = 40 + 30 * sun - 5 * i
    ts = pd.DataFrame(cols, index=index)
    ts.reset_index().to_parquet(folder / "timeseries.parquet", index=False)
    (folder / "scenario.toml").write_text(FULL_SCENARIO)
    kpis, blocks = kpi_module.compute_indexed(ts, 600, FULL_ROLES)
    (folder / "kpis.json").write_text(json.dumps(kpis))
    (folder / "metadata.json").write_text(json.dumps({"scenario": "all_parts", "status": "ok", "reason": None,
                                                      "roles": FULL_ROLES.to_json(), "kpi_blocks": blocks,
                                                      "entities": {"pcc": {"model": "Load", "bus": "3"}}}))
    return folder


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> Path:
    return synthetic_run(tmp_path_factory.mktemp("report") / "all_parts")


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> Path:
    """The default scenario for one hour (the grid and power parts of a real run)."""
    result = run(DEFAULT, tmp_path_factory.mktemp("runs"), overrides={"scenario.duration_s": 3600})
    assert result.ok, result.reason
    return result.run_dir


def figure_pngs(page: str) -> dict[str, bytes]:
    """Decoded PNG of each figure section, by its data-figure marker."""
    found = re.findall(r"data-figure='(\w+)'><h2>[^<]*</h2><img alt='[^']*' src='data:image/png;base64,([^']+)'", page)
    return {name: base64.b64decode(data) for name, data in found}


def test_every_figure_of_a_run_with_every_part(full_run):
    page = write_report(full_run).read_text()
    pngs = figure_pngs(page)
    assert sorted(pngs) == sorted(NAMES)
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000 for png in pngs.values())
    assert "id='kpi-table'" in page and "feeder.import_mwh" in page
    assert "id='absent'" not in page  # nothing is reported missing
    assert "Run finished: ok" in page


def test_power_stack_roles_and_dr_spans(full_run):
    """Grid copies (pcc) are not stacked twice; the battery splits into charge and discharge."""
    ts = pd.read_parquet(full_run / "timeseries.parquet").set_index("time_utc")
    parts = power_parts(ts, FULL_ROLES)
    assert sorted(parts["demand"]) == ["bess charging", "campus it", "campus losses", "hall air_handler",
                                       "plant cooling"]
    assert sorted(parts["supply"]) == ["bess discharging", "pv clean_gen"]
    assert sorted(parts["lines"]) == ["calls DR cap", "feeder import"]
    spans = event_spans(ts)
    assert [(s.hour, e.hour) for s, e in spans] == [(16, 18), (20, 21)]


def test_series_stream_keeps_band_and_most_loaded_lines(full_run):
    """Read in batches of 7 rows: the bus band and the top lines equal what the full table gives."""
    full = pd.read_parquet(full_run / "timeseries.parquet").set_index("time_utc")
    ts = read_series(full_run, top_lines=2, batch_rows=7)
    buses = [c for c in full.columns if c.startswith("feeder.bus_")]
    assert len(ts) == len(full) and not any(c.startswith("feeder.bus_") for c in ts.columns)
    assert np.allclose(ts[BAND_LOW], full[buses].min(axis=1)) and np.allclose(ts[BAND_HIGH], full[buses].max(axis=1))
    assert sorted(c for c in ts.columns if "_loading_pct" in c and "line_" in c) == [
        "feeder.line_1_2_loading_pct", "feeder.line_2_3_loading_pct"]
    assert np.allclose(ts["feeder.line_2_3_loading_pct"], full["feeder.line_2_3_loading_pct"])


def test_default_run_grid_and_power_figures(default_run):
    page = write_report(default_run).read_text()
    pngs = figure_pngs(page)
    assert {"power", "voltage", "temperature", "signals"} <= set(pngs)  # ieee33 has no line ratings
    assert "feeder.vm_min_pu" in page
    # ... and the page says so before the figures: the validation guard's warning, from metadata.json
    warned = page[page.index("id='warnings'"):page.index("data-figure=")]
    assert "placeholder ratings" in warned and "Warnings (1)" in warned


def test_absent_parts_are_named(full_run, tmp_path):
    """The same run without its battery: no SoC figure, a note saying so, the rest drawn."""
    folder = tmp_path / "no_battery"
    shutil.copytree(full_run, folder)
    ts = pd.read_parquet(folder / "timeseries.parquet")
    ts.drop(columns=["bess.p_mw", "bess.soc_frac"]).to_parquet(folder / "timeseries.parquet", index=False)
    page = render(folder)
    assert sorted(figure_pngs(page)) == sorted(set(NAMES) - {"soc"})
    assert "no state of charge (*soc_frac) recorded" in page


def test_frequency_and_spectrum_panels_of_a_sub_second_run(tmp_path):
    """ffr_trip for 12 s at 0.1 s: the frequency panel (areas' f_hz, RoCoF) and the spectrum panel."""
    result = run(ROOT / "scenarios" / "ffr_trip.toml", tmp_path, overrides={"scenario.duration_s": 12,
                                                                            "scenario.engine": "direct"})
    assert result.ok, result.reason
    pngs = figure_pngs(write_report(result.run_dir).read_text())
    assert {"frequency", "spectrum"} <= set(pngs)
    assert all(len(pngs[name]) > 5000 for name in ("frequency", "spectrum"))


def test_optional_panels_are_not_listed_as_missing(full_run):
    page = render(full_run)
    assert "no system frequency" not in page and "0.5 s or less" not in page


def test_failed_run_without_series_still_reports(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    meta = {"status": "failed", "reason": "grid: power flow did not converge"}
    (folder / "metadata.json").write_text(json.dumps(meta))
    page = render(folder)
    assert "Run failed: grid: power flow did not converge" in page
    assert not figure_pngs(page)
    assert "no readable timeseries.parquet" in page
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        write_report(tmp_path / "nowhere")


def test_page_is_self_contained(full_run):
    page = render(full_run)
    refs = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)['"]""", page)
    assert refs and all(ref.startswith("data:") for ref in refs)
    assert "<script" not in page


# -- headless Chromium -------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def load_in_chromium(page: Path, out_png: Path, profile: Path) -> list[str]:
    """Open ``page`` in headless Chromium, screenshot it; return its console messages."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
         "--v=0", f"--user-data-dir={profile}", "--window-size=1280,2400", f"--screenshot={out_png}",
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert out_png.is_file(), proc.stderr[-2000:]
    return [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install -y chromium)")
def test_report_in_headless_chromium(full_run, tmp_path):
    from PIL import Image

    bad = tmp_path / "bad.html"  # the check itself must see a console error when there is one
    bad.write_text("<!DOCTYPE html><html><body><p>x</p><script>console.error('deliberate')</script></body></html>")
    assert any("deliberate" in m for m in load_in_chromium(bad, tmp_path / "bad.png", tmp_path / "profile0"))

    report = write_report(full_run)
    shot = tmp_path / "report.png"
    assert load_in_chromium(report, shot, tmp_path / "profile1") == []
    pixels = np.asarray(Image.open(io.BytesIO(shot.read_bytes())).convert("L"), dtype=float)
    non_background = np.mean(np.abs(pixels - np.median(pixels)) > 30)
    assert pixels.std() > 10 and non_background > 0.02  # drawn figures, not a blank page

    from cosim.studies.compare import (  # the comparison page loads cleanly too
        compare,
        write_compare_html,
    )

    page = write_compare_html(compare([full_run, full_run]), tmp_path / "compare.html")
    assert load_in_chromium(page, tmp_path / "compare.png", tmp_path / "profile2") == []


# -- review findings: a damaged run folder still gives a page saying what is unreadable ------
def _damaged(full_run: Path, folder: Path) -> Path:
    shutil.copytree(full_run, folder)
    return folder


def test_corrupt_series_is_named(full_run, tmp_path):
    """The footer is intact (the file opens) but the pages are garbage: reading batches raises OSError."""
    folder = _damaged(full_run, tmp_path / "corrupt")
    data = bytearray((folder / "timeseries.parquet").read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    data[8:len(data) - footer] = b"\xab" * (len(data) - footer - 8)
    (folder / "timeseries.parquet").write_bytes(bytes(data))
    page = write_report(folder).read_text()
    assert "timeseries.parquet is unreadable" in page and not figure_pngs(page)
    assert "id='kpi-table'" in page  # the rest of the folder is still shown


def test_series_without_time_column_is_named(full_run, tmp_path):
    folder = _damaged(full_run, tmp_path / "no_time")
    ts = pd.read_parquet(folder / "timeseries.parquet")
    ts.drop(columns=["time_utc"]).to_parquet(folder / "timeseries.parquet", index=False)
    page = render(folder)
    assert "no time_utc column" in page and not figure_pngs(page)


def test_malformed_scenario_and_metadata_are_named(full_run, tmp_path):
    folder = _damaged(full_run, tmp_path / "malformed")
    (folder / "scenario.toml").write_text("sims = [1]\nentities = 3\nscenario = 'x'\n")
    (folder / "metadata.json").write_text('["not", "an", "object"]')
    page = render(folder)
    assert "scenario.toml is malformed" in page
    assert "metadata.json holds a JSON list, not an object" in page
    assert figure_pngs(page)  # the series is fine: drawn, roles guessed from the column names


# -- a report a person reads (the layout issue, item 7) -----------------------------------------
def test_default_run_report_reads_well(default_run):
    """On the showcase: the KPI table is grouped by block with the headline figures first; the
    point-of-connection voltage is drawn once per bus; temperatures split into air, water and
    weather panels; ieee33's missing line ratings are said, not drawn as a flat line; each
    carbon total says what it covers."""
    from cosim.folder import RunFolder
    from cosim.report.figures import temperature_groups, voltage_points

    page = write_report(default_run).read_text()
    headline = page.index("id='kpi-headline'")
    assert headline < page.index("data-block='Grid'") < page.index("data-block='Site accounting (behind the meter)'")
    assert page.count("<details") >= 5 and "feeder.vm_min_pu" in page[headline:page.index("<details")]
    folder = RunFolder(default_run)
    ts = read_series(default_run)
    assert list(voltage_points(ts, folder.entity_info())) == ["bus 3 (pcc, pv_gen, bess_grid)"]
    groups = temperature_groups(ts, folder.roles())
    assert set(groups) >= {"air", "water", "weather"}
    assert "tmy.t_dry_c" in groups["weather"] and "hall.t_rack_inlet_c" in groups["air"]
    assert "plant.t_chw_supply_c" in groups["water"]
    pngs = figure_pngs(page)
    assert "loading" not in pngs and "no line ratings in this network" in page
    assert "whole feeder (background loads included)" in page and "the site behind its meter" in page


def test_a_rated_network_draws_its_loadings(full_run):
    """The synthetic run's lines carry loadings of 25-70 %: the figure is drawn, not explained away."""
    assert "loading" in figure_pngs(render(full_run))


def test_a_folder_from_before_roles_still_gets_its_power_stack(default_run, tmp_path):
    """Run folders written before metadata.json had roles: the roles come from scenario.toml and
    the adapters' METAs, so the power stack is still drawn."""
    from cosim.folder import RunFolder

    folder = tmp_path / "old"
    shutil.copytree(default_run, folder)
    meta = json.loads((folder / "metadata.json").read_text())
    del meta["roles"]
    (folder / "metadata.json").write_text(json.dumps(meta))
    roles = RunFolder(folder).roles()
    assert roles.of("campus") == "it" and roles.of("pv") == "clean_gen" and roles.of("pcc") == "grid_element"
    assert "power" in figure_pngs(render(folder))


def test_the_spectrum_panel_shades_the_band_the_kpis_screened():
    """The swing band comes from metadata.json's kpi_params ([kpis.swing] band_hz); the default
    (0.1-2 Hz) only when the run did not set one or the metadata is unreadable."""
    assert swing_band({"kpi_params": {"swing": {"band_hz": [0.5, 3.0]}}}) == (0.5, 3.0)
    assert swing_band({"kpi_params": {"swing": {}}}) == BAND_HZ == swing_band(None) == swing_band({})
    assert swing_band({"kpi_params": {"swing": {"band_hz": "wide"}}}) == BAND_HZ


def test_drawing_keeps_the_callers_matplotlib_backend(full_run):
    """The report, the hosting map and the published-results page draw on matplotlib's object API:
    a program (a notebook with inline figures) keeps the backend it chose, and pyplot gets no figure."""
    code = f"""
import matplotlib
matplotlib.use("svg")
import matplotlib.pyplot as plt
import pandas as pd
from pathlib import Path
from cosim.report import render
from cosim.studies.hosting import plot_hosting
from cosim.studies.reproduce_page import case_chart
render(Path({str(full_run)!r}))
plot_hosting(pd.DataFrame({{"bus": [1, 2], "hosting_mw": [1.0, 2.0], "bound": ["", "lower bound"]}}),
             Path({str(full_run)!r}) / "hosting.png")
case_chart({{"name": "c", "figures": [{{"name": "f", "published": 1.0, "ours": 1.1, "passed": True, "check": "within",
                                        "tolerance": "±20 %"}}]}})
print(matplotlib.get_backend(), len(plt.get_fignums()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["svg", "0"]
    assert (full_run / "hosting.png").stat().st_size > 1000
