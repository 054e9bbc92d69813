"""Power smoothing of a GPU cluster: a GPU power floor, a ramp limiter and rack energy storage.

Synchronous training swings a cluster's power by tens to hundreds of MW at 0.2-3 Hz (Choukse et al.,
"Power stabilization for AI training datacenters", arXiv 2508.14318); large-load interconnection specs
cap the swing energy in a 0.1-20 Hz band and the ramps in MW/s (the ``swing`` KPI checks both). The
mitigations NVIDIA ships, as plain models (no mosaik; wired into :class:`~.cluster.GpuCluster`):

* :class:`PowerFloor` — GB200 power smoothing's *power floor*: a running job's GPUs draw at least
  ``power_floor_frac`` of TDP (NVIDIA allows 20-90 % of TDP), burning power in communication phases,
  stalls and checkpoints, so the trough of the swing is lifted. It costs energy only: progress is set
  by compute, which the floor does not change.
* :class:`RampLimiter` — its *ramp limiter*: the training GPUs' summed power rises and falls at most
  at ``ramp_up_mw_s`` / ``ramp_down_mw_s``, and starts falling only after the demand has stayed below
  it for ``ramp_down_hold_s`` (NVIDIA's ramp-down hysteresis, which lets short dips pass unseen). A
  limited fall burns energy; a limited rise withholds power from compute, which costs time: reported as
  ``ramp_lost_gpu_h``, the GPU-hours of work withheld, taking speed as proportional to power above idle
  (*our* linear assumption; measured cap curves are concave, so it is an upper bound). The loss is
  reported, not fed back into the jobs' progress.
* :class:`RackStorage` — GB300 NVL72's energy storage in the rack power shelves ("smooth power spikes
  ... and reduce peak grid demand by up to 30 %", NVIDIA, "How New GB300 NVL72 Features Provide Steady
  Power for AI", developer blog, 2025: a vendor claim). The racks draw a first-order low-pass of their
  IT power (time constant ``rack_tau_s``) while the store has room or energy, pulled slowly back to half
  charge, losing a round-trip efficiency split evenly between charge and discharge. NVIDIA states no
  storage size per GPU there: ``rack_storage_per_gpu_j``, the time constant and the efficiency are
  *ours* (a 0.5 Hz swing of 300 W per GPU moves about 300 W x 1 s / π ≈ 100 J in and out).

All three act on the step-mean power the cluster computes: at steps <= 1 s, where the cluster resolves
the compute/communication swing, that is the swing; at longer steps the swing is averaged out and their
effect and cost are understated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: The settable power floor of GB200 power smoothing: 20-90 % of TDP (NVIDIA). [-]
FLOOR_FRAC_RANGE = (0.2, 0.9)


@dataclass(frozen=True)
class PowerFloor:
    """The least power a running job's GPUs draw.

    Args:
        floor_frac: the floor as a share of TDP, within :data:`FLOOR_FRAC_RANGE`. [-]
        tdp_w: the GPU's TDP. [W]
    """

    floor_frac: float
    tdp_w: float

    def __post_init__(self) -> None:
        low, high = FLOOR_FRAC_RANGE
        if not low <= self.floor_frac <= high:
            raise ValueError(f"power_floor_frac = {self.floor_frac:g} is outside [{low:g}, {high:g}] (GB200 power "
                             "smoothing sets 20-90 % of TDP); give a value inside, or 0 to turn the floor off")

    @property
    def floor_w(self) -> float:
        """The floor per GPU. [W]"""
        return self.floor_frac * self.tdp_w

    def lift(self, p_gpu_w: np.ndarray) -> np.ndarray:
        """Per-GPU power of running jobs, lifted to the floor. [W]"""
        return np.maximum(p_gpu_w, self.floor_w)


@dataclass
class RampLimiter:
    """A rate limit on a summed power, with a hold before it falls.

    Args:
        ramp_up_mw_s: the fastest rise. [MW/s]
        ramp_down_mw_s: the fastest fall; default ``ramp_up_mw_s``. [MW/s]
        hold_s: how long the demand must stay below the output before the output falls. [s]
    """

    ramp_up_mw_s: float
    ramp_down_mw_s: float | None = None
    hold_s: float = 0.0
    p_out_mw: float | None = None  # the last output (None before the first step)
    below_s: float = 0.0  # how long the demand has stayed below the output

    def __post_init__(self) -> None:
        if self.ramp_down_mw_s is None:
            self.ramp_down_mw_s = self.ramp_up_mw_s
        if not (self.ramp_up_mw_s > 0 and self.ramp_down_mw_s > 0 and self.hold_s >= 0):
            raise ValueError(f"ramp limits must be > 0 MW/s and the hold >= 0 s; got up {self.ramp_up_mw_s:g}, "
                             f"down {self.ramp_down_mw_s:g} MW/s, hold {self.hold_s:g} s")

    def step(self, demand_mw: float, dt_s: float) -> float:
        """The limited power over the next ``dt_s`` for a demand of ``demand_mw``. [MW]"""
        last = self.p_out_mw
        if last is None:  # the first step: nothing to ramp from
            out = demand_mw
        elif demand_mw >= last:
            self.below_s = 0.0
            out = min(demand_mw, last + self.ramp_up_mw_s * dt_s)
        else:
            self.below_s += dt_s
            held = self.below_s <= self.hold_s + 1e-9  # (a sum of float steps: 5 x 0.1 s is a 0.5 s hold)
            out = last if held else max(demand_mw, last - self.ramp_down_mw_s * dt_s)
        self.p_out_mw = out
        return out


@dataclass
class RackStorage:
    """Energy storage in the racks' power shelves, smoothing what the racks draw.

    Args:
        e_max_mj: usable energy. [MJ]
        tau_s: time constant of the low-pass the racks' draw follows. [s]
        round_trip_frac: round-trip efficiency (charge and discharge each lose its square root). [-]
        soc_frac: state of charge at the start. [-]
        restore_s: time constant pulling the charge back to ``soc_set_frac``. [s]
    """

    e_max_mj: float
    tau_s: float = 1.0
    round_trip_frac: float = 0.95
    soc_frac: float = 0.5
    restore_s: float | None = None  # default 20 tau
    soc_set_frac: float = 0.5
    p_smooth_mw: float | None = field(default=None)  # the low-pass state

    def __post_init__(self) -> None:
        if not (self.e_max_mj > 0 and self.tau_s > 0 and 0 < self.round_trip_frac <= 1 and 0 <= self.soc_frac <= 1):
            raise ValueError(f"rack storage needs energy > 0, tau_s > 0, 0 < round_trip_frac <= 1 and soc in [0, 1]; "
                             f"got {self.e_max_mj:g} MJ, {self.tau_s:g} s, {self.round_trip_frac:g}, {self.soc_frac:g}")
        if self.restore_s is None:
            self.restore_s = 20.0 * self.tau_s
        self.eta_frac = math.sqrt(self.round_trip_frac)

    def step(self, p_load_mw: float, dt_s: float) -> tuple[float, float, float]:
        """One step: ``(grid-side draw [MW], into the store at its terminal [MW], conversion loss [MW])``.

        Consumer sign: the draw is the load plus what goes into the store (negative when it gives);
        the energy stored changes by (into - loss) x dt.
        """
        if self.p_smooth_mw is None:
            self.p_smooth_mw = p_load_mw
        smooth = self.p_smooth_mw + (p_load_mw - self.p_smooth_mw) * (1.0 - math.exp(-dt_s / self.tau_s))
        restore_mw = (self.soc_set_frac - self.soc_frac) * self.e_max_mj / self.restore_s
        # the pull back to the set charge stays between the smoothed draw and the load: it never makes a new peak
        target_mw = smooth + restore_mw
        target_mw = min(target_mw, max(smooth, p_load_mw)) if restore_mw > 0 else max(target_mw, min(smooth, p_load_mw))
        into_mw = target_mw - p_load_mw
        e_mj = self.soc_frac * self.e_max_mj
        if into_mw >= 0:  # charging: the room left caps it
            into_mw = min(into_mw, (self.e_max_mj - e_mj) / (self.eta_frac * dt_s))
            loss_mw = into_mw * (1.0 - self.eta_frac)
        else:  # discharging: the energy left caps it (the store gives eta x what it loses)
            into_mw = max(into_mw, -e_mj * self.eta_frac / dt_s)
            loss_mw = -into_mw * (1.0 / self.eta_frac - 1.0)
        e_mj += (into_mw - loss_mw) * dt_s
        self.soc_frac = min(max(e_mj / self.e_max_mj, 0.0), 1.0)
        grid_mw = p_load_mw + into_mw
        # a full or empty store passes the load through: the low-pass follows what is drawn (no wind-up)
        self.p_smooth_mw = grid_mw if abs(grid_mw - target_mw) > 1e-12 else smooth
        return grid_mw, into_mw, loss_mw


@dataclass
class Smoothing:
    """The three mitigations of one cluster and what they cost so far.

    Args:
        floor: the GPU power floor, or None.
        limiter: the ramp limiter on the training GPUs' summed power, or None.
        storage: the rack storage on the IT power, or None.
    """

    floor: PowerFloor | None = None
    limiter: RampLimiter | None = None
    storage: RackStorage | None = None
    p_floor_w: float = 0.0  # what the floor added this step (set by the cluster) [W]
    e_floor_mwh: float = 0.0  # energy the floor and limited falls burnt so far [MWh]
    ramp_lost_gpu_h: float = 0.0  # work a limited rise withheld so far [GPU-h]

    def limit_training(self, gpu_w: float, busy_gpus: float, idle_w: float, dt_s: float) -> float:
        """The training GPUs' summed power after the ramp limiter (counts its costs). [W]"""
        if self.limiter is None:
            return gpu_w
        out_w = self.limiter.step(gpu_w / 1e6, dt_s) * 1e6
        if out_w < gpu_w:  # a limited rise: the busy GPUs lack (gpu_w - out_w) of their power above idle
            above_w = gpu_w - busy_gpus * idle_w  # (idle GPUs draw idle either way)
            share = min(1.0, (gpu_w - out_w) / above_w) if above_w > 0 else 0.0
            self.ramp_lost_gpu_h += busy_gpus * share * dt_s / 3600.0
        return out_w

    def outputs(self, p_burn_mw: float, dt_s: float) -> dict[str, float]:
        """The cost outputs of a step whose floor and limited falls burnt ``p_burn_mw``."""
        self.e_floor_mwh += p_burn_mw * dt_s / 3600.0
        return {"p_floor_mw": float(p_burn_mw), "e_floor_mwh": float(self.e_floor_mwh),
                "ramp_lost_gpu_h": float(self.ramp_lost_gpu_h)}


