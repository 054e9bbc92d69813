"""``pwr``: power-aware placement with FGD as the weighted second term (Lettich et al., CCGrid 2025).

"Power- and Fragmentation-aware Online Scheduling for GPU Datacenters" (F. Lettich,
E. Carlini, F. M. Nardini, R. Perego, S. Trani; arXiv 2412.17484). PWR scores a node by the
power it adds, ``s_PWR = P(n) - P(n')``, rescales the scores of the candidate nodes to
[0, 100] (Kubernetes ``NormalizeScore``) and is combined linearly with FGD's score,
``S = w S_PWR + (1 - w) S_FGD`` (code read: Fr4nz83/PWR-plugin-kubernetes,
``pkg/simulator/plugin/pwr_score.go``; the weights the paper used were not found, so
``pwr_weight_frac`` defaults to 0.5, cosim's choice).

``P(n)`` is the power the node will draw in steady state under this cluster's model: a
node with no job draws its sleep power when ``nodes.sleep`` is on (else its idle power),
a node with jobs its idle non-GPU power plus per busy GPU the job's draw and the node's
busy share. The paper's own model (a GPU at full power once anything is allocated on it,
CPU packages on or off) differs in the CPU part, which cosim does not model. Consequence,
stated plainly: with sleep off every feasible node adds the same power, PWR's term is
flat, and ``pwr`` places as ``fgd``; with sleep on it fills nodes that already run jobs
before it wakes (or keeps awake) an empty one.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from cosim.adapters.datacenter.nodes import NodePower
from cosim.adapters.datacenter.policies._base import Policy, PolicyParams
from cosim.adapters.datacenter.policies._placement import Score, minmax_0_100, place_pods
from cosim.adapters.datacenter.policies.fgd import fgd_score


class PwrParams(PolicyParams):
    """Attributes:
        pwr_weight_frac: weight ``w`` of the power score (1 = PWR alone, 0 = FGD alone). [-]
        backfill: EASY backfill behind the head (off: strict priority FIFO).
    """

    pwr_weight_frac: float = Field(default=0.5, ge=0, le=1)
    backfill: bool = True


def pwr_score(sched, power: NodePower, gpu_job_w: float) -> Score:
    """``(free, pod) -> P(n) - P(n')``: minus the power placing ``pod`` adds to each node. [W]"""
    on_node = sched.topology.gpus_on_node

    def score(free: np.ndarray, pod: int) -> np.ndarray:
        after = np.maximum(free - pod, 0)
        return power.node_w(free, on_node, gpu_job_w) - power.node_w(after, on_node, gpu_job_w)
    return score


class Pwr(Policy):
    """PWR + FGD: least added power, FGD's fragmentation as the weighted term (Lettich et al., CCGrid '25)."""

    PARAMS = PwrParams
    STRICT_PARAMS = {"backfill": False}

    def backfill(self) -> bool:
        return self.params.backfill

    def place(self, sched, job: int, need: int, time_s: float) -> np.ndarray | None:
        sizes, probs = sched.pod_mix()
        power = sched.node_power
        frac = 1.0 if sched.jobs.power_frac is None else float(sched.jobs.power_frac[job])
        gpu_w = power.gpu_idle_w + frac * (power.gpu_tdp_w - power.gpu_idle_w)
        s_pwr, s_fgd = pwr_score(sched, power, gpu_w), fgd_score(sizes, probs)
        weight = self.params.pwr_weight_frac
        # among equals, an awake node before a sleeping one (waking costs wake_s of idle power)
        asleep = sched.sleep.asleep if sched.sleep is not None else np.zeros(sched.topology.n_nodes, bool)

        def combined(free: np.ndarray, pod: int) -> np.ndarray:
            feasible = free >= pod
            score = (weight * minmax_0_100(s_pwr(free, pod), feasible)
                     + (1.0 - weight) * minmax_0_100(s_fgd(free, pod), feasible))
            return np.round(score, 6) - 1e-3 * asleep  # rounded: ties on paper stay ties
        return place_pods(sched, need, combined)
