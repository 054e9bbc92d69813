"""What a scheduling study reads off the cluster: idle and fragmented GPUs, JCT tails, fairness, shed capacity.

Reported (:data:`SCHEDULING_OUTPUTS`) only when the datacenter sim asks for them
(``[sims.<id>] scheduling_outputs = true``), so existing runs record the columns they always had.

* ``n_gpus_idle``: training GPUs no job holds; ``n_gpus_frag``: FGD's fragmentation
  ``F(M)`` of those (:func:`.nodes.frag_gpus`, target workload = pods of the latest arrivals);
  ``gpu_frag_of_idle_frac`` = ``n_gpus_frag / n_gpus_idle``.
* ``n_gpus_held``: idle GPUs booked by jobs paused on them (``training.hold_paused_gpus``).
* ``n_nodes_empty``, ``n_nodes_asleep``; ``p_train_idle_mw``: what idle capacity draws (free
  and held GPUs at idle power plus their share of the node's idle non-GPU power; sleeping
  nodes at their sleep power).
* ``jct_p99_h``, ``wait_p99_h``: 99th percentiles over the jobs submitted at or after time 0
  that finished (JCT) or started (wait) so far (a job moved in from another site counts from its
  own submission, its wait where it first started: :mod:`.moves`).
* ``ftf_rho_mean_ratio``, ``ftf_rho_max_ratio``: finish-time fairness of the finished jobs,
  ``rho = T_sh / T_id`` (Mahajan et al., "Themis: Fair and Efficient GPU Cluster
  Scheduling", NSDI 2020): ``T_sh`` the job's completion time counted from the step at which
  the cluster first sees it (so a step's rounding of a short job's submission is not counted
  as unfairness; JCT keeps it), ``T_id`` its time alone on a
  ``1/N`` share of the partition, ``N`` its mean contention (active jobs) over its life:
  ``T_id = work_s * d / min(C / N, d)`` for a job of ``d`` GPUs on ``C`` (the simplification of
  the notes' third-party simulators; the paper's own estimate of ``T_id`` is not reproduced).
* ``done_gpu_h``: GPU-hours of work (requested GPUs x full-speed runtime) of the finished jobs.
* ``p_shed_cap_mw``: facility power shed within a step by capping every running training
  GPU at its lowest settable limit (a power limit applies in well under a second);
  ``p_shed_mw``: pausing the running flexible jobs (their checkpoint loss is the cost) and
  capping the rest at that limit. Sleep is not counted: nodes sleep only after
  ``idle_before_sleep_s``.
* ``n_gpus_mig``, ``n_mig_slices_frag``: GPUs of the MIG pool and their free memory slices
  the deployment's profile mix cannot use (:mod:`.mig`; 0 without MIG fleets).
* ``n_job_failures`` (failures so far, restarts included), ``n_jobs_failed`` (jobs ended by a
  failure), ``lost_gpu_h`` (work lost since the jobs' last checkpoints; :mod:`.failures`);
  counted from the scenario start (not in the warm-up).
* ``n_jobs_transient``, ``n_gpus_transient``, ``p_transient_mw`` (off-site, not in ``p_mw``),
  ``transient_gpu_h`` and ``transient_cost_usd`` (billed), ``n_transient_revoked``: the burst
  capacity of :mod:`.transient` (0 without it); ``wait_short_mean_h``: mean queueing wait of
  the short jobs (work ≤ its ``short_max_h``, else 1 h) started so far.
"""

from __future__ import annotations

import numpy as np

from cosim.adapters.datacenter.nodes import frag_gpus
from cosim.adapters.datacenter.states import DONE, RUNNING, TRANSIENT

SCHEDULING_OUTPUTS: tuple[str, ...] = (
    "n_gpus_idle", "n_gpus_frag", "gpu_frag_of_idle_frac", "n_gpus_held", "n_nodes_empty", "n_nodes_asleep",
    "p_train_idle_mw",
    "jct_p99_h", "wait_p99_h", "ftf_rho_mean_ratio", "ftf_rho_max_ratio", "done_gpu_h",
    "p_shed_cap_mw", "p_shed_mw", "n_gpus_mig", "n_mig_slices_frag",
    "n_job_failures", "n_jobs_failed", "lost_gpu_h",
    "n_jobs_transient", "n_gpus_transient", "p_transient_mw", "transient_gpu_h", "transient_cost_usd",
    "n_transient_revoked", "wait_short_mean_h",
)


