"""Reward guards (cosim/gym/guards.py): a weighted term no action can move, an action whose cost
no weighted term prices; at env build (a RewardGuardWarning) and at validation (scn.warnings).

The shipped cases of issue 31: rl_site priced a deferred GPU-hour at 0.05 $ (pausing training
nearly free), rl_voltage did not price SLO loss at all; both are warned about with those
weights and not with the shipped ones."""

from __future__ import annotations

import warnings
from pathlib import Path

from cosim.gym import CosimEnv, CosimParallelEnv, check_scenario
from cosim.gym.guards import RewardGuardWarning, _service_texts
from cosim.gym.spec import ActionSpec
from cosim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "scenarios" / "rl_site.toml"
VOLTAGE = ROOT / "scenarios" / "rl_voltage.toml"
TWO_HOURS = {"scenario.duration_s": 7200}
BATTERY = [{"input": "bess.p_set_mw"}]
PAUSE = [{"input": "campus.pause_flexible_frac"}]


def guard_warnings(build) -> list[str]:
    """The RewardGuardWarning texts given while ``build()`` runs."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = build()
    env.close()
    return [str(w.message) for w in caught if issubclass(w.category, RewardGuardWarning)]


def test_a_weighted_term_no_action_reaches_is_warned_about():
    """rl_site's battery reaches its simulator, the grid and the dispatcher, never the datacenter."""
    texts = guard_warnings(lambda: CosimEnv(SITE, TWO_HOURS, actions=BATTERY,
                                            reward={"energy_cost_usd": -1.0, "slo_loss_h": -256.0}))
    assert len(texts) == 1
    assert texts[0].startswith("agent.reward.slo_loss_h = -256: no action can move this term")
    assert "campus.slo_attainment_frac" in texts[0]


def test_a_term_an_action_reaches_is_not_warned_about():
    texts = guard_warnings(lambda: CosimEnv(SITE, TWO_HOURS, actions=BATTERY + PAUSE,
                                            reward={"energy_cost_usd": -1.0, "slo_loss_h": -256.0,
                                                    "delay_gpu_h": -2.0}))
    assert texts == []


def test_an_action_no_weighted_term_sees_is_warned_about():
    texts = guard_warnings(lambda: CosimEnv(SITE, TWO_HOURS, actions=BATTERY, reward={"slo_loss_h": -256.0}))
    assert any(t.startswith("agent.actions[0] (bess.p_set_mw): no weighted reward term") for t in texts)


def test_pausing_training_at_five_cents_a_gpu_hour_is_nearly_free():
    """Issue 31's rl_site weights: 0.05 $/GPU-h is under the 0.2 $/GPU-h floor (10 % of 2 $/H100-h)."""
    texts = guard_warnings(lambda: CosimEnv(SITE, TWO_HOURS, reward={"energy_cost_usd": -1.0, "carbon_t": -190.0,
                                                                     "slo_loss_h": -500.0, "delay_gpu_h": -0.05}))
    assert len(texts) == 1
    assert texts[0].startswith("agent.actions[1] (campus.pause_flexible_frac at 1, idle 0, first 2 h): gives up "
                               "service (delay_gpu_h +")
    assert "0.05 $/GPU-h, below the 0.2 $/GPU-h floor" in texts[0]


def test_the_shipped_environments_pass_the_guards():
    assert guard_warnings(lambda: CosimEnv(SITE, TWO_HOURS)) == []
    assert guard_warnings(lambda: CosimEnv(VOLTAGE, TWO_HOURS)) == []
    assert guard_warnings(lambda: CosimParallelEnv(SITE, TWO_HOURS)) == []


def test_a_cap_that_costs_slo_with_slo_unpriced_is_warned_about():
    """Issue 31's rl_voltage weights (no SLO term): capping the GPUs at 200 W loses SLO for free."""
    texts = guard_warnings(lambda: CosimEnv(VOLTAGE, TWO_HOURS, reward={"voltage_violation_pu_s": -1.0,
                                                                        "n_tokens": 1e-7, "delay_gpu_h": -0.01}))
    assert len(texts) == 1
    assert texts[0].startswith("agent.actions[0] (campus.p_cap_w at 200, idle 700, first 2 h): gives up service "
                               "(slo_loss_h +")
    assert "the reward does not price it (agent.reward.slo_loss_h = 0 or absent)" in texts[0]


def test_validation_keeps_the_findings_in_the_scenarios_warnings():
    scn = load_scenario(SITE, {**TWO_HOURS, "agent.reward.delay_gpu_h": -0.05,
                               "agents.workload.reward.delay_gpu_h": -0.05})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RewardGuardWarning)  # validation records, the CLI prints
        check_scenario(scn)
    found = [t for t in scn.warnings if "campus.pause_flexible_frac" in t]
    assert len(found) == 2 and "agents.workload.actions[0]" in found[1]  # [agent] and [agents.workload]
    clean = load_scenario(SITE, TWO_HOURS)
    check_scenario(clean)
    assert not [t for t in clean.warnings if "reward" in t]


CAP = ActionSpec("campus", "p_cap_w", 200.0, 700.0, None, 700.0)


def test_a_reward_that_pays_for_lost_service_is_warned_about():
    texts = _service_texts("agent", 0, CAP, {"voltage_violation_pu_s": -1.0, "delay_gpu_h": 0.5},
                           {"voltage_violation_pu_s": -40.0, "delay_gpu_h": 100.0})
    assert len(texts) == 1 and "the reward pays for the loss (delay_gpu_h = 0.5" in texts[0]


def test_a_service_cost_under_one_percent_of_the_gain_is_negligible():
    weights = {"voltage_violation_pu_s": -1.0, "delay_gpu_h": -0.001}
    texts = _service_texts("agent", 0, CAP, weights, {"voltage_violation_pu_s": -40.0, "delay_gpu_h": 100.0})
    assert len(texts) == 1 and "under 1% of what it gains (voltage_violation_pu_s: +40)" in texts[0]
    weights["delay_gpu_h"] = -0.01  # 1.0 against 40: 2.5 %, priced
    assert _service_texts("agent", 0, CAP, weights, {"voltage_violation_pu_s": -40.0, "delay_gpu_h": 100.0}) == []
