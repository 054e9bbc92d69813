"""Datacenter: a GPU cluster running training jobs and LLM inference, with power knobs.

The physics lives in plain modules (no mosaik): :mod:`.hardware` (GPU and node catalogue,
UPS/PDU losses), :mod:`.training` (jobs, Acme power, Zeus cap curves), :mod:`.scheduler`
(gang scheduling state on nodes, :mod:`.nodes`) with its policies as plug-ins
(:mod:`.policies`: ``easy``, ``fifo``, ``pwr``, ``fgd``, ``compass_abs``, ``themis``, ``srpt``,
``elastic``, ...), :mod:`.inference` (arrivals, continuous batching, ML.ENERGY curves; MIG
slices in :mod:`.mig`) and :mod:`.cluster` (:class:`GpuCluster`, one step of everything).
This module only declares the params and translates mosaik calls.

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
import re
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, Field, field_validator

from cosim.sdk import DataFile, Params, ScenarioContext, SingleModelSim, as_tuple
from cosim.adapters.datacenter.cluster import OUTPUTS, FleetSetup, GpuCluster, Knobs
from cosim.adapters.datacenter.hardware import GPUS, NODES, NodeSpec, gpu_spec, node_spec
from cosim.adapters.datacenter.mig import MigPool, SliceCurves, kv_frac, mig_problems, place_instances
from cosim.adapters.datacenter.mig import profiles as mig_profiles
from cosim.adapters.datacenter.moves import MOVE_INPUTS, MOVE_OUTPUTS, JobMoves, with_guest_slots
from cosim.adapters.datacenter.nodes import SleepParams
from cosim.adapters.datacenter.observe import SCHEDULING_OUTPUTS
from cosim.adapters.datacenter.policies import describe as describe_policies
from cosim.adapters.datacenter.policies import param_problems
from cosim.adapters.datacenter.inference import (
    MLENERGY_GPUS,
    MODELS,
    Fleet,
    batch_curves,
    measured_gpus_per_replica,
    trace_input_tokens,
    trace_profile,
)
from cosim.adapters.datacenter.prefill import prefill_tokens_per_s
from cosim.adapters.datacenter.smoothing import (
    FLOOR_FRAC_RANGE,
    SMOOTHING_OUTPUTS,
    PowerFloor,
    RackStorage,
    RampLimiter,
    Smoothing,
)
from cosim.adapters.datacenter.transient import TransientSetup
from cosim.adapters.datacenter.training import (
    CLASSES,
    ELASTIC_STREAM,
    PHILLY_FILE,
    SIZE_WEIGHTS,
    SIZES_GPUS,
    Jobs,
    TraceError,
    jobs_from_trace,
    read_job_trace,
    sample_power_frac,
    substream,
    synthetic_jobs,
)

#: the largest ``demand_<fleet>_ratio`` a gym action space offers (a site taking in 9x its own demand). [-]
DEMAND_RATIO_MAX = 10.0
INPUTS = ("p_cap_w", *(f"p_cap_{c}_w" for c in CLASSES), "p_cap_infer_w", "p_limit_mw", "n_batch_max",
          "pause_flexible_frac", "replicas_frac")


class TrainingParams(Params):
    """Training workload of a ``Cluster``.

    Attributes:
        source: ``synthetic`` (seeded generator), ``philly`` (the shipped Philly extract) or
            ``file`` (a CSV with ``submitted_time``/``submit_s``, ``runtime_s``, ``num_gpus``,
            optional ``priority``, ``flexible``).
        file: the trace for ``source = "file"``.
        n_jobs: synthetic jobs over ``span_s``. [-]
        span_s: synthetic arrival window; default the scenario duration. [s]
        duration_median_h, duration_sigma_ln, duration_max_h: log-normal job durations. [h, -, h]
        sizes_gpus, size_weights: synthetic job sizes and their weights.
        class_fracs: shares of the high/normal/low classes (traces without ``priority``).
        flexible_frac: share of normal/low jobs that may be paused (traces without ``flexible``). [-]
        speedup_ratio: replay a trace this many times faster. [-]
        trace_skip_h: start a trace this long after its first submission (jobs submitted
            earlier are dropped; the Philly sample's first weeks are sparse). [h]
        gpu_scale: multiply traced GPU counts. [-]
        policy: a scheduling policy of :mod:`.policies` (``cosim list`` shows them and their
            params): ``easy`` (priority FIFO + EASY backfill, the default), ``fifo``, ``pwr``,
            ``fgd``, ``compass_abs``, ``themis``, ``srpt``, ``elastic``, ...
        policy_params: the policy's params, e.g. ``{ pwr_weight_frac = 0.5 }``.
        locality: where a gang's GPUs may be: ``any`` (anywhere, the default), ``node`` (a job
            that fits a node on one node, larger jobs on whole nodes), ``rack`` (as ``node``,
            and a multi-node job that fits a rack in one rack).
        elastic_frac: share of jobs that may run on fewer or more GPUs than requested (only the
            ``elastic`` policy resizes them; a trace column ``elastic`` overrides it). [-]
        checkpoint_loss_s, restore_s: work lost at a pause, and added at restart. [s]
        checkpoint_interval_s, checkpoint_duration_s: every job checkpoints every
            ``checkpoint_interval_s`` of running time (a trace column of that name overrides it
            per job) for ``checkpoint_duration_s``, GPUs near idle; visible at steps <= 1 s,
            averaged at longer steps; duration 0 = no dips. [s, s]
        checkpoint_stagger: shift each job's checkpoint schedule by a seeded offset in
            ``[0, interval)`` so jobs started together do not all dip at once (off: every job
            checkpoints at the end of each interval of its own running time).
        hold_paused_gpus: a job paused by ``pause_flexible_frac`` or the facility limit (DR)
            keeps its GPUs booked and idle until it resumes, so queued jobs do not backfill
            them and the power cut holds (a curtailment such as FFR); ``false`` (the default,
            every earlier result unchanged): the freed GPUs go to queued jobs, which the limit
            then caps (tracks a moving target more closely, e.g. ``emerald_london``).
        failure_rate_per_gpu_h: failures per GPU-hour of a running job, any GPU interrupting
            its gang (a job of n GPUs running t hours fails with probability 1 - exp(-rate n t));
            the job loses its work since its last checkpoint (:mod:`.failures`, which gives
            sources to pick a value from); 0 = jobs never fail. [1/GPU-h]
        failure_end_frac: share of failed jobs that end (state ``failed``) instead of
            restarting from their last checkpoint. [-]
        warmup_h: run the workload this long before the scenario starts (at 5-minute steps,
            unrecorded), so the cluster starts busy instead of empty; synthetic arrivals and
            traces are shifted to begin that much earlier. [h]
        n_guest_slots: flexible jobs moved in from other sites this cluster can hold at once
            (:mod:`.moves`; needs the sim's ``job_moves = true``); 0 = it takes none. [-]
    """

    source: Literal["synthetic", "philly", "file"] = "synthetic"
    file: DataFile | None = None
    n_jobs: int = Field(default=200, ge=0)
    span_s: float | None = Field(default=None, gt=0)
    duration_median_h: float = Field(default=2.0, gt=0)
    duration_sigma_ln: float = Field(default=1.5, ge=0)
    duration_max_h: float = Field(default=168.0, gt=0)
    sizes_gpus: list[Annotated[int, Field(ge=1)]] = list(SIZES_GPUS)
    size_weights: list[Annotated[float, Field(ge=0)]] = list(SIZE_WEIGHTS)
    class_fracs: Annotated[tuple[Annotated[float, Field(ge=0)], Annotated[float, Field(ge=0)],
                                 Annotated[float, Field(ge=0)]], BeforeValidator(as_tuple)] = (
        0.2, 0.6, 0.2)

    @field_validator("size_weights", "class_fracs")
    @classmethod
    def _some_weight(cls, value):
        if sum(value) <= 0:
            raise ValueError("the weights must add up to more than 0")
        return value
    flexible_frac: float = Field(default=0.3, ge=0, le=1)
    speedup_ratio: float = Field(default=1.0, gt=0)
    trace_skip_h: float = Field(default=0.0, ge=0)
    gpu_scale: int = Field(default=1, ge=1)
    policy: str = "easy"
    policy_params: dict[str, Any] = {}
    locality: Literal["any", "node", "rack"] = "any"
    elastic_frac: float = Field(default=0.0, ge=0, le=1)
    checkpoint_loss_s: float = Field(default=900.0, ge=0)
    restore_s: float = Field(default=300.0, ge=0)
    checkpoint_interval_s: float = Field(default=1800.0, gt=0)
    checkpoint_duration_s: float = Field(default=60.0, ge=0)
    checkpoint_stagger: bool = True
    warmup_h: float = Field(default=0.0, ge=0)
    hold_paused_gpus: bool = False
    failure_rate_per_gpu_h: float = Field(default=0.0, ge=0)
    failure_end_frac: float = Field(default=0.0, ge=0, le=1)
    n_guest_slots: int = Field(default=0, ge=0, le=100_000)


class FleetParams(Params):
    """One LLM inference fleet.

    Attributes:
        name: label. model: one of ``MODELS`` (ML.ENERGY data). node: node type; default the cluster's.
        replicas: model replicas (each on the GPUs ML.ENERGY measured it on). [-]
        n_gpus_per_replica: GPUs one replica spans (tensor parallel), one of the configurations
            ML.ENERGY measured the model in on that GPU; default the fewest measured. [-]
        max_batch: vLLM ``max_num_seqs`` per replica. [-]
        arrivals: ``azure_conv``, ``azure_code``, ``mooncake_conv`` (trace shape) or ``synthetic`` (Poisson).
        rate_req_s: mean request rate of the whole fleet. [1/s]
        diurnal_amp_frac, peak_hour_utc: daily modulation of the rate. [-, h]
        output_tokens: mean output tokens per request; default from the trace (synthetic: 211). [-]
        input_tokens: mean prompt tokens per request (prefill, TTFT); default from the trace
            (synthetic: 1,155, the Azure conversation trace's mean). [-]
        itl_slo_ms, ttft_slo_s, max_wait_s: p99 ITL deadline, TTFT deadline, drop after. [ms, s, s]
        mig_profile: run each replica on one MIG instance of this profile (e.g. ``"3g.40gb"`` on
            H100; :mod:`.mig` lists them per GPU); the cluster's MIG fleets share a pool of GPUs
            placed by ``mig_placement``. Models of one GPU per replica only.
    """

    name: str = "fleet"

    @field_validator("name")
    @classmethod
    def _attr_safe(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", value):
            raise ValueError("fleet names name knob inputs (n_batch_max_<name>): use lower-case letters, "
                             "digits and '_', starting with a letter, e.g. 'chat'")
        return value
    model: str = "llama-3.1-70b"
    node: str | None = None
    replicas: int = Field(default=8, ge=0, le=1_000_000)
    n_gpus_per_replica: int | None = Field(default=None, ge=1, le=64)
    max_batch: int = Field(default=256, ge=1)
    arrivals: Literal["azure_conv", "azure_code", "mooncake_conv", "synthetic"] = "azure_conv"
    rate_req_s: float = Field(default=10.0, ge=0)
    diurnal_amp_frac: float = Field(default=0.3, ge=0, le=1)
    peak_hour_utc: float = 18.0
    output_tokens: float | None = Field(default=None, gt=0)
    input_tokens: float | None = Field(default=None, ge=0)
    itl_slo_ms: float = Field(default=100.0, gt=0)
    ttft_slo_s: float = Field(default=2.0, gt=0)
    max_wait_s: float = Field(default=120.0, ge=0)
    mig_profile: str | None = None


class NodesParams(Params):
    """The nodes of the training partition (GPUs per node, idle and non-GPU power come from ``node``).

    Attributes:
        n_nodes_per_rack: nodes per rack or pod, for ``training.locality = "rack"``. [-]
        sleep: put nodes that stay empty into a low-power state (off: always awake, the power
            of every scenario unchanged).
        p_sleep_w: power of a sleeping node, GPUs included (*estimate*: BMC and power-supply
            standby of a powered-down server; no measurement found). [W]
        wake_s: time from waking a node until jobs on it progress (*estimate*: boot and GPU
            driver initialisation of a server). [s]
        idle_before_sleep_s: how long a node stays empty before it sleeps. [s]
        n_awake_spare: empty nodes kept awake for arriving jobs. [-]
    """

    n_nodes_per_rack: int = Field(default=4, ge=1)
    sleep: bool = False
    p_sleep_w: float = Field(default=60.0, ge=0)
    wake_s: float = Field(default=300.0, ge=0)
    idle_before_sleep_s: float = Field(default=600.0, ge=0)
    n_awake_spare: int = Field(default=0, ge=0)

    def sleep_params(self) -> SleepParams | None:
        if not self.sleep:
            return None
        return SleepParams(self.p_sleep_w, self.wake_s, self.idle_before_sleep_s, self.n_awake_spare)


class TransientParams(Params):
    """Off-site transient (revocable) GPUs that short training jobs burst onto (:mod:`.transient`,
    after CloudCoaster). Every default is an *assumption*.

    Attributes:
        n_gpus_max: transient GPUs in use at most; 0 = off. [-]
        short_max_h: jobs with at most this much remaining work may burst. [h]
        wait_before_s: how long a short job waits in the on-site queue before it bursts. [s]
        provision_s: from the burst until the job runs (instance start). [s]
        revoke_rate_per_h: revocations per transient job and hour; a revoked job loses its
            off-site work and queues again. [1/h]
        price_usd_per_gpu_h: price of a transient GPU-hour, billed from the burst. [USD/GPU-h]
    """

    n_gpus_max: int = Field(default=0, ge=0)
    short_max_h: float = Field(default=1.0, gt=0)
    wait_before_s: float = Field(default=300.0, ge=0)
    provision_s: float = Field(default=120.0, ge=0)
    revoke_rate_per_h: float = Field(default=0.0, ge=0)
    price_usd_per_gpu_h: float = Field(default=1.0, ge=0)

    def setup(self) -> TransientSetup | None:
        if self.n_gpus_max == 0:
            return None
        return TransientSetup(self.n_gpus_max, self.short_max_h, self.wait_before_s, self.provision_s,
                              self.revoke_rate_per_h, self.price_usd_per_gpu_h)


class SmoothingParams(Params):
    """Power smoothing of the training GPUs and the racks (:mod:`.smoothing`); every knob off by default.

    Attributes:
        power_floor_frac: least power of a running job's GPUs, as a share of TDP: 0 = off, else
            0.2-0.9 (GB200 power smoothing's 20-90 % of TDP); costs energy (``p_floor_mw``). [-]
        ramp_up_mw_s: fastest rise of the training GPUs' summed power; None = no limiter; costs
            time (``ramp_lost_gpu_h``). [MW/s]
        ramp_down_mw_s: fastest fall; default ``ramp_up_mw_s``; a limited fall burns energy. [MW/s]
        ramp_down_hold_s: the demand must stay below the limiter's output this long before it falls
            (NVIDIA's ramp-down hysteresis: short dips pass unseen). [s]
        rack_storage_per_gpu_j: usable energy of the racks' power-shelf storage per GPU (GB300
            NVL72-style; the size is *ours*, NVIDIA states none); 0 = off. [J]
        rack_tau_s: time constant of the low-pass the racks' draw follows (*ours*). [s]
        rack_round_trip_frac: round-trip efficiency of the store (*ours*: capacitor banks). [-]
    """

    power_floor_frac: float = Field(default=0.0, ge=0, le=FLOOR_FRAC_RANGE[1])
    ramp_up_mw_s: float | None = Field(default=None, gt=0)
    ramp_down_mw_s: float | None = Field(default=None, gt=0)
    ramp_down_hold_s: float = Field(default=0.0, ge=0)
    rack_storage_per_gpu_j: float = Field(default=0.0, ge=0)
    rack_tau_s: float = Field(default=1.0, gt=0)
    rack_round_trip_frac: float = Field(default=0.95, gt=0, le=1)

    @field_validator("power_floor_frac")
    @classmethod
    def _floor_range(cls, value: float) -> float:
        low, high = FLOOR_FRAC_RANGE
        if 0 < value < low:
            raise ValueError(f"GB200 power smoothing sets a floor of {low:g}-{high:g} of TDP; give a value inside, "
                             "or 0 to turn the floor off")
        return value

    @property
    def on(self) -> bool:
        """Whether any knob is on."""
        return self.power_floor_frac > 0 or self.ramp_up_mw_s is not None or self.rack_storage_per_gpu_j > 0

    def build(self, tdp_w: float, n_gpus_total: int) -> Smoothing:
        """The :class:`.smoothing.Smoothing` of these params (every part None when off)."""
        floor = PowerFloor(self.power_floor_frac, tdp_w) if self.power_floor_frac > 0 else None
        limiter = (RampLimiter(self.ramp_up_mw_s, self.ramp_down_mw_s, self.ramp_down_hold_s)
                   if self.ramp_up_mw_s is not None else None)
        storage = (RackStorage(self.rack_storage_per_gpu_j * n_gpus_total / 1e6, self.rack_tau_s,
                               self.rack_round_trip_frac) if self.rack_storage_per_gpu_j > 0 and n_gpus_total else None)
        return Smoothing(floor, limiter, storage)


class ClusterParams(Params):
    """Params of one ``Cluster`` entity.

    Attributes:
        node: node type of the training partition (``NODES``).
        n_gpus: GPUs of the training partition. [-]
        training: the training workload.
        nodes: racks and the idle-node low-power state of the training partition.
        inference: inference fleets (their GPUs come on top of ``n_gpus``).
        power_factor: lagging displacement power factor. [-]
        rated_mw: UPS/PDU rating; default the all-busy IT power. [MW]
        swing_frac, iteration_s: iteration-level power swing and mean iteration time at steps <= 1 s. [-, s]
        stragglers: ``alibaba_pai`` draws straggler stalls at steps <= 1 s from the PAI
            per-worker mini-batch times (:mod:`.stragglers`); ``none`` turns them off.
        p_cap_w: static per-GPU cap on every GPU, used while no ``p_cap_w`` input arrives. [W]
        p_limit_mw: static facility limit, used while no ``p_limit_mw`` input arrives. [MW]
        mig_placement: how MIG fleets' instances are placed on their GPUs: ``first_fit`` or
            ``frag_aware`` (:mod:`.mig`).
        transient: off-site burst GPUs for short jobs (:class:`TransientParams`; off by default).
        smoothing: GPU power floor, ramp limiter and rack storage (:class:`SmoothingParams`; off by
            default); its outputs are recorded with the sim param ``smoothing_outputs = true``.
    """

    node: str = "DGX-H100"
    n_gpus: int = Field(default=1024, ge=0)
    training: TrainingParams = TrainingParams()
    nodes: NodesParams = NodesParams()
    inference: list[FleetParams] = []
    power_factor: float = Field(default=0.98, gt=0, le=1)
    rated_mw: float | None = Field(default=None, gt=0)
    swing_frac: float = Field(default=0.3, ge=0, lt=1)
    iteration_s: float = Field(default=2.0, gt=0)
    stragglers: Literal["alibaba_pai", "none"] = "alibaba_pai"
    p_cap_w: float | None = Field(default=None, gt=0)
    p_limit_mw: float | None = Field(default=None, ge=0)
    mig_placement: Literal["first_fit", "frag_aware"] = "first_fit"
    transient: TransientParams = TransientParams()
    smoothing: SmoothingParams = SmoothingParams()


# -- building ---------------------------------------------------------------------------------
def make_jobs(params: ClusterParams, rng: np.random.Generator, duration_s: float) -> Jobs:
    """The training jobs of ``params`` (seeded); raises :class:`TraceError` for a bad trace."""
    t = params.training
    if t.source == "synthetic":
        span_s = (t.span_s or duration_s) + t.warmup_h * 3600.0
        jobs = synthetic_jobs(rng, t.n_jobs, span_s, median_h=t.duration_median_h,
                              sigma=t.duration_sigma_ln, max_h=t.duration_max_h, sizes=t.sizes_gpus,
                              weights=t.size_weights, class_fracs=t.class_fracs, flexible_frac=t.flexible_frac)
    else:
        path = PHILLY_FILE if t.source == "philly" else t.file
        if path is None:
            raise TraceError("training.source = 'file' needs training.file")
        frame = read_job_trace(path, time_scale=t.speedup_ratio)
        skip_s = t.trace_skip_h * 3600.0 / t.speedup_ratio
        frame = frame[frame["submit_s"] >= skip_s].reset_index(drop=True)
        frame["submit_s"] -= skip_s
        jobs = jobs_from_trace(frame, rng, class_fracs=t.class_fracs, flexible_frac=t.flexible_frac,
                               gpu_scale=t.gpu_scale)
    jobs.submit_s = jobs.submit_s - t.warmup_h * 3600.0
    jobs.power_frac = sample_power_frac(rng, len(jobs))
    if jobs.elastic is None and t.elastic_frac > 0:
        # a stream of its own, so the other draws are those of a run without elastic jobs
        jobs.elastic = substream(rng, ELASTIC_STREAM).random(len(jobs)) < t.elastic_frac
    return jobs


def make_fleet(p: FleetParams, cluster_node: str, rng: np.random.Generator) -> FleetSetup:
    node = node_spec(p.node or cluster_node)
    gpu = gpu_spec(node.gpu)
    curves = batch_curves(p.model, gpu.name, p.n_gpus_per_replica)
    profile = None
    if p.mig_profile is not None:
        profile = mig_profiles(gpu.name, gpu.memory_gb)[p.mig_profile]
        curves = SliceCurves(curves, profile, curves.b_max * kv_frac(profile, p.model, gpu.memory_gb))
    tokens = p.output_tokens or (211.0 if p.arrivals == "synthetic" else trace_profile(p.arrivals)[1])
    prompt = p.input_tokens if p.input_tokens is not None else (
        trace_input_tokens("azure_conv" if p.arrivals == "synthetic" else p.arrivals))
    fleet = Fleet(curves, p.replicas, p.max_batch, tokens, gpu.idle_w, gpu.tdp_w, itl_slo_ms=p.itl_slo_ms,
                  ttft_slo_s=p.ttft_slo_s, max_wait_s=p.max_wait_s, input_tokens=prompt,
                  prefill_tok_s=prefill_tokens_per_s(p.model, gpu.name, curves.gpus_per_replica)
                  * (profile.speed_frac if profile else 1.0))
    return FleetSetup(p.name, fleet, node, gpu, p.arrivals, p.rate_req_s, p.diurnal_amp_frac, p.peak_hour_utc, rng,
                      mig=profile)


def make_mig_pool(params: ClusterParams, fleets: list[FleetSetup]) -> MigPool | None:
    """The GPUs of the MIG fleets, their instances placed by ``params.mig_placement``."""
    requests = [(i, f.mig, f.fleet.replicas) for i, f in enumerate(fleets) if f.mig is not None]
    return place_instances(requests, params.mig_placement) if requests else None


def build_cluster(params: ClusterParams, rng: np.random.Generator, duration_s: float,
                  start_hour_utc: float = 0.0, report_scheduling: bool = False,
                  report_smoothing: bool = False) -> GpuCluster:
    """A :class:`GpuCluster` from validated params (plain Python, no mosaik); ``report_smoothing``
    gives it a (possibly all-off) smoothing so it reports :data:`.smoothing.SMOOTHING_OUTPUTS`."""
    node = node_spec(params.node)
    jobs = with_guest_slots(make_jobs(params, rng, duration_s), params.training.n_guest_slots)
    fleets = [make_fleet(f, params.node, np.random.default_rng(rng.integers(2**63))) for f in params.inference]
    mig_pool = make_mig_pool(params, fleets)
    cluster = GpuCluster(node, gpu_spec(node.gpu), params.n_gpus, jobs, fleets, start_hour_utc=start_hour_utc,
                         policy=params.training.policy, power_factor=params.power_factor, rated_mw=params.rated_mw,
                         checkpoint_loss_s=params.training.checkpoint_loss_s, restore_s=params.training.restore_s,
                         swing_frac=params.swing_frac, iteration_s=params.iteration_s,
                         checkpoint_interval_s=jobs.checkpoint_interval_s(params.training.checkpoint_interval_s),
                         checkpoint_duration_s=params.training.checkpoint_duration_s,
                         checkpoint_stagger=params.training.checkpoint_stagger,
                         stragglers=params.stragglers != "none", rng=rng,
                         policy_params=params.training.policy_params, nodes_per_rack=params.nodes.n_nodes_per_rack,
                         locality=params.training.locality, sleep=params.nodes.sleep_params(),
                         report_scheduling=report_scheduling, mig_pool=mig_pool,
                         hold_paused_gpus=params.training.hold_paused_gpus,
                         failure_rate_per_gpu_h=params.training.failure_rate_per_gpu_h,
                         failure_end_frac=params.training.failure_end_frac,
                         transient=params.transient.setup(),
                         smoothing=_smoothing(params, node, fleets, mig_pool, report_smoothing))
    cluster.sched.next_arrival = params.training.n_guest_slots  # guest slots are never submitted (.moves)
    cluster.warm_up(params.training.warmup_h * 3600.0)
    return cluster


def _smoothing(params: ClusterParams, node: NodeSpec, fleets: list[FleetSetup], mig_pool: MigPool | None,
               report: bool) -> Smoothing | None:
    if not (params.smoothing.on or report):
        return None  # off: the cluster steps exactly as without the knob
    n_total = params.n_gpus + sum(f.fleet.n_gpus for f in fleets if f.mig is None) + (mig_pool.n_gpus if mig_pool else 0)
    return params.smoothing.build(gpu_spec(node.gpu).tdp_w, n_total)


def cluster_problems(params: ClusterParams, duration_s: float) -> list[str]:
    """What makes these params impossible (unknown hardware, jobs larger than the cluster, bad trace)."""
    problems: list[str] = []
    if params.node not in NODES:
        return [f"node = {params.node!r}: unknown; known: {', '.join(NODES)}"]
    if params.p_cap_w is not None:
        try:
            gpu_spec(NODES[params.node].gpu).check_cap(params.p_cap_w)
        except ValueError as exc:
            problems.append(str(exc))
    names = [f.name for f in params.inference]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"inference: fleet name {name!r} is used twice; give each fleet its own name "
                        "(it names the fleet's knob inputs)")
    for i, f in enumerate(params.inference):
        where = f"inference[{i}] ({f.name})"
        node = f.node or params.node
        if node not in NODES:
            problems.append(f"{where}.node = {node!r}: unknown; known: {', '.join(NODES)}")
        elif f.model not in MODELS:
            problems.append(f"{where}.model = {f.model!r}: unknown; known: {', '.join(MODELS)}")
        elif NODES[node].gpu not in MLENERGY_GPUS:
            problems.append(f"{where}: no ML.ENERGY inference data for {NODES[node].gpu} (node {node}); "
                            f"use a node with {' or '.join(MLENERGY_GPUS)}")
        elif f.n_gpus_per_replica is not None and f.n_gpus_per_replica not in (
                measured := measured_gpus_per_replica(f.model, NODES[node].gpu)):
            problems.append(f"{where}.n_gpus_per_replica = {f.n_gpus_per_replica}: ML.ENERGY measured {f.model} on the "
                            f"{NODES[node].gpu} with {' or '.join(map(str, measured))} GPUs per replica; use one of "
                            "these (or drop the key for the fewest)")
        elif f.mig_profile is not None and (problem := mig_problems(NODES[node].gpu, GPUS[NODES[node].gpu].memory_gb,
                                                                      f.model, f.mig_profile)):
            problems.extend(f"{where}.{text}" for text in problem)
        elif f.mig_profile is not None and (n_tp := batch_curves(f.model, NODES[node].gpu,
                                                                    f.n_gpus_per_replica).gpus_per_replica) != 1:
            problems.append(f"{where}.mig_profile = {f.mig_profile!r}: a MIG instance holds one replica on part of one "
                            f"GPU, and {f.model} needs {n_tp} GPUs "
                            "per replica on the " + NODES[node].gpu + "; drop mig_profile or use a one-GPU model")
        elif params.p_cap_w is not None:  # the fleet's GPUs take p_cap_w too
            try:
                gpu_spec(NODES[node].gpu).check_cap(params.p_cap_w, f"p_cap_w (on {where}'s GPUs)")
            except ValueError as exc:
                problems.append(str(exc))
    mig_nodes = {f.node or params.node for f in params.inference if f.mig_profile is not None}
    if len(mig_nodes) > 1:
        problems.append(f"inference: MIG fleets share one pool of GPUs, so one node type; found {sorted(mig_nodes)}")
    t = params.training
    problems.extend(param_problems(t.policy, t.policy_params))
    # params a policy ignores: said, so a study that names them knows what ran
    if t.policy != "elastic" and t.elastic_frac > 0:
        problems.append(f"warning: training.elastic_frac = {t.elastic_frac:g} has no effect under training.policy = "
                        f"{t.policy!r}: only \"elastic\" resizes jobs (the marked jobs run at their requested size)")
    if t.policy == "pwr" and not params.nodes.sleep:
        problems.append("warning: training.policy = \"pwr\" without nodes.sleep = true places as \"fgd\" (while every "
                        "node is awake each placement draws the same power, so pwr_weight_frac has no effect); "
                        "set nodes.sleep = true, or use policy = \"fgd\"")
    if t.checkpoint_duration_s >= t.checkpoint_interval_s:
        problems.append(f"training.checkpoint_duration_s = {t.checkpoint_duration_s:g} s is not shorter than "
                        f"checkpoint_interval_s = {t.checkpoint_interval_s:g} s; shorten it (0 turns dips off)")
    if t.source == "synthetic":
        if len(t.sizes_gpus) != len(t.size_weights):
            problems.append(f"training.sizes_gpus has {len(t.sizes_gpus)} entries, size_weights {len(t.size_weights)}")
        else:
            big = [s for s, w in zip(t.sizes_gpus, t.size_weights) if w > 0 and s > params.n_gpus]
            if big and t.n_jobs:
                problems.append(f"training: job sizes {big} GPUs exceed the cluster's n_gpus = {params.n_gpus}; "
                                "drop them from sizes_gpus (or give them weight 0) or add GPUs")
        return problems
    try:
        jobs = make_jobs(params, np.random.default_rng(0), duration_s)
    except TraceError as exc:
        return problems + [f"training: {exc}"]
    short = jobs.checkpoint_interval_s(t.checkpoint_interval_s) <= t.checkpoint_duration_s
    if short.any():
        problems.append(f"training: {int(short.sum())} trace jobs have a checkpoint_interval_s not longer than "
                        f"checkpoint_duration_s = {t.checkpoint_duration_s:g} s; lengthen them or shorten the duration")
    too_big = jobs.n_gpus > params.n_gpus
    if too_big.any():
        problems.append(f"training: {int(too_big.sum())} trace jobs need more GPUs than the cluster's "
                        f"n_gpus = {params.n_gpus} (largest {int(jobs.n_gpus.max())}); add GPUs or lower gpu_scale")
    return problems


# -- mosaik adapter ---------------------------------------------------------------------------------
class DatacenterSimParams(Params):
    """``[sims.<id>]`` keys of the datacenter adapter.

    Attributes:
        scheduling_outputs: every cluster also reports :data:`.observe.SCHEDULING_OUTPUTS`
            (what the ``scheduling`` KPI block reads); off by default, so existing scenarios
            record the columns they always had.
        job_moves: every cluster also takes :data:`.moves.MOVE_INPUTS` and reports
            :data:`.moves.MOVE_OUTPUTS`: flexible training jobs moved between sites by
            ``controllers/load_shift`` (:mod:`.moves`); off by default.
        smoothing_outputs: every cluster also reports :data:`.smoothing.SMOOTHING_OUTPUTS` (what its
            ``smoothing`` knobs cost and the rack store's charge; zeros and NaN where off); off by default.
    """

    scheduling_outputs: bool = False
    job_moves: bool = False
    smoothing_outputs: bool = False


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


__all__ = ["DatacenterSim", "ClusterParams", "FleetParams", "SmoothingParams", "TrainingParams", "build_cluster", "GPUS", "NODES"]
