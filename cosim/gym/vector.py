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
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from gymnasium.vector import AutoresetMode, SyncVectorEnv

from cosim.gym.env import CosimEnv, load_direct
from cosim.scenario import Scenario


def make_vector_env(scenario: str | Path | Scenario, n_envs: int, overrides: dict[str, Any] | None = None,
                    agent: dict[str, Any] | None = None, **keys: Any) -> SyncVectorEnv:
    """``n_envs`` copies of ``CosimEnv(scenario, overrides, agent, **keys)`` in one SyncVectorEnv.

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
    return SyncVectorEnv(makers, autoreset_mode=AutoresetMode.NEXT_STEP)
