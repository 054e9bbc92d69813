"""Fleet DR allocation (Carbon Responder): split a required reduction across workloads,
efficiently (least total performance loss) or fairly (equal relative loss), and report both.

Carbon Responder (Zhang et al., "Carbon Responder: Coordinating Demand Response for the
Datacenter Fleet", arXiv:2311.08589, 2023) curtails a fleet's power by choosing, per
workload, how far down its power-performance curve to go: *efficient* splits minimise the
fleet's performance loss for the MW asked, *fair* splits give every workload the same
relative loss. Its finding, which this module reproduces mechanically: the efficient split
loses less performance for the same MW, the fair split spreads the pain.

Curves (:class:`Curve`) come from the datacenter package's own physics:

* training (:func:`training_curve`): a partition of ``n_gpus`` GPUs whose jobs draw
  ``power_frac`` of the idle-to-TDP range, capped from TDP down to the lowest settable
  limit; speed and power from the Zeus cap curves exactly as the cluster applies them
  (relative to the same job at TDP);
* inference (:func:`inference_curve`): a fleet of replicas whose running batch is lowered
  from ``batch`` (ML.ENERGY fits): power per GPU and output tokens/s both fall.

Loss of workload ``i`` at reduction ``r_i``: ``loss_i = 1 - perf_i(p_max,i - r_i)`` (a fraction
of its own performance). Fleet loss = ``Σ w_i loss_i / Σ w_i`` with weights ``w_i`` (default
the workload's GPU count: loss in GPU-equivalents).

* fair: the one ``ℓ`` with ``Σ r_i(ℓ) = R``, ``r_i(ℓ)`` the reduction at relative loss ``ℓ``
  (bisection; a workload at its floor gives no more);
* efficient: minimise ``Σ w_i loss_i(r_i)`` subject to ``Σ r_i = R``, by dynamic programming
  over a grid of ``R / n_grid`` MW steps (exact on the grid for any curve shape, convex or
  not); the fair split is a candidate too, so efficient <= fair holds by construction.

When ``R`` exceeds what all workloads can give, each gives its most and ``shortfall_mw``
reports the rest.

Adapter: the workloads are sim params (they name the outputs); model ``Allocator`` reads
``dr_reduction_mw`` and writes, per workload ``<name>``, ``r_<name>_mw`` and
``loss_<name>_frac`` of the chosen ``policy`` plus the setpoint that achieves it
(``p_cap_<name>_w`` for training, ``n_batch_max_<name>`` for inference), and both fleet
losses ``loss_efficient_frac`` / ``loss_fair_frac``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, field_validator

from cosim.sdk import Params, SingleModelSim
from cosim.adapters.datacenter.hardware import gpu_spec
from cosim.adapters.datacenter.inference import batch_curves
from cosim.adapters.datacenter.training import capped


@dataclass
class Curve:
    """A workload's power-performance curve (points with power increasing).

    Attributes:
        name: label.
        p_mw: power at each point. [MW]
        perf_frac: performance at each point, 1 at the top point. [-]
        knob: the setpoint at each point (a cap in W, a batch size). [knob unit]
        weight: importance in the fleet's loss. [-]
    """

    name: str
    p_mw: np.ndarray
    perf_frac: np.ndarray
    knob: np.ndarray
    weight: float = 1.0

    def __post_init__(self):
        order = np.argsort(self.p_mw, kind="stable")
        self.p_mw = np.asarray(self.p_mw, float)[order]
        self.perf_frac = np.maximum.accumulate(np.asarray(self.perf_frac, float)[order])
        self.knob = np.asarray(self.knob, float)[order]
        if len(self.p_mw) < 2:
            raise ValueError(f"curve {self.name!r} needs at least two points")

    @property
    def r_max_mw(self) -> float:
        """The most this workload can give. [MW]"""
        return float(self.p_mw[-1] - self.p_mw[0])

    def loss_frac(self, r_mw) -> np.ndarray:
        """Relative performance loss at reduction ``r_mw``. [-]"""
        p = self.p_mw[-1] - np.clip(r_mw, 0.0, self.r_max_mw)
        return 1.0 - np.interp(p, self.p_mw, self.perf_frac) / self.perf_frac[-1]

    def reduction_at_loss(self, loss_frac: float) -> float:
        """The largest reduction whose loss is at most ``loss_frac``. [MW]"""
        perf = self.perf_frac / self.perf_frac[-1]
        target = 1.0 - loss_frac
        if target <= perf[0]:
            return self.r_max_mw
        # lowest power reaching the target performance (perf non-decreasing in p)
        i = int(np.searchsorted(perf, target, side="left"))
        if i == 0:
            return self.r_max_mw
        p0, p1, f0, f1 = self.p_mw[i - 1], self.p_mw[i], perf[i - 1], perf[i]
        p = p1 if f1 == f0 else p0 + (target - f0) * (p1 - p0) / (f1 - f0)
        return float(self.p_mw[-1] - p)

    def knob_at(self, r_mw: float) -> float:
        """The setpoint that gives reduction ``r_mw``. [knob unit]"""
        return float(np.interp(self.p_mw[-1] - min(max(r_mw, 0.0), self.r_max_mw), self.p_mw, self.knob))


# -- curves from the datacenter physics ----------------------------------------------------------
def training_curve(name: str, gpu: str, n_gpus: int, power_frac: float = 0.6, n_points: int = 60,
                   weight: float | None = None) -> Curve:
    """Power-performance of a training partition under a per-GPU cap (Zeus curves). [MW, -]"""
    spec = gpu_spec(gpu)
    p_unc = spec.idle_w + power_frac * (spec.tdp_w - spec.idle_w)
    caps = np.linspace(spec.p_limit_min_w, spec.tdp_w, n_points)
    speed, power = capped(caps / p_unc)
    speed_tdp, power_tdp = capped(spec.tdp_w / p_unc)
    speed = np.minimum(speed / speed_tdp, 1.0)
    p_gpu = np.maximum(np.minimum(p_unc * np.minimum(power / power_tdp, 1.0), caps), spec.idle_w)
    return Curve(name, n_gpus * p_gpu / 1e6, speed, caps, float(n_gpus) if weight is None else weight)


def inference_curve(name: str, model: str, gpu: str, replicas: int, batch: float, n_points: int = 60,
                    weight: float | None = None) -> Curve:
    """Power-throughput of an inference fleet as its running batch is lowered (ML.ENERGY fits). [MW, -]"""
    spec = gpu_spec(gpu)
    curves = batch_curves(model, gpu)
    batches = np.geomspace(1.0, batch, n_points)
    n_gpus = replicas * curves.gpus_per_replica
    p_mw = n_gpus * curves.power_w(batches, spec.idle_w) / 1e6
    tput = curves.tokens_per_s(batches)
    return Curve(name, p_mw, tput / tput[-1], batches, float(n_gpus) if weight is None else weight)


# -- the two splits ----------------------------------------------------------------------------------
@dataclass
class Split:
    """One allocation. [MW, -]"""

    r_mw: np.ndarray
    loss_frac: np.ndarray
    fleet_loss_frac: float
    shortfall_mw: float


def _split(curves: list[Curve], r_mw: np.ndarray, asked_mw: float) -> Split:
    loss = np.array([c.loss_frac(r) for c, r in zip(curves, r_mw)], float)
    w = np.array([c.weight for c in curves], float)
    return Split(r_mw, loss, float(w @ loss / w.sum()), max(asked_mw - float(r_mw.sum()), 0.0))


def fair_split(curves: list[Curve], r_total_mw: float, tol_mw: float = 1e-9) -> Split:
    """Equal relative loss for every workload (bisection on the loss)."""
    r_max = np.array([c.r_max_mw for c in curves])
    if r_total_mw >= r_max.sum():
        return _split(curves, r_max, r_total_mw)
    if r_total_mw <= 0:  # nothing asked: nothing given (bisection would stop a hair above 0)
        return _split(curves, np.zeros(len(curves)), 0.0)
    low, high = 0.0, 1.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        given = sum(c.reduction_at_loss(mid) for c in curves)
        low, high = (mid, high) if given < r_total_mw else (low, mid)
        if high - low < 1e-12:
            break
    r = np.array([c.reduction_at_loss(high) for c in curves])
    excess = r.sum() - r_total_mw  # flat stretches can overshoot: trim the overshoot proportionally
    if excess > tol_mw:
        r = r - excess * r / r.sum()
    return _split(curves, r, r_total_mw)


def efficient_split(curves: list[Curve], r_total_mw: float, n_grid: int = 200) -> Split:
    """Least weighted loss for the total (dynamic programming on a grid, fair split as a candidate)."""
    r_max = np.array([c.r_max_mw for c in curves])
    if r_total_mw >= r_max.sum():
        return _split(curves, r_max, r_total_mw)
    fair = fair_split(curves, r_total_mw)
    if r_total_mw <= 0:
        return fair
    unit = r_total_mw / n_grid
    steps = np.arange(n_grid + 1)
    w = np.array([c.weight for c in curves], float)
    best = np.zeros(n_grid + 1)  # best[k]: least loss giving k units with the workloads so far
    best[1:] = np.inf
    choice = []
    for c, wi in zip(curves, w):
        cost = np.where(steps * unit <= c.r_max_mw + 1e-12, wi * c.loss_frac(steps * unit), np.inf)
        total = best[None, :] + cost[:, None]  # [units to this workload, units before]
        new = np.full(n_grid + 1, np.inf)
        pick = np.zeros(n_grid + 1, int)
        for k in range(n_grid + 1):
            options = total[np.arange(k + 1), k - np.arange(k + 1)]
            j = int(np.argmin(options))
            new[k], pick[k] = options[j], j
        best = new
        choice.append(pick)
    if not np.isfinite(best[n_grid]):
        return fair
    r = np.zeros(len(curves))
    k = n_grid
    for i in range(len(curves) - 1, -1, -1):
        r[i] = choice[i][k] * unit
        k -= choice[i][k]
    dp = _split(curves, r, r_total_mw)
    return dp if dp.fleet_loss_frac <= fair.fleet_loss_frac else fair


# -- adapter --------------------------------------------------------------------------------------------
class WorkloadParams(Params):
    """One workload of the fleet.

    Attributes:
        name: label (lower case, digits, _); names the outputs.
        kind: ``training`` or ``inference``.
        gpu: GPU model (catalogue key).
        n_gpus: training GPUs. [-]
        power_frac: training jobs' activity, 0 = idle, 1 = TDP. [-]
        model, replicas, batch: inference model, replicas and its running batch now. [-, -, -]
        weight: importance in the fleet loss (default its GPU count). [-]
    """

    name: str
    kind: Literal["training", "inference"]
    gpu: str = "H100-SXM"
    n_gpus: int = Field(default=0, ge=0)
    power_frac: float = Field(default=0.6, gt=0, le=1)
    model: str = "llama-3.1-70b"
    replicas: int = Field(default=0, ge=0)
    batch: float = Field(default=128.0, ge=1)
    weight: float | None = Field(default=None, gt=0)

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not name.replace("_", "").isalnum() or not name.islower():
            raise ValueError(f"name {name!r} must be lower case letters, digits and _")
        return name


def curve_of(w: WorkloadParams) -> Curve:
    if w.kind == "training":
        return training_curve(w.name, w.gpu, w.n_gpus, w.power_frac, weight=w.weight)
    return inference_curve(w.name, w.model, w.gpu, w.replicas, w.batch, weight=w.weight)


class SimParams(Params):
    """Params of one fleet_dr simulator: the fleet's workloads."""

    workloads: list[WorkloadParams] = Field(min_length=1)


