"""The [agent] / [agents.<name>] sections (cosim/gym/spec.py): every mistake named once, with its
key, value and fix; the core validator accepts the tables, `cosim validate` checks them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cosim.cli import main
from cosim.errors import ScenarioError
from cosim.gym import CosimEnv, CosimParallelEnv
from cosim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "scenarios" / "data"

BASE = f"""
[scenario]
name = "agent_check"
start = 2024-07-15T00:00:00Z
duration_s = 7200
step_s = 60

[sims.prices]
adapter = "signals"
file = "{DATA / 'tariffs' / 'example_hourly_prices_usd_kwh.csv'}"
columns = {{ price_usd_mwh = {{ column = "price_usd_kwh", from_unit = "usd/kWh" }} }}

[sims.storage]
adapter = "battery"

[entities.price]
sim = "prices"
model = "Series"

[entities.bess]
sim = "storage"
model = "Battery"
e_capacity_mwh = 1.0
p_charge_max_mw = 0.5
p_discharge_max_mw = 0.5
"""

GOOD = BASE + """
[agent]
decision_s = 600
observations = ["bess.*"]
forecasts = [{ signal = "price.price_usd_mwh", n = 3 }]
actions = [{ input = "bess.p_set_mw" }]
reward = { energy_cost_usd = -1.0, battery_throughput_mwh = -0.5 }
"""

BAD = BASE + """
[agent]
decision_s = 90
start_window = [2024-07-15, 2024-07-16]
speed = 3
observations = ["bess.soc_frac", "bess.volts_pu"]
forecasts = [{ signal = "bess.soc_frac", n = 0 }]
actions = [{ input = "bess.p_set_mw", high = 2.0 }, { input = "bess.p_charge_mw" }, { input = "nope.x_mw" }]
reward = { energy_cost_usd = -1.0, carbon_t = -100.0, profit_usd = 1.0, battery_throughput_mwh = "lots" }
"""


def problems_of(error: ScenarioError) -> dict[str, str]:
    return {p.path: str(p) for p in error.problems}


def test_a_good_section_makes_an_env(write_scenario):
    env = CosimEnv(write_scenario(GOOD))
    assert env.observation_names[:2] == ["bess.p_mw", "bess.p_shortfall_mw"]  # the glob, in output order
    assert env.observation_names[-3:] == ["price.price_usd_mwh@+0s", "price.price_usd_mwh@+3600s",
                                          "price.price_usd_mwh@+7200s"]
    assert env.action_space.low.tolist() == [-0.5] and env.action_space.high.tolist() == [0.5]
    assert env.episode_spec.decision_s == 600


def test_a_bad_section_is_one_error_naming_every_key_value_and_fix(write_scenario):
    with pytest.raises(ScenarioError) as caught:
        CosimEnv(write_scenario(BAD))
    found = problems_of(caught.value)
    assert str(caught.value).startswith(f"{caught.value.file}: {len(found)} problems:")
    expected = {
        "agent.decision_s": "= 90: not a multiple of the scenario's step 60 s",
        "agent.start_window": "an episode starting 2024-07-16 would not run",  # the price file covers one day
        "agent.speed": "unknown key; allowed: decision_s",
        "agent.observations[1]": "= 'bess.volts_pu': matches no output; e.g. bess.p_mw",
        "agent.forecasts[0].n": "= 0: give a whole number >= 1",
        "agent.forecasts[0].signal": "cannot look ahead; forecast a signals or tariff output",
        "agent.actions[0].high": "= 2.0: outside what bess.p_set_mw accepts, [-0.5, 0.5]",
        "agent.actions[1].input": "bess has no input 'p_charge_mw'; inputs: p_set_mw, p_load_mw, p_gen_mw",
        "agent.actions[2].input": "unknown entity 'nope'; known: price, bess",
        "agent.reward.carbon_t": "not available in this scenario: no '<entity>.ci_g_kwh' recorded",
        "agent.reward.profit_usd": "unknown reward term; terms: energy_cost_usd",
        "agent.reward.battery_throughput_mwh": "= 'lots': give a finite number",
    }
    for path, text in expected.items():
        assert path in found, f"{path} not reported; got {sorted(found)}"
        assert text in found[path], found[path]
    assert set(found) == set(expected)


def test_keyword_arguments_replace_keys_of_the_section(write_scenario):
    path = write_scenario(BAD)
    env = CosimEnv(path, agent={"actions": [{"input": "bess.p_set_mw", "low": -0.25, "high": 0.25}]},
                   decision_s=120, reward={"energy_cost_usd": -2.0})
    assert env.episode_spec.decision_s == 120 and env.reward_weights == {"energy_cost_usd": -2.0}
    assert env.action_space.high.tolist() == [0.25]
    with pytest.raises(ScenarioError, match=r"agent.decision_s = 7: not a multiple of the scenario.s step 60 s .*; use 60 or 120"):
        CosimEnv(write_scenario(GOOD, "good.toml"), decision_s=7)


def test_an_action_needs_bounds_when_the_adapter_gives_none(write_scenario):
    text = GOOD.replace('actions = [{ input = "bess.p_set_mw" }]', 'actions = [{ input = "bess.p_load_mw" }]')
    with pytest.raises(ScenarioError, match=r"agent.actions\[0\].low: the adapter gives no default bounds for "
                                            r"bess.p_load_mw; give low and high"):
        CosimEnv(write_scenario(text))
    ok = text.replace('{ input = "bess.p_load_mw" }', '{ input = "bess.p_load_mw", values = [0.0, 1.0] }')
    assert CosimEnv(write_scenario(ok, "ok.toml")).action_space.nvec.tolist() == [2]  # values give the bounds


def test_action_bounds_wider_than_what_the_input_accepts_from_outside_are_refused(write_scenario):
    """Every input has bounds ``Session.set`` holds it to (here a measured power's plausible
    +-100 GW); an action allowed past them would fail at the step that went there."""
    text = GOOD.replace('actions = [{ input = "bess.p_set_mw" }]',
                        'actions = [{ input = "bess.p_load_mw", low = -2e5, high = 1.0 }]')
    with pytest.raises(ScenarioError, match=r"agent.actions\[0\].low = -200000.0: outside what bess.p_load_mw "
                                            r"accepts from outside, \[-100000, 100000\]; bound it inside"):
        CosimEnv(write_scenario(text))


def test_the_core_accepts_agent_tables_and_refuses_other_shapes(write_scenario):
    assert load_scenario(write_scenario(BAD)).raw["agent"]["decision_s"] == 90  # not read by the core
    with pytest.raises(ScenarioError, match=r"agent = 3: must be a table \(\[agent\] ...\), read by cosim.gym"):
        load_scenario(write_scenario("agent = 3\n" + BASE, "three.toml"))  # a top-level key
    with pytest.raises(ScenarioError, match=r"agnet: unknown section; allowed: scenario, .*, agent, agents"):
        load_scenario(write_scenario(BASE + "[agnet]\nx = 1\n", "typo.toml"))


def test_cosim_validate_reports_a_bad_agent_section_and_run_ignores_it(write_scenario, capsys, tmp_path):
    path = write_scenario(BAD)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "agent.decision_s = 90" in err and "Traceback" not in err
    assert main(["validate", str(write_scenario(GOOD, "good.toml"))]) == 0
    assert main(["run", str(path), "--quiet", "--no-report", "--out", str(tmp_path)]) == 0


def test_agents_sections_are_checked_each_and_share_the_episode(write_scenario):
    text = BASE + """
[agent]
decision_s = 300

[agents.one]
actions = [{ input = "bess.p_set_mw" }]
reward = { energy_cost_usd = -1.0 }

[agents.two]
decision_s = 600
actions = [{ input = "bess.p_set_mw" }]
"""
    with pytest.raises(ScenarioError) as caught:
        CosimParallelEnv(write_scenario(text))
    found = problems_of(caught.value)
    assert "an episode key: the agents decide together, so it goes in [agent]" in found["agents.two.decision_s"]
    assert "bess.p_set_mw is already set by agent 'one'" in found["agents.two.actions"]
    assert len(found) == 2
