"""Benchmark the Gymnasium and PettingZoo envs: env steps per CPU second and the reset's CPU time.

Run by hand (never in the tests)::

    .venv/bin/python bench/bench_gym.py                      # rl_site.toml, 1500 env steps, 3 repeats
    .venv/bin/python bench/bench_gym.py --only-plain         # the reset and the one env only
    .venv/bin/python bench/bench_gym.py --split              # ... and where an env step's CPU time goes
    .venv/bin/python bench/bench_gym.py --processes          # also AsyncVectorEnv (wall-clock figures)
    .venv/bin/python bench/bench_gym.py --scenario scenarios/rl_voltage.toml --steps 600
    valgrind --tool=callgrind --instr-atstart=no .venv/bin/python bench/bench_gym.py --callgrind steps
    ... bench/bench_gym.py --callgrind steps --python-fleets     # the datacenter's fleets in Python, to compare
    ... bench/bench_gym.py --callgrind steps --python-scheduler  # the scheduling pass and pause knob in Python

One env step is one decision (``decision_s`` of the scenario: 15 minutes of rl_site, three
5-minute scenario steps and their reward terms). Random actions, episodes reset as they end
(the resets are inside the timing). Printed, each as the range over ``--repeats`` runs:

1. a reset (a new seed each, a start day drawn from the window), in ms of CPU time: with the
   set-up copies of every start day kept (:mod:`cosim.gym.snapshot`, as after the first
   episodes of a training run) and without (most draws meet a day not seen yet);
2. one env (``CosimEnv``), env steps per CPU second, with every start day kept and without;
3. N copies in this process (``cosim.gym.vector.make_vector_env``: a ``SyncVectorEnv`` with
   autoreset; steps counted over all copies), N = 1, 2, 4, 8;
4. PettingZoo's parallel env (``CosimParallelEnv``, all agents acting at once: one env step is
   one decision of every agent).

CPU time (``time.process_time``) rather than wall time: on a shared machine other jobs move
the wall clock far more than this process's CPU time. Each figure comes after a warm-up
(imports, the first power flow's JIT, data caches); the random actions are drawn inside the
timing, as a training loop draws them. ``--split`` times each simulator's steps, the engine and
the gym layer around them, actions drawn beforehand (timers around every call add a little to
each; and the timers around ``DirectEngine._step_sim`` make the engine step through its Python loop, not the C
loop of ``cosim/run/_engine.c`` the other figures take). ``--callgrind steps`` (or ``resets``) under valgrind counts the instructions of two
episodes' env steps (or of two resets): a figure that does not move with the machine's load,
for comparing two checkouts.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from gymnasium.vector import AsyncVectorEnv

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cosim.gym import CosimEnv  # noqa: E402
from cosim.gym import spec as specs  # noqa: E402
from cosim.gym.parallel import CosimParallelEnv  # noqa: E402
from cosim.gym.vector import make_vector_env  # noqa: E402
from cosim.run.runner import versions_line  # noqa: E402

cpu = time.process_time


def keep_every_start_day(env: CosimEnv) -> None:
    """One reset per day of the start window: every simulator whose set-up copy serves a start day
    has one kept (:mod:`cosim.gym.snapshot`), as after the first episodes of a long training run."""
    if env.episode_spec.start_window is not None:
        for day in specs.window_days(env.episode_spec.start_window):
            env.reset(seed=0, options={"start": day})


def reset_ms(scenario: Path, n: int, warm: bool) -> float:
    """CPU time of one reset (a new seed each, a start day drawn from the window). [ms]"""
    env = CosimEnv(scenario, guards=False)
    env.reset(seed=0)
    env.step(env.action_space.sample())  # warm-up
    if warm:
        keep_every_start_day(env)
    started = cpu()
    for seed in range(1, n + 1):
        env.reset(seed=seed)
    ms = (cpu() - started) / n * 1e3
    env.close()
    return ms


def plain(scenario: Path, steps: int, warm: bool) -> float:
    """Env steps per CPU second of one env, episodes reset as they end."""
    env = CosimEnv(scenario, guards=False)
    if warm:
        keep_every_start_day(env)
    env.reset(seed=0)
    for _ in range(20):  # warm-up
        env.step(env.action_space.sample())
    env.reset(seed=1)
    started = cpu()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    rate = steps / (cpu() - started)
    env.close()
    return rate


def parallel(scenario: Path, steps: int) -> float:
    """Env steps (decisions of all agents) per CPU second of PettingZoo's parallel env."""
    env = CosimParallelEnv(scenario, guards=False)

    def actions():
        return {agent: env.action_space(agent).sample() for agent in env.possible_agents}

    env.reset(seed=0)
    for _ in range(20):  # warm-up
        env.step(actions())
    env.reset(seed=1)
    started = cpu()
    for _ in range(steps):
        env.step(actions())
        if not env.agents:  # the episode ended
            env.reset()
    rate = steps / (cpu() - started)
    env.close()
    return rate


