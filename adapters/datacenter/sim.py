"""Datacenter: a GPU cluster running training jobs and LLM inference, with power knobs.

The physics lives in plain modules (no mosaik): :mod:`.hardware` (GPU and node catalogue,
UPS/PDU losses), :mod:`.training` (jobs, Acme power, Zeus cap curves), :mod:`.scheduler`
(gang scheduling state on nodes, :mod:`.nodes`) with its policies as plug-ins
(:mod:`.policies`: ``easy``, ``fifo``, ``pwr``, ``fgd``, ``compass_abs``, ``themis``, ``srpt``,
``elastic``, ...), :mod:`.inference` (arrivals, continuous batching, ML.ENERGY curves; MIG
slices in :mod:`.mig`) and :mod:`.cluster` (:class:`GpuCluster`, one step of everything).
The params are in :mod:`.params`, a cluster is built from them (and checked) in :mod:`.build`;
this module translates mosaik calls.

Sim param ``scheduling_outputs = true`` adds :data:`.observe.SCHEDULING_OUTPUTS` (idle and
fragmented GPUs, JCT/wait tails, finish-time fairness, sheddable power) to every cluster's
outputs; off by default, so existing scenarios record the columns they always had.
Sim param ``job_moves = true`` lets flexible training jobs move between clusters (:mod:`.moves`:
exported at one site, imported into ``training.n_guest_slots`` at another, relayed by
``controllers/load_shift``); off by default.
An entity's ``smoothing`` table turns on the GPU power floor, the ramp limiter and the rack energy
storage of :mod:`.smoothing` (GB200/GB300-style power smoothing; every knob off by default, and off
the cluster steps exactly as without it); sim param ``smoothing_outputs = true`` adds
:data:`.smoothing.SMOOTHING_OUTPUTS` (what they cost, the store's charge).

Model ``Cluster``. Inputs (optional knobs; absent means unconstrained): ``p_cap_w`` (every
GPU), ``p_cap_high_w`` / ``p_cap_normal_w`` / ``p_cap_low_w`` (training classes),
``p_cap_infer_w``, ``p_limit_mw`` (facility limit on ``p_mw``), ``n_batch_max``,
``pause_flexible_frac``, ``replicas_frac``, and per inference fleet ``n_batch_max_<fleet>``
and ``replicas_<fleet>_frac`` (the tighter of a fleet's and the global one applies), and
``demand_<fleet>_ratio`` (multiplies the fleet's arrival rate: requests routed in from, or
out to, other sites; see ``controllers/load_shift``). Outputs: :data:`.cluster.OUTPUTS`; ``p_mw`` is
IT plus UPS/PDU losses (consumer sign), ``p_it_mw`` the servers alone, and
``q_heat_mw = q_heat_air_mw + q_heat_liquid_mw = p_mw``.

Example ``[entities]`` entry::

    campus = { sim = "dc", model = "Cluster", node = "DGX-H100", n_gpus = 1024,
               training = { source = "synthetic", n_jobs = 300 },
               inference = [{ name = "chat", model = "llama-3.1-70b", replicas = 64,
                              rate_req_s = 200.0 }] }
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from cosim.sdk import ScenarioContext, SingleModelSim
from cosim.adapters.datacenter.build import build_cluster, cluster_problems
from cosim.adapters.datacenter.cluster import OUTPUTS, GpuCluster, Knobs
from cosim.adapters.datacenter.hardware import NODES, gpu_spec
from cosim.adapters.datacenter.moves import MOVE_INPUTS, MOVE_OUTPUTS, JobMoves
from cosim.adapters.datacenter.observe import SCHEDULING_OUTPUTS
from cosim.adapters.datacenter.params import ClusterParams, DatacenterSimParams, SmoothingParams, TrainingParams
from cosim.adapters.datacenter.policies import describe as describe_policies
from cosim.adapters.datacenter.smoothing import SMOOTHING_OUTPUTS
from cosim.adapters.datacenter.training import CLASSES

__all__ = ["DEMAND_RATIO_MAX", "INPUTS", "DatacenterSim", "fleet_inputs", "knobs_from"]

#: the largest ``demand_<fleet>_ratio`` a gym action space offers (a site taking in 9x its own demand). [-]
DEMAND_RATIO_MAX = 10.0
INPUTS = ("p_cap_w", *(f"p_cap_{c}_w" for c in CLASSES), "p_cap_infer_w", "p_limit_mw", "n_batch_max",
          "pause_flexible_frac", "replicas_frac")


class DatacenterSim(SingleModelSim):
    """GPU clusters (model ``Cluster``): training + inference power, heat and performance."""

    MODEL, PARAMS, ROLE = "Cluster", ClusterParams, "it"
    SimParams = DatacenterSimParams
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    # any_inputs: per-fleet knob names depend on the entity's fleets; cosim's validator
    # still checks every connection against INPUTS + entity_inputs()
    ANY_INPUTS = True
    EXAMPLE = {
        "models": {"Cluster": {
            "node": "DGX-H100", "n_gpus": 64,
            "training": {"source": "synthetic", "n_jobs": 20, "sizes_gpus": [1, 8, 32],
                         "size_weights": [0.5, 0.4, 0.1]},
            "inference": [{"name": "chat", "model": "llama-3.1-8b", "replicas": 4, "rate_req_s": 5.0}],
            "smoothing": {"power_floor_frac": 0.5, "ramp_up_mw_s": 0.01, "rack_storage_per_gpu_j": 500.0},
        }},
        "sim": {"scheduling_outputs": True, "smoothing_outputs": True},
    }

    @classmethod
    def meta_for(cls, sim_params: DatacenterSimParams) -> dict[str, Any]:
        if not sim_params.scheduling_outputs and not sim_params.job_moves and not sim_params.smoothing_outputs:
            return cls.META
        outputs = (*OUTPUTS, *(SCHEDULING_OUTPUTS if sim_params.scheduling_outputs else ()),
                   *(MOVE_OUTPUTS if sim_params.job_moves else ()),
                   *(SMOOTHING_OUTPUTS if sim_params.smoothing_outputs else ()))
        return cls.single_meta(outputs=outputs, inputs=(*INPUTS, *(MOVE_INPUTS if sim_params.job_moves else ())))

    @classmethod
    def listing(cls) -> list[str]:
        """Lines ``cosim list`` adds: the training scheduling policies and their params."""
        lines = ["training.policy (adapters/datacenter/policies/, one file each):"]
        for name, (summary, params) in describe_policies().items():
            lines.append(f"  {name}: {summary}")
            if params:
                lines.append(f"    policy_params: {', '.join(params)}")
        return lines

    @classmethod
    def check_entity(cls, model: str, params: ClusterParams, ctx: ScenarioContext,
                     sim_params: BaseModel | None = None) -> list[str]:
        problems = cluster_problems(params, ctx.duration_s)
        if params is not None and params.training.n_guest_slots and sim_params is not None \
                and not getattr(sim_params, "job_moves", False):
            problems.append(f"training.n_guest_slots = {params.training.n_guest_slots} needs job_moves = true in the "
                            "entity's [sims] table (the inputs that bring jobs in); set it, or drop n_guest_slots")
        if params is not None and sim_params is not None and getattr(sim_params, "job_moves", False):
            problems += _move_problems(params.training)
        if params is not None and params.smoothing.on:
            problems += _smoothing_warnings(params.smoothing, ctx, sim_params)
        return problems

    @classmethod
    def entity_inputs(cls, model: str, params: BaseModel | None) -> list[str]:
        """Per-fleet knobs of one Cluster: ``n_batch_max_<fleet>``, ``replicas_<fleet>_frac``,
        ``demand_<fleet>_ratio``."""
        return fleet_inputs([f.name for f in params.inference]) if params is not None else []

    @classmethod
    def input_bounds(cls, model: str, params: BaseModel | None,
                     sim_params: BaseModel | None = None) -> dict[str, tuple[float, float]]:
        """Knob ranges of one Cluster: caps within its GPUs' settable limits (``p_cap_w`` one that
        every GPU takes), fractions in [0, 1], batch caps from 1 to the fleets' ``max_batch``. [W, -, -]"""
        if params is None or params.node not in NODES or any((f.node or params.node) not in NODES
                                                              for f in params.inference):
            return {}
        train = gpu_spec(NODES[params.node].gpu)
        fleet_gpus = [gpu_spec(NODES[f.node or params.node].gpu) for f in params.inference]
        every = [train, *fleet_gpus]
        bounds = {"p_cap_w": (max(g.p_limit_min_w for g in every), min(g.tdp_w for g in every)),
                  **{f"p_cap_{c}_w": (train.p_limit_min_w, train.tdp_w) for c in CLASSES},
                  "pause_flexible_frac": (0.0, 1.0), "replicas_frac": (0.0, 1.0)}
        if params.inference:
            bounds["p_cap_infer_w"] = (max(g.p_limit_min_w for g in fleet_gpus), min(g.tdp_w for g in fleet_gpus))
            bounds["n_batch_max"] = (1.0, float(max(f.max_batch for f in params.inference)))
        for f in params.inference:
            bounds[f"n_batch_max_{f.name}"] = (1.0, float(f.max_batch))
            bounds[f"replicas_{f.name}_frac"] = (0.0, 1.0)
            bounds[f"demand_{f.name}_ratio"] = (0.0, DEMAND_RATIO_MAX)
        # a facility limit is never negative; without a rating any size above the draw means no limit
        bounds["p_limit_mw"] = (0.0, params.rated_mw if params.rated_mw is not None else math.inf)
        return bounds

    def build(self, eid: str, params: ClusterParams) -> "_Entity":
        problems = [p for p in cluster_problems(params, self.duration_s) if not p.startswith("warning: ")]
        if problems:
            raise ValueError(f"{eid}: " + "; ".join(problems))
        start = self.start_utc
        hour = start.hour + start.minute / 60 + start.second / 3600
        cluster = build_cluster(params, self.rng(eid), self.duration_s, hour,
                                report_scheduling=self.params.scheduling_outputs,
                                report_smoothing=self.params.smoothing_outputs)
        moves = JobMoves(cluster, params.training.n_guest_slots, f"entities.{eid}") if self.params.job_moves else None
        return _Entity(eid, cluster, {"p_cap_w": params.p_cap_w, "p_limit_mw": params.p_limit_mw}, moves)

    def advance(self, entity: "_Entity", time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        if not inputs and entity.moves is None:  # nothing connected (most runs): the params' knobs, checked once
            if entity.plain_knobs is None:
                knobs = knobs_from(entity.static, [f.name for f in entity.cluster.fleets])
                entity.cluster._check_knobs(knobs)
                entity.plain_knobs = knobs
            return entity.cluster.step(time_s, self.step_s, entity.plain_knobs, check=False)
        names = [f.name for f in entity.cluster.fleets]
        unknown = set(inputs) - set(INPUTS) - set(fleet_inputs(names))
        if entity.moves is not None:
            unknown -= set(MOVE_INPUTS)
        if unknown:
            raise ValueError(f"{entity.eid}: unknown inputs {sorted(unknown)}; fleets are {names}")
        knobs = knobs_from({**entity.static, **inputs}, names)
        if entity.moves is None:
            return entity.cluster.step(time_s, self.step_s, knobs)
        entity.moves.apply(inputs, time_s)  # jobs leave and arrive before the step's scheduling pass
        return entity.moves.report(entity.cluster.step(time_s, self.step_s, knobs))

    @property
    def clusters(self) -> dict[str, GpuCluster]:
        """The physics of each entity (for tests and benchmarks)."""
        return {eid: e.cluster for eid, e in self.entities.items()}


class _Entity:
    """One Cluster entity: its physics and the knob values its params fix."""

    __slots__ = ("eid", "cluster", "static", "moves", "plain_knobs")

    def __init__(self, eid: str, cluster: GpuCluster, static: dict[str, float | None], moves: JobMoves | None = None):
        self.eid, self.cluster, self.static, self.moves = eid, cluster, static, moves
        self.plain_knobs: Knobs | None = None  # knobs_from(static), checked, while no input is set


def _smoothing_warnings(p: SmoothingParams, ctx: ScenarioContext, sim_params: BaseModel | None) -> list[str]:
    """What a study with smoothing on should know: it acts on step means, and its costs need recording."""
    found = []
    if ctx.step_s > 1:
        found.append(f"warning: smoothing acts on the step-mean power, and at the scenario's step_s = {ctx.step_s:g} s "
                     "the sub-second training swing it smooths is averaged out (its effect and cost are understated); "
                     "run the datacenter at step_s <= 1 s to resolve the swing")
    if sim_params is not None and not getattr(sim_params, "smoothing_outputs", False):
        found.append("warning: smoothing is on but its outputs (p_floor_mw, e_floor_mwh, ramp_lost_gpu_h, rack_soc_frac, "
                     "...) are not reported; set smoothing_outputs = true in the entity's [sims] table to record them")
    return found


def _move_problems(t: TrainingParams) -> list[str]:
    """A Cluster under ``job_moves = true`` that can neither take a moved job nor give one moves nothing:
    say so (a trace file may mark jobs flexible itself, so it may give)."""
    if t.n_guest_slots > 0 or t.source == "file":
        return []
    if t.source == "synthetic" and t.n_jobs == 0:
        none = "training.n_jobs = 0"
    elif t.flexible_frac == 0:
        none = "training.flexible_frac = 0"
    else:
        return []
    return [f"training.n_guest_slots = 0 with job_moves = true in the entity's [sims] table: this Cluster can neither "
            f"take a moved job (no guest slot) nor give one ({none}: no flexible job), so job_moves does nothing "
            "for it; give it training.n_guest_slots = <jobs it may hold at once> to receive jobs, or put it in "
            "a [sims] table without job_moves"]


def fleet_inputs(fleet_names: list[str]) -> list[str]:
    """Knob inputs of named inference fleets (unit rule: counts ``n_``, fractions ``_frac``)."""
    return [a for n in fleet_names for a in (f"n_batch_max_{n}", f"replicas_{n}_frac", f"demand_{n}_ratio")]


def knobs_from(values: dict[str, Any], fleet_names: list[str] = ()) -> Knobs:
    """:class:`Knobs` from summed mosaik inputs (absent, ``None`` or NaN = unconstrained)."""
    def get(name):
        value = values.get(name)
        return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)

    return Knobs(p_cap_w=get("p_cap_w"), p_cap_class_w={c: get(f"p_cap_{c}_w") for c in CLASSES},
                 p_cap_infer_w=get("p_cap_infer_w"), p_limit_mw=get("p_limit_mw"), n_batch_max=get("n_batch_max"),
                 pause_flexible_frac=get("pause_flexible_frac"), replicas_frac=get("replicas_frac"),
                 fleet_batch_max={n: get(f"n_batch_max_{n}") for n in fleet_names},
                 fleet_replicas_frac={n: get(f"replicas_{n}_frac") for n in fleet_names},
                 fleet_demand_ratio={n: get(f"demand_{n}_ratio") for n in fleet_names})

