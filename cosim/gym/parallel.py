"""``CosimParallelEnv``: several agents over one scenario (PettingZoo ``ParallelEnv``).

Each ``[agents.<name>]`` section is one agent with its own actions, observations and reward
weights (same keys as ``[agent]``); the episode keys (``decision_s``, ``start_window``,
``max_decisions``, ``record``) come from ``[agent]`` and are shared, since the agents decide
together. All agents act at once each decision; an input belongs to one agent. The reward
terms are computed once per decision and weighted per agent; every agent's info carries all
of them, unweighted. An agent missing from the actions of a step keeps its last inputs.

::

    from cosim.gym import CosimParallelEnv

    env = CosimParallelEnv("scenarios/rl_site.toml")
    obs, infos = env.reset(seed=1)
    actions = {a: env.action_space(a).sample() for a in env.agents}
    obs, rewards, terminations, truncations, infos = env.step(actions)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gymnasium.utils import seeding
from pettingzoo import ParallelEnv

from cosim.gym import guards as reward_guards
from cosim.gym import spec as specs
from cosim.gym.actions import Actuator
from cosim.gym.env import SEED_MAX, draw_start, load_direct, observation_box
from cosim.gym.episode import Episode
from cosim.gym.observations import Observer
from cosim.scenario import Scenario


class CosimParallelEnv(ParallelEnv):
    """A scenario's ``[agents.<name>]`` as a PettingZoo parallel environment (module docstring).

    Args:
        scenario: a scenario file (or a validated Scenario).
        overrides: dotted scenario keys replaced before validation (as ``--set``).
        agents: ``{name: table}`` replacing the file's ``[agents.<name>]`` sections.
        apply_actions: False ignores the actions (the scenario's own controllers act).
        out_dir: where run folders go when ``record`` is on.
        report: also write ``report.html`` into each run folder.
        guards: run the reward guards (:mod:`cosim.gym.guards`) and warn; False skips them.
        **keys: episode keys replacing ``[agent]``'s (``decision_s=900``, ``record=True``, ...).

    Raises:
        ScenarioError: a problem with the scenario or its agent sections.
    """

    metadata = {"render_modes": [], "name": "cosim_parallel_v0"}

    def __init__(self, scenario: str | Path | Scenario, overrides: dict[str, Any] | None = None,
                 agents: dict[str, dict[str, Any]] | None = None, *, apply_actions: bool = True,
                 out_dir: str | Path = "runs", report: bool = False, guards: bool = True, **keys: Any):
        self.scn = load_direct(scenario, overrides)
        self.episode_spec, self.agent_specs = specs.parallel_agents(self.scn, agents, keys)
        if guards:
            reward_guards.warn(self.scn, reward_guards.reward_guards(
                self.scn, self.episode_spec, {f"agents.{n}": a for n, a in self.agent_specs.items()}))
        self.apply_actions = apply_actions
        self._episode = Episode(self.scn, self.episode_spec, out_dir, report)
        self._actuators = {n: Actuator(s.actions) for n, s in self.agent_specs.items()}
        self._observers = {n: Observer(s) for n, s in self.agent_specs.items()}
        self._action_spaces = {n: a.space for n, a in self._actuators.items()}
        self._observation_spaces = {n: observation_box(len(o.names)) for n, o in self._observers.items()}
        self.possible_agents = list(self.agent_specs)
        self.agents: list[str] = []
        self.observation_names = {n: o.names for n, o in self._observers.items()}
        self.render_mode = None
        self._rng, _ = seeding.np_random()

    def observation_space(self, agent: str):
        return self._observation_spaces[agent]

    def action_space(self, agent: str):
        return self._action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._rng, _ = seeding.np_random(seed)
        scenario_seed = seed if seed is not None else int(self._rng.integers(SEED_MAX))
        self._episode.start(scenario_seed, draw_start(self.scn, self.episode_spec, self._rng, options))
        self.agents = list(self.possible_agents)
        for observer in self._observers.values():
            observer.reset(scenario_seed)
        info = {"seed": scenario_seed, "start_utc": self._episode.utc.isoformat()}
        return self._observe(), {a: dict(info) for a in self.agents}

    def step(self, actions: dict[str, Any]):
        unknown = [str(a) for a in actions if a not in self.possible_agents]
        if unknown:  # a misspelt agent would keep the real one's last inputs without a word
            raise ValueError(f"actions for unknown agent(s) {', '.join(unknown)}; agents: "
                             f"{', '.join(self.possible_agents)}")
        settings, clipped = [], {}
        for agent in self.agents:
            if agent in actions:
                found, clipped[agent] = self._actuators[agent].settings(actions[agent])
                settings += found
        terms = self._episode.decide(settings if self.apply_actions else [])
        observations = self._observe()
        rewards = {a: float(sum(w * terms[t] for t, w in self.agent_specs[a].reward.items())) for a in self.agents}
        done, cut = self._episode.terminated, self._episode.truncated
        infos = {a: {"terms": dict(terms), "time_s": self._episode.t_s, "n_actions_clipped": clipped.get(a, 0)}
                 for a in self.agents}
        terminations = {a: done for a in self.agents}
        truncations = {a: cut for a in self.agents}
        if done or cut:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def _observe(self) -> dict[str, Any]:
        return {a: self._observers[a].observe(self._episode.engine, self._episode.utc) for a in self.agents}

    def render(self) -> None:
        return None

    def close(self) -> None:
        """Close the episode's Session (writing its run folder when ``record`` is on)."""
        self._episode.close()

    def idle_actions(self) -> dict[str, Any]:
        """Every agent's do-nothing action."""
        return {n: a.idle() for n, a in self._actuators.items()}

    @property
    def run_dirs(self) -> list[Path]:
        return list(self._episode.run_dirs)
