"""Multi-Instance GPU (MIG): profiles, valid placements, slice scaling, and placing a fleet's instances.

Profiles and placements from the NVIDIA MIG User Guide (v580, "Supported MIG Profiles" and
``nvidia-smi mig -lgipp``; docs.nvidia.com/datacenter/tesla/mig-user-guide/). A GPU has 8
memory slices and 7 compute slices; an instance of a profile occupies ``memory`` consecutive
memory slices from one of its allowed starts:

=============  ==================  ======  ============  =====
profile        compute / memory    starts  per GPU (max) ID
=============  ==================  ======  ============  =====
1g (small)     1 / 1               0-6     7             19
1g large-mem   1 / 2               0,2,4,6 4             15
2g             2 / 2               0,2,4   3             14
3g             3 / 4               0,4     2             9
4g             4 / 4               0       1             5
7g             7 / 8               0       1             0
=============  ==================  ======  ============  =====

Names per GPU follow its memory (A100-80GB and H100-80GB: 1g.10gb, 1g.20gb, 2g.20gb,
3g.40gb, 4g.40gb, 7g.80gb; H200: 1g.18gb ... 7g.141gb; B200: 1g.23gb ... 7g.180gb). The
guide's placement listing was seen for A100/H100 only; H200 and B200 have the same slice
geometry and counts, so the same starts are **assumed**.

Slice scaling (**assumptions**, no measurement per slice was found): an instance's SMs are
``g x SMs-per-g`` (A100 14 of 108, H100/H200 16 of 132 for 1g-4g, 7g the whole GPU as far
as SMs go: 98/108 and 132/132; B200 18 of 148, the 148 from recollection); decode is
bandwidth-bound, so a replica's tokens/s at batch ``b`` is the full GPU's at ``b`` times the
tighter of the SM and memory-slice fractions, its ITL divided by it; the batch it can hold
scales with the KV-cache memory left after the weights; its power above the GPU's idle is
that fraction of the full GPU's at the same batch (the notes' "idle + (TDP - idle) x active
fraction", applied to measured curves).

Placement (:func:`place_instances`): the fleets' instances arrive interleaved, one per fleet
in turn, and are placed onto as few GPUs as the rule manages: ``first_fit`` scans GPUs in
order and each profile's starts in ascending order; ``frag_aware`` picks the (GPU, start)
that least increases the pool's MIG fragmentation ``F = sum_gpu sum_m p_m free_gpu [no valid
start for m]`` (``p_m`` the profile shares of the deployment, ``free_gpu`` the free memory
slices), the idea of Zambianco et al. ("An Online Fragmentation-Aware GPU Scheduler for
Multi-Tenant MIG-based Clouds", arXiv 2511.18906) with a formula of the research notes, not
the paper's; a new GPU is opened only when no placed one fits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: (compute slices, memory slices, allowed starts, most per GPU) per profile kind.
KINDS: dict[str, tuple[int, int, tuple[int, ...], int]] = {
    "1g": (1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
    "1g_large": (1, 2, (0, 2, 4, 6), 4),
    "2g": (2, 2, (0, 2, 4), 3),
    "3g": (3, 4, (0, 4), 2),
    "4g": (4, 4, (0,), 1),
    "7g": (7, 8, (0,), 1),
}
#: Profile names per catalogue GPU, kind -> name (memory in the name).
NAMES: dict[str, dict[str, str]] = {
    "A100-80GB-SXM": {"1g": "1g.10gb", "1g_large": "1g.20gb", "2g": "2g.20gb", "3g": "3g.40gb", "4g": "4g.40gb",
                      "7g": "7g.80gb"},
    "H100-SXM": {"1g": "1g.10gb", "1g_large": "1g.20gb", "2g": "2g.20gb", "3g": "3g.40gb", "4g": "4g.40gb",
                 "7g": "7g.80gb"},
    "H200-SXM": {"1g": "1g.18gb", "1g_large": "1g.35gb", "2g": "2g.35gb", "3g": "3g.71gb", "4g": "4g.71gb",
                 "7g": "7g.141gb"},
    "B200": {"1g": "1g.23gb", "1g_large": "1g.45gb", "2g": "2g.45gb", "3g": "3g.90gb", "4g": "4g.90gb",
             "7g": "7g.180gb"},
}
#: (SMs per compute slice for 1g-4g, SMs of a 7g instance, SMs of the GPU).
SMS: dict[str, tuple[int, int, int]] = {
    "A100-80GB-SXM": (14, 98, 108), "H100-SXM": (16, 132, 132), "H200-SXM": (16, 132, 132), "B200": (18, 148, 148),
}
#: Weights of the inference models in BF16 (2 bytes per parameter; FP8 1). [GB]
WEIGHTS_GB = {"llama-3.1-8b": 16.1, "llama-3.1-70b": 141.1, "llama-3.1-405b-fp8": 405.9, "qwen-3-30b-a3b": 61.1,
              "qwen-3-235b-a22b": 470.0}
PLACEMENTS = ("first_fit", "frag_aware")
N_MEMORY_SLICES = 8


@dataclass(frozen=True)
class Profile:
    """One MIG profile on one GPU model.

    Attributes:
        name: e.g. ``"3g.40gb"``.
        kind: key of :data:`KINDS`.
        compute: compute slices (of 7). [-]
        memory: memory slices (of 8). [-]
        starts: allowed first memory slices. [-]
        memory_gb: the instance's memory. [GB]
        sm_frac: its share of the GPU's SMs. [-]
    """

    name: str
    kind: str
    compute: int
    memory: int
    starts: tuple[int, ...]
    memory_gb: float
    sm_frac: float

    @property
    def speed_frac(self) -> float:
        """Throughput share of the full GPU: the tighter of SMs and memory bandwidth (module docstring). [-]"""
        return min(self.sm_frac, self.memory / N_MEMORY_SLICES)


def profiles(gpu: str, gpu_memory_gb: float) -> dict[str, Profile]:
    """The MIG profiles of catalogue GPU ``gpu`` by name (``ValueError`` if it has no MIG)."""
    if gpu not in NAMES:
        raise ValueError(f"GPU {gpu!r} has no MIG profiles here; MIG GPUs: {', '.join(NAMES)}")
    per_g, sms_7g, sms = SMS[gpu]
    out = {}
    for kind, name in NAMES[gpu].items():
        compute, memory, starts, _ = KINDS[kind]
        sm = sms_7g if compute == 7 else compute * per_g
        out[name] = Profile(name, kind, compute, memory, starts, gpu_memory_gb * memory / N_MEMORY_SLICES, sm / sms)
    return out


def kv_frac(profile: Profile, model: str, gpu_memory_gb: float) -> float:
    """KV-cache memory of an instance over that of a whole GPU, after the model's weights. [-]"""
    weights = WEIGHTS_GB[model]
    return max(profile.memory_gb - weights, 0.0) / max(gpu_memory_gb - weights, 1e-9)