def vector(scenario: Path, steps: int, n_envs: int) -> float:
    """Env steps per CPU second, summed over ``n_envs`` copies in this process (autoreset)."""
    envs = make_vector_env(scenario, n_envs)
    envs.reset(seed=list(range(n_envs)))
    for _ in range(20):  # warm-up
        envs.step(envs.action_space.sample())
    rounds = max(1, steps // n_envs)
    started = cpu()
    for _ in range(rounds):
        envs.step(envs.action_space.sample())  # ended episodes reset themselves
    rate = rounds * n_envs / (cpu() - started)
    envs.close()
    return rate


def processes(scenario: Path, steps: int, n_envs: int) -> float:
    """Env steps per wall second of ``n_envs`` envs in as many worker processes."""
    envs = AsyncVectorEnv([functools.partial(CosimEnv, scenario)] * n_envs)
    envs.reset(seed=list(range(n_envs)))
    for _ in range(20):
        envs.step(envs.action_space.sample())
    rounds = max(1, steps // n_envs)
    started = time.perf_counter()
    for _ in range(rounds):
        envs.step(envs.action_space.sample())
    rate = rounds * n_envs / (time.perf_counter() - started)
    envs.close()
    return rate


def split(scenario: Path, episodes: int = 6) -> None:
    """Where an env step's CPU time goes: each simulator's steps, the engine and the Session around
    them, the simulators' ``forecast()`` calls for the observations, the gym layer (actions,
    observations, rows, reward terms, info) and the resets."""
    from cosim.run import direct, session

    spent: collections.Counter = collections.Counter()
    originals: list[tuple[type, str, object]] = []

    def timed(cls: type, name: str, label) -> None:
        original = getattr(cls, name)
        originals.append((cls, name, original))

        def wrapper(self, *args, **kwargs):
            started = cpu()
            result = original(self, *args, **kwargs)
            spent[label(self, *args)] += cpu() - started
            return result

        setattr(cls, name, wrapper)

    timed(direct.DirectEngine, "_step_sim", lambda engine, sim, *_: f"simulator {sim.sid}")
    timed(direct.DirectEngine, "step", lambda *_: "engine")
    timed(session.Session, "run_until", lambda *_: "session")
    try:
        env = CosimEnv(scenario, guards=False)
        keep_every_start_day(env)
        for cls in {type(s.obj) for s in env._episode.engine.sims if hasattr(s.obj, "forecast")}:
            timed(cls, "forecast", lambda *_: "forecasts (simulators' forecast())")
        actions = [env.action_space.sample() for _ in range(10_000)]  # drawn outside the timing
        spent.clear()
        n, total = 0, cpu()
        for seed in range(1, episodes + 1):
            started = cpu()
            env.reset(seed=seed)
            spent["reset"] += cpu() - started
            while True:
                n += 1
                _, _, terminated, truncated, _ = env.step(actions[n % len(actions)])
                if terminated or truncated:
                    break
        total = cpu() - total
    finally:
        for cls, name, original in originals:
            setattr(cls, name, original)
    simulators = sum(v for k, v in spent.items() if k.startswith("simulator"))
    spent["session"] -= spent["engine"]  # the Session's own share: its checks and its loop
    spent["engine"] -= simulators  # the engine's own share: its loop and the inputs it gathers
    spent["gym layer"] = total - sum(spent.values())
    print(f"  where an env step goes ({n} env steps, every start day kept; {total / n * 1e6:.0f} us of CPU each;"
          f" the timers add to each share):")
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        print(f"    {name:36s} {seconds / n * 1e6:7.1f} us  {seconds / total * 100:5.1f} %")


def callgrind(scenario: Path, what: str, episodes: int = 2) -> None:
    """Instructions of ``episodes`` episodes' env steps (``what = "steps"``) or of as many resets
    (``"resets"``), counted by valgrind's callgrind, which this switches on only around them: a
    figure that other jobs on the machine do not move. Fixed actions, every start day kept.

    Run as ``valgrind --tool=callgrind --instr-atstart=no .venv/bin/python bench/bench_gym.py
    --callgrind steps``; valgrind prints ``I refs``."""
    import subprocess

    def instrument(state: str) -> None:
        subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], capture_output=True, check=False)

    env = CosimEnv(scenario, guards=False)
    keep_every_start_day(env)
    rng = np.random.default_rng(0)
    low, high = env.action_space.low, env.action_space.high
    actions = (low + rng.random((10_000, *low.shape)) * (high - low)).astype(low.dtype)
    env.reset(seed=0)
    for action in actions[:5]:  # warm-up
        env.step(action)
    n = 0
    for seed in range(1, episodes + 1):
        if what == "resets":
            instrument("on")
        env.reset(seed=seed)
        instrument("on" if what == "steps" else "off")
        while True:
            n += 1
            _, _, terminated, truncated, _ = env.step(actions[n % len(actions)])
            if terminated or truncated:
                break
        instrument("off")
    print(f"{what}: {episodes} {'episodes' if what == 'steps' else 'resets'}, {n} env steps")


