"""``make_vector_env``: N copies of a scenario's env in this process, as a Gymnasium vector env.

::

    from cosim.gym.vector import make_vector_env

    envs = make_vector_env("scenarios/rl_site.toml", 8)       # gymnasium.vector.SyncVectorEnv
    obs, info = envs.reset(seed=0)                             # copy i seeded 0 + i
    obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())

The scenario is read and validated once and shared by the copies, with the simulators a reset
copies instead of building (:mod:`cosim.gym.snapshot`); the reward guards run once (on the
first copy). A copy whose episode ends resets itself on the next ``step``
(Gymnasium's ``AutoresetMode.NEXT_STEP``: that step returns the new episode's first
observation with reward 0), drawing its next seed and start day from its own generator, as
``CosimEnv.reset()`` without a seed does; so copy ``i`` of a vector env seeded ``s`` gives the
same observations and rewards as a lone ``CosimEnv`` reset with seed ``s + i`` and stepped
with the same actions. The copies step one after another: the rate in env steps per second
is the one env's (for several cores, ``gymnasium.vector.AsyncVectorEnv`` over ``CosimEnv``).
A step or reset of the vector env holds the simulators' one BLAS thread (:mod:`cosim.run.blas`)
for all its copies, instead of each copy setting and undoing it at each scenario step.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from gymnasium.vector import AutoresetMode, SyncVectorEnv

from cosim.gym.env import CosimEnv, load_direct
from cosim.run import blas
from cosim.scenario import Scenario


class CosimVectorEnv(SyncVectorEnv):
    """A SyncVectorEnv whose steps and resets run on one BLAS thread throughout (the copies'
    simulators run on one anyway; the env layer between them calls no BLAS routine: its
    observations and rewards are element-wise numbers), set once per call rather than at every
    scenario step of every copy (~25 µs each time)."""

    def step(self, actions):
        with blas.one_thread():
            return super().step(actions)

    def reset(self, *, seed=None, options=None):
        with blas.one_thread():
            return super().reset(seed=seed, options=options)


def make_vector_env(scenario: str | Path | Scenario, n_envs: int, overrides: dict[str, Any] | None = None,
                    agent: dict[str, Any] | None = None, **keys: Any) -> CosimVectorEnv:
    """``n_envs`` copies of ``CosimEnv(scenario, overrides, agent, **keys)`` in one SyncVectorEnv
    (:class:`CosimVectorEnv`).

    Raises:
        ValueError: ``n_envs`` below 1.
        ScenarioError: a problem with the scenario or its ``[agent]`` section.
    """
    if int(n_envs) < 1:
        raise ValueError(f"make_vector_env: n_envs = {n_envs!r}; give 1 or more copies")
    scn = load_direct(scenario, overrides)
    keys.pop("guards", None)
    first = CosimEnv(scn, agent=agent, guards=True, **keys)
    makers = [lambda: first] + [functools.partial(CosimEnv, scn, agent=agent, guards=False, **keys)] * (int(n_envs) - 1)
    return CosimVectorEnv(makers, autoreset_mode=AutoresetMode.NEXT_STEP)
