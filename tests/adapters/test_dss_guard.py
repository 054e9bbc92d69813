"""A user's OpenDSS file is read as a circuit description only (adapters/grid/opendss_guard.py).

Every OpenDSS command outside the allow-list, every ``Set`` option outside it and every element
property that writes, loads a library or reads a file outside the feeder's folder is refused, in
every spelling OpenDSS accepts (whole, abbreviated, quoted, bracketed), before OpenDSS sees the
file; nothing is written into the feeder's folder by a check, a compile or solves. The command,
option and property lists come from the OpenDSS engine itself (``opendssdirect``'s Executive).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cosim.adapters.grid.opendss_guard import ALLOWED_COMMANDS, ALLOWED_OPTIONS, dss_file_problems, dss_names, resolve
from cosim.adapters.grid.opendss_flow import OpenDssFlow, compile_circuit, new_engine

ROOT = Path(__file__).resolve().parents[2]
IEEE13 = (ROOT / "grid_models" / "ieee13.dss").read_text()
COMMANDS, OPTIONS, PROPERTIES = dss_names()
REFUSED_COMMANDS = [c for c in COMMANDS if c not in ALLOWED_COMMANDS and c != "//"]
REFUSED_OPTIONS = [o for o in OPTIONS if o not in ALLOWED_OPTIONS]
IEEE8500 = Path("/work/shared/data/ieee8500-opendss")
ENGINE = new_engine()  # one engine for the refusals (each is refused before the engine reads the file)


def shortest_abbreviation(name: str, names: tuple[str, ...]) -> str | None:
    """The shortest prefix of ``name`` OpenDSS reads as ``name`` (None when only the whole name does)."""
    for n in range(1, len(name)):
        if resolve(name[:n], names) == name:
            return name[:n]
    return None


def spellings(name: str, names: tuple[str, ...]) -> list[str]:
    """Every way to write ``name``: whole (capitalised), abbreviated, quoted and bracketed."""
    found = [name.capitalize(), *(f"{a}{name.upper()}{b}" for a, b in ('""', "''", "()", "[]", "{}"))]
    short = shortest_abbreviation(name, names)
    return found + ([short.upper(), f'"{short}"', f"({short})"] if short else [])


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def no_viewer(tmp_path, monkeypatch):
    """A PATH whose viewers (xdg-open, open, less, ...) only leave a marker: nothing may start them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "launched"
    for name in ("xdg-open", "open", "gio", "sensible-editor", "notepad", "less", "more", "vi", "nano"):
        (bin_dir / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("EDITOR", str(bin_dir / "vi"))
    return marker


def refused(tmp_path: Path, line: str, marker: Path | None = None) -> str:
    """Compile ieee13 + ``line`` from its own folder: the refusal's text; nothing written or launched."""
    folder = tmp_path / "feeder"
    folder.mkdir(exist_ok=True)
    feeder = folder / "f.dss"
    feeder.write_text(IEEE13 + f"\n{line}\n")
    before = listing(folder)
    with pytest.raises(ValueError) as err:
        compile_circuit(ENGINE, feeder)
    assert listing(folder) == before
    assert marker is None or not marker.exists()
    text = str(err.value)
    assert f"f.dss:{len(feeder.read_text().splitlines())}: {line}" in text, text
    return text


def test_the_command_lists_come_from_the_engine():
    """The engine lists OpenDSS's commands (Export, Show, Save, ...) and options; every allowed name is one."""
    assert {"export", "show", "save", "plot", "doscmd", "new", "redirect"} <= set(COMMANDS)
    assert {"datapath", "demandinterval", "editor", "voltagebases"} <= set(OPTIONS)
    assert ALLOWED_COMMANDS - {"like"} <= set(COMMANDS)
    assert ALLOWED_OPTIONS <= set(OPTIONS)
    assert "debugtrace" in PROPERTIES["regcontrol"] and "action" in PROPERTIES["monitor"]


@pytest.mark.parametrize("command", REFUSED_COMMANDS)
def test_every_command_outside_the_allow_list_is_refused_in_every_spelling(command, tmp_path, no_viewer):
    """Each OpenDSS command that writes, shows, plots, exports, reads or runs (and any other that does not
    describe a circuit), whole, abbreviated (``Exp`` = Export), quoted and bracketed."""
    for spelling in spellings(command, COMMANDS):
        text = refused(tmp_path, f"{spelling} voltages {tmp_path / 'out.csv'}", no_viewer)
        assert f"'{command}'" in text and "remove the line" in text
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("option", REFUSED_OPTIONS)
def test_every_set_option_outside_the_allow_list_is_refused(option, tmp_path, no_viewer):
    """``Set Dem=true`` (DemandInterval), ``Set DataPath=``, ``Set Editor=``, ``Set Log=``, ... in each spelling,
    also after an allowed option and on a Solve line."""
    short = shortest_abbreviation(option, OPTIONS)
    for line in [f"Set {option}=yes", f'Set "{option.upper()}"=yes', f"Set mode=snap {option}=yes",
                 f"Solve {option}=yes", *([f"Set {short}=yes"] if short else [])]:
        text = refused(tmp_path, line, no_viewer)
        assert f"the option '{option}'" in text and "from the line" in text


WRITING_PROPERTIES = [(cls, prop, value) for cls, props in sorted(PROPERTIES.items()) for prop, value in
                      (("debugtrace", "yes"), ("usermodel", "lib.so"), ("dynadll", "lib.so"),
                       ("shaftmodel", "lib.so"), ("action", "save"), ("action", "zonedump"),
                       ("action", "dblsave"), ("action", "sngsave"), ("phasevoltagereport", "yes"))
                      if prop in props and not (prop == "action" and cls in ("swtcontrol", "relay", "recloser", "fuse")
                                                and value != "save")]


@pytest.mark.parametrize("cls, prop, value", WRITING_PROPERTIES)
def test_every_property_that_writes_or_loads_code_is_refused(cls, prop, value, tmp_path):
    """RegControl ``debugtrace=yes`` (EPRI's ckt24 as published writes REG_*.csv into its folder),
    ``UserModel``/``DynaDLL`` (a library is loaded), Monitor/EnergyMeter/LoadShape ``action=save``...,
    on the New line, on a ``~`` line and abbreviated."""
    short = shortest_abbreviation(prop, PROPERTIES[cls]) or prop
    for line in [f"New {cls}.x {prop}={value}", f"New {cls}.x\n~ {short}={value}", f"{cls}.x.{short}={value}"]:
        folder = tmp_path / "feeder"
        folder.mkdir(exist_ok=True)
        (folder / "f.dss").write_text(IEEE13 + f"\n{line}\n")
        problems = dss_file_problems(folder / "f.dss")
        assert len(problems) == 1 and "remove '" in problems[0] and value in problems[0], (line, problems)


@pytest.mark.parametrize("line", ["Redirect (/etc/passwd)", "Compile [../outside.dss]", "Redirect sub/../../outside.dss",
                                  "BusCoords /etc/passwd", "LatLongCoords ../outside.csv",
                                  "New LoadShape.s npts=2 mult=(file=/etc/passwd)",
                                  "New LoadShape.s npts=2 mult=[sngfile=../x.sng]", "New XYcurve.c csvfile=/etc/passwd",
                                  "New LoadShape.s npts=2\n~ csv=../outside.csv"])
def test_reading_outside_the_feeder_folder_is_refused(line, tmp_path):
    """OpenDSS would read the file (and echo its first line in its error): refused before it does."""
    (tmp_path / "outside.dss").write_text("Export voltages\n")
    folder = tmp_path / "feeder"
    folder.mkdir()
    (folder / "f.dss").write_text(IEEE13 + f"\n{line}\n")
    problems = dss_file_problems(folder / "f.dss")
    assert len(problems) == 1 and "outside the feeder's folder" in problems[0], problems


def test_a_symlink_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "outside.dss").write_text("New Load.x bus1=650 kW=1\n")
    folder = tmp_path / "feeder"
    folder.mkdir()
    (folder / "link.dss").symlink_to(tmp_path / "outside.dss")
    (folder / "f.dss").write_text(IEEE13 + "\nRedirect link.dss\n")
    assert "outside the feeder's folder" in dss_file_problems(folder / "f.dss")[0]


