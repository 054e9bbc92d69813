"""CosimEnv (cosim/gym/env.py, episode.py, rewards.py): Gymnasium's checker, seeding, clipping,
and the reward terms summed over an episode against the KPIs of the recorded run.

Every test runs scenarios/rl_site.toml (or rl_voltage.toml) cut to a few hours."""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AsyncVectorEnv

from cosim.errors import ScenarioError
from cosim.gym import ActionClippedWarning, CosimEnv
from cosim.gym.env import UnknownResetOptionWarning
from cosim.gym.rewards import TERMS

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "scenarios" / "rl_site.toml"
VOLTAGE = ROOT / "scenarios" / "rl_voltage.toml"
TWO_HOURS = {"scenario.duration_s": 7200}


def episode(env: CosimEnv, seed: int, actions) -> tuple[np.ndarray, list[float], dict[str, float]]:
    """Run one episode with the given actions (cycled); observations, rewards and summed terms."""
    obs, _ = env.reset(seed=seed)
    seen, rewards, terms = [obs], [], {}
    for i in range(10_000):
        obs, reward, terminated, truncated, info = env.step(actions[i % len(actions)])
        seen.append(obs)
        rewards.append(reward)
        for name, value in info["terms"].items():
            terms[name] = terms.get(name, 0.0) + value
        if terminated or truncated:
            break
    return np.array(seen), rewards, terms


