"""make_vector_env (cosim/gym/vector.py): N copies in one process give, copy by copy, what lone
envs give for the same seeds and actions, across the autoreset at an episode's end."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from cosim.gym import CosimEnv
from cosim.gym.vector import make_vector_env

SITE = Path(__file__).resolve().parents[2] / "scenarios" / "rl_site.toml"
ONE_HOUR = {"scenario.duration_s": 3600}  # 4 decisions of 15 min


def test_copies_match_lone_envs_across_autoreset():
    rng = np.random.default_rng(0)
    n, steps = 2, 7  # 4 decisions, the autoreset step, 2 more
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs = make_vector_env(SITE, n, ONE_HOUR)
        actions = [envs.action_space.sample() for _ in range(steps)]
        for a in actions:
            a[:] = envs.single_action_space.low + rng.random(a.shape) * (
                envs.single_action_space.high - envs.single_action_space.low)
        obs, _ = envs.reset(seed=10)
        got_obs, got_rewards, got_done = [obs], [], []
        for a in actions:
            obs, reward, terminated, truncated, _ = envs.step(a)
            got_obs.append(obs)
            got_rewards.append(reward)
            got_done.append(terminated | truncated)
        envs.close()
        for i in range(n):
            env = CosimEnv(SITE, ONE_HOUR, guards=False)
            obs, _ = env.reset(seed=10 + i)
            want_obs, want_rewards, done = [obs], [], False
            for a in actions:
                if done:  # NEXT_STEP autoreset: this step resets, reward 0
                    obs, _ = env.reset()
                    reward, done = 0.0, False
                else:
                    obs, reward, terminated, truncated, _ = env.step(a[i])
                    done = terminated or truncated
                want_obs.append(obs)
                want_rewards.append(reward)
            env.close()
            np.testing.assert_array_equal(np.array(got_obs)[:, i], np.array(want_obs))
            np.testing.assert_array_equal(np.array(got_rewards)[:, i], np.array(want_rewards, dtype=float))
    assert np.array(got_done)[3].all() and not np.array(got_done)[4].any()  # the end, then the new episode


def test_no_copies_is_refused():
    with pytest.raises(ValueError, match="n_envs"):
        make_vector_env(SITE, 0)


def test_a_vector_step_sets_the_blas_limit_once(monkeypatch):
    """A step of all the copies holds one BLAS thread throughout: the limit is set once, not at every
    copy's decision (a plain SyncVectorEnv over the same copies sets it for each copy)."""
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    from cosim.run import blas

    set_limits = []
    limit = blas._limit
    monkeypatch.setattr(blas, "_limit", lambda: set_limits.append(1) or limit())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs = make_vector_env(SITE, 2, ONE_HOUR)
        envs.reset(seed=3)
        set_limits.clear()
        envs.step(envs.action_space.sample())
        assert len(set_limits) == 1
        plain = SyncVectorEnv(envs.env_fns, autoreset_mode=AutoresetMode.NEXT_STEP)
        plain.reset(seed=3)
        set_limits.clear()
        plain.step(plain.action_space.sample())
        assert len(set_limits) == 2  # each copy's decision once (Episode.decide holds it over its scenario steps)
        plain.close()
        envs.close()
