"""Nodes of a training partition: where GPUs sit, FGD's fragmentation measure, idle-node sleep.

* :class:`Topology` numbers GPUs node by node (GPU ``g`` is on node ``g // gpus_per_node``)
  and nodes rack by rack; the last node may hold fewer GPUs.
* :func:`pod_sizes` splits a gang job into per-node *pods* (whole nodes, then the rest), the
  unit the fragmentation papers place: Kubernetes pods live on one node.
* :func:`node_frag_gpus` is the fragmentation measure of FGD (Weng et al., "Beware of
  Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
  USENIX ATC 2023; ``pkg/utils/frag.go`` of hkust-adsl/kubernetes-scheduler-simulator) for
  whole-GPU tasks: a node's free GPUs are *fragmented* for a task class ``m`` when the node
  cannot host ``m`` (fewer free GPUs than ``m`` needs), and the node's fragmentation is the
  expectation over the target workload, ``F_n(M) = sum_m p_m F_n(m)``. With whole GPUs only
  (no GPU sharing in training here) the per-GPU ``MilliGpu`` test of the paper reduces to
  this count test.
* :class:`NodeSleep` puts nodes that stayed empty for ``idle_before_sleep_s`` into a
  low-power state (``p_sleep_w`` for the whole node) and wakes them when a job is placed on
  them, ``wake_s`` later; the knob of Helios's Cluster Energy Saving service, which powers
  idle nodes down (Hu et al., "Characterization and Prediction of Deep Learning Workloads in
  Large-Scale GPU Datacenters", SC '21). Off unless ``nodes.sleep = true``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Topology:
    """GPUs in nodes, nodes in racks.

    Attributes:
        n_gpus: GPUs of the partition. [-]
        gpus_per_node: GPUs in a full node. [-]
        nodes_per_rack: nodes in a rack (or pod), for rack locality. [-]
    """

    n_gpus: int
    gpus_per_node: int
    nodes_per_rack: int = 4
    node_of_gpu: np.ndarray = field(init=False, repr=False, compare=False)
    gpus_on_node: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.gpus_per_node < 1 or self.nodes_per_rack < 1:
            raise ValueError(f"gpus_per_node = {self.gpus_per_node}, nodes_per_rack = {self.nodes_per_rack}: "
                             "both must be at least 1")
        node_of_gpu = np.arange(self.n_gpus) // self.gpus_per_node
        object.__setattr__(self, "node_of_gpu", node_of_gpu)
        object.__setattr__(self, "gpus_on_node", np.bincount(node_of_gpu, minlength=self.n_nodes))

    @property
    def n_nodes(self) -> int:
        return math.ceil(self.n_gpus / self.gpus_per_node)

    @property
    def n_racks(self) -> int:
        return math.ceil(self.n_nodes / self.nodes_per_rack)

    def free_per_node(self, owner: np.ndarray) -> np.ndarray:
        """Free GPUs on each node (``owner[g] < 0`` = free). [-]"""
        return np.bincount(self.node_of_gpu[owner < 0], minlength=self.n_nodes)

    def gpus_of(self, node: int) -> slice:
        """The GPU indices of ``node``."""
        first = node * self.gpus_per_node
        return slice(first, min(first + self.gpus_per_node, self.n_gpus))

    def nodes_of_rack(self, rack: int) -> range:
        return range(rack * self.nodes_per_rack, min((rack + 1) * self.nodes_per_rack, self.n_nodes))


def pod_sizes(n_gpus: int, gpus_per_node: int) -> list[int]:
    """A gang of ``n_gpus`` as per-node pods: whole nodes first, then the remainder. [-]"""
    whole, rest = divmod(int(n_gpus), gpus_per_node)
    return [gpus_per_node] * whole + ([rest] if rest else [])


def node_frag_gpus(free: np.ndarray, sizes: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """FGD's ``F_n(M)`` per node for whole-GPU pods: expected free GPUs the workload cannot use. [-]

    Args:
        free: free GPUs per node. [-]
        sizes: pod sizes of the target workload's classes. [-]
        probs: their probabilities (summing to 1). [-]
    """
    free = np.asarray(free, float)
    blocked = free[:, None] < np.asarray(sizes, float)[None, :]
    return free * (blocked @ np.asarray(probs, float))


def frag_gpus(free: np.ndarray, sizes: np.ndarray, probs: np.ndarray) -> float:
    """Cluster fragmentation ``F(M) = sum_n F_n(M)``. [-]"""
    return float(node_frag_gpus(free, sizes, probs).sum()) if len(sizes) else 0.0


@dataclass(frozen=True)
class NodePower:
    """Per-node power numbers for placement decisions (the cluster's model, :mod:`.cluster`).

    Attributes:
        gpu_idle_w, gpu_tdp_w: a GPU idle and at its default limit. [W]
        node_idle_w: non-GPU power of a node with no busy GPU. [W]
        node_busy_share_w: extra non-GPU power per busy GPU (``(other_full - other_idle) / gpus_per_node``). [W]
        p_sleep_w: a sleeping node, GPUs included; None when nodes do not sleep. [W]
    """

    gpu_idle_w: float = 80.0
    gpu_tdp_w: float = 700.0
    node_idle_w: float = 1400.0
    node_busy_share_w: float = 400.0
    p_sleep_w: float | None = None

    def node_w(self, free: np.ndarray, gpus_on_node: np.ndarray, gpu_job_w: float) -> np.ndarray:
        """Steady-state power of nodes with ``free`` GPUs free, busy ones drawing ``gpu_job_w``;
        an empty node sleeps when nodes sleep, else draws its idle power. [W]"""
        busy = gpus_on_node - free
        awake_w = self.node_idle_w + busy * (gpu_job_w + self.node_busy_share_w) + free * self.gpu_idle_w
        empty_w = awake_w if self.p_sleep_w is None else np.full(len(free), float(self.p_sleep_w))
        return np.where(busy > 0, awake_w, empty_w)


@dataclass(frozen=True)
class SleepParams:
    """Low-power state of empty nodes.

    Attributes:
        p_sleep_w: power of a sleeping node, GPUs included. [W]
        wake_s: time from a wake request until jobs on the node make progress. [s]
        idle_before_sleep_s: how long a node stays empty before it sleeps. [s]
        n_awake_spare: empty nodes kept awake for arriving jobs. [-]
    """

    p_sleep_w: float = 60.0
    wake_s: float = 300.0
    idle_before_sleep_s: float = 600.0
    n_awake_spare: int = 0


class NodeSleep:
    """Sleep and wake of the nodes of one :class:`Topology` (see the module docstring)."""

    def __init__(self, topology: Topology, params: SleepParams):
        self.topology, self.params = topology, params
        n = topology.n_nodes
        self.asleep = np.zeros(n, bool)
        self.awake_at_s = np.full(n, -np.inf)  # waking nodes: when they are ready
        self.empty_since_s = np.full(n, np.nan)

    def wake(self, nodes: np.ndarray, time_s: float) -> float:
        """Wake ``nodes`` (no-op for awake ones); the time all of them are ready. [s]"""
        nodes = np.unique(nodes)
        sleeping = nodes[self.asleep[nodes]]
        self.asleep[sleeping] = False
        self.awake_at_s[sleeping] = time_s + self.params.wake_s
        self.empty_since_s[nodes] = np.nan
        return float(self.awake_at_s[nodes].max()) if len(nodes) else time_s

    def update(self, time_s: float, free: np.ndarray) -> None:
        """Put nodes empty for ``idle_before_sleep_s`` to sleep, keeping ``n_awake_spare`` awake."""
        empty = free >= self.topology.gpus_on_node
        self.empty_since_s[~empty] = np.nan
        start = empty & np.isnan(self.empty_since_s) & ~self.asleep
        self.empty_since_s[start] = time_s
        due = np.flatnonzero(empty & ~self.asleep & (time_s - self.empty_since_s >= self.params.idle_before_sleep_s)
                             & (self.awake_at_s <= time_s))
        n_spare_awake = int(np.count_nonzero(empty & ~self.asleep)) - len(due)
        keep = max(self.params.n_awake_spare - n_spare_awake, 0)
        due = due[keep:]  # spares: the lowest-numbered empty nodes stay awake
        self.asleep[due] = True
        self.empty_since_s[due] = np.nan

    def saving_w(self, gpu_idle_w: float, node_idle_w: float) -> float:
        """Power the sleeping nodes save against drawing their idle power. [W]

        Args:
            gpu_idle_w: idle power of one GPU. [W]
            node_idle_w: non-GPU power of an idle node. [W]
        """
        n_sleep = int(np.count_nonzero(self.asleep))
        if n_sleep == 0:
            return 0.0
        gpus = float(self.topology.gpus_on_node[self.asleep].sum())
        return gpus * gpu_idle_w + n_sleep * (node_idle_w - self.params.p_sleep_w)
