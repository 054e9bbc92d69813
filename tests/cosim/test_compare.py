"""Run comparison: KPIs side by side, differences to the baseline, text and HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cosim.studies.compare import STATUS_ROW, compare, format_table, write_compare_html


def fake_run(folder: Path, status: str, kpis: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "kpis.json").write_text(json.dumps(kpis))
    (folder / "metadata.json").write_text(json.dumps({"status": status}))
    return folder


@pytest.fixture
def runs(tmp_path):
    base = fake_run(tmp_path / "base", "ok", {"duration_h": 24.0, "feeder": {"import_mwh": 100.0, "vm_min_pu": 0.95,
                                                                            "export_mwh": 0.0},
                                               "carbon": {"signal": "ci.ci_g_kwh", "carbon_t": 30.0}})
    capped = fake_run(tmp_path / "capped", "ok", {"duration_h": 24.0, "feeder": {"import_mwh": 90.0, "vm_min_pu": 0.96,
                                                                                "export_mwh": 1.5},
                                                   "carbon": {"signal": "ci.ci_g_kwh", "carbon_t": 27.0},
                                                   "bess": {"n_cycles": 1.2}})
    failed = fake_run(tmp_path / "failed", "failed", {})
    return [base, capped, failed]


def test_side_by_side_with_differences(runs):
    table = compare(runs)
    assert list(table.columns) == ["base", "capped", "failed", "Δ capped", "Δ% capped", "Δ failed", "Δ% failed"]
    assert table.at[STATUS_ROW, "failed"] == "failed"
    assert table.at["feeder.import_mwh", "Δ capped"] == pytest.approx(-10.0)
    assert table.at["feeder.import_mwh", "Δ% capped"] == pytest.approx(-10.0)
    assert table.at["feeder.vm_min_pu", "Δ capped"] == pytest.approx(0.01)
    assert table.at["feeder.export_mwh", "Δ capped"] == pytest.approx(1.5)
    assert table.at["feeder.export_mwh", "Δ% capped"] is None  # no percentage of a zero baseline
    assert table.at["bess.n_cycles", "base"] is None and table.at["bess.n_cycles", "Δ capped"] is None  # missing, not 0
    assert table.at["carbon.signal", "Δ capped"] is None  # text is not differenced
    assert table.at["feeder.import_mwh", "failed"] is None and table.at["feeder.import_mwh", "Δ failed"] is None


def test_text_and_html(runs, tmp_path):
    table = compare(runs)
    text = format_table(table)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["kpi", "base", "capped", "failed"]
    row = next(line for line in lines if line.startswith("feeder.import_mwh"))
    assert row.split()[1:5] == ["100", "90", "—", "-10"] and "-10.0 %" in row
    page = write_compare_html(table, tmp_path / "compare.html").read_text()
    assert "id='compare-table'" in page and "baseline: base" in page
    assert "<td class='num neg'>-10</td>" in page and "<td class='num pos'>+1.5 %</td>" not in page
    assert "<td class='num pos'>0.01</td>" in page


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        compare([tmp_path / "nowhere"])


def test_damaged_kpis_and_html_folder_are_named(runs, tmp_path, capsys):
    """A kpis.json holding a list, or --html naming a folder: a clear message, not an internal error."""
    from cosim.cli import main
    from cosim.scenario import ScenarioError

    (runs[1] / "kpis.json").write_text("[1, 2]")
    with pytest.raises(ScenarioError, match=r"capped/kpis.json = \[1, 2\]: expected a JSON object"):
        compare(runs)
    assert main(["compare", str(runs[0]), str(runs[1])]) == 1
    assert "expected a JSON object" in capsys.readouterr().err

    table = compare([runs[0], runs[2]])
    with pytest.raises(ScenarioError, match="is a folder; give the HTML file"):
        write_compare_html(table, tmp_path)
    assert main(["compare", str(runs[0]), str(runs[2]), "--html", str(tmp_path)]) == 1
    assert "is a folder" in capsys.readouterr().err


def test_kpi_prefixes_keep_only_those_and_a_prefix_matching_nothing_is_named(runs):
    table = compare(runs, only=["feeder.import"])
    assert list(table.index) == [STATUS_ROW, "feeder.import_mwh"]
    from cosim.errors import ScenarioError

    with pytest.raises(ScenarioError, match="no KPI starts with swing.nowhere"):
        compare(runs, only=["swing.nowhere"])


def test_labels_name_the_columns_and_repeats_get_a_suffix(runs):
    table = compare(runs, labels=["none", "floor", "floor"])
    assert [c for c in table.columns if not c.startswith("Δ")] == ["none", "floor", "floor#2"]


def test_spectrum_overlay_of_a_swinging_column(tmp_path):
    """A 0.5 Hz swing recorded at 0.1 s gives a figure; a run without the column, or at 1 s steps, is left out."""
    import numpy as np
    import pandas as pd

    from cosim.studies.compare import spectrum_png

    def with_series(name: str, step_s: float, amplitude_mw: float) -> Path:
        folder = fake_run(tmp_path / name, "ok", {"duration_h": 0.1})
        index = pd.date_range("2024-01-01", periods=600, freq=pd.Timedelta(seconds=step_s), tz="UTC")
        t = np.arange(600) * step_s
        frame = pd.DataFrame({"campus.p_mw": 100 + amplitude_mw * np.sin(2 * np.pi * 0.5 * t)}, index=index)
        frame.index.name = "time_utc"
        frame.reset_index().to_parquet(folder / "timeseries.parquet")
        return folder

    a, b, coarse = with_series("none", 0.1, 10.0), with_series("floor", 0.1, 1.0), with_series("coarse", 1.0, 10.0)
    assert spectrum_png([a, b], ["none", "floor"], "campus.p_mw")
    assert spectrum_png([coarse], ["coarse"], "campus.p_mw") is None
    assert spectrum_png([a], ["none"], "pcc.p_mw") is None
    page = write_compare_html(compare([a, b]), tmp_path / "c.html",
                              {"Power spectrum of campus.p_mw": spectrum_png([a, b], ["none", "floor"], "campus.p_mw")})
    assert "Power spectrum of campus.p_mw" in page.read_text() and "data:image/png;base64," in page.read_text()