def scheduling_outputs(cluster, run: np.ndarray, caps: np.ndarray, p_it_mw: float) -> dict[str, float]:
    """The :data:`SCHEDULING_OUTPUTS` of ``cluster`` after a step (``run``, ``caps``: its running jobs and caps).

    What depends only on the jobs' states and times (tails, fairness, short-job waits), on the
    running jobs and their caps (what they could shed) or on the MIG placement is kept in
    ``cluster.observed`` and worked out again only when that changed: the same numbers.
    """
    sched = cluster.sched
    free = sched.free_per_node()
    sizes, probs = sched.pod_mix()
    n_frag = frag_gpus(free, sizes, probs)
    n_held = float(sched.n_alloc[sched.held].sum())  # paused on their GPUs: idle, not placeable
    out = {"n_gpus_idle": float(sched.n_free), "n_gpus_frag": n_frag,
           "gpu_frag_of_idle_frac": n_frag / sched.n_free if sched.n_free else 0.0, "n_gpus_held": n_held,
           "n_nodes_empty": float(np.count_nonzero(free >= sched.topology.gpus_on_node)),
           "n_nodes_asleep": float(np.count_nonzero(cluster.sleep.asleep)) if cluster.sleep is not None else 0.0,
           "p_train_idle_mw": _idle_w(cluster, free, n_held) / 1e6}
    kept = cluster.observed
    # the jobs' states (views' key: their bytes), first starts, ends, arrivals and any moved-in job
    key = (sched.state_key(), sched.alloc_version, sched.n_started, sched.n_finished, sched.next_arrival)
    if kept.get("jobs_key") != key:
        kept["jobs_key"], kept["tails"], kept["short"] = key, _tails_and_fairness(sched, cluster.n_gpus), None
    out.update(kept["tails"])
    out.update(_shed_mw(cluster, run, caps, p_it_mw))
    out.update(_mig(cluster))
    out.update({"n_job_failures": float(cluster.n_job_failures),
                "n_jobs_failed": float(cluster.n_jobs_failed), "lost_gpu_h": cluster.lost_gpu_h})
    out.update(_transient(cluster))
    return out


def _transient(cluster) -> dict[str, float]:
    pool, sched = cluster.transient, cluster.sched
    kept = cluster.observed.get("short")  # (n_jobs_transient, wait_short_mean_h) while the jobs' key holds
    if kept is None:
        kept = cluster.observed["short"] = _short_waits(sched, pool)
    out = {"n_jobs_transient": kept[0],
           "n_gpus_transient": float(pool.n_gpus_used) if pool is not None else 0.0,
           "p_transient_mw": cluster.p_transient_mw,
           "transient_gpu_h": pool.gpu_h if pool is not None else 0.0,
           "transient_cost_usd": pool.cost_usd if pool is not None else 0.0,
           "n_transient_revoked": float(pool.n_revoked) if pool is not None else 0.0,
           "wait_short_mean_h": kept[1]}
    return out


def _short_waits(sched, pool) -> tuple[float, float]:
    """``(n_jobs_transient, wait_short_mean_h)``: jobs running off-site, mean wait of the short jobs started. [-, h]"""
    short_s = (pool.setup.short_max_h if pool is not None else 1.0) * 3600.0
    jobs = sched.jobs
    started = (sched.stat_submit_s >= 0) & ~np.isnan(sched.first_start_s) & ~sched.waited_elsewhere \
        & (jobs.work_s <= short_s)
    wait_s = sched.first_start_s[started] - sched.stat_submit_s[started]
    return (float(np.count_nonzero(sched.state == TRANSIENT)),
            float(wait_s.mean()) / 3600.0 if len(wait_s) else 0.0)


def _mig(cluster) -> dict[str, float]:
    pool = cluster.mig_pool
    if pool is None:
        return {"n_gpus_mig": 0.0, "n_mig_slices_frag": 0.0}
    kept = cluster.observed.get("mig")  # (pool, used bytes, instances, outputs): the placement as it was
    if kept is not None and kept[0] is pool and kept[1] == pool.used.tobytes() and kept[2] == pool.instances:
        return dict(kept[3])
    found = _mig_frag(pool)
    cluster.observed["mig"] = (pool, pool.used.tobytes(), list(pool.instances), found)
    return dict(found)


def _mig_frag(pool) -> dict[str, float]:
    counts: dict[str, int] = {}
    for _, _, _, profile in pool.instances:
        counts[profile.name] = counts.get(profile.name, 0) + 1
    by_name = {p.name: p for _, _, _, p in pool.instances}
    mix = [(by_name[n], c / len(pool.instances)) for n, c in counts.items()]
    return {"n_gpus_mig": float(pool.n_gpus), "n_mig_slices_frag": pool.frag_slices(mix)}


