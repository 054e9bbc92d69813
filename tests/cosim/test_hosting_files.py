"""The hosting-capacity study files shipped in scenarios/hosting/ validate, and the commands the manual gives for
``cosim hosting-capacity`` name files that are shipped, so each runs on a fresh clone as written. (A full study is
a few dozen runs: the CLI's reading of the file is checked here, not the answer.)"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from cosim.cli.studies import add_parsers, hosting_arguments
from cosim.scenario import load_scenario
from cosim.studies.hosting_buses import feeder_bus_table
from cosim.studies.hosting_file import is_hosting_file, load_hosting_file

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted(p for p in (ROOT / "scenarios" / "hosting").glob("*.toml") if is_hosting_file(p))
#: ``cosim hosting-capacity FILE`` in the manual and the README
COMMAND = re.compile(r"cosim hosting-capacity\s+([^\s`]+\.toml)")


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers())
    return parser.parse_args(["hosting-capacity", *argv])


def test_the_guides_study_is_shipped_and_read_as_documented():
    """The IEEE 8500 study of docs/guides/planner-hosting.md: the CLI reads from it what the guide passes as
    options (``--load pcc --bus m1166366 --v-low 0.92 --v-high 1.06 --loading-max 1000 --max-mw 7.2 --engine
    direct``)."""
    path = ROOT / "scenarios" / "hosting" / "ieee8500_m1166366.toml"
    assert path in STUDIES
    study = hosting_arguments(_parse([str(path)]))
    assert study["scenario"] == path.parent / "hc8500.toml" and study["load_entity"] == "pcc"
    assert study["buses"] == ["m1166366"] and study["max_mw"] == 7.2
    assert study["overrides"] == {"scenario.engine": "direct"}
    assert (study["limits"].v_low_pu, study["limits"].v_high_pu, study["limits"].loading_max_pct) == (0.92, 1.06, 1000.0)


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_a_shipped_study_validates_with_its_scenario_and_buses(path):
    """The file reads without a problem, its scenario validates with the file's overrides, the load it sizes is
    an entity of it, and each bus it names is a bus of the feeder."""
    spec = load_hosting_file(path)
    scn = load_scenario(spec["scenario"], spec.get("overrides"))
    assert spec["load"] in scn.entity_info()
    assert hosting_arguments(_parse([str(path)]))["scenario"] == spec["scenario"]
    grid = next(e for e, info in scn.entity_info().items() if info["model"] == "Grid")
    names = {str(bus.ref).lower() for bus in feeder_bus_table(scn, grid)}
    assert set(b.lower() for b in spec["buses"]) <= names


def _documented_commands() -> dict[str, list[str]]:
    texts = [*ROOT.glob("docs/**/*.md"), ROOT / "README.md"]
    found: dict[str, list[str]] = {}
    for path in texts:
        for name in COMMAND.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_documented_study_file_is_shipped():
    """A command the manual gives with a path (``scenarios/...``) names a file of this repository; one with a
    bare name is the example a page builds itself (the tutorial's ``hc8500.toml``), never a placeholder that
    reads as a file (``STUDY.toml``)."""
    commands = _documented_commands()
    assert "scenarios/hosting/ieee8500_m1166366.toml" in commands
    missing = {name: where for name, where in commands.items() if "/" in name and not (ROOT / name).is_file()}
    assert not missing, missing
    placeholders = {name: where for name, where in commands.items() if name.isupper() or name.startswith("STUDY")}
    assert not placeholders, f"name the shipped study file instead: {placeholders}"
