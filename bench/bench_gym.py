"""Benchmark the Gymnasium env: env steps per second in one process and under AsyncVectorEnv.

Run by hand (never in the tests)::

    .venv/bin/python bench/bench_gym.py                      # rl_site.toml, 1500 env steps each
    .venv/bin/python bench/bench_gym.py --scenario scenarios/rl_voltage.toml --steps 600

One env step is one decision (``decision_s`` of the scenario: 15 minutes of rl_site, three
5-minute scenario steps and their reward terms). Random actions, episodes reset as they end
(the reset, a fresh Session, is inside the timing). Printed: the plain env in this process,
then ``AsyncVectorEnv`` with 1 and 2 worker processes (steps counted over all envs), each
after a warm-up (imports, the first power flow's JIT, data caches), and the load average
before and after (other jobs on the 2 cores lower the figures).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np
from gymnasium.vector import AsyncVectorEnv

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cosim.gym import CosimEnv  # noqa: E402


def plain(scenario: Path, steps: int) -> float:
    """Env steps per second of one env in this process."""
    env = CosimEnv(scenario)
    env.reset(seed=0)
    for _ in range(20):  # warm-up
        env.step(env.action_space.sample())
    env.reset(seed=1)
    started = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    rate = steps / (time.perf_counter() - started)
    env.close()
    return rate


def vector(scenario: Path, steps: int, n_envs: int) -> float:
    """Env steps per second (summed over the envs) of ``n_envs`` envs in as many processes."""
    envs = AsyncVectorEnv([functools.partial(CosimEnv, scenario)] * n_envs)
    envs.reset(seed=list(range(n_envs)))
    for _ in range(20):  # warm-up in every worker
        envs.step(envs.action_space.sample())
    rounds = max(1, steps // n_envs)
    started = time.perf_counter()
    for _ in range(rounds):
        envs.step(envs.action_space.sample())  # ended episodes reset themselves
    rate = rounds * n_envs / (time.perf_counter() - started)
    envs.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "rl_site.toml")
    parser.add_argument("--steps", type=int, default=1500, help="env steps timed per configuration")
    args = parser.parse_args()
    print(f"{args.scenario.name}, {args.steps} env steps each, load average before {os.getloadavg()[0]:.2f}")
    print(f"  one env, this process:       {plain(args.scenario, args.steps):7.1f} env steps/s")
    for n in (1, 2):
        print(f"  AsyncVectorEnv, {n} process{'es' if n > 1 else '  '}: {vector(args.scenario, args.steps, n):7.1f} "
              f"env steps/s")
    print(f"load average after {os.getloadavg()[0]:.2f} (1 min), {np.round(os.getloadavg(), 2).tolist()}")


if __name__ == "__main__":
    main()