def smooth_training(sm: Smoothing, train: dict, idle_w: float, dt_s: float) -> float:
    """Apply the ramp limiter to the training GPUs' power in ``train`` (``gpu_w``, ``it_w``: changed in
    place); what the floor and a limited fall burn this step. [W]

    The per-class powers (``p_train_<class>_mw``) stay the GPUs' demand: the limiter acts on their sum.
    """
    gpu_w = train["gpu_w"]
    limited_w = sm.limit_training(gpu_w, train["busy_gpus"], idle_w, dt_s)
    train["gpu_w"] = limited_w
    train["it_w"] += limited_w - gpu_w
    return sm.p_floor_w + max(limited_w - gpu_w, 0.0)


def smooth_outputs(sm: Smoothing, out: dict[str, float], burn_w: float, losses, q_per_p: float,
                   dt_s: float) -> dict[str, float]:
    """The cluster's outputs with the rack storage between the servers and the delivery chain, and the
    smoothing outputs. ``p_it_mw`` becomes the racks' draw (servers plus what goes into the store),
    ``p_gpu_mw`` stays the GPUs' own; the heat is every watt drawn less what the store kept. [MW]"""
    out.update(sm.outputs(burn_w / 1e6, dt_s))
    if sm.storage is None:
        out.update({"rack_soc_frac": float("nan"), "p_rack_store_mw": 0.0, "p_rack_loss_mw": 0.0})
        return out
    grid_it_mw, into_mw, loss_mw = sm.storage.step(out["p_it_mw"], dt_s)
    p_loss_mw = float(losses.loss_mw(grid_it_mw))
    p_mw = grid_it_mw + p_loss_mw
    heat_mw = p_mw - (into_mw - loss_mw)
    liquid_mw = out["q_heat_liquid_mw"]
    out.update({"p_mw": float(p_mw), "p_it_mw": float(grid_it_mw), "p_loss_mw": p_loss_mw,
                "q_mvar": float(p_mw * q_per_p), "q_heat_mw": float(heat_mw), "q_heat_air_mw": float(heat_mw - liquid_mw),
                "rack_soc_frac": float(sm.storage.soc_frac), "p_rack_store_mw": float(into_mw),
                "p_rack_loss_mw": float(loss_mw)})
    return out


#: Outputs a cluster with smoothing adds (sim param ``smoothing_outputs = true``).
SMOOTHING_OUTPUTS: tuple[str, ...] = ("p_floor_mw", "e_floor_mwh", "ramp_lost_gpu_h", "rack_soc_frac",
                                      "p_rack_store_mw", "p_rack_loss_mw")
