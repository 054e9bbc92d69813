"""Benchmark the Gymnasium env: env steps per second in one process and under AsyncVectorEnv.

Run by hand (never in the tests)::

    .venv/bin/python bench/bench_gym.py                      # rl_site.toml, 1500 env steps each
    .venv/bin/python bench/bench_gym.py --steps 1000 --only-plain   # the reset and the one env only
    .venv/bin/python bench/bench_gym.py --scenario scenarios/rl_voltage.toml --steps 600

One env step is one decision (``decision_s`` of the scenario: 15 minutes of rl_site, three
5-minute scenario steps and their reward terms). Random actions, episodes reset as they end
(the reset is inside the timing). Printed: the time of a reset with the first decision after
it, the plain env in this process, PettingZoo's parallel env (``CosimParallelEnv``, all agents
acting at once: one env step is one decision of every agent), N copies in this process
(``cosim.gym.vector.make_vector_env``, a ``SyncVectorEnv`` with autoreset; steps counted over
all copies), then ``AsyncVectorEnv`` with 1 and 2 worker processes, each after a warm-up
(imports, the first power flow's JIT, data caches), and the load average before and after.
In-process figures come per wall second and per second of this process's CPU time (other jobs
on a shared machine move the first much more than the second).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cosim.gym import CosimEnv  # noqa: E402


def keep_every_start_day(env: CosimEnv) -> None:
    """One reset per day of the start window: every simulator whose set-up copy serves a start day
    has one kept (:mod:`cosim.gym.snapshot`), as after the first episodes of a long training run."""
    from cosim.gym import spec as specs

    if env.episode_spec.start_window is not None:
        for day in specs.window_days(env.episode_spec.start_window):
            env.reset(seed=0, options={"start": day})


def plain(scenario: Path, steps: int, warm: bool = False) -> tuple[float, float]:
    """Env steps per second of one env in this process: per wall second, and per second of this
    process's CPU time (less moved by other jobs on a shared machine). ``warm``: every start day
    kept first (:func:`keep_every_start_day`)."""
    env = CosimEnv(scenario)
    if warm:
        keep_every_start_day(env)
    env.reset(seed=0)
    for _ in range(20):  # warm-up
        env.step(env.action_space.sample())
    env.reset(seed=1)
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    rate, cpu_rate = steps / (time.perf_counter() - started), steps / (time.process_time() - cpu)
    env.close()
    return rate, cpu_rate


def reset_ms(scenario: Path, n: int = 20, warm: bool = False) -> tuple[float, float]:
    """Mean wall and CPU time of a reset (a new seed each, a start day drawn from the window) and the
    first decision after it. [ms]

    ``warm``: every start day kept first (:func:`keep_every_start_day`); otherwise most draws meet a
    day not seen yet."""
    env = CosimEnv(scenario)
    action = env.action_space.sample()
    env.reset(seed=0)
    env.step(action)  # warm-up
    if warm:
        keep_every_start_day(env)
    started, cpu = time.perf_counter(), time.process_time()
    for seed in range(1, n + 1):
        env.reset(seed=seed)
        env.step(action)
    ms, cpu_ms = (time.perf_counter() - started) / n * 1e3, (time.process_time() - cpu) / n * 1e3
    env.close()
    return ms, cpu_ms


def parallel(scenario: Path, steps: int) -> tuple[float, float]:
    """Env steps (decisions of all agents) per wall and per CPU second of PettingZoo's parallel env
    in this process, episodes reset as they end."""
    from cosim.gym.parallel import CosimParallelEnv

    env = CosimParallelEnv(scenario)

    def actions():
        return {agent: env.action_space(agent).sample() for agent in env.possible_agents}

    env.reset(seed=0)
    for _ in range(20):  # warm-up
        env.step(actions())
    env.reset(seed=1)
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        env.step(actions())
        if not env.agents:  # the episode ended
            env.reset()
    rate, cpu_rate = steps / (time.perf_counter() - started), steps / (time.process_time() - cpu)
    env.close()
    return rate, cpu_rate


def in_process(scenario: Path, n_envs: int):
    """N copies in this process: make_vector_env, or a SyncVectorEnv where it does not exist."""
    try:
        from cosim.gym.vector import make_vector_env
    except ImportError:  # an older checkout, for a side-by-side figure
        return SyncVectorEnv([functools.partial(CosimEnv, scenario)] * n_envs)
    return make_vector_env(scenario, n_envs)


def vector(scenario: Path, steps: int, n_envs: int, processes: bool = True) -> tuple[float, float]:
    """Env steps per second (summed over the envs) of ``n_envs`` envs in as many processes
    (or in this one): per wall second, and per CPU second of this process (NaN for processes)."""
    envs = (AsyncVectorEnv([functools.partial(CosimEnv, scenario)] * n_envs) if processes
            else in_process(scenario, n_envs))
    envs.reset(seed=list(range(n_envs)))
    for _ in range(20):  # warm-up in every worker
        envs.step(envs.action_space.sample())
    rounds = max(1, steps // n_envs)
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        envs.step(envs.action_space.sample())  # ended episodes reset themselves
    rate = rounds * n_envs / (time.perf_counter() - started)
    cpu_rate = float("nan") if processes else rounds * n_envs / (time.process_time() - cpu)
    envs.close()
    return rate, cpu_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "rl_site.toml")
    parser.add_argument("--steps", type=int, default=1500, help="env steps timed per configuration")
    parser.add_argument("--only-plain", action="store_true", help="the reset and the one env only")
    args = parser.parse_args()
    print(f"{args.scenario.name}, {args.steps} env steps each, load average before {os.getloadavg()[0]:.2f}")
    ms, cpu_ms = reset_ms(args.scenario)
    print(f"  reset + first decision:      {ms:7.1f} ms      ({cpu_ms:.1f} ms of CPU time)")
    ms, cpu_ms = reset_ms(args.scenario, warm=True)
    print(f"  the same, every start day kept: {ms:4.1f} ms      ({cpu_ms:.1f} ms of CPU time)")
    rate, cpu_rate = plain(args.scenario, args.steps)
    print(f"  one env, this process:       {rate:7.1f} env steps/s ({cpu_rate:.1f} per CPU second)")
    rate, cpu_rate = plain(args.scenario, args.steps, warm=True)
    print(f"  the same, every start day kept: {rate:4.1f} env steps/s ({cpu_rate:.1f} per CPU second)")
    if args.only_plain:
        return
    rate, cpu_rate = parallel(args.scenario, args.steps)
    print(f"  PettingZoo parallel env:     {rate:7.1f} env steps/s ({cpu_rate:.1f} per CPU second)")
    for n in (1, 2, 4, 8):
        rate, cpu_rate = vector(args.scenario, args.steps, n, processes=False)
        print(f"  SyncVectorEnv, {n} copies:     {rate:7.1f} env steps/s ({cpu_rate:.1f} per CPU second)")
    for n in (1, 2):
        rate, _ = vector(args.scenario, args.steps, n)
        print(f"  AsyncVectorEnv, {n} process{'es' if n > 1 else '  '}: {rate:7.1f} env steps/s")
    print(f"load average after {os.getloadavg()[0]:.2f} (1 min), {np.round(os.getloadavg(), 2).tolist()}")


if __name__ == "__main__":
    main()
