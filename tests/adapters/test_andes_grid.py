"""ANDES transient-stability adapter: equilibrium start, load-loss direction, fault dips, bad input.

Physics checked (Kundur, *Power System Stability and Control*, 1994, ch. 11): losing load raises
the system frequency (the machines accelerate) and a bus fault depresses the voltage at that bus
while it lasts; a case initialised with the campus at its first-step power stays at nominal.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

import cosim.adapters.andes_grid.sim as andes_sim
from cosim.adapters import andes_grid
from cosim.adapters.andes_grid import AndesGridSim, cases
from cosim.adapters.grid.opendss_flow import unique_ids
from cosim.adapters.grid.pandapower_tables import element_ids
from cosim.scenario import ScenarioError, load_scenario
from cosim.sdk import ScenarioContext, parse_utc


def _sim(step_s=0.1, **params):
    sim = AndesGridSim()
    sim.init("tgrid", time_resolution=0.1, start_utc="2024-07-10T00:00:00Z", step_s=step_s, duration_s=60, seed=1,
             **params)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="campus", bus=16, p_mw=0.0)
    return sim


def _run(sim, p_of_t, n_steps, step_ticks=1):
    rows = []
    for k in range(n_steps):
        sim.step(k * step_ticks, {"campus": {"p_mw": {"dc": p_of_t(k * 0.1)}}}, None)
        rows.append(sim.get_data({"grid": ["f_hz", "f_zenith_hz", "vm_min_pu"], "campus": ["vm_pu", "vm_min_pu",
                                                                                          "p_mw", "f_hz"]}))
    return rows


def test_starts_in_equilibrium_with_the_first_step_load():
    rows = _run(_sim(), lambda t: 300.0, 20)
    assert all(abs(r["grid"]["f_hz"] - 60.0) < 1e-3 for r in rows)
    assert rows[-1]["campus"]["p_mw"] == pytest.approx(300.0, rel=1e-3)


def test_losing_the_campus_raises_frequency_and_more_loss_raises_it_more():
    zenith = []
    for p_mw in (300.0, 600.0):
        rows = _run(_sim(), lambda t, p=p_mw: p if t < 1.0 else 0.0, 60)
        assert rows[5]["grid"]["f_hz"] == pytest.approx(60.0, abs=1e-3)
        assert rows[-1]["grid"]["f_hz"] > 60.0 + 0.01
        zenith.append(rows[-1]["grid"]["f_zenith_hz"])
    assert zenith[1] > zenith[0]


def test_a_fault_dips_the_bus_voltage_while_it_lasts():
    rows = _run(_sim(faults=[[1.0, 0.1, 16, 0.02]]), lambda t: 300.0, 30)
    before, during, after = rows[5]["campus"]["vm_min_pu"], rows[10]["campus"]["vm_min_pu"], rows[25]["campus"]["vm_pu"]
    assert during < before - 0.2
    assert after > during + 0.2


def _ctx(step_s=0.1):
    return ScenarioContext(parse_utc("2024-07-10T00:00:00Z"), 60, step_s, 1, tick_s=0.1)


def test_ids_follow_the_rule_of_the_other_grid_engines(monkeypatch):
    """A machine or bus gets the id that the pandapower and OpenDSS engines give the same name (runs of
    other characters become one ``_``), so an element has one id whichever engine solves it."""
    names = ["GEN--1", "Gen 2 (north)", "Bus 1.a", "7"]
    info = {"gens": names[:2], "buses": dict.fromkeys(names[2:], "x"), "vn_kv": {}, "f_hz": 60.0}
    monkeypatch.setattr(andes_sim, "case_info", lambda case, dyr=None: info)
    attrs = AndesGridSim.meta_for(andes_grid.SimParams())["models"]["Grid"]["attrs"]
    pandapower_ids = element_ids(pd.DataFrame({"name": names}))
    assert pandapower_ids == unique_ids(names) == ["gen_1", "gen_2_north", "bus_1_a", "7"]
    assert [a for a in attrs if a.startswith(("gen_", "bus_"))] == [
        "gen_gen_1_f_hz", "gen_gen_1_p_mw", "gen_gen_2_north_f_hz", "gen_gen_2_north_p_mw", "bus_bus_1_a_vm_pu",
        "bus_7_vm_pu"]


def test_bad_input_is_named():
    params = andes_grid.SimParams(case="ieee39", faults=[[1.0, 0.1, 99, 0.05]], dt_s=0.03)
    text = " | ".join(AndesGridSim.check(params, _ctx()))
    assert "unknown bus 99" in text and "dt_s = 0.03 does not divide" in text
    assert "at most" in " ".join(AndesGridSim.check(andes_grid.SimParams(case="ieee39"), _ctx(step_s=5.0)))
    load = andes_grid.LoadParams(bus="nowhere")
    assert "unknown bus 'nowhere'" in AndesGridSim.check_entity("Load", load, _ctx(), andes_grid.SimParams())[0]
    assert "give one of" in AndesGridSim.check(andes_grid.SimParams(case="ieee300"), _ctx())[0]


def test_a_case_without_a_power_flow_solution_fails_with_its_reason():
    sim = _sim()
    with pytest.raises(RuntimeError, match="no power-flow solution|could not initialise"):
        _run(sim, lambda t: 1e6, 1)


SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "interconnection_study.toml"


def _scenario(tmp_path, **replace):
    text = SCENARIO.read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


def test_the_sims_own_step_is_checked_at_validation(tmp_path):
    """A [sims] step_s over 1 s is named even when the scenario's step is 0.1 s."""
    path = _scenario(tmp_path, **{'case = "ieee39"': 'case = "ieee39"\nstep_s = 2'})
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert any("step_s = 2: ANDES is stepped at most every 1 s" in str(p) for p in info.value.problems)