def test_gymnasium_env_checker_passes():
    env = CosimEnv(SITE, TWO_HOURS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # unbounded observation Box, no render modes: by design
        check_env(env, skip_render_check=True)
    env.close()


def test_spaces_and_names_follow_the_section():
    env = CosimEnv(SITE, TWO_HOURS)
    assert env.action_names == ["bess.p_set_mw", "campus.pause_flexible_frac"]
    np.testing.assert_array_equal(env.action_space.low, [-1.0, 0.0])  # the battery's limits, from its adapter
    np.testing.assert_array_equal(env.action_space.high, [1.0, 1.0])
    assert env.observation_names[:6] == ["bess.soc_frac", "campus.p_mw", "campus.n_jobs_paused", "pv.p_mw",
                                         "tou.price_usd_mwh", "grid_ci.ci_g_kwh"]
    assert env.observation_names[6:10] == ["time.hour_sin", "time.hour_cos", "time.dow_sin", "time.dow_cos"]
    assert env.observation_names[10] == "tou.price_usd_mwh@+0s"
    assert env.observation_space.shape == (len(env.observation_names),)
    env.close()


def test_an_episode_ends_terminated_at_the_scenario_end_and_truncated_only_by_the_limit():
    env = CosimEnv(SITE, TWO_HOURS)
    env.reset(seed=0)
    flags = [env.step(env.idle_action())[2:4] for _ in range(8)]  # 2 h of 15-minute decisions
    assert flags[-1] == (True, False) and all(f == (False, False) for f in flags[:-1])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(env.idle_action())
    limited = CosimEnv(SITE, TWO_HOURS, max_decisions=3)
    limited.reset(seed=0)
    flags = [limited.step(limited.idle_action())[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_same_seed_same_episode_other_seed_other_episode():
    actions = [np.array([0.8, 0.0], np.float32), np.array([-0.6, 0.7], np.float32)]
    first = episode(CosimEnv(SITE, TWO_HOURS), 11, actions)
    again = episode(CosimEnv(SITE, TWO_HOURS), 11, actions)
    other = episode(CosimEnv(SITE, TWO_HOURS), 12, actions)
    np.testing.assert_array_equal(first[0], again[0])
    assert first[1] == again[1] and first[2] == again[2]
    assert first[1] != other[1]  # another seed draws other training jobs


def test_reset_draws_its_start_day_from_the_window_and_takes_a_given_one():
    env = CosimEnv(SITE, TWO_HOURS)
    starts = {env.reset(seed=s)[1]["start_utc"] for s in range(6)}
    assert len(starts) > 1
    assert all("2024-06-03" <= s[:10] <= "2024-07-28" and s[11:19] == "04:00:00" for s in starts)
    assert env.reset(seed=0, options={"start": "2024-08-05"})[1]["start_utc"] == "2024-08-05T04:00:00+00:00"


@pytest.mark.parametrize("start", ["2024-08-05T06:00:00Z", "2024-08-05 06:00", "2024-08-05Tgarbage",
                                   pd.Timestamp("2024-08-05T06:00:00Z").to_pydatetime()])
def test_a_start_at_another_time_of_day_is_refused_not_moved(start):
    """rl_site's episodes start at 04:00 UTC (its scenario's time of day); a start at 06:00 was
    silently moved to 04:00 of that date, and text after the date was never read."""
    env = CosimEnv(SITE, TWO_HOURS)
    with pytest.raises(ScenarioError, match=r"start = .*(own time of day \(04:00 UTC\); give the date alone|give a date)"):
        env.reset(seed=0, options={"start": start})
    at_its_time = {"start": "2024-08-05T04:00:00Z"}
    assert env.reset(seed=0, options=at_its_time)[1]["start_utc"] == "2024-08-05T04:00:00+00:00"


def test_reset_names_options_it_does_not_know():
    """A misspelt option (``strt``) was ignored: the episode silently started on a random day (now
    a warning: PettingZoo's API test passes options of its own); a start given as a plain string
    gave AttributeError from inside ``reset``."""
    env = CosimEnv(SITE, TWO_HOURS)
    with pytest.warns(UnknownResetOptionWarning, match=r"unknown option\(s\) strt ignored; known: start"):
        env.reset(seed=0, options={"strt": "2024-08-05"})
    with pytest.raises(ScenarioError, match=r"reset\(options=...\) = '2024-08-05': give a dict"):
        env.reset(seed=0, options="2024-08-05")
    assert env.reset(seed=0, options={})[1]["start_utc"] == env.reset(seed=0)[1]["start_utc"]


def test_an_action_that_is_not_numbers_names_what_the_env_takes():
    """A dict or text gave numpy's or float()'s own error (TypeError: float() argument must be ...)."""
    env = CosimEnv(SITE, TWO_HOURS)
    env.reset(seed=0)
    for action in ({"bess.p_set_mw": 0.5}, ["a", "b"]):
        with pytest.raises(ValueError, match=r"is not an array of numbers; this env takes \(2,\) \(bess.p_set_mw, "):
            env.step(action)
    env.step(np.array([0.5, 0.0], np.float32))  # the episode goes on


def test_two_recording_envs_in_one_process_keep_their_whole_runs(tmp_path):
    """As a DummyVecEnv holds them: a reset of one closed every recorder of the process, so the
    other's run folder lost every row after it and still said ``ok``."""
    envs = [CosimEnv(SITE, {"scenario.duration_s": 3600}, record=True, out_dir=tmp_path / f"env{k}") for k in (0, 1)]
    for env in envs:
        env.reset(seed=0)
    for _ in range(4):  # the hour: 4 decisions of 15 min
        envs[1].step(envs[1].idle_action())
        envs[0].reset(seed=1)  # closes env 0's episode, mid-run of env 1's
    envs[0].close()
    envs[1].close()
    (run_dir,) = envs[1].run_dirs
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "ok" and meta["steps"] == 12  # 3600 s at 300 s


def test_out_of_bounds_actions_are_clipped_with_a_warning():
    env = CosimEnv(SITE, TWO_HOURS, observations=["bess.p_mw", "campus.n_jobs_paused"], time_features=False,
                   forecasts=[])
    env.reset(seed=0)
    with pytest.warns(ActionClippedWarning, match=r"bess.p_set_mw = 5 \(allowed \[-1, 1\]\).*pause_flexible_frac = -2"):
        obs, _, _, _, info = env.step(np.array([5.0, -2.0], np.float32))
    assert info["n_actions_clipped"] == 2
    assert obs[0] == pytest.approx(1.0)  # the battery charged at its 1 MW limit, not 5
    assert obs[1] == 0.0  # a pause fraction of -2 is no pause
    with warnings.catch_warnings():
        warnings.simplefilter("error", ActionClippedWarning)
        _, _, _, _, info = env.step(np.array([-0.5, 0.0], np.float32))  # inside: no warning
    assert info["n_actions_clipped"] == 0


def test_the_action_bounds_cannot_be_edited_in_place():
    """The env reads its action bounds once: an edit of ``action_space.low``/``high`` (or a discrete
    space's ``nvec``) in place afterwards was ignored without a word; now it raises. A new space
    (``env.action_space = Box(...)``) is the user's own, as before."""
    env = CosimEnv(SITE, TWO_HOURS, observations=["bess.p_mw"], time_features=False, forecasts=[])
    for bounds in (env.action_space.low, env.action_space.high):
        with pytest.raises(ValueError, match="read-only"):
            bounds[0] = 0.0
    assert env.action_space.contains(env.action_space.sample())
    discrete = CosimEnv(SITE, TWO_HOURS, observations=["bess.p_mw"], time_features=False, forecasts=[],
                        actions=[{"input": "campus.pause_flexible_frac", "values": [0.0, 0.5, 1.0]}])
    with pytest.raises(ValueError, match="read-only"):
        discrete.action_space.nvec[0] = 2


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("position", [0, 1])
def test_a_non_finite_action_is_refused_not_clipped(bad, position):
    """A NaN action was clipped to the lowest bound with only a warning: the battery charged at
    -1 MW. Now the step raises naming the coordinate, nothing is applied and the episode goes on."""
    env = CosimEnv(SITE, TWO_HOURS, observations=["bess.p_mw"], time_features=False, forecasts=[])
    env.reset(seed=0)
    action = np.array([0.5, 0.0], np.float32)
    action[position] = bad
    name = ["bess.p_set_mw", "campus.pause_flexible_frac"][position]
    with pytest.raises(ValueError, match=rf"non-finite value\(s\): {name} = {bad}; nothing was applied"):
        env.step(action)
    _, _, _, _, info = env.step(np.array([0.5, 0.0], np.float32))
    assert info["time_s"] == 900 and info["n_actions_clipped"] == 0  # the refused step did not count
    env.close()


def test_reward_is_the_weighted_sum_of_the_terms_in_info():
    env = CosimEnv(SITE, TWO_HOURS)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(env.action_space.sample())
    assert set(info["terms"]) == set(env.term_names) and "energy_cost_usd" in info["terms"]
    assert reward == pytest.approx(sum(w * info["terms"][t] for t, w in env.reward_weights.items()))


def kpi_of(kpis: dict, ts: pd.DataFrame, term: str) -> float:
    """The KPI of the recorded run that a term's episode sum must equal (cosim/gym/rewards.py's table)."""
    acc, dc = kpis.get("accounting", {}), kpis["datacenter"]["campus"]
    dt_h = (ts["time_utc"].iloc[1] - ts["time_utc"].iloc[0]).total_seconds() / 3600.0
    return {
        "energy_cost_usd": lambda: acc["cost"]["energy_usd"],
        "carbon_t": lambda: acc["carbon"]["grid_t"],
        "import_peak_mw": lambda: acc["site"]["import_peak_mw"],
        "battery_throughput_mwh": lambda: acc["storage"]["bess"]["charged_mwh"] + acc["storage"]["bess"]["discharged_mwh"],
        "voltage_violation_pu_s": lambda: kpis["feeder"]["voltage_violation_pu_s"],
        "line_overload_s": lambda: kpis["feeder"]["line_overload_s"],
        "n_tokens": lambda: dc["n_tokens"],
        "delay_gpu_h": lambda: dc["delay_gpu_h"],
        "slo_loss_h": lambda: (1.0 - dc["slo_attainment_mean_frac"]) * ts["campus.slo_attainment_frac"].notna().sum() * dt_h,
    }[term]()


@pytest.mark.parametrize(("scenario", "n_terms"), [(SITE, 9), (VOLTAGE, 6)], ids=["rl_site", "rl_voltage"])
def test_reward_terms_summed_over_an_episode_equal_the_recorded_runs_kpis(scenario, n_terms, tmp_path):
    env = CosimEnv(scenario, {"scenario.duration_s": 6 * 3600}, record=True, out_dir=tmp_path)
    env.action_space.seed(4)
    _, _, terms = episode(env, 4, [env.action_space.sample() for _ in range(8)])
    env.close()
    (run_dir,) = env.run_dirs
    kpis = json.loads((run_dir / "kpis.json").read_text())
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "ok" and meta["seed"] == 4
    ts = pd.read_parquet(run_dir / "timeseries.parquet")
    assert len(terms) == n_terms
    for term, value in terms.items():
        assert value == pytest.approx(kpi_of(kpis, ts, term), rel=1e-9, abs=1e-8), term  # kpis.json keeps 9 decimals
    busy = ("energy_cost_usd", "carbon_t", "battery_throughput_mwh") if scenario == SITE else ("voltage_violation_pu_s",)
    assert all(terms[t] > 0 for t in (*busy, "n_tokens", "import_peak_mw"))  # sums of something, not of zeros


def test_every_documented_term_is_registered():
    doc = (ROOT / "cosim" / "gym" / "rewards.py").read_text()
    assert all(f"``{name}``" in doc for name in TERMS)
    assert len(TERMS) == 10


def test_the_rule_baseline_lets_the_scenarios_controller_act():
    idle = CosimEnv(SITE, TWO_HOURS)
    rule = CosimEnv(SITE, TWO_HOURS, apply_actions=False)
    terms = [episode(e, 0, [e.idle_action()])[2] for e in (idle, rule)]
    assert terms[0]["battery_throughput_mwh"] == 0.0  # do-nothing: the battery held at 0 MW
    assert terms[1]["battery_throughput_mwh"] > 0.1  # rule: battery_dispatch moves it


def test_async_vector_env_runs_two_processes():
    make = functools.partial(CosimEnv, SITE, {"scenario.duration_s": 3600})
    envs = AsyncVectorEnv([make, make])
    try:
        obs, infos = envs.reset(seed=[1, 2])
        assert obs.shape == (2, envs.single_observation_space.shape[0])
        for _ in range(6):  # 4 decisions per episode: the envs reset themselves and go on
            obs, rewards, terminated, truncated, infos = envs.step(envs.action_space.sample())
            assert np.isfinite(obs).all() and np.isfinite(rewards).all()
        assert "terms" in infos
    finally:
        envs.close()
