"""The manual's gallery (docs/gen_gallery.py): every catalogue scenario has an entry, and an entry
draws its figure from a run of its scenario.

The full gallery runs in ``make docs``; here the entries are checked against the catalogue without
running them, and one short scenario is drawn.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from cosim.report.figures import FIGURES

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("gen_gallery", ROOT / "docs" / "gen_gallery.py")
gen_gallery = sys.modules["gen_gallery"] = importlib.util.module_from_spec(SPEC)  # dataclasses look it up
SPEC.loader.exec_module(gen_gallery)

PNG = b"\x89PNG\r\n\x1a\n"


def test_every_catalogue_scenario_has_a_gallery_entry():
    catalogue = {p.stem for p in (ROOT / "scenarios").glob("*.toml")}
    assert catalogue, "no scenarios/*.toml"
    missing = sorted(catalogue - set(gen_gallery.GALLERY))
    assert not missing, f"catalogue scenarios without a gallery entry (docs/gen_gallery.py GALLERY): {missing}"
    stale = sorted(set(gen_gallery.GALLERY) - catalogue)
    assert not stale, f"gallery entries without a scenario: {stale}"


def test_every_entry_names_a_report_figure_and_a_sensible_window():
    names = {f.name for f in FIGURES}
    for name, entry in gen_gallery.GALLERY.items():
        assert entry.figure in names, f"{name}: {entry.figure!r} is not a report figure ({sorted(names)})"
        assert entry.look.strip(), name
        assert entry.window_s is None or entry.window_s > 0, name


def test_a_scenario_without_an_entry_stops_the_generator(tmp_path, monkeypatch):
    (tmp_path / "new_study.toml").write_text("[scenario]\nname = 'new_study'\n")
    for path in (ROOT / "scenarios").glob("*.toml"):
        (tmp_path / path.name).write_text(path.read_text())
    monkeypatch.setattr(gen_gallery, "SCENARIOS", tmp_path)
    with pytest.raises(SystemExit, match="no entry for new_study"):
        gen_gallery.check_entries()


def test_one_entry_is_drawn_from_its_run(tmp_path):
    """fleet_dr whole (4 h at 60 s); the command make docs runs, for one name."""
    out = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_gallery.py"), "--out", str(tmp_path),
                          "--only", "fleet_dr"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    png = tmp_path / "gallery" / "fleet_dr.png"
    assert png.read_bytes()[:8] == PNG and png.stat().st_size > 5_000
    assert (tmp_path / "gallery" / "fleet_dr.toml").read_text() == (ROOT / "scenarios" / "fleet_dr.toml").read_text()
    page = (tmp_path / "gallery.md").read_text()
    assert "![fleet_dr: Power](gallery/fleet_dr.png)" in page
    assert "[`scenarios/fleet_dr.toml`](gallery/fleet_dr.toml)" in page
    assert "## default" not in page  # --only: that entry alone


def test_a_shortened_horizon_is_stated_under_the_figure():
    entry = gen_gallery.GALLERY["openadr_month"]
    assert entry.window_s and entry.window_s < 2_678_400
    text = gen_gallery.page(["openadr_month"], {"openadr_month": {"title": "Power", "whole_s": 2_678_400.0,
                                                                   "ran_s": entry.window_s}})
    assert "the first 7 days of its 31 days (shortened for the gallery)" in text


def test_a_figure_drawn_in_place_of_the_entrys_is_not_captioned_with_the_entrys_words():
    entry = gen_gallery.GALLERY["fleet_dr"]
    assert entry.figure == "power"
    same = gen_gallery.page(["fleet_dr"], {"fleet_dr": {"figure": "power", "title": "Power", "whole_s": 14_400.0,
                                                        "ran_s": 14_400.0}})
    other = gen_gallery.page(["fleet_dr"], {"fleet_dr": {"figure": "soc", "title": "State of charge",
                                                         "whole_s": 14_400.0, "ran_s": 14_400.0}})
    assert entry.look in same
    assert entry.look not in other and "*State of charge: the figure this run has data for;" in other