def span(values: list[float], fmt: str = "{:.1f}") -> str:
    low, high = min(values), max(values)
    return fmt.format(low) if len(values) == 1 else f"{fmt.format(low)}-{fmt.format(high)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "rl_site.toml")
    parser.add_argument("--steps", type=int, default=1500, help="env steps timed per figure and repeat")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (the range is printed)")
    parser.add_argument("--only-plain", action="store_true", help="the reset and the one env only")
    parser.add_argument("--split", action="store_true", help="also where an env step's CPU time goes")
    parser.add_argument("--processes", action="store_true", help="also AsyncVectorEnv in 1 and 2 processes (wall)")
    parser.add_argument("--callgrind", choices=["steps", "resets"],
                        help="only count instructions under valgrind (see callgrind())")
    parser.add_argument("--python-fleets", action="store_true",
                        help="step the datacenter's inference fleets in Python, not their C form (to compare)")
    parser.add_argument("--python-scheduler", action="store_true",
                        help="the training scheduler's pass and the pause knob in Python, not C (to compare)")
    args = parser.parse_args()
    if args.python_scheduler:
        from cosim.adapters.datacenter import scheduler_kernel  # noqa: PLC0415 — only this switch needs it

        scheduler_kernel.C_PASS = False
    if args.python_fleets:
        import cosim.adapters.datacenter.cluster as cluster  # noqa: PLC0415 — only this switch needs it

        cluster.SERVE_FLEETS = False
    if args.callgrind:
        callgrind(args.scenario, args.callgrind)
        return
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"versions: {versions_line()}")
    print(f"{args.scenario.name}, {args.steps} env steps x {args.repeats} repeats, {now}, "
          f"load average before {np.round(os.getloadavg(), 2).tolist()}")
    rows = [("reset, every start day kept", "ms of CPU", lambda: reset_ms(args.scenario, 20, True)),
            ("reset, start days not kept", "ms of CPU", lambda: reset_ms(args.scenario, 20, False)),
            ("one env, every start day kept", "env steps per CPU s", lambda: plain(args.scenario, args.steps, True)),
            ("one env", "env steps per CPU s", lambda: plain(args.scenario, args.steps, False))]
    if not args.only_plain:
        rows += [(f"vector env, {n} in this process", "env steps per CPU s",
                  functools.partial(vector, args.scenario, args.steps, n)) for n in (1, 2, 4, 8)]
        rows.append(("PettingZoo parallel env", "env steps per CPU s", lambda: parallel(args.scenario, args.steps)))
    for label, unit, measure in rows:
        print(f"  {label:34s} {span([measure() for _ in range(args.repeats)]):>13s} {unit}", flush=True)
    if args.processes:
        for n in (1, 2):
            print(f"  AsyncVectorEnv, {n} process{'es' if n > 1 else ''}:{' ' * (11 - 2 * (n > 1))}"
                  f"{processes(args.scenario, args.steps, n):8.1f} env steps per wall s")
    if args.split:
        split(args.scenario)
    print(f"load average after {np.round(os.getloadavg(), 2).tolist()}")


if __name__ == "__main__":
    main()
