"""CosimParallelEnv (cosim/gym/parallel.py): PettingZoo's own API test, and the agents' shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from cosim.gym import CosimParallelEnv

SITE = Path(__file__).resolve().parents[2] / "scenarios" / "rl_site.toml"
TWO_HOURS = {"scenario.duration_s": 7200}


@pytest.mark.filterwarnings("ignore::cosim.gym.UnknownResetOptionWarning")  # its reset(options={"options": 1})
def test_pettingzoo_parallel_api_test_passes():
    env = CosimParallelEnv(SITE, TWO_HOURS)
    parallel_api_test(env, num_cycles=20)
    env.close()


def test_each_agent_has_its_own_spaces_and_reward_over_shared_terms():
    env = CosimParallelEnv(SITE, TWO_HOURS)
    assert env.possible_agents == ["battery", "workload"]
    assert env.action_space("battery").shape == (1,) and env.action_space("workload").nvec.tolist() == [3]
    obs, infos = env.reset(seed=3)
    assert {a: o.shape for a, o in obs.items()} == {"battery": (15,), "workload": (9,)}
    actions = {"battery": np.array([0.5], np.float32), "workload": np.array([2])}
    obs, rewards, terminations, truncations, infos = env.step(actions)
    terms = infos["battery"]["terms"]
    assert infos["workload"]["terms"] == terms
    assert rewards["battery"] == -terms["energy_cost_usd"] - 190.0 * terms["carbon_t"]
    assert rewards["workload"] == rewards["battery"] - 256.0 * terms["slo_loss_h"] - 2.0 * terms["delay_gpu_h"]
    for _ in range(7):
        obs, rewards, terminations, truncations, infos = env.step(actions)
    assert all(terminations.values()) and env.agents == []


def test_actions_for_an_unknown_agent_are_refused():
    """``{"batery": ...}`` was ignored: every agent kept its last inputs, and the step counted."""
    env = CosimParallelEnv(SITE, TWO_HOURS)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="unknown agent.* batery; agents: battery, workload"):
        env.step({"batery": np.array([0.5], np.float32), "workload": np.array([0])})
    env.step({"battery": np.array([0.5], np.float32)})  # an agent left out keeps its inputs, as documented
    env.close()


@pytest.mark.parametrize("agent", ["battery", "workload"])
def test_a_non_finite_action_of_any_agent_is_refused_before_any_is_applied(agent):
    """As in the single-agent env: NaN is refused (it was clipped to the lowest bound or index 0)."""
    env = CosimParallelEnv(SITE, TWO_HOURS)
    env.reset(seed=0)
    actions = {"battery": np.array([0.5], np.float32), "workload": np.array([1.0])}
    actions[agent] = np.array([np.nan])
    with pytest.raises(ValueError, match=r"non-finite value\(s\): .* = nan; nothing was applied"):
        env.step(actions)
    _, _, _, _, infos = env.step({"battery": np.array([0.5], np.float32), "workload": np.array([1])})
    assert infos["battery"]["time_s"] == 900  # the refused step did not count
    env.close()