def test_redirected_files_inside_the_folder_are_checked_too(tmp_path):
    folder = tmp_path / "feeder"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "more.dss").write_text("New Load.x bus1=650 kW=1\nsho voltages\n")
    (folder / "f.dss").write_text(IEEE13 + "\nRedirect sub/more.dss\n")
    assert dss_file_problems(folder / "f.dss") == [
        "more.dss:2: sho voltages: 'show' (OpenDSS reads 'sho' as 'show') writes files and opens a viewer; remove "
        "the line: a network file may only define and solve the circuit (cosim reads and records the results itself)"]


def test_a_file_screened_once_is_screened_again_when_it_or_a_redirected_file_changes(tmp_path):
    """The verdict is kept per file while every file it read is unchanged (validation, the run's compile
    and the size check screen the same feeder): a change to a redirected file, or a file that appears
    where a Redirect named a missing one, is seen."""
    folder = tmp_path / "feeder"
    folder.mkdir()
    (folder / "more.dss").write_text("New Load.x bus1=650 kW=1\n")
    (folder / "f.dss").write_text(IEEE13 + "\nRedirect more.dss\nRedirect later.dss\n")
    assert dss_file_problems(folder / "f.dss") == dss_file_problems(folder / "f.dss") == []
    (folder / "more.dss").write_text("New Load.x bus1=650 kW=1\nsho voltages\n")
    assert [p.split(":")[0] for p in dss_file_problems(folder / "f.dss")] == ["more.dss"]
    (folder / "more.dss").write_text("New Load.x bus1=650 kW=1\n")
    (folder / "later.dss").write_text("Export voltages\n")
    assert [p.split(":")[0] for p in dss_file_problems(folder / "f.dss")] == ["later.dss"]


