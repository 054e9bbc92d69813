"""A reset takes set-up copies of the simulators that allow it (cosim/gym/snapshot.py): the steps
after such a reset equal, to the bit, those of a fresh env reset with the same seed and start,
also when the copy was set up under another seed and another start day."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from cosim.gym import CosimEnv
from cosim.gym import snapshot
from cosim.gym.env import load_direct

SITE = Path(__file__).resolve().parents[2] / "scenarios" / "rl_site.toml"
TWO_HOURS = {"scenario.duration_s": 7200}  # 8 decisions of 15 min


def steps(env: CosimEnv, seed: int, start: str, n: int = 8) -> dict[str, np.ndarray]:
    """Observations, rewards and terms of ``n`` decisions after ``reset(seed, start)``, actions fixed."""
    rng = np.random.default_rng(99)
    obs, _ = env.reset(seed=seed, options={"start": start})
    got_obs, rewards, terms = [obs], [], []
    low, high = env.action_space.low, env.action_space.high
    for _ in range(n):
        obs, reward, terminated, truncated, info = env.step((low + rng.random(low.shape) * (high - low)).astype(
            env.action_space.dtype))
        got_obs.append(obs)
        rewards.append(reward)
        terms.append([info["terms"][t] for t in env.term_names])
        if terminated or truncated:
            break
    return {"obs": np.array(got_obs), "reward": np.array(rewards), "terms": np.array(terms)}


def test_a_reset_from_copies_steps_as_a_fresh_env():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scn = load_direct(SITE, TWO_HOURS)
        kept = snapshot.kept_for(scn)
        env = CosimEnv(scn, guards=False)
        steps(env, 3, "2024-06-10", 5)  # sets the grid up (and keeps a copy), then steps it
        assert kept.n_taken == 0
        after = steps(env, 5, "2024-07-02")  # another seed and day: the grid is a copy
        assert kept.n_taken == 1  # the grid (the signals and PV were set up for another day)
        again = steps(env, 5, "2024-07-02")  # copies of the grid, the signals and the PV of that day
        assert kept.n_taken == 1 + 4
        env.close()
        fresh_env = CosimEnv(SITE, TWO_HOURS, guards=False)  # another scenario object: nothing kept
        fresh = steps(fresh_env, 5, "2024-07-02")
        fresh_env.close()
    for key in fresh:
        np.testing.assert_array_equal(after[key], fresh[key], err_msg=key)  # to the bit
        np.testing.assert_array_equal(again[key], fresh[key], err_msg=key)


def test_the_comparison_can_fail():
    """Another seed after the copy gives other rewards (the trajectory depends on the seed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = CosimEnv(SITE, TWO_HOURS, guards=False)
        first = steps(env, 5, "2024-07-02")
        other = steps(env, 6, "2024-07-02")
        env.close()
    assert not np.array_equal(first["terms"], other["terms"])


def test_only_simulators_that_allow_it_are_copied():
    """The datacenter, the tariff, the battery and its controller say nothing (built at every
    reset); the pandapower grid says its set-up depends on the duration only, the signals and
    the PV on the start and the duration."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = CosimEnv(SITE, TWO_HOURS, guards=False)
        env.reset(seed=1)
        engine = env._episode.engine
        said = {sim.sid: sim.obj.built_from() for sim in engine.sims}
        env.reset(seed=2)
        assert env._episode.engine.by_sid["grid"].obj is not engine.by_sid["grid"].obj  # a copy, not the same
        env.close()
    by_start = frozenset({"start_utc", "duration_s"})
    assert said == {"weather": by_start, "carbon": by_start, "tariff": None, "dc": None, "solar": by_start,
                    "storage": None, "ctl": None, "grid": frozenset({"duration_s"})}


class _Said:
    def __init__(self, names):
        self.names = names

    def built_from(self):
        return self.names


class _Engine:
    def __init__(self, obj):
        self.sims = [type("S", (), {"sid": "x", "obj": obj})()]


def test_a_name_outside_the_init_arguments_is_refused():
    scn = load_direct(SITE, TWO_HOURS)
    scn.sims["x"] = scn.sims["grid"]  # a stand-in sim id for the fake engine
    try:
        with pytest.raises(ValueError, match="start_utc, duration_s, seed"):
            snapshot.Kept().keep(scn, _Engine(_Said(frozenset({"weather_file"}))), {})
        kept = snapshot.Kept(max_kept=2)
        kept.keep(scn, _Engine(_Said(frozenset({"seed"}))), {})
        assert len(kept._copies["x"]) == 1 and kept.take(scn)["x"].names == frozenset({"seed"})
    finally:
        del scn.sims["x"]


def test_the_copies_of_a_vector_env_share_what_is_kept():
    from cosim.gym.vector import make_vector_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scn = load_direct(SITE, TWO_HOURS)
        envs = make_vector_env(scn, 2)
        kept = snapshot.kept_for(scn)
        before = kept.n_taken  # (the reward guards' probes of the first copy run episodes too)
        envs.reset(seed=[1, 2], options={"start": "2024-06-20"})
        envs.close()
    assert kept.n_taken - before == 1 + 4  # the first copy the guards' grid; the second the first's grid,
    # weather, carbon and PV of that day


def test_copies_share_the_kept_meta_and_it_is_a_fresh_init_s():
    """A copy handed out shares the kept simulator's ``meta`` (read only after init), and that is what a
    simulator set up anew returns from ``init``: the sharing changes no description mosaik reads."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scn = load_direct(SITE, TWO_HOURS)
        kept = snapshot.kept_for(scn)
        env = CosimEnv(scn, guards=False)
        env.reset(seed=1, options={"start": "2024-06-10"})
        fresh_grid = next(s.obj for s in env._episode.engine.sims if s.sid == "grid")
        env.reset(seed=2, options={"start": "2024-06-10"})
        copied = next(s.obj for s in env._episode.engine.sims if s.sid == "grid")
        env.close()
    stored = next(iter(kept._copies["grid"].values()))
    assert copied is not stored and copied.meta is stored.meta
    assert copied.meta == fresh_grid.meta and copied.meta is not fresh_grid.meta
    assert copied.meta is not type(copied).META  # its own copy from init, not the class's


def test_each_simulator_is_told_the_start_days_once(monkeypatch):
    """The first reset tells every simulator it built the env's start days (the window's 56 and
    the 7 held-out ones, ``prepare_starts``); a later reset tells none again."""
    from cosim.sdk import CosimSim
    from cosim.adapters.pv import PvSim

    told = []
    for cls in (CosimSim, PvSim):
        monkeypatch.setattr(cls, "prepare_starts", lambda self, starts: told.append((self.sid, len(starts))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = CosimEnv(load_direct(SITE, TWO_HOURS), guards=False)
        env.reset(seed=1, options={"start": "2024-06-10"})
        first = sorted(told)
        env.reset(seed=2, options={"start": "2024-07-02"})
        env.close()
    assert first == sorted((sid, 56 + 7) for sid in ("weather", "carbon", "tariff", "dc", "solar", "storage", "ctl",
                                                     "grid"))
    assert sorted(told) == first
