"""A :class:`~.cluster.GpuCluster` built from validated :class:`~.params.ClusterParams` (plain Python, no
mosaik: tests and benchmarks build clusters here), and what makes params impossible to build."""

from __future__ import annotations

import numpy as np

from cosim.adapters.datacenter.cluster import FleetSetup, GpuCluster
from cosim.adapters.datacenter.hardware import GPUS, NODES, NodeSpec, gpu_spec, node_spec
from cosim.adapters.datacenter.inference import (
    MLENERGY_GPUS,
    MODELS,
    Fleet,
    batch_curves,
    measured_gpus_per_replica,
    trace_input_tokens,
    trace_profile,
)
from cosim.adapters.datacenter.mig import MigPool, SliceCurves, kv_frac, mig_problems, place_instances
from cosim.adapters.datacenter.mig import profiles as mig_profiles
from cosim.adapters.datacenter.moves import with_guest_slots
from cosim.adapters.datacenter.params import ClusterParams, FleetParams
from cosim.adapters.datacenter.policies import param_problems
from cosim.adapters.datacenter.prefill import prefill_tokens_per_s
from cosim.adapters.datacenter.smoothing import Smoothing
from cosim.adapters.datacenter.training import (
    ELASTIC_STREAM,
    PHILLY_FILE,
    Jobs,
    TraceError,
    jobs_from_trace,
    read_job_trace,
    sample_power_frac,
    substream,
    synthetic_jobs,
)

__all__ = ["build_cluster", "cluster_problems", "make_fleet", "make_jobs", "make_mig_pool"]


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

