"""The datacenter adapter's parameters: one ``Cluster`` entity's keys (:class:`ClusterParams`, with its
training workload, inference fleets, nodes, transient GPUs and power smoothing) and the
``[sims.<id>]`` keys (:class:`DatacenterSimParams`), with their defaults and bounds."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from cosim.sdk import DataFile, Params, as_tuple
from cosim.adapters.datacenter.nodes import SleepParams
from cosim.adapters.datacenter.smoothing import FLOOR_FRAC_RANGE, PowerFloor, RackStorage, RampLimiter, Smoothing
from cosim.adapters.datacenter.training import SIZE_WEIGHTS, SIZES_GPUS
from cosim.adapters.datacenter.transient import TransientSetup

__all__ = ["ClusterParams", "DatacenterSimParams", "FleetParams", "NodesParams", "SmoothingParams", "TrainingParams",
           "TransientParams"]


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