class AllocatorParams(Params):
    """Params of one ``Allocator``.

    Attributes:
        policy: which split drives the setpoints, ``efficient`` or ``fair`` (both are reported).
        n_grid: grid steps of the efficient split. [-]
    """

    policy: Literal["efficient", "fair"] = "efficient"
    n_grid: int = Field(default=200, ge=10, le=2000)


def _outputs(workloads: list[WorkloadParams]) -> list[str]:
    names = ["loss_efficient_frac", "loss_fair_frac", "dr_allocated_mw", "dr_shortfall_mw"]
    for w in workloads:
        knob = f"p_cap_{w.name}_w" if w.kind == "training" else f"n_batch_max_{w.name}"
        names += [f"r_{w.name}_mw", f"loss_{w.name}_frac", knob]
    return names


class FleetDrSim(SingleModelSim):
    """Fleet DR allocators (model ``Allocator``)."""

    MODEL, PARAMS, ROLE = "Allocator", AllocatorParams, "controller"
    INPUTS, OUTPUTS = ("dr_reduction_mw",), tuple(_outputs([]))
    SimParams = SimParams
    EXAMPLE = {
        "sim": {"workloads": [{"name": "train", "kind": "training", "n_gpus": 512},
                              {"name": "chat", "kind": "inference", "model": "llama-3.1-8b", "replicas": 32}]},
        "models": {"Allocator": {}},
    }

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        return cls.single_meta(outputs=_outputs(sim_params.workloads))

    def setup(self) -> None:
        super().setup()
        self.curves = [curve_of(w) for w in self.params.workloads]
        self.cache: dict[tuple[float, int], tuple[Split, Split]] = {}  # requests hold for hours

    def build(self, eid: str, params: AllocatorParams) -> AllocatorParams:
        return params

    def advance(self, p: AllocatorParams, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        asked = float(inputs.get("dr_reduction_mw") or 0.0)
        key = (asked, p.n_grid)
        if key not in self.cache:
            self.cache[key] = (efficient_split(self.curves, asked, p.n_grid), fair_split(self.curves, asked))
        eff, fair = self.cache[key]
        chosen = eff if p.policy == "efficient" else fair
        out = {"loss_efficient_frac": eff.fleet_loss_frac, "loss_fair_frac": fair.fleet_loss_frac,
               "dr_allocated_mw": float(chosen.r_mw.sum()), "dr_shortfall_mw": chosen.shortfall_mw}
        for w, c, r, loss in zip(self.params.workloads, self.curves, chosen.r_mw, chosen.loss_frac):
            knob = f"p_cap_{w.name}_w" if w.kind == "training" else f"n_batch_max_{w.name}"
            out.update({f"r_{w.name}_mw": float(r), f"loss_{w.name}_frac": float(loss), knob: c.knob_at(r)})
        return out
