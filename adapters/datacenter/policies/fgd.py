"""``fgd``: Fragmentation Gradient Descent placement (Weng et al., USENIX ATC 2023).

Each pod of a job goes to the feasible node whose fragmentation ``F_n(M)`` grows least
(the steepest descent of the cluster's fragmentation): ``Delta_n = F_n(M) - F_n'(M)`` with
``n'`` the node after the placement, highest ``Delta`` wins (the paper's score is
``sigmoid(Delta) x 100``, a monotone map, so the choice is the same). ``F`` is
:func:`..nodes.node_frag_gpus` (whole GPUs); the target workload ``M`` is the pod-size mix
of the latest arrivals (FGD estimates it from the trace's typical pods, the most frequent
specs up to 60 % of pods; here every size in the window counts by its frequency, a
simplification). Queue order: priority FIFO with EASY backfill (``backfill = false``: strict).
Code read: hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/fgd_score.go``.
"""

from __future__ import annotations

import numpy as np

from cosim.adapters.datacenter.nodes import node_frag_gpus
from cosim.adapters.datacenter.policies._base import Policy, PolicyParams
from cosim.adapters.datacenter.policies._placement import Score, place_pods


class FgdParams(PolicyParams):
    """Attributes:
        backfill: EASY backfill behind the head (off: strict priority FIFO).
    """

    backfill: bool = True


def fgd_score(sizes: np.ndarray, probs: np.ndarray) -> Score:
    """``(free, pod) -> Delta_n``: how much placing ``pod`` lowers each node's fragmentation. [GPUs]"""
    def score(free: np.ndarray, pod: int) -> np.ndarray:
        after = np.maximum(free - pod, 0)
        # rounded so that changes equal on paper are equal in floating point (exact ties -> lowest node)
        return np.round(node_frag_gpus(free, sizes, probs) - node_frag_gpus(after, sizes, probs), 9)
    return score


class Fgd(Policy):
    """FGD: each pod where cluster fragmentation grows least (Weng et al., ATC '23)."""

    PARAMS = FgdParams
    STRICT_PARAMS = {"backfill": False}

    def backfill(self) -> bool:
        return self.params.backfill

    def place(self, sched, job: int, need: int, time_s: float) -> np.ndarray | None:
        sizes, probs = sched.pod_mix()
        return place_pods(sched, need, fgd_score(sizes, probs))
