"""GpuCluster: a training partition and inference fleets on one power chain, with knobs.

One :meth:`GpuCluster.step` advances a step of ``dt_s`` seconds:

1. queue the jobs submitted by now; release paused jobs the knobs and the limit allow back;
2. apply ``pause_flexible_frac`` (checkpoint: lost work; restore: extra work on restart);
3. schedule (:class:`~adapters.datacenter.scheduler.Scheduler` with the chosen policy of
   :mod:`.policies`); with ``sleep`` on, nodes empty long enough go to a low-power state
   and wake (``wake_s``) when a job is placed on them (:mod:`.nodes`);
4. serve inference (:class:`~adapters.datacenter.inference.Fleet`);
5. set training caps from the knobs, then enforce the facility limit ``p_limit_mw`` by, in
   order: capping low-priority jobs, pausing flexible jobs (low priority first), capping
   normal, then high priority jobs (inference is never throttled by the limit; what is left
   over is reported as ``p_limit_excess_mw``);
6. advance training (speed from the Zeus cap curves), average power over the step (a job
   finishing mid-step draws for that part only), add node and delivery losses. At steps of
   1 s or less a job's step is split into checkpoint (:mod:`.checkpoints`), straggler stall,
   compute and communication time (:mod:`.stragglers`), each job's mean kept.

Energy: every watt drawn (servers + UPS/PDU losses) leaves as heat, to air or liquid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cosim.adapters.datacenter.checkpoints import checkpoint_share, split_levels
from cosim.adapters.datacenter.failures import FailureModel
from cosim.adapters.datacenter.hardware import DeliveryLosses, GpuSpec, NodeSpec
from cosim.adapters.datacenter.inference import Fleet, arrival_rate
from cosim.adapters.datacenter.inference_kernel import ServeFleets, fleet_key
from cosim.adapters.datacenter.kernels import KERNELS, N_CLASSES, TrainStep, numpy_progress, numpy_sums
from cosim.adapters.datacenter.mig import MigPool, Profile
from cosim.adapters.datacenter.nodes import NodePower, NodeSleep, SleepParams, Topology
from cosim.adapters.datacenter.observe import SCHEDULING_OUTPUTS, scheduling_outputs
from cosim.adapters.datacenter import scheduler_kernel
from cosim.adapters.datacenter.scheduler import (
    DONE,
    FAILED,
    PAUSED,
    QUEUED,
    REJECTED,
    RUNNING,
    Scheduler,
)
from cosim.adapters.datacenter.scheduler_kernel import PauseKnob
from cosim.adapters.datacenter.smoothing import Smoothing, smooth_outputs, smooth_training
from cosim.adapters.datacenter.stragglers import COMPUTE_FRAC, StragglerModel
from cosim.adapters.datacenter.transient import TransientPool, TransientSetup
from cosim.adapters.datacenter.training import (
    CLASSES,
    FAILURE_STREAM,
    POLICY_STREAM,
    TRANSIENT_STREAM,
    Jobs,
    capped,
    capped_power,
    capped_speed,
    substream,
)

_HIGH, _NORMAL, _LOW = CLASSES

#: Bisection steps when searching the cap that meets the facility limit (resolution
#: (TDP - min) / 2**20, far below a watt).
_BISECT_STEPS = 20


@dataclass
class Knobs:
    """Optional setpoints; ``None`` means no constraint.

    Attributes:
        p_cap_w: per-GPU cap on every GPU. [W]
        p_cap_class_w: per-GPU cap per training class (``{"low": 300.0}``). [W]
        p_cap_infer_w: per-GPU cap on the inference GPUs. [W]
        p_limit_mw: facility limit on ``p_mw`` (IT plus delivery losses). [MW]
        n_batch_max: cap on the running batch of every inference replica. [-]
        pause_flexible_frac: share of the unfinished flexible jobs to hold paused. [-]
        replicas_frac: share of each fleet's replicas serving. [-]
        fleet_batch_max: ``n_batch_max`` per fleet name; the tighter of it and the global one. [-]
        fleet_replicas_frac: ``replicas_frac`` per fleet name; the tighter of the two. [-]
        fleet_demand_ratio: multiplier on a fleet's arrival rate (demand routed in from or out to
            other sites, e.g. by ``load_shift``); ``None`` = 1. [-]
    """

    p_cap_w: float | None = None
    p_cap_class_w: dict[str, float | None] = field(default_factory=dict)
    p_cap_infer_w: float | None = None
    p_limit_mw: float | None = None
    n_batch_max: float | None = None
    pause_flexible_frac: float | None = None
    replicas_frac: float | None = None
    fleet_batch_max: dict[str, float | None] = field(default_factory=dict)
    fleet_replicas_frac: dict[str, float | None] = field(default_factory=dict)
    fleet_demand_ratio: dict[str, float | None] = field(default_factory=dict)


def _tighter(a: float | None, b: float | None) -> float | None:
    """The smaller of two optional limits (``None`` = no limit)."""
    return b if a is None else a if b is None else min(a, b)


def _sure_steps(rem_s: np.ndarray, full_s: np.ndarray, floor_s: np.ndarray) -> int:
    """Steps after this one in which every job surely runs the whole step and none finishes. [-]

    Each step takes ``rem - full`` (rounded) from each job's remaining work ``rem_s``, starting
    here; ``floor_s`` is ``max(full_s, 1e-12)``. A subtraction's rounding error is at most
    ``2**-53`` of its result, below ``rem_s``, so after ``k + 1`` steps the remaining work is at
    least ``rem - (k + 1) * (full + 2**-52 * rem)``; while that is at least ``floor + 1e-6``,
    ``rem / floor >= 1`` (a whole step) and the work left after the step is above 1e-6 s (not
    finished). Two steps fewer than that bound allow for its own rounding. Needs ``rem_s`` and
    ``floor_s`` without NaN (a whole step's). [s, s, s]
    """
    bound = np.floor((rem_s - floor_s - 1e-6) / (full_s + rem_s * 2.0 ** -52)) - 2.0
    return _sure_count(float(bound.min()))


def _sure_count(least_bound: float) -> int:
    """:func:`_sure_steps` from the least of its bounds (``cosim_dc_step`` finds it in C). [-]"""
    return int(min(max(least_bound, 0.0), 1e6))


@dataclass
class FleetSetup:
    """An inference fleet with its arrival process."""

    name: str
    fleet: Fleet
    node: NodeSpec
    gpu: GpuSpec
    arrivals: str
    rate_req_s: float
    diurnal_amp_frac: float = 0.0
    peak_hour_utc: float = 18.0
    rng: np.random.Generator | None = None
    mig: Profile | None = None  # each replica on one MIG instance of this profile (:mod:`.mig`)


#: :meth:`GpuCluster._serve` steps its fleets in C where :class:`.inference_kernel.ServeFleets` covers them (the same
#: numbers; tests set it False to compare with the Python form)
SERVE_FLEETS = True


class _NoServePlan:
    """:meth:`GpuCluster._serve`'s note that the C form does not cover these knobs and fleets (falsy)."""

    __slots__ = ("knobs", "key", "fleets", "keys", "switch")

    def __init__(self, cluster: "GpuCluster", knobs: Knobs):
        self.knobs, self.key, self.fleets = knobs, fleet_key(knobs), [f.fleet for f in cluster.fleets]
        self.keys = [(f.max_batch, f.replicas) for f in self.fleets]
        self.switch = SERVE_FLEETS  # (switched on again: the C form is looked for again)

    def __bool__(self) -> bool:
        return False

    def fits(self, knobs: Knobs) -> bool:
        """The same knobs' values for the fleets and the same fleets' limits as when the C form was found not to cover
        them (or switched off)."""
        if self.switch is not SERVE_FLEETS:
            return False
        if knobs is not self.knobs:
            if fleet_key(knobs) != self.key:
                return False
            self.knobs = knobs
        return [(f.max_batch, f.replicas) for f in self.fleets] == self.keys


class GpuCluster:
    """Training partition + inference fleets of one facility.

    Args:
        node: node type of the training partition.
        gpu: its GPU model.
        n_gpus: GPUs of the training partition. [-]
        jobs: training jobs (``power_frac`` set).
        fleets: inference fleets.
        start_hour_utc: hour of day of the scenario start (diurnal arrivals). [h]
        policy: scheduler policy (``easy`` or ``fifo``).
        power_factor: lagging displacement power factor of the facility. [-]
        rated_mw: rating of the UPS/PDU chain; default the all-busy IT power. [MW]
        checkpoint_loss_s: work lost when a running job is paused (half a checkpoint
            interval on average). [s]
        restore_s: extra work to reload a checkpoint when a paused job restarts. [s]
        swing_frac: amplitude of the iteration-level power swing at steps <= 1 s. [-]
        iteration_s: mean iteration time of synchronous training (period of the swing). [s]
        checkpoint_interval_s: running time between checkpoints, one value or one per job. [s]
        checkpoint_duration_s: length of a checkpoint (GPUs idle, no progress); 0 = none. [s]
        stragglers: draw straggler stalls at steps <= 1 s (PAI per-worker times). [-]
        rng: seeded generator (swing phases, straggler cycles).
        policy_params: params of ``policy`` (:mod:`.policies`).
        nodes_per_rack: nodes per rack, for rack locality. [-]
        locality: ``any``, ``node`` or ``rack`` (:class:`~.scheduler.Scheduler`).
        sleep: low-power state of empty nodes, or ``None`` (always awake).
        report_scheduling: add :data:`.observe.SCHEDULING_OUTPUTS` to the outputs.
        mig_pool: the GPUs the MIG fleets' instances sit on (all MIG fleets on one node type).
        hold_paused_gpus: a job paused by ``pause_flexible_frac`` or the limit keeps its GPUs,
            idle, until it resumes, so queued jobs do not backfill them and the cut holds
            (off: the freed GPUs go to queued jobs, as before).
        failure_rate_per_gpu_h: failures per GPU-hour of a running job; a failed job loses its
            work since its last checkpoint (:mod:`.failures`); 0 = jobs never fail. [1/GPU-h]
        failure_end_frac: share of failed jobs that end (state ``FAILED``) instead of restarting. [-]
        transient: burst capacity off-site for short jobs (:mod:`.transient`), or ``None``.
        smoothing: power floor, ramp limiter and rack storage (:mod:`.smoothing`), or ``None`` (off:
            every output as without it); with it the step also reports :data:`.smoothing.SMOOTHING_OUTPUTS`.
    """

    def __init__(self, node: NodeSpec, gpu: GpuSpec, n_gpus: int, jobs: Jobs, fleets: list[FleetSetup], *,
                 start_hour_utc: float = 0.0, policy: str = "easy", power_factor: float = 0.98,
                 rated_mw: float | None = None, checkpoint_loss_s: float = 900.0, restore_s: float = 300.0,
                 swing_frac: float = 0.3, iteration_s: float = 2.0, checkpoint_interval_s=1800.0,
                 checkpoint_duration_s: float = 60.0, checkpoint_stagger: bool = True, stragglers: bool = True,
                 rng: np.random.Generator | None = None, policy_params: dict | None = None, nodes_per_rack: int = 4,
                 locality: str = "any", sleep: SleepParams | None = None, report_scheduling: bool = False,
                 mig_pool: MigPool | None = None, hold_paused_gpus: bool = False,
                 failure_rate_per_gpu_h: float = 0.0, failure_end_frac: float = 0.0,
                 transient: TransientSetup | None = None, smoothing: Smoothing | None = None):
        self.node, self.gpu, self.jobs, self.fleets = node, gpu, jobs, fleets
        self.n_gpus = int(n_gpus)
        topology = Topology(self.n_gpus, node.gpus_per_node, nodes_per_rack)
        self.sleep = NodeSleep(topology, sleep) if sleep is not None else None
        # the policy's own stream: every other random quantity of the run stays as it was
        policy_rng = substream(rng or np.random.default_rng(0), POLICY_STREAM)
        self.failures = FailureModel(failure_rate_per_gpu_h, failure_end_frac,
                                     substream(rng or np.random.default_rng(0), FAILURE_STREAM))
        self.transient = (TransientPool(transient, substream(rng or np.random.default_rng(0), TRANSIENT_STREAM))
                          if transient is not None and transient.n_gpus_max > 0 else None)
        self.p_transient_mw = 0.0
        node_power = NodePower(gpu.idle_w, gpu.tdp_w, node.other_idle_w,
                               (node.other_full_w - node.other_idle_w) / node.gpus_per_node,
                               sleep.p_sleep_w if sleep is not None else None)
        self.sched = Scheduler(jobs, n_gpus, policy, policy_params=policy_params, topology=topology,
                               locality=locality, sleep=self.sleep, rng=policy_rng, node_power=node_power)
        self.report_scheduling = report_scheduling
        self.start_hour_utc = start_hour_utc
        self.q_per_p = math.tan(math.acos(power_factor))
        self.checkpoint_loss_s, self.restore_s = checkpoint_loss_s, restore_s
        self.swing_frac, self.iteration_s = swing_frac, iteration_s
        rng = rng or np.random.default_rng(0)
        self.phase = rng.random(len(jobs))
        self.stragglers = StragglerModel(iteration_s, rng, enabled=stragglers)
        self.ckpt_interval_s = np.broadcast_to(np.asarray(checkpoint_interval_s, float), (len(jobs),)).copy()
        self.ckpt_duration_s = np.full(len(jobs), float(checkpoint_duration_s))
        if (self.ckpt_duration_s >= self.ckpt_interval_s).any():
            raise ValueError(f"checkpoint_duration_s = {checkpoint_duration_s:g} s is not shorter than every job's "
                             "checkpoint interval; shorten it or lengthen the intervals")
        self.ckpt_mean_frac = self.ckpt_duration_s / self.ckpt_interval_s
        # whole seconds, from the seeded per-job phase (no extra draws: coarse runs are unchanged)
        self.checkpoint_stagger = checkpoint_stagger
        self.ckpt_offset_s = np.floor(self.phase * self.ckpt_interval_s) if checkpoint_stagger else np.zeros(len(jobs))
        self.busy_mean_frac = np.full(len(jobs), np.nan)  # long-run straggler busy share, filled by _fill_stall
        self._stall_mean_frac = np.full(len(jobs), np.nan)  # (1 - ckpt_mean) (1 - busy_mean), filled with it
        self.ran_s = np.zeros(len(jobs))  # running (wall) time of each job, for its checkpoints
        self.ckpt_work_s = np.zeros(len(jobs))  # work done at the last checkpoint (what a failure falls back to)
        self.n_job_failures = 0  # failures so far (a job may fail more than once)
        self.n_jobs_failed = 0  # jobs a failure ended
        self.lost_s = np.zeros(len(jobs))  # work each job lost to failures [s]
        self.lost_gpu_h = 0.0  # GPU-hours of work lost to failures
        self.p_unc_w = gpu.idle_w + jobs.power_frac * (gpu.tdp_w - gpu.idle_w)
        # speed and power of each job at the default (TDP) limit, the reference of every cap:
        # fixed per job, so looked up instead of interpolated every step
        self._speed_tdp_frac, self._power_tdp_frac = capped(gpu.tdp_w / self.p_unc_w)
        # uncapped (every cap at TDP): speed and power relative to the TDP points, the same
        # divisions the capped path makes, once per job
        self._speed_unc_frac = np.minimum(self._speed_tdp_frac / self._speed_tdp_frac, 1.0)
        self._power_unc_frac = np.minimum(self._power_tdp_frac / self._power_tdp_frac, 1.0)
        self.n_nodes = math.ceil(n_gpus / node.gpus_per_node)
        self.fleet_nodes = [0 if f.mig is not None else math.ceil(f.fleet.n_gpus / f.node.gpus_per_node)
                            for f in fleets]
        self.fleet_gpus = [0 if f.mig is not None else f.fleet.n_gpus for f in fleets]
        self.mig_pool = mig_pool
        self.mig_setup = next((f for f in fleets if f.mig is not None), None)
        self.mig_nodes = math.ceil(mig_pool.n_gpus / self.mig_setup.node.gpus_per_node) if mig_pool else 0
        full_mw = (self.n_nodes * node.other_full_w + n_gpus * gpu.tdp_w
                   + sum(n * f.node.other_full_w + g * f.gpu.tdp_w
                         for n, g, f in zip(self.fleet_nodes, self.fleet_gpus, fleets))) / 1e6
        if mig_pool is not None:
            full_mw += (self.mig_nodes * self.mig_setup.node.other_full_w
                        + mig_pool.n_gpus * self.mig_setup.gpu.tdp_w) / 1e6
        self.losses = DeliveryLosses(rated_mw or max(full_mw, 1e-6))
        # every GPU of the facility, at least 1 (gpu_util_frac's denominator)
        self._util_gpus = max(self.n_gpus + sum(self.fleet_gpus) + (mig_pool.n_gpus if mig_pool else 0), 1)
        self.paused_by = np.zeros(len(jobs), np.int8)  # 0 none, 1 knob, 2 limit
        self._pause_knob: PauseKnob | bool | None = None  # the knob in C (False: not covered; None: not made yet)
        self._caps_for: tuple | None = None  # (running jobs, cap knobs, caps) of the last _class_caps
        self._steady: list | None = None  # what _advance_steady keeps between steps (see there)
        self._steady_c: list | None = None  # what _advance_c keeps between steps (see there)
        self._progress: TrainStep | None = None  # its per-job arithmetic in C (_kernel), False: numpy's
        self._serve_c: ServeFleets | _NoServePlan | None = None  # the fleets' step in C (_serve), or why not
        # the step is one of report=None: only the state that carries forward is advanced (no power,
        # no training sums, no delay/slowdown/work sums, which the warm-up resets)
        self._quiet = False
        self._idle: dict | None = None  # the training part of a step with no job running, without sleep
        self._training_out: tuple | None = None  # (training part, counts, statistics, what they gave)
        self.observed: dict = {}  # what .observe keeps between steps (see scheduling_outputs)
        self._flexible_pool: tuple | None = None  # (jobs' key, unfinished flexible jobs) of _pause_flexible
        self._paused_key: bytes | None = None  # paused_by's bytes when _paused_lists were made
        self._paused_lists: dict[int, np.ndarray] = {}
        self.hold_paused_gpus = hold_paused_gpus
        self.smoothing = smoothing
        self.p_last_mw = 0.0
        self.delay_gpu_h = 0.0
        self.slowdown_gpu_h = 0.0
        self.work_gpu_h = 0.0
        self.work_class_gpu_h = np.zeros(len(CLASSES))  # useful GPU-hours per training class

    def warm_up(self, span_s: float, dt_s: float = 300.0) -> None:
        """Run ``[-span_s, 0)`` uncapped, unrecorded, so time 0 finds the cluster in use."""
        steps = int(math.ceil(span_s / dt_s))
        # outputs no one reads are not made, unless smoothing or scheduling outputs keep a state through them
        report = self.smoothing is not None or self.report_scheduling
        # without outputs, the steps before the last keep no power either (only the last step's
        # p_last_mw outlives the warm-up) and no sums the warm-up's end resets (see _quiet)
        knobs = Knobs()
        self._check_knobs(knobs)
        for k in range(steps):
            self.step(-span_s + k * dt_s, min(dt_s, span_s - k * dt_s), knobs, check=False,
                      report=report if report or k == steps - 1 else None)
        self.delay_gpu_h = self.slowdown_gpu_h = self.work_gpu_h = 0.0
        self.work_class_gpu_h[:] = 0.0
        self.n_job_failures, self.n_jobs_failed, self.lost_gpu_h = 0, 0, 0.0
        if self.transient is not None:
            self.transient.reset_counters()
        if self.smoothing is not None:
            self.smoothing.e_floor_mwh = self.smoothing.ramp_lost_gpu_h = 0.0

    # -- the step ---------------------------------------------------------------------------
    def step(self, time_s: float, dt_s: float, knobs: Knobs | None = None, *, check: bool = True,
             report: bool | None = True) -> dict[str, float] | None:
        """Advance ``[time_s, time_s + dt_s)`` and return the outputs (see module docstring).

        ``check=False``: ``knobs`` passed :meth:`_check_knobs` before and were not changed since
        (the adapter reuses one checked object while its inputs stay empty). ``report=False``
        (a warm-up's steps, without smoothing and scheduling outputs): the same step, no outputs made;
        ``report=None`` (a warm-up's steps before its last, without them): nor its power
        (:attr:`p_last_mw` unchanged) or sums, only the state that carries forward (see ``_quiet``).
        """
        knobs = knobs or Knobs()
        # (a facility limit reads the step's inference power, and smoothing keeps a state through the
        # sums: with either, report=None makes the step as report=False does)
        self._quiet = report is None and knobs.p_limit_mw is None and self.smoothing is None
        if check:
            self._check_knobs(knobs)
        sched = self.sched
        sched.admit(time_s)
        self._release_limit_paused(knobs)
        self._pause_flexible(knobs, time_s)
        sched.schedule(time_s)
        if self.transient is not None:  # after the on-site pass: short jobs still waiting burst
            self.transient.offload(sched, time_s)
        if self.sleep is not None:
            self.sleep.update(time_s, sched.free_per_node())
        infer = self._serve(time_s, dt_s, knobs)
        run = sched.running()
        caps = self._class_caps(run, knobs)
        excess_mw = 0.0
        if knobs.p_limit_mw is not None:
            run, caps, excess_mw = self._enforce_limit(run, caps, knobs.p_limit_mw, infer["p_it_w"], time_s)
        if self.smoothing is not None:
            self.smoothing.p_floor_w = 0.0  # (_advance sets it when jobs run)
        train = self._advance(run, caps, time_s, dt_s)
        if self.failures.enabled:
            self._fail(run[sched.state[run] == RUNNING], time_s, dt_s)
        if self.transient is not None:
            gpn = self.node.gpus_per_node
            self.p_transient_mw = self.transient.advance(
                sched, self.p_unc_w + self.node.other_full_w / gpn, self.gpu.idle_w + self.node.other_idle_w / gpn,
                time_s, dt_s) / 1e6
        sched.account(dt_s, time_s)
        if not report:
            if not self._quiet:
                self.p_last_mw = self._power_mw(train, infer)[2]
            return None
        if self.smoothing is None:
            out = self._outputs(train, infer, excess_mw, dt_s)
        else:
            train = dict(train)  # (smooth_training changes it: a kept one must stay as it was)
            burn_w = smooth_training(self.smoothing, train, self.gpu.idle_w, dt_s)
            out = smooth_outputs(self.smoothing, self._outputs(train, infer, excess_mw, dt_s), burn_w, self.losses,
                                 self.q_per_p, dt_s)
            self.p_last_mw = out["p_mw"]
        if self.report_scheduling:
            out.update(scheduling_outputs(self, run, caps, out["p_it_mw"]))
        return out

    def _check_knobs(self, knobs: Knobs) -> None:
        for name, cap in [("p_cap_w", knobs.p_cap_w), *((f"p_cap_{c}_w", v) for c, v in knobs.p_cap_class_w.items())]:
            if cap is not None:
                self.gpu.check_cap(cap, name)
        # the fleets take p_cap_infer_w, else p_cap_w: either must be settable on their GPUs too
        infer_cap, infer_name = ((knobs.p_cap_infer_w, "p_cap_infer_w") if knobs.p_cap_infer_w is not None
                                 else (knobs.p_cap_w, "p_cap_w"))
        if infer_cap is not None:
            for f in self.fleets:
                f.gpu.check_cap(infer_cap, f"{infer_name} (fleet {f.name})")
        for name in ("pause_flexible_frac", "replicas_frac"):
            value = getattr(knobs, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} = {value:g} is outside [0, 1]")
        if knobs.p_limit_mw is not None and knobs.p_limit_mw < 0:
            raise ValueError(f"p_limit_mw = {knobs.p_limit_mw:g} is negative")
        if knobs.n_batch_max is not None and knobs.n_batch_max < 1:
            raise ValueError(f"n_batch_max = {knobs.n_batch_max:g} is below 1")
        for name, value in knobs.fleet_batch_max.items():
            if value is not None and value < 1:
                raise ValueError(f"n_batch_max_{name} = {value:g} is below 1")
        for name, value in knobs.fleet_replicas_frac.items():
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"replicas_{name}_frac = {value:g} is outside [0, 1]")
        for name, value in knobs.fleet_demand_ratio.items():
            if value is not None and value < 0:
                raise ValueError(f"demand_{name}_ratio = {value:g} is negative")

    # -- pausing ---------------------------------------------------------------------------------
    def _pause(self, jobs: np.ndarray, reason: int, time_s: float) -> None:
        running = jobs[self.sched.state[jobs] == RUNNING]
        self.sched.remaining_s[running] += self.checkpoint_loss_s
        self.ckpt_work_s[running] = self.sched.work_done_s[running]  # the pause's loss is charged above
        if self.hold_paused_gpus:  # the GPUs stay booked and idle: the cut holds
            self.sched.hold(running)
        else:
            self.sched.release(running, PAUSED, time_s)
        self.sched.state[jobs] = PAUSED
        self.sched.dirty = True
        self.paused_by[jobs] = reason

    def _resume(self, jobs: np.ndarray) -> None:
        held = self.sched.held[jobs]
        self.sched.unhold(jobs[held], self.restore_s)
        off = jobs[~held]
        started = ~np.isnan(self.sched.first_start_s[off])
        self.sched.requeue(off[started], self.restore_s)
        self.sched.requeue(off[~started])
        self.paused_by[jobs] = 0

    def _pause_flexible(self, knobs: Knobs, time_s: float) -> None:
        state = self.sched.state
        frac = knobs.pause_flexible_frac or 0.0
        knob_paused = self._paused_by(1)
        if frac == 0.0 and len(knob_paused) == 0:
            return  # the target is 0 paused and none are: nothing to do (most steps)
        knob = self._pause_c()
        if knob is not None:  # the target, the jobs to resume or pause and their costs in one C call (PauseKnob)
            knob.run(self, frac)
            return
        # the unfinished flexible jobs, kept while no job's state changed (and no job moved in)
        key = (state.tobytes(), self.sched.alloc_version)  # (not state_key: no views needed before the pass)
        if self._flexible_pool is None or self._flexible_pool[0] != key:
            # queued, running or paused: consecutive states (.states), one range test (np.isin on a tuple
            # costs ~10x more on every job, a lookup table indexed by the int8 states more on thousands)
            self._flexible_pool = (key, (self.jobs.flexible & (state >= QUEUED) & (state <= PAUSED)).nonzero()[0])
        pool = self._flexible_pool[1]
        target = int(round(frac * len(pool)))
        if target == len(knob_paused):
            return  # as many paused as the knob asks (most steps under a held knob)
        if target < len(knob_paused):  # release the most important first
            order = knob_paused[np.lexsort((knob_paused, self.jobs.prio[knob_paused]))]
            self._resume(order[: len(knob_paused) - target])
        elif target > len(knob_paused):  # pause running low-priority jobs first, then queued
            cand = pool[(self.paused_by[pool] == 0) & ((state[pool] == QUEUED) | (state[pool] == RUNNING))]
            key = (-cand, -self.jobs.prio[cand], state[cand] != RUNNING)
            chosen = cand[np.lexsort(key)][: target - len(knob_paused)]
            self._pause(chosen, 1, time_s)

    def _pause_c(self) -> PauseKnob | None:
        """The pause knob in C (:class:`.scheduler_kernel.PauseKnob`), or None: not built, switched off, or a cluster
        or scheduler of a subclass (whose pausing may do more)."""
        if not scheduler_kernel.C_PASS or scheduler_kernel.LIB is None:
            return None
        kept = self._pause_knob
        if kept is None or (kept and not kept.current(self)):  # (None: not made yet, or dropped by a copy)
            fits = type(self) is GpuCluster and type(self.sched) is Scheduler and PauseKnob.fits(self)
            kept = self._pause_knob = PauseKnob(scheduler_kernel.LIB, self) if fits else False
        return kept or None

    def _paused_by(self, reason: int) -> np.ndarray:
        """Jobs paused by ``reason`` (1 knob, 2 limit), ascending; recounted only when ``paused_by`` changed."""
        key = self.paused_by.tobytes()
        if key != self._paused_key:
            self._paused_lists = {r: (self.paused_by == r).nonzero()[0] for r in (1, 2)}
            self._paused_key = key
        return self._paused_lists[reason]

    def _release_limit_paused(self, knobs: Knobs) -> None:
        paused = self._paused_by(2)
        if len(paused) == 0:
            return
        if knobs.p_limit_mw is None:
            self._resume(paused)
            return
        order = paused[np.lexsort((paused, self.jobs.prio[paused]))]
        need_mw = np.cumsum(self._saving_w(self.jobs.n_gpus[order], self.p_unc_w[order])) / 1e6
        room_mw = 0.97 * knobs.p_limit_mw - self.p_last_mw  # margin against flapping
        self._resume(order[need_mw <= room_mw])

    def _saving_w(self, n_gpus: np.ndarray, p_gpu_w: np.ndarray) -> np.ndarray:
        """Power freed by stopping jobs of ``n_gpus`` GPUs drawing ``p_gpu_w`` per GPU (GPU and node share). [W]"""
        node_share_w = (self.node.other_full_w - self.node.other_idle_w) / self.node.gpus_per_node
        per_gpu = p_gpu_w - self.gpu.idle_w + node_share_w
        return n_gpus * per_gpu

    # -- caps and the facility limit ------------------------------------------------------------
    def _class_caps(self, run: np.ndarray, knobs: Knobs) -> np.ndarray:
        get, tdp = knobs.p_cap_class_w.get, self.gpu.tdp_w
        key = (knobs.p_cap_w, get(_HIGH) or tdp, get(_NORMAL) or tdp, get(_LOW) or tdp)  # (CLASSES order)
        cached = self._caps_for
        if cached is not None and cached[0] is run and cached[1] == key:
            return cached[2]  # same running jobs, same caps (most steps): read-only, shared
        by_class = np.array(key[1:], float)
        if knobs.p_cap_w is not None:
            by_class = np.minimum(by_class, knobs.p_cap_w)
        caps = by_class[self.jobs.prio[run]]
        caps.flags.writeable = False
        self._caps_for = (run, key, caps)
        return caps

    def _gpu_power(self, run: np.ndarray, caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(speed_frac, per-GPU power)`` of running jobs under ``caps`` (Zeus curves). [-, W]"""
        # Relative to the same job at the default (TDP) limit: uncapped means speed 1.
        if self._uncapped(caps):  # the ratios at the TDP points, worked out once per job
            return self._speed_unc_frac[run], self._gpu_w(run, caps, True)
        speed_tdp = self._speed_tdp_frac[run]
        speed = capped_speed(caps / self.p_unc_w[run])
        return np.minimum(speed / speed_tdp, 1.0), self._gpu_w(run, caps, False)

    def _gpu_w(self, run: np.ndarray, caps: np.ndarray, uncapped: bool | None = None) -> np.ndarray:
        """Per-GPU power of running jobs under ``caps`` (the power half of :meth:`_gpu_power`). [W]"""
        p_unc = self.p_unc_w[run]
        if self._uncapped(caps) if uncapped is None else uncapped:
            ratio = self._power_unc_frac[run]
        else:
            power_tdp = self._power_tdp_frac[run]
            ratio = np.minimum(capped_power(caps / p_unc) / power_tdp, 1.0)
        return np.maximum(np.minimum(p_unc * ratio, caps), self.gpu.idle_w)

    def _uncapped(self, caps: np.ndarray) -> bool:
        """Every cap at TDP (most steps): the curves' points are the precomputed TDP ones."""
        return bool((caps == self.gpu.tdp_w).all())

    def _train_it_w(self, run: np.ndarray, caps: np.ndarray) -> float:
        """Training partition IT power with every running job busy all step. [W]"""
        # the limit search calls this ~20 times per tier: power only, GPU counts gathered once
        p_gpu = self._gpu_w(run, caps)
        n_alloc = self.sched.n_alloc[run]
        busy = float(n_alloc.sum())
        it_w = (float(n_alloc @ p_gpu) + (self.n_gpus - busy) * self.gpu.idle_w
                + self.n_nodes * self.node.other_idle_w
                + (self.node.other_full_w - self.node.other_idle_w) * busy / self.node.gpus_per_node)
        return it_w - self._sleep_saving_w() if self.sleep is not None else it_w

    def _sleep_saving_w(self) -> float:
        """What the sleeping nodes save against their idle draw. [W]"""
        return self.sleep.saving_w(self.gpu.idle_w, self.node.other_idle_w)

    def _facility_mw(self, it_w: float) -> float:
        return it_w / 1e6 + float(self.losses.loss_mw(it_w / 1e6))

    def _enforce_limit(self, run, caps, limit_mw, infer_w, time_s):
        """Meet ``limit_mw`` by capping/pausing the least important training first."""
        def total_mw(run_, caps_):
            return self._facility_mw(self._train_it_w(run_, caps_) + infer_w)

        if total_mw(run, caps) <= limit_mw:
            return run, caps, 0.0
        prio, flexible = self.jobs.prio[run], self.jobs.flexible[run]
        caps = self._cap_tier(run, caps, prio == 2, limit_mw, total_mw)
        if total_mw(run, caps) > limit_mw:
            run, caps = self._pause_tier(run, caps, flexible, limit_mw, total_mw, time_s)
            prio = self.jobs.prio[run]
        for level in (1, 0):
            if total_mw(run, caps) > limit_mw:
                caps = self._cap_tier(run, caps, prio == level, limit_mw, total_mw)
        return run, caps, max(total_mw(run, caps) - limit_mw, 0.0)

    def _cap_tier(self, run, caps, members, limit_mw, total_mw):
        """Lower the caps of ``members`` to the highest common cap that meets the limit."""
        if not members.any():
            return caps
        low, high = self.gpu.p_limit_min_w, float(caps[members].max())
        trial = caps.copy()
        trial[members] = np.minimum(caps[members], low)
        if total_mw(run, trial) > limit_mw:
            return trial
        for _ in range(_BISECT_STEPS):
            mid = 0.5 * (low + high)
            trial[members] = np.minimum(caps[members], mid)
            low, high = (mid, high) if total_mw(run, trial) <= limit_mw else (low, mid)
        trial[members] = np.minimum(caps[members], low)
        return trial

    def _pause_tier(self, run, caps, members, limit_mw, total_mw, time_s):
        """Pause flexible jobs, low priority and most recently started first, until the limit holds."""
        cand = np.flatnonzero(members)
        if len(cand) == 0:
            return run, caps
        jobs = run[cand]
        order = np.lexsort((-self.sched.first_start_s[jobs], -self.jobs.prio[jobs]))
        p_gpu = self._gpu_w(run, caps)
        saving_mw = np.cumsum(self._saving_w(self.sched.n_alloc[jobs[order]], p_gpu[cand][order])) / 1e6
        excess_mw = total_mw(run, caps) - limit_mw
        n = min(int(np.searchsorted(saving_mw, excess_mw)) + 1, len(order))
        self._pause(jobs[order[:n]], 2, time_s)
        keep = ~np.isin(run, jobs[order[:n]])
        return run[keep], caps[keep]

    # -- inference ----------------------------------------------------------------------------
    def _serve(self, time_s: float, dt_s: float, knobs: Knobs) -> dict[str, float]:
        plan = self._serve_c
        if plan is None or not plan.fits(knobs):  # (made again for other knobs, replicas, limits or queue arrays)
            plan = self._serve_c = ServeFleets.make(self, knobs, _tighter, arrival_rate) if SERVE_FLEETS else None
            if plan is None:  # not a case the C function covers: said so until the knobs or the fleets change
                self._serve_c = _NoServePlan(self, knobs)
        if plan and SERVE_FLEETS:  # (a plan made before the switch went off steps in Python: the queues are shared)
            return plan.step(time_s, dt_s, self._quiet, self.start_hour_utc)
        return self._serve_python(time_s, dt_s, knobs)

    def _serve_python(self, time_s: float, dt_s: float, knobs: Knobs) -> dict[str, float]:
        """:meth:`_serve` in Python (the C form, :class:`.inference_kernel.ServeFleets`, where it covers the fleets)."""
        p_it_w = p_gpu_w = liquid_w = n_gpus_busy = 0.0
        tokens_per_s = good_req = done_req = dropped_req = queued_req = ttft_good_req = itl_good_req = 0.0
        itl_p99_ms = ttft_p99_ms = 0.0
        mig_active: list = []
        p_cap_w = knobs.p_cap_infer_w if knobs.p_cap_infer_w is not None else knobs.p_cap_w
        quiet = self._quiet
        kept = self.__dict__.setdefault("_serve_kept", {})  # fleet index -> (key, its constants), see below
        for i, (setup, n_nodes) in enumerate(zip(self.fleets, self.fleet_nodes)):
            fleet = setup.fleet
            rate = arrival_rate(setup.arrivals, setup.rate_req_s, time_s, dt_s, self.start_hour_utc,
                                setup.diurnal_amp_frac, setup.peak_hour_utc, setup.rng)
            demand = knobs.fleet_demand_ratio.get(setup.name)
            if demand is not None:
                rate *= demand
            active = _tighter(knobs.replicas_frac, knobs.fleet_replicas_frac.get(setup.name))
            active = 1.0 if active is None else active
            max_batch = _tighter(knobs.n_batch_max, knobs.fleet_batch_max.get(setup.name))
            res = fleet.advance(dt_s, rate, active, max_batch, p_cap_w, quiet, False)
            if quiet:  # the queue's state only (arrival draws above kept: the same stream)
                continue
            _, p_fleet_w, tokens, _, itl_p99, served, good, dropped, queued, ttft_p99, ttft_good, itl_good = res
            tokens_per_s += tokens
            good_req += good
            done_req += served + dropped
            dropped_req += dropped
            queued_req += queued
            ttft_good_req += ttft_good
            itl_good_req += itl_good
            itl_p99_ms, ttft_p99_ms = max(itl_p99_ms, itl_p99), max(ttft_p99_ms, ttft_p99)
            if setup.mig is not None:
                mig_active.append((len(mig_active), round(fleet.replicas * active), p_fleet_w, setup))
                continue
            # the GPUs active, what the idle ones and the nodes' non-GPU parts draw: constant while the
            # share active and the replicas stay (kept per fleet for the last ones; the specs are frozen)
            key = (active, fleet.replicas)
            site = kept.get(i)
            if site is None or site[0] != key:
                n_active_gpus = round(fleet.replicas * active) * fleet.curves.gpus_per_replica
                n_gpus = fleet.n_gpus
                site = (key, n_active_gpus, (n_gpus - n_active_gpus) * setup.gpu.idle_w,
                        n_nodes * setup.node.other_w(n_active_gpus / max(n_gpus, 1)))
                kept[i] = site
            _, n_active_gpus, idle_gpus_w, other_w = site
            gpu_w = n_active_gpus * p_fleet_w + idle_gpus_w
            p_gpu_w += gpu_w
            fleet_it_w = gpu_w + other_w
            p_it_w += fleet_it_w
            liquid_w += setup.node.liquid_frac * fleet_it_w
            n_gpus_busy += n_active_gpus
        out = {"p_it_w": p_it_w, "p_gpu_w": p_gpu_w, "tokens_per_s": tokens_per_s, "good_req": good_req,
               "done_req": done_req, "dropped_req": dropped_req, "queued_req": queued_req, "itl_p99_ms": itl_p99_ms,
               "n_gpus_busy": n_gpus_busy, "liquid_w": liquid_w, "ttft_good_req": ttft_good_req,
               "itl_good_req": itl_good_req, "ttft_p99_ms": ttft_p99_ms}
        if self.mig_pool is not None and not self._quiet:
            self._serve_mig(out, mig_active)
        return out

    def _serve_mig(self, out: dict[str, float], active: list) -> None:
        """The MIG pool's power: idle GPUs, plus per active instance its share of the full GPU's dynamic power."""
        setup = self.mig_setup
        fleet_index = {id(f): i for i, f in enumerate(self.fleets)}
        instances = self.mig_pool.instances
        kept = self.__dict__.get("_mig_gpus")  # (instances, fleet index -> its instances' GPUs, in order)
        if kept is None or kept[0] is not instances:
            gpus: dict[int, list] = {}
            for f, g, _, _ in instances:
                gpus.setdefault(f, []).append(g)
            kept = self._mig_gpus = (instances, gpus)
        dynamic_w, busy = 0.0, set()
        for _, n_active, p_gpu_w, fsetup in active:
            mine = kept[1].get(fleet_index[id(fsetup)], [])[:n_active]
            busy.update(mine)
            dynamic_w += n_active * fsetup.mig.speed_frac * max(p_gpu_w - fsetup.gpu.idle_w, 0.0)
        gpu_w = self.mig_pool.n_gpus * setup.gpu.idle_w + dynamic_w
        busy_frac = len(busy) / max(self.mig_pool.n_gpus, 1)
        it_w = gpu_w + self.mig_nodes * setup.node.other_w(busy_frac)
        out["p_gpu_w"] += gpu_w
        out["p_it_w"] += it_w
        out["liquid_w"] += setup.node.liquid_frac * it_w
        out["n_gpus_busy"] += len(busy)

    # -- training progress ------------------------------------------------------------------------
    def _advance(self, run: np.ndarray, caps: np.ndarray, time_s: float, dt_s: float) -> dict:
        if not len(run) and dt_s > 1.0:
            return self._advance_idle(dt_s)
        if dt_s > 1.0 and self.sleep is None and (self.smoothing is None or self.smoothing.floor is None):
            return self._advance_steady(run, caps, time_s, dt_s)
        self._steady = self._steady_c = None  # (what they kept would not know of this step's writes)
        sched, jobs = self.sched, self.jobs
        speed, p_gpu = self._gpu_power(run, caps)
        sched.speed[run] = speed
        if dt_s <= 1.0:
            p_gpu, progress, stall = self._fine(run, caps, p_gpu, time_s, dt_s)
            progress = progress * sched.rate_frac[run]  # elastic jobs off their requested size; 1 otherwise
        else:  # progress 1 times the rate (1 * x is x exactly)
            progress, stall = sched.rate_frac[run], self._mean_stall(run)
        if self.sleep is not None:
            p_gpu, progress = self._waking(run, p_gpu, progress, time_s, dt_s)
        floor = self.smoothing.floor if self.smoothing is not None else None
        if floor is not None:  # the running jobs' GPUs burn up to the floor (progress unchanged)
            lifted = floor.lift(p_gpu)
            lift_w, p_gpu = lifted - p_gpu, lifted
        rem = sched.remaining_s[run]
        full_s = speed * progress * dt_s  # the work of a whole step
        active = np.minimum(1.0, rem / np.maximum(full_s, 1e-12))
        work_s = full_s * active
        left_s = rem - work_s
        sched.remaining_s[run] = left_s
        sched.work_done_s[run] += work_s
        ran_s = dt_s * active
        if self.failures.enabled:
            self._mark_checkpoints(run, ran_s, work_s)
        self.ran_s[run] += ran_s
        finished = left_s <= 1e-6  # (run holds distinct jobs: no isin needed)
        g = sched.n_alloc[run].astype(float)
        if finished.any():
            sched.release(run[finished], DONE, time_s + ran_s[finished])
        busy_gpus = float(g @ active)
        gpu_w = float(g @ (p_gpu * active)) + (self.n_gpus - busy_gpus) * self.gpu.idle_w
        if floor is not None:
            self.smoothing.p_floor_w = float(g @ (lift_w * active))
        it_w = gpu_w + self.n_nodes * self.node.other_idle_w + (
            self.node.other_full_w - self.node.other_idle_w) * busy_gpus / self.node.gpus_per_node
        if self.sleep is not None:
            it_w -= self._sleep_saving_w()
        hours = dt_s / 3600.0
        slow = float(g @ ((1.0 - speed) * active)) * hours
        self.slowdown_gpu_h += slow
        self.work_gpu_h += float(g @ (speed * active)) * hours
        prio = jobs.prio[run]
        self.work_class_gpu_h += np.bincount(prio, weights=g * speed * active, minlength=len(CLASSES)) * hours
        self.delay_gpu_h += slow + float(sched.waiting_gpus()) * hours
        by_class_w = np.bincount(prio, weights=g * p_gpu * active, minlength=len(CLASSES))
        stall_gpus = tuple(float(g @ (active * s)) for s in stall)  # (straggler stall, checkpoint) GPUs
        return {"it_w": it_w, "gpu_w": gpu_w, "busy_gpus": busy_gpus, "by_class_w": by_class_w,
                "stall_gpus": stall_gpus}

    def _advance_steady(self, run: np.ndarray, caps: np.ndarray, time_s: float, dt_s: float) -> dict:
        """:meth:`_advance` for a step over 1 s with no node sleep and no power floor (most runs).

        The same numbers by the same operations, with what only changes on events kept: the
        running jobs' speed, power, stall shares, GPU counts and classes for the same ``run`` and
        ``caps`` objects (both cached read-only upstream) and the same ``n_alloc``
        (:attr:`~.scheduler.Scheduler.alloc_version`), and the step's sums over the jobs when
        every job runs the whole step (``active`` all 1, so the sums are those of the last such
        step with these jobs). After a whole step, the next :func:`_sure_steps` steps are whole and
        finish no job for certain: their tests are skipped (the remaining work of a running job is
        written only here, or with a change of its state or of ``n_alloc``, which ends what is kept).
        With the C library (:mod:`.kernels`) both the gathers and each step's per-job work and sums are
        one call each (:meth:`_advance_c`).
        """
        kernel = self._kernel()
        if kernel:
            return self._advance_c(kernel, run, caps, time_s, dt_s)
        self._steady_c = None  # (each form keeps its own; one that did not step would not know of this one's)
        sched = self.sched
        kept = self._steady
        if kept is None or kept[0] is not run or kept[1] is not caps or kept[2] != sched.alloc_version:
            speed, p_gpu = self._gpu_power(run, caps)
            sched.speed[run] = speed  # (only this method and a job moved in write speed: kept while kept)
            kept = self._steady = [run, caps, sched.alloc_version, speed, p_gpu, None, None, None, None, None]
        if kept[5] is None and not self._quiet:
            # stall shares, GPU counts and classes feed only the sums, which a report=None step leaves out:
            # made at the first step that needs them, from the same values (each written only with a
            # change of alloc_version, which ends what is kept), before this step's releases
            kept[5:8] = [self._mean_stall(run), sched.n_alloc[run].astype(float), self.jobs.prio[run]]
        speed = kept[3]
        per_dt = kept[9]  # (rate_frac changes only with n_alloc: on a start or a job moved in)
        if per_dt is None or per_dt[0] != dt_s:
            progress = sched.rate_frac[run]  # progress 1 times the rate (1 * x is x exactly)
            full_s = speed * progress * dt_s  # the work of a whole step
            per_dt = kept[9] = [dt_s, full_s, np.maximum(full_s, 1e-12), None, 0, None]
        sure = per_dt[4] > 0  # a step _sure_steps vouched for: whole, and no job finishes in it
        if sure:
            per_dt[4] -= 1
        whole, bound, least_left, active = numpy_progress(
            run, sched.remaining_s, sched.work_done_s, self.ran_s, per_dt[1], per_dt[2], dt_s, sure,
            (lambda ran_s, work_s: self._mark_checkpoints(run, ran_s, work_s)) if self.failures.enabled else None)
        if bound is not None:
            per_dt[4] = _sure_count(bound)
        if not sure and not least_left > 1e-6:  # (a NaN left, never expected, takes the full test)
            self._release_finished(run, whole, active, time_s, dt_s)
        if self._quiet:
            return None
        p_gpu, stall, g, prio = kept[4:8]
        if whole:  # the sums with active all 1 (x * 1.0 is x): no products with it, and the same each such step
            if kept[8] is None:
                kept[8] = self._step_sums(numpy_sums(g, p_gpu, speed, prio, stall, None))
            sums = kept[8]
        else:
            sums = self._step_sums(numpy_sums(g, p_gpu, speed, prio, stall, active))
        return self._add_sums(sums, whole, per_dt, dt_s)

    def _advance_c(self, kernel: TrainStep, run: np.ndarray, caps: np.ndarray, time_s: float, dt_s: float) -> dict:
        """:meth:`_advance_steady` in two C calls (:mod:`.kernels`): the gathers when the running jobs, their
        caps, ``n_alloc`` or the step length change, and each step's per-job work and sums; kept as there."""
        sched = self.sched
        self._steady = None
        kept = self._steady_c
        if kept is None or kept[0] is not run or kept[1] is not caps or kept[2] != sched.alloc_version \
                or kept[3] != dt_s or kept[4] is not kernel:  # (a copy's kernel is new: nothing gathered yet)
            # (speed, power and stall shares are the values numpy's path makes, gathered at once: a job's
            # stall share is filled on its first run, the same whenever it is)
            kernel.configure(run, caps, dt_s, self._gpu_power, self._mean_stall)
            kept = self._steady_c = [run, caps, sched.alloc_version, dt_s, kernel, None, 0, None, None, None]
        sure = kept[6] > 0  # a step _sure_steps vouched for: whole, and no job finishes in it
        if sure:
            kept[6] -= 1
        # the sums: none for a report=None step, else unless whole with the whole step's kept
        whole, bound, least_left, made = kernel.step(dt_s, sure, 0 if self._quiet else 1 if kept[8] else 2)
        if whole and not sure:
            kept[6] = _sure_count(bound)
        if not sure and not least_left > 1e-6:  # (a NaN left, never expected, takes the full test)
            self._release_finished(run, whole, None if whole else kernel.active, time_s, dt_s)
        if self._quiet:
            return None
        if not made:
            return self._add_sums(kept[8], whole, kept, dt_s)
        sums = self._step_sums(kernel.sums())
        if whole:
            kept[8] = sums
        return self._add_sums(sums, whole, kept, dt_s)

    def _release_finished(self, run, whole, active, time_s, dt_s) -> None:
        """Release the jobs the step finished (asked only when one may have: not after a step _sure_steps
        vouched for, nor when the least work left is above 1e-6 s)."""
        finished = self.sched.remaining_s[run] <= 1e-6  # (the work left; run holds distinct jobs: no isin needed)
        if finished.any():
            ran_s = np.full(len(run), dt_s * 1.0) if whole else dt_s * active
            self.sched.release(run[finished], DONE, time_s + ran_s[finished])

    def _add_sums(self, sums: tuple, whole: bool, kept: list, dt_s: float) -> dict:
        """Add a step's sums (:meth:`_step_sums`) to the run's slowdown, work and delay; its training part.

        ``kept[5]``: the per-class work of the last whole step's sums times ``dt_s / 3600`` (the same
        product for the same sums and step length)."""
        slow_dot, work_dot, work_by_class, train = sums
        hours = dt_s / 3600.0
        slow = slow_dot * hours
        self.slowdown_gpu_h += slow
        self.work_gpu_h += work_dot * hours
        if whole:  # the product of the same sums and step length as the last whole step's
            if kept[5] is None or kept[5][0] is not sums:
                kept[5] = (sums, work_by_class * hours)
            self.work_class_gpu_h += kept[5][1]
        else:
            self.work_class_gpu_h += work_by_class * hours
        self.delay_gpu_h += slow + float(self.sched.waiting_gpus()) * hours
        return train

    def _kernel(self) -> TrainStep | None:
        """The C form of :meth:`_advance_steady`'s per-job arithmetic (:mod:`.kernels`), or None: not built,
        failures drawn (their checkpoints read the step's arrays), or arrays it does not take."""
        if KERNELS is None or self.failures.enabled:
            return None
        kernel = self._progress
        if kernel is None:  # (not made yet, or dropped by a copy, whose addresses were the original's)
            sched = self.sched
            arrays = (sched.remaining_s, sched.work_done_s, self.ran_s, self._speed_unc_frac, self._power_unc_frac,
                      self.p_unc_w, sched.rate_frac, sched.n_alloc, self.jobs.prio, self._stall_mean_frac,
                      self.ckpt_mean_frac, sched.speed)
            kernel = self._progress = (TrainStep(KERNELS, arrays, self.gpu.tdp_w, self.gpu.idle_w)
                                       if len(CLASSES) == N_CLASSES and TrainStep.fits(arrays) else False)
        return kernel or None

    def _step_sums(self, sums: tuple) -> tuple[float, float, np.ndarray, dict]:
        """``(slowdown GPUs, working GPUs, working GPUs per class, training part of the step)`` from
        :func:`.kernels.numpy_sums` (or the C function's)."""
        busy_gpus, gpu_dot, slow_dot, work_dot, work_by_class, by_class_w, stall_gpus = sums
        gpu_w = gpu_dot + (self.n_gpus - busy_gpus) * self.gpu.idle_w
        it_w = gpu_w + self.n_nodes * self.node.other_idle_w + (
            self.node.other_full_w - self.node.other_idle_w) * busy_gpus / self.node.gpus_per_node
        return slow_dot, work_dot, work_by_class, {"it_w": it_w, "gpu_w": gpu_w, "busy_gpus": busy_gpus,
                                                   "by_class_w": by_class_w, "stall_gpus": stall_gpus}

    def _advance_idle(self, dt_s: float) -> dict:
        """:meth:`_advance` with no job running (a step over 1 s): the same sums, each of nothing.

        Every dot product and bincount of :meth:`_advance` over empty arrays is 0.0 (zeros), so
        the numbers are the ones it gives; the training partition is idle most of a long run
        once the trace's jobs are done. Without node sleep the training part is the same every
        such step: kept (as :meth:`_advance_steady` keeps its own).
        """
        if self._quiet:
            return None  # (nothing of an idle step carries forward but these sums, which the warm-up resets)
        hours = dt_s / 3600.0
        slow = 0.0 * hours
        self.slowdown_gpu_h += slow
        self.work_gpu_h += 0.0 * hours
        # (work_class_gpu_h += 0.0 left out: x + 0.0 is x for every x but -0.0, and these sums of
        # non-negative work start at +0.0)
        self.delay_gpu_h += slow + float(self.sched.waiting_gpus()) * hours
        if self.sleep is None and self._idle is not None:
            return self._idle
        busy_gpus = 0.0
        gpu_w = 0.0 + (self.n_gpus - busy_gpus) * self.gpu.idle_w
        it_w = gpu_w + self.n_nodes * self.node.other_idle_w + (
            self.node.other_full_w - self.node.other_idle_w) * busy_gpus / self.node.gpus_per_node
        if self.sleep is not None:
            it_w -= self._sleep_saving_w()
        train = {"it_w": it_w, "gpu_w": gpu_w, "busy_gpus": busy_gpus, "by_class_w": np.zeros(len(CLASSES)),
                 "stall_gpus": (0.0, 0.0)}
        if self.sleep is None:
            self._idle = train
        return train

    # -- failures ----------------------------------------------------------------------------------
    def _mark_checkpoints(self, run: np.ndarray, ran_s: np.ndarray, work_s: np.ndarray) -> None:
        """Move the checkpoint reference of jobs whose checkpoint clock passes a checkpoint this step.

        The clock is :meth:`_fine`'s (running time plus the seeded offset); the work at the last
        checkpoint passed is the step's work before it, progress taken as even over the step.
        """
        interval = self.ckpt_interval_s[run]
        before = self.ran_s[run] + self.ckpt_offset_s[run]
        after = before + ran_s
        crossed = np.floor(after / interval) > np.floor(before / interval)
        if crossed.any():
            since = np.mod(after, interval)  # running time since the last checkpoint
            tail = np.clip(since / np.maximum(ran_s, 1e-12), 0.0, 1.0)
            jobs = run[crossed]
            self.ckpt_work_s[jobs] = self.sched.work_done_s[jobs] - (work_s * tail)[crossed]

    def _fail(self, run: np.ndarray, time_s: float, dt_s: float) -> None:
        """Draw failures among the jobs still running after the step (:mod:`.failures`)."""
        sched = self.sched
        failed, ends = self.failures.draw(sched.n_alloc[run], np.full(len(run), dt_s / 3600.0))
        if not failed.any():
            return
        jobs, ends = run[failed], ends[failed]
        # back to the last checkpoint, or to the last restart if later (a preemption or resize kept
        # the progress and charged its own cost: that work is not lost twice)
        lost_s = np.maximum(sched.work_done_s[jobs] - np.maximum(self.ckpt_work_s[jobs], sched.restart_work_s[jobs]),
                            0.0)
        self.n_job_failures += len(jobs)
        self.n_jobs_failed += int(ends.sum())
        self.lost_gpu_h += float(sched.n_alloc[jobs] @ lost_s) / 3600.0
        self.lost_s[jobs] += lost_s
        sched.remaining_s[jobs] += lost_s  # redone from the checkpoint
        sched.extra_work_s[jobs] += lost_s
        self.ckpt_work_s[jobs] = sched.work_done_s[jobs]
        sched.release(jobs[ends], FAILED, time_s + dt_s)
        sched.preempt(jobs[~ends], time_s + dt_s, self.restore_s)

    def _waking(self, run, p_gpu, progress, time_s, dt_s):
        """Jobs on waking nodes: no progress and idle GPUs until their nodes are up."""
        ready = np.clip((time_s + dt_s - self.sched.ready_s[run]) / dt_s, 0.0, 1.0)
        if (ready >= 1.0).all():
            return p_gpu, progress
        return ready * p_gpu + (1.0 - ready) * self.gpu.idle_w, progress * ready

    def _mean_stall(self, run: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Long-run ``(straggler stall, checkpoint)`` shares of each running job's time. [-]"""
        stall = self._stall_mean_frac[run]
        new = np.isnan(stall)  # (busy_mean_frac is NaN before: see _fill_stall)
        if new.any():
            self._fill_stall(run[new])
            stall = self._stall_mean_frac[run]
        return stall, self.ckpt_mean_frac[run]

    def _fill_stall(self, jobs: np.ndarray) -> None:
        """Fill the long-run shares of ``jobs`` (at their first run) and of every job not filled yet whose size's
        cycle is drawn: the numbers each would get at its own first run (a size's cycle is drawn once, from its
        own seeded stream; no other draw moves), so a job of a size run before finds its shares when it starts."""
        self.stragglers.busy_mean(self.jobs.n_gpus[jobs])  # (draws the cycles of sizes not run yet)
        todo = np.isnan(self._stall_mean_frac).nonzero()[0]
        busy = self.stragglers.known_busy_mean(self.jobs.n_gpus[todo])  # NaN: a size not drawn yet
        todo, busy = todo[~np.isnan(busy)], busy[~np.isnan(busy)]
        self.busy_mean_frac[todo] = busy
        self._stall_mean_frac[todo] = (1.0 - self.ckpt_mean_frac[todo]) * (1.0 - self.busy_mean_frac[todo])

    def _fine(self, run, caps, p_mean_w, time_s, dt_s):
        """Per-GPU power, progress factor and ``(stall, checkpoint)`` shares of a step <= 1 s.

        Levels keep each job's mean power (:func:`.checkpoints.split_levels`): checkpoint at
        idle, then straggler stall at idle, then busy time with the compute/communication swing
        (70 % above, 30 % below the busy level; ``swing_frac`` and the split are *estimates*).
        """
        idle = self.gpu.idle_w
        interval, duration = self.ckpt_interval_s[run], self.ckpt_duration_s[run]
        ckpt_mean = self.ckpt_mean_frac[run]
        ckpt = checkpoint_share(self.ran_s[run] + self.ckpt_offset_s[run], dt_s, interval, duration)
        p_run, p_ckpt = split_levels(p_mean_w, ckpt_mean, idle, caps)
        comp, comm, stall, busy_mean = self.stragglers.shares(self.jobs.n_gpus[run], self.phase[run], time_s, dt_s)
        p_busy, p_stall = split_levels(p_run, 1.0 - busy_mean, idle, caps)
        # the swing keeps the busy mean; its amplitude shrinks where the high phase would pass the cap
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(p_busy > 0, (np.asarray(caps, float) / p_busy - 1.0) / (1 - COMPUTE_FRAC), self.swing_frac)
        amp = np.clip(np.minimum(self.swing_frac, room), 0.0, None)
        hi, lo = 1.0 + amp * (1 - COMPUTE_FRAC), 1.0 - amp * COMPUTE_FRAC
        p_iter = p_busy * (comp * hi + comm * lo) + stall * p_stall
        p_gpu = ckpt * p_ckpt + (1.0 - ckpt) * p_iter
        progress = (1.0 - ckpt) / (1.0 - ckpt_mean) * (comp + comm) / busy_mean
        return p_gpu, progress, ((1.0 - ckpt) * stall, ckpt)

    # -- outputs ---------------------------------------------------------------------------------
    def _power_mw(self, train: dict, infer: dict) -> tuple[float, float, float]:
        """``(p_it_mw, p_loss_mw, p_mw)`` of the step: the servers, the UPS/PDU losses, both. [MW]"""
        p_it_mw = (train["it_w"] + infer["p_it_w"]) / 1e6
        p_loss_mw = float(self.losses.loss_mw(p_it_mw))
        return p_it_mw, p_loss_mw, p_it_mw + p_loss_mw

    def _outputs(self, train: dict, infer: dict, excess_mw: float, dt_s: float) -> dict[str, float]:
        p_it_mw, p_loss_mw, p_mw = self._power_mw(train, infer)
        self.p_last_mw = p_mw
        liquid_mw = (self.node.liquid_frac * train["it_w"] + infer["liquid_w"]) / 1e6
        p_train_mw, counts, wait_mean_h, jct_mean_h, by_class, stall_frac, ckpt_frac = self._training_outputs(train)
        # plain Python numbers (mosaik may serialise them, remote simulators): ints for the
        # counts, float() around everything else
        out = {
            "p_mw": float(p_mw), "p_it_mw": float(p_it_mw), "p_loss_mw": p_loss_mw,
            "q_mvar": float(p_mw * self.q_per_p), "q_heat_mw": float(p_mw), "q_heat_liquid_mw": float(liquid_mw),
            "q_heat_air_mw": float(p_mw - liquid_mw),
            "p_train_mw": p_train_mw, "p_infer_mw": float(infer["p_it_w"] / 1e6),
            "gpu_util_frac": float((train["busy_gpus"] + infer["n_gpus_busy"]) / self._util_gpus),
            "n_jobs_running": counts[RUNNING], "n_jobs_queued": counts[QUEUED],
            "n_jobs_paused": counts[PAUSED], "n_jobs_done": counts[DONE],
            "n_jobs_rejected": counts[REJECTED],
            "delay_gpu_h": float(self.delay_gpu_h), "slowdown_gpu_h": float(self.slowdown_gpu_h),
            "wait_mean_h": wait_mean_h, "jct_mean_h": jct_mean_h,
            "p_limit_excess_mw": float(excess_mw),
            "tokens_per_s": float(infer["tokens_per_s"]),
            "slo_attainment_frac": float(infer["good_req"] / infer["done_req"] if infer["done_req"] > 0 else 1.0),
            "itl_p99_ms": float(infer["itl_p99_ms"]),
            "n_requests_queued": float(infer["queued_req"]), "n_requests_dropped": float(infer["dropped_req"]),
        }
        out.update(by_class)
        done = infer["done_req"]
        out["train_stall_frac"] = stall_frac
        out["train_checkpoint_frac"] = ckpt_frac
        out["ttft_p99_ms"] = float(infer["ttft_p99_ms"])
        out["ttft_attainment_frac"] = float(infer["ttft_good_req"] / done if done > 0 else 1.0)
        out["itl_attainment_frac"] = float(infer["itl_good_req"] / done if done > 0 else 1.0)
        out["p_gpu_mw"] = float((train["gpu_w"] + infer["p_gpu_w"]) / 1e6)
        out["work_gpu_h"] = float(self.work_gpu_h)
        for key, value in zip(_WORK_KEYS, self.work_class_gpu_h.tolist()):
            out[key] = value
        return out

    def _training_outputs(self, train: dict) -> tuple:
        """``(p_train_mw, counts per state, wait_mean_h, jct_mean_h, {per-class outputs}, train_stall_frac,
        train_checkpoint_frac)``: what of :meth:`_outputs` only the training part and the jobs' states
        and statistics give (do not modify).

        Kept while the step's training part is the same object (:meth:`_advance_steady` keeps it
        while the running jobs run whole steps, :meth:`_advance_idle` while none runs), the counts
        are (recounted only when a job's state changes) and the wait and completion sums are: the
        same numbers from the same inputs.
        """
        sched = self.sched
        counts, by_state_class = sched.count_lists()  # Python ints, kept until a job's state changes
        kept = self._training_out
        if kept is not None and kept[0] is train and kept[1] is counts \
                and kept[2] == (sched.wait_sum_s, sched.n_started, sched.jct_sum_s, sched.n_finished):
            return kept[3]
        running, queued = by_state_class[RUNNING], by_state_class[QUEUED]
        by_class_w = train["by_class_w"].tolist()
        by_class = {}
        for level, (p_key, run_key, queue_key) in enumerate(_CLASS_KEYS):
            by_class[p_key] = by_class_w[level] / 1e6
            by_class[run_key] = running[level]
            by_class[queue_key] = queued[level]
        busy = max(train["busy_gpus"], 1e-12)
        stall_gpus, ckpt_gpus = train["stall_gpus"]
        found = (float(train["it_w"] / 1e6), counts, float(sched.wait_mean_s() / 3600.0),
                 float(sched.jct_mean_s() / 3600.0), by_class, float(stall_gpus / busy), float(ckpt_gpus / busy))
        if train is self._idle or any(kept is not None and kept[8] is not None and train is kept[8][3]
                                      for kept in (self._steady, self._steady_c)):
            # a kept training part (one made anew each step is never asked for again)
            self._training_out = (train, counts, (sched.wait_sum_s, sched.n_started, sched.jct_sum_s,
                                                  sched.n_finished), found)
        return found


#: Per-class output names of :meth:`GpuCluster._outputs`, in :data:`CLASSES` order.
_CLASS_KEYS = tuple((f"p_train_{c}_mw", f"n_jobs_running_{c}", f"n_jobs_queued_{c}") for c in CLASSES)
_WORK_KEYS = tuple(f"work_{c}_gpu_h" for c in CLASSES)

#: Every output of :meth:`GpuCluster.step`, in order.
OUTPUTS: tuple[str, ...] = (
    "p_mw", "p_it_mw", "p_loss_mw", "q_mvar", "q_heat_mw", "q_heat_liquid_mw", "q_heat_air_mw",
    "p_train_mw", "p_infer_mw", "gpu_util_frac", "n_jobs_running", "n_jobs_queued", "n_jobs_paused",
    "n_jobs_done", "n_jobs_rejected", "delay_gpu_h", "slowdown_gpu_h", "wait_mean_h", "jct_mean_h",
    "p_limit_excess_mw", "tokens_per_s",
    "slo_attainment_frac", "itl_p99_ms", "n_requests_queued", "n_requests_dropped",
    *(name for c in CLASSES for name in (f"p_train_{c}_mw", f"n_jobs_running_{c}", f"n_jobs_queued_{c}")),
    "train_stall_frac", "train_checkpoint_frac", "ttft_p99_ms", "ttft_attainment_frac", "itl_attainment_frac",
    "p_gpu_mw", "work_gpu_h", *(f"work_{c}_gpu_h" for c in CLASSES),
)