def _idle_w(cluster, free: np.ndarray, n_held: float = 0.0) -> float:
    per_gpu_w = cluster.gpu.idle_w + cluster.node.other_idle_w / cluster.node.gpus_per_node
    held_w = n_held * per_gpu_w  # held GPUs sit on awake nodes (their job's)
    if cluster.sleep is None:
        return float(free.sum()) * per_gpu_w + held_w
    asleep = cluster.sleep.asleep
    return float(free[~asleep].sum()) * per_gpu_w + float(asleep.sum()) * cluster.sleep.params.p_sleep_w + held_w


def _tails_and_fairness(sched, n_gpus_partition: int) -> dict[str, float]:
    jobs = sched.jobs
    submit_s = sched.stat_submit_s  # a job moved in counts from its own submission (.moves)
    counted = submit_s >= 0
    done = np.flatnonzero(counted & (sched.state == DONE))
    started = np.flatnonzero(counted & ~np.isnan(sched.first_start_s) & ~sched.waited_elsewhere)
    jct_s = sched.end_s[done] - submit_s[done]
    wait_s = sched.first_start_s[started] - submit_s[started]
    rho = finish_time_fairness(sched.end_s[done] - sched.admit_s[done], jobs.work_s[done], jobs.n_gpus[done],
                               sched.mean_contention(done), n_gpus_partition)
    return {"jct_p99_h": _p99(jct_s) / 3600.0, "wait_p99_h": _p99(wait_s) / 3600.0,
            "ftf_rho_mean_ratio": float(rho.mean()) if len(rho) else 0.0,
            "ftf_rho_max_ratio": float(rho.max()) if len(rho) else 0.0,
            "done_gpu_h": float(jobs.n_gpus[done] @ jobs.work_s[done]) / 3600.0}


def finish_time_fairness(jct_s, work_s, n_gpus, contention, capacity_gpus) -> np.ndarray:
    """Themis's ``rho = T_sh / T_id`` per job (see the module docstring). [-]

    Args:
        jct_s: completion time in the shared cluster. [s]
        work_s: runtime alone at the requested size. [s]
        n_gpus: requested GPUs. [-]
        contention: mean number of active jobs over the job's life (>= 1). [-]
        capacity_gpus: GPUs of the partition. [-]
    """
    demand = np.asarray(n_gpus, float)
    share = capacity_gpus / np.maximum(np.asarray(contention, float), 1.0)
    t_id = np.asarray(work_s, float) * demand / np.maximum(np.minimum(share, demand), 1e-9)
    return np.asarray(jct_s, float) / np.maximum(t_id, 1e-9)


def _p99(values: np.ndarray) -> float:
    return float(np.percentile(values, 99)) if len(values) else 0.0


def _shed_mw(cluster, run: np.ndarray, caps: np.ndarray, p_it_mw: float) -> dict[str, float]:
    sched = cluster.sched
    # the sheddable IT power depends on the running jobs, their caps and states, not on the step's draw
    key = (run, caps, sched.state_key(), sched.alloc_version)
    kept = cluster.observed.get("shed")
    if kept is None or kept[0][0] is not run or kept[0][1] is not caps or kept[0][2:] != key[2:]:
        kept = cluster.observed["shed"] = (key, _shed_w(cluster, run, caps))
    if kept[1] is None:
        return {"p_shed_cap_mw": 0.0, "p_shed_mw": 0.0}
    cap_sum_w, both_w = kept[1]
    return {"p_shed_cap_mw": _facility_drop_mw(cluster, p_it_mw, cap_sum_w),
            "p_shed_mw": _facility_drop_mw(cluster, p_it_mw, both_w)}


def _shed_w(cluster, run: np.ndarray, caps: np.ndarray) -> tuple[float, float] | None:
    """IT power the running jobs shed capped at the lowest limit, and paused if flexible else capped (None:
    no job runs). [W, W]"""
    still = cluster.sched.state[run] == RUNNING
    run, caps = run[still], caps[still]
    if len(run) == 0:
        return None
    n_alloc = cluster.sched.n_alloc[run].astype(float)
    p_now = cluster._gpu_w(run, caps)
    p_min = cluster._gpu_w(run, np.full(len(run), cluster.gpu.p_limit_min_w))
    cap_w = n_alloc * np.maximum(p_now - p_min, 0.0)
    flexible = cluster.jobs.flexible[run]
    pause_w = cluster._saving_w(n_alloc, p_now)
    both_w = float(np.where(flexible, pause_w, cap_w).sum())
    return float(cap_w.sum()), both_w


def _facility_drop_mw(cluster, p_it_mw: float, drop_w: float) -> float:
    """Facility power (IT + delivery losses) saved by ``drop_w`` less IT power. [MW]"""
    after_mw = max(p_it_mw - drop_w / 1e6, 0.0)
    return float(cluster._facility_mw(p_it_mw * 1e6) - cluster._facility_mw(after_mw * 1e6))