def test_a_relative_case_file_resolves_from_the_scenario_folder(tmp_path):
    shutil.copy(andes_grid.case_path("ieee39"), tmp_path / "my39.xlsx")
    load_scenario(_scenario(tmp_path, **{'case = "ieee39"': 'case = "my39.xlsx"'}))
    with pytest.raises(ScenarioError) as info:
        load_scenario(_scenario(tmp_path, **{'case = "ieee39"': 'case = "missing.xlsx"'}))
    assert "give one of ieee14, ieee39" in str(info.value)


def _keep_sheets(tmp_path, *names: str) -> None:
    """ieee14_full.xlsx with only the sheets ``names`` (``mine.xlsx``)."""
    import openpyxl

    book = openpyxl.load_workbook(andes_grid.case_path("ieee14"))
    for sheet in [s for s in book.sheetnames if s not in names]:
        del book[sheet]
    book.save(tmp_path / "mine.xlsx")


@pytest.mark.parametrize("name, make, expected", [
    ("mine.json", lambda tmp: (tmp / "mine.json").write_text("{not json"), "JSONDecodeError"),
    ("mine.json", lambda tmp: (tmp / "mine.json").write_text('{"a": 1}'), "could not read it"),
    ("mine.xlsx", lambda tmp: (tmp / "mine.xlsx").write_text("not a spreadsheet"), "could not read it"),
    ("mine.xlsx", lambda tmp: _keep_sheets(tmp, "Area"), "ANDES read no buses from it"),
    ("mine.xlsx", lambda tmp: _keep_sheets(tmp, "Bus", "PQ", "PV", "Slack", "Line", "Shunt", "Area"),
     "no synchronous machine (GENROU or GENCLS)"),
])
def test_an_unusable_case_file_is_one_problem_naming_it(tmp_path, name, make, expected):
    """A case file that is not JSON, not a case, or a case without buses or machines: one problem at the
    sim, naming ``case`` and the file (before: a bare JSON error without the file or key; a workbook
    without buses validated the sim and blamed the entity's bus; a case without machines validated)."""
    make(tmp_path)
    with pytest.raises(ScenarioError) as info:
        load_scenario(_scenario(tmp_path, **{'case = "ieee39"': f'case = "{name}"'}))
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert problems[0].path.startswith("sims.") and f"case = '{tmp_path / name}'" in problems[0].message
    assert expected in problems[0].message


def test_a_loads_inputs_are_bounded_by_load_p_max_mw_and_a_release_restores_its_params():
    """A Load's p_mw/q_mvar from outside stay within +-``load_p_max_mw`` (default ten times the
    100 MVA base; a scenario widens it); released, the load goes back to its params' power."""
    from cosim.adapters.andes_grid import AndesGridSim, SimParams

    assert AndesGridSim.settable_bounds("Load", None, SimParams.model_validate({"case": "ieee14"})) == {
        "p_mw": (-1000.0, 1000.0), "q_mvar": (-1000.0, 1000.0)}
    wide = SimParams.model_validate({"case": "ieee14", "load_p_max_mw": 5000.0})
    assert AndesGridSim.settable_bounds("Load", None, wide)["p_mw"] == (-5000.0, 5000.0)
    sim = AndesGridSim()
    sim.init("g", 1.0, start_utc="2024-07-15T00:00:00Z", step_s=1, duration_s=10, seed=0, case="ieee14")
    sim.create(1, "Load", eid="dc", bus=9, p_mw=10.0, q_mvar=1.0)
    sim.loads["dc"].update(p_mw=80.0, q_mvar=5.0)  # what a held input left there
    sim.release("dc", "p_mw")
    sim.release("dc", "q_mvar")
    assert (sim.loads["dc"]["p_mw"], sim.loads["dc"]["q_mvar"]) == (10.0, 1.0)
    sim.finalize()


def test_loading_a_case_leaves_no_folder_in_the_temp_dir(tmp_path, monkeypatch):
    """ANDES makes a new empty ``andes-*`` log folder in the temp dir at every ``config_logger`` call without a log
    path (its file log off or not): loading cases must not, or every ANDES run and test litters /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for _ in range(3):
        cases.load_case("ieee14")
    assert not list(tmp_path.glob("andes-*"))