# -- placement -------------------------------------------------------------------------------------
def fits(used: np.ndarray, profile: Profile, start: int) -> bool:
    """``profile`` can start at memory slice ``start`` (one of its allowed starts) of a GPU whose slices ``used`` are taken."""
    end = start + profile.memory
    return start in profile.starts and end <= N_MEMORY_SLICES and not used[start:end].any()


def gpu_frag_slices(used: np.ndarray, mix: list[tuple[Profile, float]]) -> float:
    """Expected free memory slices of one GPU that the profile mix cannot use (module docstring). [-]"""
    free = N_MEMORY_SLICES - int(used.sum())
    return sum(p * free for profile, p in mix if not any(fits(used, profile, s) for s in profile.starts))


@dataclass
class MigPool:
    """GPUs partitioned into MIG instances.

    Attributes:
        used: per GPU, which memory slices are taken, shape (n_gpus, 8).
        instances: ``(fleet index, gpu, start, profile)`` per placed instance, in placement order.
    """

    used: np.ndarray
    instances: list[tuple[int, int, int, Profile]]

    @property
    def n_gpus(self) -> int:
        return len(self.used)

    def frag_slices(self, mix: list[tuple[Profile, float]]) -> float:
        """The pool's MIG fragmentation for ``mix``. [memory slices]"""
        return float(sum(gpu_frag_slices(u, mix) for u in self.used))


def _choose(used: np.ndarray, profile: Profile, rule: str, mix) -> tuple[int, int] | None:
    """``(gpu, start)`` on the placed GPUs, or None when none fits."""
    if rule == "first_fit":
        for g in range(len(used)):
            for s in profile.starts:
                if fits(used[g], profile, s):
                    return g, s
        return None
    best, best_delta = None, np.inf
    for g in range(len(used)):
        before = gpu_frag_slices(used[g], mix)
        for s in profile.starts:
            if fits(used[g], profile, s):
                trial = used[g].copy()
                trial[s:s + profile.memory] = True
                delta = gpu_frag_slices(trial, mix) - before
                if delta < best_delta - 1e-12:
                    best, best_delta = (g, s), delta
    return best


