"""Pollux's goodput model: how a data-parallel job's progress rate scales with its GPU count.

From Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI 2021, as coded in petuum/adaptdl ``adaptdl/adaptdl/goodput.py``:

* compute time per step at local batch ``m``: ``T_comp = alpha_c + beta_c m``;
* all-reduce time for ``K`` replicas, ring: ``T_net = alpha + beta max(K - 2, 0)`` with the
  intra-node pair ``(alpha_r, beta_r)`` when the ``K`` GPUs share a node and the inter-node
  pair ``(alpha_n, beta_n)`` otherwise; 0 for ``K = 1``;
* step time with overlap exponent ``gamma``: ``T_step = (T_comp^gamma + T_net^gamma)^(1/gamma)``
  (no gradient accumulation);
* throughput ``K m / T_step`` samples/s; statistical efficiency at global batch ``M`` against
  the job's initial ``M0``: ``E = (phi + M0) / (phi + M)`` (``phi`` the gradient noise scale);
* goodput = throughput x ``E``.

ONES-style elasticity (Bian et al., arXiv 2108.03645) keeps the per-GPU batch, so the global
batch grows with ``K``; :meth:`GoodputModel.speedup` is the goodput at ``K`` GPUs over that
at the requested ``K0``. Pollux fits its parameters online per job; the defaults below are
**assumed** (no fitted values were available): a step of ~0.23 s, a cheap NVLink ring and
an all-reduce over the network about five times dearer, noise scale 4,000 samples. With them,
doubling an 8-GPU job onto two nodes gives 1.22x, halving it 0.53x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class GoodputModel:
    """Parameters of the goodput model (module docstring; all *assumed*).

    Attributes:
        alpha_c_s, beta_c_s: compute time per step, fixed and per sample. [s, s]
        alpha_r_s, beta_r_s: intra-node all-reduce, fixed and per replica beyond 2. [s, s]
        alpha_n_s, beta_n_s: inter-node all-reduce, the same. [s, s]
        overlap_gamma: overlap of compute and communication (1: none). [-]
        noise_scale_samples: gradient noise scale ``phi``. [samples]
        n_batch_per_gpu: local batch per GPU. [samples]
    """

    alpha_c_s: float = 0.1
    beta_c_s: float = 0.004
    alpha_r_s: float = 0.02
    beta_r_s: float = 0.004
    alpha_n_s: float = 0.1
    beta_n_s: float = 0.01
    overlap_gamma: float = 1.5
    noise_scale_samples: float = 4000.0
    n_batch_per_gpu: int = 32

    def step_s(self, n_gpus: int, gpus_per_node: int) -> float:
        """Time of one step on ``n_gpus`` GPUs packed onto as few nodes as possible. [s]"""
        t_comp = self.alpha_c_s + self.beta_c_s * self.n_batch_per_gpu
        if n_gpus <= 1:
            return t_comp
        alpha, beta = ((self.alpha_r_s, self.beta_r_s) if n_gpus <= gpus_per_node
                       else (self.alpha_n_s, self.beta_n_s))
        t_net = alpha + beta * max(n_gpus - 2, 0)
        g = self.overlap_gamma
        return (t_comp ** g + t_net ** g) ** (1.0 / g)

    def goodput(self, n_gpus: int, n_gpus_requested: int, gpus_per_node: int) -> float:
        """Progress in samples of the initial batch per second. [samples/s]"""
        batch, batch0 = n_gpus * self.n_batch_per_gpu, n_gpus_requested * self.n_batch_per_gpu
        efficiency = (self.noise_scale_samples + batch0) / (self.noise_scale_samples + batch)
        return batch / self.step_s(n_gpus, gpus_per_node) * efficiency

    def speedup(self, n_gpus: int, n_gpus_requested: int, gpus_per_node: int) -> float:
        """Progress rate at ``n_gpus`` relative to the requested size. [-]"""
        if n_gpus == n_gpus_requested:
            return 1.0
        return (self.goodput(n_gpus, n_gpus_requested, gpus_per_node)
                / self.goodput(n_gpus_requested, n_gpus_requested, gpus_per_node))


def allowed_sizes(n_gpus_requested: int, min_frac: float, max_ratio: float, n_gpus_max: int) -> list[int]:
    """GPU counts an elastic job may run on: the request halved or doubled, within the bounds. [-]"""
    low = max(1, math.ceil(n_gpus_requested * min_frac))
    high = min(n_gpus_max, int(n_gpus_requested * max_ratio))
    sizes = {n_gpus_requested}
    k = n_gpus_requested
    while k // 2 >= low:
        k //= 2
        sizes.add(k)
    k = n_gpus_requested
    while k * 2 <= high:
        k *= 2
        sizes.add(k)
    return sorted(s for s in sizes if s <= n_gpus_max)
