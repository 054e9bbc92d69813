"""Where a gang job's GPUs go: first-fit and score-driven placement on nodes, with locality.

A job of ``n`` GPUs is split into per-node pods (:func:`..nodes.pod_sizes`). Under locality
``node`` every pod sits on one node; under ``rack`` a multi-node job that fits a rack keeps
all its pods in one rack (larger ones: as ``node``); under ``any`` the GPUs may be anywhere.
A placement is computed whole before anything is booked, so a gang gets all or nothing.

``place_first_fit`` with locality ``any`` takes the lowest-numbered free GPUs, exactly what
the scheduler did before nodes existed (so ``easy`` and ``fifo`` runs are unchanged).
``place_scored`` puts pod after pod on the feasible node with the highest score (ties: the
lowest-numbered node), as the Kubernetes score plug-ins of FGD and PWR do; under ``any`` a
job whose pods do not fit whole nodes falls back to the first free GPUs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cosim.adapters.datacenter.nodes import pod_sizes

#: ``(free GPUs per node, pod size) -> score per node`` (higher is better; only feasible
#: nodes, those with ``free >= pod``, are looked at).
Score = Callable[[np.ndarray, int], np.ndarray]


def gpus_on_nodes(sched, nodes: list[int], sizes: list[int]) -> np.ndarray:
    """The lowest-numbered free GPUs, ``sizes[i]`` of them on ``nodes[i]``."""
    picked = []
    for node, size in zip(nodes, sizes):
        span = sched.topology.gpus_of(node)
        free = np.flatnonzero(sched.owner[span] < 0) + span.start
        picked.append(free[:size])
    return np.concatenate(picked) if picked else np.zeros(0, np.int64)


def first_free(sched, need: int) -> np.ndarray | None:
    """The ``need`` lowest-numbered free GPUs, anywhere."""
    return sched.lowest_free(need)  # (the free list is made once per pass while starts take its lowest GPUs)


def _greedy(free: np.ndarray, sizes: list[int], allowed: np.ndarray, score: Score | None) -> list[int] | None:
    """Nodes for each pod in turn (first feasible, or best ``score``); None when a pod fits nowhere."""
    free = free.copy()
    nodes = []
    for size in sizes:
        feasible = allowed & (free >= size)
        if not feasible.any():
            return None
        if score is None:
            node = int(np.argmax(feasible))
        else:
            values = np.where(feasible, score(free, size), -np.inf)
            node = int(np.argmax(values))
            if not np.isfinite(values[node]):  # the score rules every feasible node out
                return None
        nodes.append(node)
        free[node] -= size
    return nodes


def _racks_that_fit(sched, free: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Racks with enough nodes for the pods (whole-node pods need empty nodes). [rack ids]"""
    topo = sched.topology
    rack = np.arange(topo.n_nodes) // topo.nodes_per_rack
    gpn = topo.gpus_per_node
    n_whole = sum(1 for s in sizes if s == gpn)
    rest = [s for s in sizes if s != gpn]
    empty = np.bincount(rack, weights=free >= gpn, minlength=topo.n_racks)
    ok = empty >= n_whole
    if rest:  # the remainder pod needs one more node with room (an empty one counts too)
        room = np.bincount(rack, weights=free >= rest[0], minlength=topo.n_racks)
        ok &= room >= n_whole + 1
    return np.flatnonzero(ok)


def place_pods(sched, need: int, score: Score | None = None, scatter: bool = True) -> np.ndarray | None:
    """GPUs for a gang of ``need`` under the scheduler's locality (see the module docstring).

    Args:
        sched: the scheduler.
        need: GPUs of the gang. [-]
        score: node scores per pod (None: first fit).
        scatter: under locality ``any``, fall back to the first free GPUs when the pods do not
            fit (a policy that bounds fragmentation turns this off).
    """
    topo = sched.topology
    if need > sched.n_free:
        return None
    sizes = pod_sizes(need, topo.gpus_per_node)
    free = sched.free_per_node()
    everywhere = np.ones(topo.n_nodes, bool)
    if sched.locality == "rack" and len(sizes) > 1 and need <= topo.nodes_per_rack * topo.gpus_per_node:
        racks = _racks_that_fit(sched, free, sizes)
        if score is not None and len(racks) > 1:  # the rack whose best node scores highest for the first pod
            values = np.where(free >= sizes[0], score(free, sizes[0]), -np.inf)
            best = np.array([values[topo.nodes_of_rack(r).start:topo.nodes_of_rack(r).stop].max() for r in racks])
            racks = racks[np.argsort(-best, kind="stable")]
        for r in racks:
            allowed = np.zeros(topo.n_nodes, bool)
            span = topo.nodes_of_rack(int(r))
            allowed[span.start:span.stop] = True
            nodes = _greedy(free, sizes, allowed, score)
            if nodes is not None:
                return gpus_on_nodes(sched, nodes, sizes)
        return None
    nodes = _greedy(free, sizes, everywhere, score)
    if nodes is not None:
        return gpus_on_nodes(sched, nodes, sizes)
    return first_free(sched, need) if sched.locality == "any" and scatter else None


def place_first_fit(sched, need: int) -> np.ndarray | None:
    """First fit: the lowest-numbered free GPUs (locality ``any``) or the lowest-numbered nodes that fit."""
    if sched.locality == "any":
        return first_free(sched, need)
    return place_pods(sched, need, None)


def minmax_0_100(values: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Kubernetes ``NormalizeScore``: feasible values rescaled to [0, 100]; all equal -> 100."""
    out = np.zeros(len(values))
    if not feasible.any():
        return out
    v = values[feasible]
    low, high = float(v.min()), float(v.max())
    out[feasible] = 100.0 if high - low <= 1e-12 * max(abs(high), 1.0) else 100.0 * (v - low) / (high - low)
    return out
