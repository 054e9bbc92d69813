"""Baselines and policies evaluated by one code path, on the same held-out days, as one table.

::

    python -m cosim.gym.evaluate scenarios/rl_site.toml [--days 2024-08-05,2024-08-06] [--seed 0]
                                 [--terms slo_loss_h,...] [--baselines do_nothing,rule,random]
                                 [--set KEY=VALUE ...]

Every policy runs the scenario's :class:`~cosim.gym.CosimEnv` on each day (default the
``[agent]`` section's ``eval_starts``) with the same reset seed per day (``seed + i`` on the
i-th day), so all policies meet the same workload and weather. The table gives, per policy,
the mean over the days of the episode return and of each reward term with a weight (plus
``--terms``), each term summed over the episode (so equal to its KPI, :mod:`.rewards`).

Policies: ``do_nothing`` (every action at its ``idle`` value: the knobs as if unset, the
scenario's controllers overridden), ``rule`` (the actions ignored, ``apply_actions=False``:
the scenario's own controllers act, e.g. ``battery_dispatch`` or ``voltage_aware``),
``random`` (uniform samples of the action space, seeded with the day's reset seed, so
reproducible), or any callable ``observation -> action`` (a trained policy). The command
runs the three baselines (``--baselines`` to choose). The reward guards
(:mod:`cosim.gym.guards`) run once, on the first policy's env.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import Problem, ScenarioError
from cosim.gym.env import CosimEnv
from cosim.scenario import parse_set

Policy = Callable[[np.ndarray], Any] | str
BASELINES = ("do_nothing", "rule", "random")


@dataclass
class Evaluation:
    """One policy's episodes: their returns and their reward terms (each summed over its episode)."""

    policy: str
    days: list[str] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    terms: list[dict[str, float]] = field(default_factory=list)

    def mean(self, name: str) -> float:
        """Mean over the days of the return (``"return"``) or of one term."""
        values = self.returns if name == "return" else [t.get(name, float("nan")) for t in self.terms]
        return float(np.mean(values)) if values else float("nan")


def run_episode(env: CosimEnv, policy: Policy, start: date | datetime | str, seed: int) -> tuple[float, dict[str, float]]:
    """One episode from ``start`` with reset seed ``seed``: its return and summed terms."""
    obs, _ = env.reset(seed=seed, options={"start": start})
    env.action_space.seed(seed)
    total, terms = 0.0, {}
    while True:
        if policy == "random":
            action = env.action_space.sample()
        else:
            action = env.idle_action() if isinstance(policy, str) else policy(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        for name, value in info["terms"].items():
            terms[name] = terms.get(name, 0.0) + value
        if terminated or truncated:
            return total, terms


def evaluate(scenario: str | Path, policies: Mapping[str, Policy], days: Sequence[Any] | None = None,
             seed: int = 0, overrides: dict[str, Any] | None = None, **env_keys: Any) -> list[Evaluation]:
    """Every policy on every day (see the module docstring); one :class:`Evaluation` per policy.

    Raises:
        ScenarioError: no policy, a policy name that is not a baseline, or no days to evaluate on.
    """
    if not policies:
        raise ScenarioError("evaluate", [Problem("policies", f"give at least one: {', '.join(BASELINES)} "
                                                             "or a callable", dict(policies))])
    results = []
    for name, policy in policies.items():
        if isinstance(policy, str) and policy not in BASELINES:
            raise ScenarioError("evaluate", [Problem(f"policies.{name}", f"unknown baseline; give one of "
                                                                          f"{', '.join(BASELINES)} or a callable", policy)])
        env = CosimEnv(scenario, overrides, apply_actions=not (isinstance(policy, str) and policy == "rule"),
                       guards=not results, **env_keys)
        starts = list(days) if days else env.eval_starts
        if not starts:
            raise ScenarioError(env.scn.file, [Problem("agent.eval_starts", "no held-out days: give eval_starts in "
                                                                            "[agent] or days to evaluate()")])
        result = Evaluation(name)
        for i, start in enumerate(starts):
            total, terms = run_episode(env, policy, start, seed + i)
            result.days.append(str(start)[:10])
            result.returns.append(total)
            result.terms.append(terms)
        env.close()
        results.append(result)
    return results


def columns_of(scenario: str | Path, extra: Sequence[str] = (), overrides: dict[str, Any] | None = None) -> list[str]:
    """The table's columns: the return, the weighted terms of the ``[agent]`` reward, then ``extra``.

    Raises:
        ScenarioError: a name in ``extra`` that is not a reward term of this scenario (it would
            be a column of NaN).
    """
    env = CosimEnv(scenario, overrides, guards=False)
    problems = [Problem("--terms", f"not a reward term of this scenario; terms: {', '.join(env.term_names)}", name)
                for name in extra if name not in env.term_names]
    if problems:
        raise ScenarioError(scenario, problems)
    weighted = list(env.reward_weights)
    return ["return", *weighted, *(t for t in extra if t not in weighted)]


def table(results: Sequence[Evaluation], columns: Sequence[str]) -> str:
    """A fixed-width table: one row per policy, the mean per day of each column."""
    width = max(12, *(len(c) + 2 for c in columns))
    lines = ["policy".ljust(12) + "".join(c.rjust(width) for c in columns)]
    for r in results:
        lines.append(r.policy.ljust(12) + "".join(f"{r.mean(c):{width}.6g}" for c in columns))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cosim.gym.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--days", default="", help="comma-separated start days (default: [agent] eval_starts)")
    parser.add_argument("--seed", type=int, default=0, help="reset seed of the first day (seed + i on day i)")
    parser.add_argument("--terms", default="", help="more terms to show, comma-separated (e.g. slo_loss_h)")
    parser.add_argument("--baselines", default=",".join(BASELINES), help=f"comma-separated, of {', '.join(BASELINES)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a scenario key")
    args = parser.parse_args(argv)
    try:
        overrides = parse_set(args.set)
        days = [d for d in args.days.split(",") if d] or None
        baselines = [b for b in args.baselines.split(",") if b]
        columns = columns_of(args.scenario, [t for t in args.terms.split(",") if t], overrides)  # before hours of runs
        results = evaluate(args.scenario, {b: b for b in baselines}, days, args.seed, overrides)
    except ScenarioError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"{args.scenario}: mean per episode over {len(results[0].days)} held-out days "
          f"({', '.join(results[0].days)}), seeds {args.seed}..{args.seed + len(results[0].days) - 1}")
    print(table(results, columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