def place_instances(requests: list[tuple[int, Profile, int]], rule: str = "first_fit") -> MigPool:
    """Place ``(fleet index, profile, count)`` requests, interleaved fleet by fleet, on as few GPUs as ``rule`` gets.

    Args:
        requests: per fleet its index, profile and number of instances.
        rule: ``first_fit`` or ``frag_aware`` (module docstring).
    """
    if rule not in PLACEMENTS:
        raise ValueError(f"mig_placement = {rule!r}: choose one of {', '.join(PLACEMENTS)}")
    total = sum(n for _, _, n in requests)
    mix = [(p, n / total) for _, p, n in requests if n > 0] if total else []
    used = np.zeros((0, N_MEMORY_SLICES), bool)
    instances: list[tuple[int, int, int, Profile]] = []
    left = [n for _, _, n in requests]
    while any(left):
        for i, (fleet, profile, _) in enumerate(requests):
            if left[i] == 0:
                continue
            spot = _choose(used, profile, rule, mix)
            if spot is None:  # open a new GPU and place there by the same rule
                used = np.vstack([used, np.zeros(N_MEMORY_SLICES, bool)])
                spot = _choose(used[-1:], profile, rule, mix)
                spot = (len(used) - 1, spot[1])
            g, s = spot
            used[g, s:s + profile.memory] = True
            instances.append((fleet, g, s, profile))
            left[i] -= 1
    return MigPool(used, instances)


class SliceCurves:
    """A fleet's batch curves on one MIG instance (module docstring: the scaling assumptions).

    Args:
        base: the full-GPU :class:`~.inference.BatchCurves` (one GPU per replica).
        profile: the instance's profile.
        b_max: the largest batch the instance's KV memory holds. [-]
    """

    gpus_per_replica = 1

    def __init__(self, base, profile: Profile, b_max: float):
        if base.gpus_per_replica != 1:
            raise ValueError(f"a MIG instance holds one replica on part of one GPU; this model needs "
                             f"{base.gpus_per_replica} GPUs per replica")
        self.base, self.profile = base, profile
        self.speed_frac = profile.speed_frac
        self.b_max = float(min(base.b_max, b_max))
        self.b_min = float(min(base.b_min, self.b_max))
        self.points = base.points

    def power_w(self, batch, idle_w: float):
        """The *full* GPU's power at ``batch`` (the cluster takes ``speed_frac`` of it above idle). [W]"""
        return self.base.power_w(batch, idle_w)

    def tokens_per_s(self, batch):
        return self.speed_frac * self.base.tokens_per_s(batch)

    def itl_ms(self, batch):
        return self.base.itl_ms(batch) / self.speed_frac

    def itl_p99_ms(self, batch):
        return self.base.itl_p99_ms(batch) / self.speed_frac

    def at_batch(self, batch: float, idle_w: float, median: bool = True) -> tuple[float, float, float, float]:
        """The four methods above at one batch, from the base curves' ``at_batch`` (``median=False``: the
        median ITL left out, NaN). [W, 1/s, ms, ms]"""
        p_w, tokens, itl, itl_p99 = self.base.at_batch(batch, idle_w, median)
        return p_w, float(self.speed_frac * tokens), itl / self.speed_frac, itl_p99 / self.speed_frac

    def tokens_at(self, batch: float) -> float:
        """:meth:`at_batch`'s ``tokens_per_s`` alone. [1/s]"""
        return float(self.speed_frac * self.base.tokens_at(batch))


def mig_problems(gpu: str, gpu_memory_gb: float, model: str, profile_name: str) -> list[str]:
    """What makes ``model`` on MIG profile ``profile_name`` of ``gpu`` impossible (empty: fine)."""
    try:
        known = profiles(gpu, gpu_memory_gb)
    except ValueError as exc:
        return [str(exc)]
    if profile_name not in known:
        return [f"mig_profile = {profile_name!r}: not a MIG profile of the {gpu}; known: {', '.join(known)}"]
    if kv_frac(known[profile_name], model, gpu_memory_gb) <= 0:
        fit = [n for n, p in known.items() if kv_frac(p, model, gpu_memory_gb) > 0]
        return [f"mig_profile = {profile_name!r}: {model}'s weights ({WEIGHTS_GB[model]:g} GB) do not fit its "
                f"{known[profile_name].memory_gb:g} GB; profiles that hold them: {', '.join(fit) or 'none'}"]
    return []