@pytest.mark.parametrize("line", ["S", "Set voltagebases=[4.16, 0.48] controlmode=static maxcontroliter=20",
                                  "Calcv", "Solve mode=snap", "Edit Line.650632 r1=0.1", "Line.650632.r1=0.1",
                                  "New Monitor.m element=line.650632 mode=0", "Open Line.671692 1",
                                  "New RegControl.r transformer=reg1 debugtrace=no", "BatchEdit Load..* kW=10",
                                  "! Export voltages", "// Show voltages", "New Load.z bus1=650 kW=1 ! Export"])
def test_circuit_description_lines_pass(line, tmp_path):
    (tmp_path / "f.dss").write_text(IEEE13 + f"\n{line}\n")
    assert dss_file_problems(tmp_path / "f.dss") == []


FEEDERS = sorted((ROOT / "grid_models").glob("*.dss")) + sorted(
    p for p in (IEEE8500.glob("Master*.dss") if IEEE8500.is_dir() else []))


@pytest.mark.parametrize("feeder", FEEDERS, ids=lambda p: p.name)
def test_every_shipped_feeder_passes(feeder):
    assert dss_file_problems(feeder) == []


def test_a_ckt24_style_debugtrace_is_refused_at_validation_with_the_fix(tmp_path):
    """EPRI's ckt24 sets ``debugtrace=yes`` on its RegControl: one message naming file, line and fix; the
    folder is unchanged."""
    import cosim

    feeder = tmp_path / "feeder.dss"
    line = "New RegControl.reg1a transformer=reg1a"
    assert line in IEEE13
    feeder.write_text(IEEE13.replace(line, f"{line} debugtrace=yes", 1))
    before = listing(tmp_path)
    with pytest.raises(cosim.ScenarioError) as err:
        cosim.load_scenario(ROOT / "scenarios" / "ieee13_llm_campus.toml", {"sims.grid.network": str(feeder)})
    assert "feeder.dss:" in str(err.value) and "remove 'debugtrace=yes'" in str(err.value)
    assert listing(tmp_path) == before


def test_compiling_and_solving_writes_nothing_into_the_feeder_folder(tmp_path):
    """Validation's compile, a run's compile and solves (regulators moving) leave the folder as it was."""
    folder = tmp_path / "feeder"
    folder.mkdir()
    for src in (ROOT / "grid_models").glob("ieee13*.dss"):
        (folder / src.name).write_text(src.read_text())
    before = listing(folder)
    flow = OpenDssFlow(folder / "ieee13.dss")
    for _ in range(3):
        flow.dss.Solution.Solve()
    assert listing(folder) == before


def test_an_opendss_error_is_never_cut_before_its_reason(tmp_path):
    """OpenDSS's message comes whole (the run's second compile once ended at "Unable to")."""
    feeder = tmp_path / "bad.dss"
    feeder.write_text("Clear\nNew Circuit.c basekv=12.47\nNew Line.l1 bus1=sourcebus bus2=b linecode="
                      + "no_such_code_" * 30 + "\n")
    dss = new_engine()
    with pytest.raises(ValueError) as err:
        compile_circuit(dss, feeder)
    assert ("no_such_code_" * 30).lower() in str(err.value).lower()


def test_a_run_writes_nothing_into_the_feeder_folder(tmp_path):
    """Validation, the run's compile and every step's solve leave a user's feeder folder as it was."""
    import cosim

    folder = tmp_path / "feeder"
    folder.mkdir()
    (folder / "ieee13.dss").write_text(IEEE13)
    before = listing(folder)
    result = cosim.run(ROOT / "scenarios" / "ieee13_llm_campus.toml", out_dir=tmp_path / "runs",
                       overrides={"sims.grid.network": str(folder / "ieee13.dss"), "scenario.duration_s": 900})
    assert result.ok
    assert listing(folder) == before


@pytest.mark.parametrize("folder_name", ["plain", "with ] bracket", "with ) and ] and \"", "it's"])
def test_a_feeder_in_a_folder_with_quotes_or_brackets_compiles_itself(folder_name, tmp_path):
    """OpenDSS reads the path as one token whatever the folder's name holds (a ``]`` ended it early)."""
    folder = tmp_path / folder_name
    folder.mkdir()
    (folder / "ieee13.dss").write_text(IEEE13)
    dss = new_engine()
    compile_circuit(dss, folder / "ieee13.dss")
    assert dss.Circuit.NumBuses() > 10


@pytest.mark.parametrize("line", ["Redirect @result", "Buscoords @lastfile", "New LoadShape.s npts=2 mult=(@x 1)",
                                  "New Load.v bus1=650 kW=@kw", "@lastredirectfile", "Load.v.kw=@result"])
def test_script_variables_are_refused(line, tmp_path):
    """OpenDSS replaces ``@name`` wherever a token starts; ``@result`` holds the last answer (``Set casename=/etc/passwd``
    then ``Get casename`` made ``Redirect @result`` read that file)."""
    (tmp_path / "f.dss").write_text(IEEE13 + f"\nSet casename=/etc/passwd\n{line}\n")
    problems = dss_file_problems(tmp_path / "f.dss")
    assert len(problems) == 1 and "script variable" in problems[0], problems
