"""Scenario validation: every problem is collected and named with its key path."""

from __future__ import annotations

import tomllib

import pytest

from cosim.scenario import ScenarioError, load_scenario

GOOD = """
[scenario]
name = "toy"
start = 2024-07-15T00:00:00Z
duration_s = 3600
step_s = 60

[sims]
src = { adapter = "toy_ramp" }
sink = { adapter = "toy_sink" }

[entities]
a = { sim = "src", model = "Ramp", p0_mw = 1.0 }
s = { sim = "sink", model = "Sink" }

[[connect]]
src = "a"
dst = "s"
attrs = ["p_mw"]
"""


def problems_of(write_scenario, text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario(text))
    return [str(p) for p in info.value.problems]


def test_good_scenario_validates(toy_adapters, write_scenario):
    scn = load_scenario(write_scenario(GOOD))
    assert scn.scenario.seed == 0
    assert scn.entity_params["a"] == {"p0_mw": 1.0}
    assert scn.outputs("a") == ["p_mw", "p_cap_mw"]


def test_five_different_mistakes_are_all_listed(toy_adapters, write_scenario):
    text = (
        GOOD.replace("duration_s = 3600", "duration_s = 3610")  # 1: not a multiple of the step
        .replace('adapter = "toy_sink"', 'adapter = "toy_snik"')  # 2: unknown adapter
        .replace("p0_mw = 1.0", 'p0_mw = "lots"')  # 3: wrong type
        + '\n[[connect]]\nsrc = "a"\ndst = "ghost"\nattrs = ["p_mw"]\n'  # 4: unknown entity
        + '\n[entities.c]\nsim = "src"\nmodel = "Rampp"\n'  # 5: unknown model
    )
    found = problems_of(write_scenario, text)
    assert len(found) == 5, found
    joined = "\n".join(found)
    assert "scenario.duration_s = 3610: not a multiple of step_s = 60; use 3600 or 3660" in joined
    assert "sims.sink.adapter = 'toy_snik': unknown adapter; known:" in joined and "toy_sink" in joined
    assert "entities.a.p0_mw = 'lots'" in joined
    assert "connect[1].dst = 'ghost': unknown entity; known: a" in joined
    assert "entities.c.model = 'Rampp': adapter 'toy_ramp' has no such model; known: Ramp" in joined


def test_attribute_without_unit_and_unknown_attr(toy_adapters, write_scenario):
    text = GOOD.replace('attrs = ["p_mw"]', 'attrs = [["p_mw", "power"], "q_mvar"]')
    found = "\n".join(problems_of(write_scenario, text))
    assert "attribute name has no unit suffix" in found and "'power'" in found
    assert "a has no output 'q_mvar'; outputs: p_mw, p_cap_mw" in found


def test_unit_mismatch_is_named(toy_adapters, write_scenario):
    text = GOOD + '\n[[connect]]\nsrc = "s"\ndst = "a"\nattrs = [["t_sink_c", "p_cap_mw"]]\ntime_shifted = true\ninitial_data = { t_sink_c = 0.0 }\n'
    found = problems_of(write_scenario, text)
    assert found == ["connect[1].attrs[0]: unit mismatch: t_sink_c is in c, p_cap_mw in mw"]


def test_feedback_loop_without_delay_is_refused(toy_adapters, write_scenario):
    loop = GOOD + '\n[[connect]]\nsrc = "s"\ndst = "a"\nattrs = ["p_cap_mw"]\n'
    found = "\n".join(problems_of(write_scenario, loop))
    assert "feedback loop without delay: sink -> src -> sink" in found or "src -> sink -> src" in found
    delayed = loop.replace('attrs = ["p_cap_mw"]\n', 'attrs = ["p_cap_mw"]\ntime_shifted = true\ninitial_data = { p_cap_mw = 5.0 }\n')
    load_scenario(write_scenario(delayed))


def test_delayed_connection_needs_initial_data(toy_adapters, write_scenario):
    text = GOOD + '\n[[connect]]\nsrc = "s"\ndst = "a"\nattrs = ["p_cap_mw"]\ntime_shifted = true\n'
    assert any("initial_data" in p and "p_cap_mw" in p for p in problems_of(write_scenario, text))


def test_toml_syntax_error_names_line(write_scenario):
    found = problems_of(write_scenario, "[scenario]\nname = \n")
    assert len(found) == 1 and "not valid TOML" in found[0] and "line 2" in found[0]


def test_missing_and_unknown_sections(write_scenario):
    found = "\n".join(problems_of(write_scenario, "[scenari]\nname = 'x'\n"))
    assert "scenari: unknown section" in found
    assert "scenario: section [scenario] is missing" in found


def test_naive_start_time_is_refused(toy_adapters, write_scenario):
    found = "\n".join(problems_of(write_scenario, GOOD.replace("2024-07-15T00:00:00Z", "2024-07-15T00:00:00")))
    assert "scenario.start" in found and "UTC" in found


def test_unknown_sim_key_lists_allowed(toy_adapters, write_scenario):
    found = "\n".join(problems_of(write_scenario, GOOD.replace('{ adapter = "toy_sink" }', '{ adapter = "toy_sink", colour = 3 }')))
    assert "sims.sink.colour: unknown key" in found


def test_overrides_apply_before_validation(toy_adapters, write_scenario):
    scn = load_scenario(write_scenario(GOOD), {"scenario.seed": 9, "entities.a.p0_mw": 4.0})
    assert scn.scenario.seed == 9 and scn.entity_params["a"]["p0_mw"] == 4.0


def test_unknown_bus_is_named_at_validation(tmp_path):
    """The grid adapter's check_entity sees its sim's network: a bad bus never reaches a run."""
    from pathlib import Path

    default = (Path(__file__).resolve().parents[2] / "scenarios" / "default.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(default.replace('bus = "3"', 'bus = "99"').replace('"data/', f'"{Path(__file__).resolve().parents[2]}/scenarios/data/'))
    with pytest.raises(ScenarioError) as info:
        load_scenario(bad)
    message = "unknown bus '99' in this network (33 in net.bus, e.g. 1, 2, 3, 4, 5, 6); give a bus name or index"
    attached = [eid for eid, body in tomllib.loads(default)["entities"].items() if body.get("bus") == "3"]
    assert len(attached) >= 1
    assert [str(p) for p in info.value.problems] == [f"entities.{eid}: {message}" for eid in attached]


def test_record_pattern_matching_nothing_is_a_problem(toy_adapters, write_scenario):
    found = problems_of(write_scenario, GOOD + '\n[record]\ninclude = ["a.*", "s.p_summ_mw"]\n')
    assert found == ["record.include[1] = 's.p_summ_mw': matches no output; outputs look like "
                     "a.p_mw, a.p_cap_mw, s.p_sum_mw, s.p_cap_mw, ... (5 in all)"]
