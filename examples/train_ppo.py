"""Train PPO (stable-baselines3) on scenarios/rl_site.toml and compare it with the baselines.

Needs the ``rl`` extra (``pip install -e '.[rl]'``: stable-baselines3 and the CPU build of torch)::

    .venv/bin/python examples/train_ppo.py                   # ~15 minutes on 2 cores
    .venv/bin/python examples/train_ppo.py --minutes 2 --envs 1

Training: ``--envs`` copies of the env in as many processes (SB3's SubprocVecEnv), each
episode a day drawn from the section's ``start_window`` (June-July 2024) with a fresh seed;
actions rescaled to [-1, 1] (Gymnasium's RescaleAction), observations and rewards normalised
(VecNormalize), an MLP policy (2 x 64) updated every ``--n-steps`` decisions per env, until
``--minutes`` of wall time or ``--timesteps`` decisions, whichever comes first.

Evaluation: :func:`cosim.gym.evaluate.evaluate` runs do-nothing, the rule (the scenario's
battery_dispatch controller) and the trained policy (deterministic) on the held-out week
(``eval_starts``: 5-11 August), same seeds, and prints the table: mean per day of the return
and of each weighted reward term (energy cost [USD], carbon [t], SLO loss [h], training
delay [GPU·h]) plus the battery's throughput [MWh].
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from gymnasium.wrappers import RescaleAction
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cosim.gym import CosimEnv  # noqa: E402
from cosim.gym.evaluate import columns_of, evaluate, table  # noqa: E402

SCENARIO = ROOT / "scenarios" / "rl_site.toml"


def make_env(seed: int):
    """A factory of one training env (in its own process under SubprocVecEnv)."""
    def make():
        torch.set_num_threads(1)
        warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32")  # RescaleAction's Box
        env = RescaleAction(CosimEnv(SCENARIO), -1.0, 1.0)
        env.reset(seed=seed)
        return Monitor(env)
    return make


class WallClock(BaseCallback):
    """Stops training after ``minutes`` of wall time and prints progress every ``every_s``."""

    def __init__(self, minutes: float, every_s: float = 60.0):
        super().__init__()
        self.deadline = time.perf_counter() + minutes * 60.0
        self.started = time.perf_counter()
        self.every_s, self.last = every_s, time.perf_counter()

    def _on_step(self) -> bool:
        now = time.perf_counter()
        if now - self.last >= self.every_s:
            self.last = now
            returns = [e["r"] for e in self.model.ep_info_buffer]
            mean = f"{np.mean(returns):.1f}" if returns else "-"
            print(f"  {now - self.started:6.0f} s: {self.num_timesteps} decisions, "
                  f"{self.num_timesteps / (now - self.started):.1f}/s, mean training return {mean}", flush=True)
        return now < self.deadline


def policy_of(model: PPO, normalizer: VecNormalize, env: CosimEnv):
    """The trained policy as ``observation -> action`` in the env's own units."""
    low, high = env.action_space.low.astype(float), env.action_space.high.astype(float)

    def act(obs: np.ndarray) -> np.ndarray:
        scaled, _ = model.predict(normalizer.normalize_obs(obs[None, :]), deterministic=True)
        return (low + (np.clip(scaled[0], -1.0, 1.0) + 1.0) * 0.5 * (high - low)).astype(np.float32)

    return act


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=14.0, help="training wall time budget [min]")
    parser.add_argument("--timesteps", type=int, default=1_000_000, help="training budget in decisions")
    parser.add_argument("--envs", type=int, default=2, help="training envs (processes)")
    parser.add_argument("--n-steps", type=int, default=192, help="decisions per env between updates")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "ppo_rl_site")
    args = parser.parse_args()
    torch.set_num_threads(1)
    factories = [make_env(args.seed + 1000 * i) for i in range(args.envs)]
    venv = SubprocVecEnv(factories) if args.envs > 1 else DummyVecEnv(factories)
    venv = VecNormalize(venv, gamma=0.99)
    model = PPO("MlpPolicy", venv, n_steps=args.n_steps, batch_size=96, n_epochs=10, learning_rate=3e-4,
                gamma=0.99, gae_lambda=0.95, ent_coef=0.0, seed=args.seed, verbose=0,
                policy_kwargs={"net_arch": [64, 64]})
    started = time.perf_counter()
    print(f"training PPO on {SCENARIO.name}: {args.envs} envs, budget {args.minutes:g} min", flush=True)
    model.learn(total_timesteps=args.timesteps, callback=WallClock(args.minutes))
    trained_s = time.perf_counter() - started
    print(f"trained {model.num_timesteps} decisions ({model.num_timesteps / 96:.0f} episodes of a day) "
          f"in {trained_s:.0f} s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    model.save(args.out / "model.zip")
    venv.save(str(args.out / "vecnormalize.pkl"))
    venv.close()
    probe = CosimEnv(SCENARIO)
    policies = {"do_nothing": "do_nothing", "rule": "rule", "ppo": policy_of(model, venv, probe)}
    results = evaluate(SCENARIO, policies, seed=args.seed)
    print(f"held-out days {', '.join(results[0].days)} (mean per day, seeds {args.seed}..{args.seed + 6}):")
    print(table(results, columns_of(SCENARIO, ["battery_throughput_mwh"])))


if __name__ == "__main__":
    main()
