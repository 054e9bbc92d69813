"""Flexible training jobs moved between sites (checkpoint-restart), driven by a load-shifting controller.

A job is moved in two halves, one per site, through numbers only (mosaik passes numbers between
entities); ``controllers/load_shift`` relays them and keeps at most one move in flight:

1. **Export** at the source. The controller raises the cumulative request counter
   ``n_export_req`` (and says the largest job the destination can take, ``n_export_max_gpus``).
   At its next step, before anything else, the source takes one *flexible* job that is running
   (not held) or queued, not paused by a knob or the limit, of at most that many GPUs: running
   before queued, then the most GPUs, then the most remaining work, then the lowest id. The job
   checkpoints on demand and stops (its GPUs freed at once; its progress is kept, nothing is
   lost), and leaves this site's system (state ``moved``). Its record — ``n_export_gpus``,
   ``export_work_s`` (remaining work at full speed on its GPUs), ``export_power_frac``,
   ``n_export_prio``, ``export_submit_s`` (its submission time, for the statistics),
   ``n_export_started`` (1 if it had started somewhere: its wait is counted there),
   ``export_ckpt_interval_s`` (its checkpoint interval) and ``n_export_elastic`` (1 if it may be
   resized) — and
   ``n_export_done`` (requests handled) are outputs. A request that finds
   no such job is answered with ``n_export_gpus = 0``.
2. **Import** at the destination. The controller passes the record on with the cumulative
   counter ``n_import_seq`` and the restart cost ``import_restart_s``. At its next step, before
   its scheduling pass, the destination puts the job into one of its guest slots (see below)
   with remaining work = exported remaining + restart cost (the checkpoint reloaded, the
   restart counted as extra work, as a local restore), with its own checkpoint interval (the
   destination's default if none is passed or it is not longer than the destination's checkpoint
   duration, with a warning naming the entity once) and elastic flag (the destination's policy
   resizes it if it resizes elastic jobs), queued ahead of its own jobs of the same
   class (it is the oldest work there) and started by its own policy when its GPUs are free.
   ``n_import_done`` counts the imports. A job needing more GPUs than the partition has, or an
   import with no free slot, is an error (the controller checks both before it asks).

Statistics: a moved job counts once. Its wait (``wait_mean_h``, ``wait_p99_h``) counts where it
first started (at the source, or, exported from the queue, at the destination, from its own
submission: ``import_submit_s``); its completion time (``jct_mean_h``, ``jct_p99_h``) counts where
it finishes, from its own submission; its finish-time fairness there, over its stay there (its
remaining work from its arrival: the contention at two sites is not one number). Without
``import_submit_s`` connected an import is an error naming it (:data:`IMPORT_RECORD_INPUTS`);
a NaN the controller passes on (its source site did not send the time) counts in none of them. The per-job percentiles and
fairness read the job table, so a guest drops out of them when its slot takes the next guest (the
means keep it).

Conservation: a moved job's work done at the source + at the destination = its work + every
extra work (restores, preemptions, the restart cost), as for a job that stayed.

**Guest slots.** A job table is fixed when a cluster is built (every per-job array is sized by
it), so a site that may receive jobs reserves ``training.n_guest_slots`` placeholder jobs at the
*front* of its table (:func:`with_guest_slots`): never submitted (the scheduler's arrival
pointer starts past them), submission time :data:`GUEST_SUBMIT_S` (so the table stays sorted
and the wait / completion-time statistics, which count jobs submitted at or after 0, leave
guests out). An import fills a slot that is free (never used, or its guest done, failed or
moved on); the guest's per-job quantities (size, work, power, class) are written into the
slot. The slots shift the real jobs' indices, and with them the seeded per-job draws
(iteration phases): a cluster with slots is not bit-identical to the same cluster without;
compare runs that have the same slots (``enabled = false`` on the controller for the baseline).

Outputs for the controller, after each step: ``n_gpus_spare`` (free GPUs not wanted by the
site's own queue: ``max(free - GPUs of queued jobs, 0)``), ``n_jobs_flex`` and
``n_gpus_flex_min`` (movable flexible jobs and the smallest one's GPUs, 0 if none),
``n_slots_free``; and reporting (the site's ``n_jobs_done`` counts its guests done as well, also
those whose slot has since been reused): ``n_jobs_moved_out``, ``n_jobs_moved_in``, ``moved_out_gpu_h``
and ``moved_in_gpu_h`` (the remaining work of the jobs exported / imported, GPU-hours at full
speed), ``restart_gpu_h`` (the restart cost of the imports) and ``guest_work_gpu_h`` (GPU-hours
of work the guests did here; the site's ``work_gpu_h`` includes them).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np

from cosim.adapters.datacenter.states import DONE, FAILED, FUTURE, MOVED, QUEUED, REJECTED, RUNNING
from cosim.adapters.datacenter.training import CLASSES, Jobs, capped

#: Submission time of the guest slots: far before any job, so the table stays sorted. [s]
GUEST_SUBMIT_S = -1e9
#: States in which a guest slot may take a new job. [-]
FREE_SLOT_STATES = (FUTURE, DONE, FAILED, REJECTED, MOVED)

MOVE_INPUTS: tuple[str, ...] = ("n_export_req", "n_export_max_gpus", "n_import_seq", "n_import_gpus",
                                "import_work_s", "import_power_frac", "n_import_prio", "import_restart_s",
                                "import_submit_s", "n_import_started", "import_ckpt_interval_s", "n_import_elastic")
#: What an import reads besides ``n_import_seq``: all of them must be connected (a missing one is an error).
IMPORT_RECORD_INPUTS: tuple[str, ...] = tuple(a for a in MOVE_INPUTS if a.startswith(("n_import_", "import_"))
                                              and a != "n_import_seq")
MOVE_OUTPUTS: tuple[str, ...] = ("n_gpus_spare", "n_jobs_flex", "n_gpus_flex_min", "n_slots_free",
                                 "n_export_done", "n_export_gpus", "export_work_s", "export_power_frac",
                                 "n_export_prio", "n_import_done", "n_jobs_moved_out", "n_jobs_moved_in",
                                 "moved_out_gpu_h", "moved_in_gpu_h", "restart_gpu_h", "guest_work_gpu_h",
                                 "export_submit_s", "n_export_started", "export_ckpt_interval_s", "n_export_elastic")


def with_guest_slots(jobs: Jobs, n_slots: int) -> Jobs:
    """``jobs`` with ``n_slots`` guest placeholders in front (never submitted; see the module docstring)."""
    if n_slots <= 0:
        return jobs
    k = int(n_slots)

    def front(values, fill, dtype):
        return np.concatenate([np.full(k, fill, dtype), np.asarray(values, dtype)])

    ckpt = None if jobs.ckpt_interval_s is None else front(jobs.ckpt_interval_s, np.nan, float)
    elastic = None if jobs.elastic is None else front(jobs.elastic, False, bool)
    power = None if jobs.power_frac is None else front(jobs.power_frac, 0.5, float)
    return replace(jobs, submit_s=front(jobs.submit_s, GUEST_SUBMIT_S, float), n_gpus=front(jobs.n_gpus, 1, np.int64),
                   work_s=front(jobs.work_s, 0.0, float), prio=front(jobs.prio, len(CLASSES) - 1, np.int64),
                   flexible=front(jobs.flexible, False, bool), power_frac=power, ckpt_interval_s=ckpt, elastic=elastic)


@dataclass
class ExportRecord:
    """One exported job. [-, s, -, -, s, -, s, -]

    ``submit_s``: its submission time for the wait and completion-time statistics (NaN: not
    counted); ``started``: it had started (its wait is counted at that site); ``ckpt_interval_s``:
    its checkpoint interval (NaN: the destination's default); ``elastic``: it may be resized.
    """

    n_gpus: int
    work_s: float
    power_frac: float
    prio: int
    submit_s: float = math.nan
    started: bool = False
    ckpt_interval_s: float = math.nan
    elastic: bool = False


class JobMoves:
    """The move state of one cluster: its guest slots, the request counters and the record.

    Args:
        cluster: the :class:`~.cluster.GpuCluster` (built from a table with the slots in front).
        n_slots: the guest slots at the front of its job table. [-]
    """

    def __init__(self, cluster, n_slots: int, label: str = "a Cluster"):
        self.cluster, self.n_slots = cluster, int(n_slots)
        self.label = label  # the entity, named in warnings
        self._warned_ckpt = False
        cluster.sched.next_arrival = max(cluster.sched.next_arrival, self.n_slots)  # slots are never submitted
        self.slot_ckpt_interval_s = cluster.ckpt_interval_s[: self.n_slots].copy()  # this site's default
        self.n_export_done = 0
        self.n_import_done = 0
        self.last = ExportRecord(0, 0.0, 0.0, 0)
        self.n_jobs_moved_out = self.n_jobs_moved_in = 0
        self.moved_out_gpu_h = self.moved_in_gpu_h = self.restart_gpu_h = 0.0
        self.retired_guest_gpu_h = 0.0  # work of guests whose slot was reused
        self.retired_done = 0  # guests done whose slot was reused (no longer in the DONE count)

    # -- the two halves ---------------------------------------------------------------------
    def apply(self, inputs: dict[str, float | None], time_s: float) -> None:
        """Handle a new export request and a new import in ``inputs`` (counters above what is done)."""
        req = _count(inputs.get("n_export_req"))
        if req > self.n_export_done:
            self.last = self.export(_count(inputs.get("n_export_max_gpus")), time_s)
            self.n_export_done = req
        seq = _count(inputs.get("n_import_seq"))
        if seq > self.n_import_done:
            missing = [k for k in IMPORT_RECORD_INPUTS if inputs.get(k) is None]
            if missing:  # else the guest silently drops out of the wait / completion-time statistics
                raise ValueError(f"{self.label}: a job import needs {', '.join(missing)} connected with the other import inputs "
                                 "(from the controller's import_<site>_* / n_import_*_<site> outputs); connect them")
            record = ExportRecord(_count(inputs.get("n_import_gpus")), _float(inputs.get("import_work_s")),
                                  _float(inputs.get("import_power_frac")), _count(inputs.get("n_import_prio")),
                                  _float(inputs.get("import_submit_s")), _count(inputs.get("n_import_started")) > 0,
                                  _float(inputs.get("import_ckpt_interval_s")), _count(inputs.get("n_import_elastic")) > 0)
            self.import_job(record, _float(inputs.get("import_restart_s")), time_s)
            self.n_import_done = seq

    def movable(self) -> np.ndarray:
        """Flexible jobs that may move: running (not held) or queued, not paused, work left. [job ids]"""
        c = self.cluster
        s, st = c.sched, c.sched.state
        ok = c.jobs.flexible & (((st == RUNNING) & ~s.held) | (st == QUEUED)) & (c.paused_by == 0)
        ok &= s.remaining_s > 1e-6
        return np.flatnonzero(ok)

    def export(self, max_gpus: int, time_s: float) -> ExportRecord:
        """Stop the movable job that fits ``max_gpus`` (the order of the module docstring); its record."""
        c = self.cluster
        s, jobs = c.sched, c.jobs
        cand = self.movable()
        cand = cand[jobs.n_gpus[cand] <= max_gpus]
        if len(cand) == 0:
            return ExportRecord(0, 0.0, 0.0, 0)
        job = int(cand[np.lexsort((cand, -s.remaining_s[cand], -jobs.n_gpus[cand], s.state[cand] != RUNNING))[0]])
        if s.state[job] == RUNNING:
            s.release(np.array([job]), MOVED, time_s)  # the GPUs are free for this step's pass
        else:
            s.state[job] = MOVED
        s.n_active -= 1
        s.dirty = True
        record = ExportRecord(int(jobs.n_gpus[job]), float(s.remaining_s[job]), float(jobs.power_frac[job]),
                              int(jobs.prio[job]), float(s.stat_submit_s[job]), bool(~np.isnan(s.first_start_s[job])),
                              float(c.ckpt_interval_s[job]), jobs.elastic is not None and bool(jobs.elastic[job]))
        self.n_jobs_moved_out += 1
        self.moved_out_gpu_h += record.n_gpus * record.work_s / 3600.0
        return record

    def import_job(self, rec: ExportRecord, restart_s: float, time_s: float) -> int:
        """Queue ``rec`` in a free guest slot with ``restart_s`` of extra work; the slot. [-, s, s -> job id]"""
        c = self.cluster
        s, jobs = c.sched, c.jobs
        if not 1 <= rec.n_gpus <= c.n_gpus:
            raise RuntimeError(f"imported job of {rec.n_gpus} GPUs: the partition has {c.n_gpus}")
        if not (math.isfinite(rec.work_s) and rec.work_s > 0 and math.isfinite(restart_s) and restart_s >= 0):
            raise RuntimeError(f"imported job with work {rec.work_s!r} s and restart {restart_s!r} s")
        free = self.free_slots()
        if len(free) == 0:
            raise RuntimeError(f"no free guest slot ({self.n_slots} slots, all in use)")
        j = int(free[0])
        self.retired_guest_gpu_h += float(jobs.n_gpus[j]) * float(s.work_done_s[j]) / 3600.0
        self.retired_done += int(s.state[j] == DONE)
        pf = min(max(rec.power_frac, 0.0), 1.0)
        jobs.n_gpus[j], jobs.work_s[j], jobs.prio[j] = rec.n_gpus, rec.work_s, min(max(rec.prio, 0), len(CLASSES) - 1)
        jobs.flexible[j], jobs.power_frac[j] = True, pf
        s.state[j] = QUEUED
        s.remaining_s[j] = rec.work_s + restart_s
        s.extra_work_s[j] = restart_s
        s.work_done_s[j] = s.restart_work_s[j] = 0.0
        s.speed[j], s.rate_frac[j], s.ready_s[j], s.held[j] = 1.0, 1.0, -np.inf, False
        s.n_alloc[j] = rec.n_gpus
        s.alloc_version += 1
        # its wait counts once: where it first started (elsewhere, or here from its own submission)
        s.first_start_s[j] = time_s if rec.started else np.nan
        s.stat_submit_s[j], s.waited_elsewhere[j] = rec.submit_s, rec.started
        s.admit_s[j], s.end_s[j], s.c_admit_s[j], s.c_end_s[j] = time_s, np.nan, s.active_integral_s, np.nan
        s.n_active += 1
        s.dirty = True
        s.forget_views()  # prio and n_gpus changed: the views' state-bytes key would not see it
        gpu = c.gpu
        c.p_unc_w[j] = gpu.idle_w + pf * (gpu.tdp_w - gpu.idle_w)
        speed, power = capped(gpu.tdp_w / c.p_unc_w[j])
        c._speed_tdp_frac[j], c._power_tdp_frac[j] = speed, power
        c._speed_unc_frac[j], c._power_unc_frac[j] = min(speed / speed, 1.0), min(power / power, 1.0)
        c.busy_mean_frac[j] = np.nan  # recomputed for its size on its first run
        c._stall_mean_frac[j] = np.nan  # the cluster's per-job stall cache, refilled with it
        c.ran_s[j] = c.ckpt_work_s[j] = c.lost_s[j] = 0.0
        c.paused_by[j] = 0
        self._checkpoints_and_elastic(j, rec)
        self.n_jobs_moved_in += 1
        self.moved_in_gpu_h += rec.n_gpus * rec.work_s / 3600.0
        self.restart_gpu_h += rec.n_gpus * restart_s / 3600.0
        return j

    def _checkpoints_and_elastic(self, j: int, rec: ExportRecord) -> None:
        """Slot ``j`` takes ``rec``'s checkpoint interval (else this site's default) and elastic flag."""
        c = self.cluster
        interval = rec.ckpt_interval_s
        if not (math.isfinite(interval) and interval > c.ckpt_duration_s[j]):
            if math.isfinite(interval) and not self._warned_ckpt:  # given but unusable here: say so, once
                self._warned_ckpt = True
                warnings.warn(f"{self.label}: a moved-in job's checkpoint interval ({interval:g} s, "
                              f"import_ckpt_interval_s) is not longer than this site's checkpoint duration "
                              f"({float(c.ckpt_duration_s[j]):g} s); it takes this site's default interval "
                              f"({float(self.slot_ckpt_interval_s[j]):g} s) instead (said once per entity)",
                              UserWarning, stacklevel=2)
            interval = float(self.slot_ckpt_interval_s[j])
        c.ckpt_interval_s[j] = interval
        c.ckpt_mean_frac[j] = c.ckpt_duration_s[j] / interval
        c.ckpt_offset_s[j] = math.floor(c.phase[j] * interval) if c.checkpoint_stagger else 0.0
        if c.jobs.elastic is None and rec.elastic:
            c.jobs.elastic = np.zeros(len(c.jobs), bool)
        if c.jobs.elastic is not None:
            c.jobs.elastic[j] = rec.elastic
        c.sched.policy.job_replaced(c.sched, j)

    # -- views ---------------------------------------------------------------------------------
    def free_slots(self) -> np.ndarray:
        st = self.cluster.sched.state[: self.n_slots]
        return np.flatnonzero(np.isin(st, FREE_SLOT_STATES))

    def report(self, out: dict[str, float]) -> dict[str, float]:
        """``out`` (the cluster's step outputs) with the move outputs added and ``n_jobs_done``
        counting the guests done in slots since reused (the table holds only the latest guest)."""
        out["n_jobs_done"] = out["n_jobs_done"] + self.retired_done
        out.update(self.outputs())
        return out

    def outputs(self) -> dict[str, float]:
        c = self.cluster
        s, jobs = c.sched, c.jobs
        queued = s.state == QUEUED
        spare = max(int(s.n_free) - int(jobs.n_gpus[queued].sum()), 0)
        movable = self.movable()
        slots = slice(0, self.n_slots)
        guest_gpu_h = self.retired_guest_gpu_h + float(jobs.n_gpus[slots] @ s.work_done_s[slots]) / 3600.0
        return {"n_gpus_spare": spare, "n_jobs_flex": len(movable),
                "n_gpus_flex_min": int(jobs.n_gpus[movable].min()) if len(movable) else 0,
                "n_slots_free": len(self.free_slots()), "n_export_done": self.n_export_done,
                "n_export_gpus": self.last.n_gpus, "export_work_s": self.last.work_s,
                "export_power_frac": self.last.power_frac, "n_export_prio": self.last.prio,
                "n_import_done": self.n_import_done, "n_jobs_moved_out": self.n_jobs_moved_out,
                "n_jobs_moved_in": self.n_jobs_moved_in, "moved_out_gpu_h": self.moved_out_gpu_h,
                "moved_in_gpu_h": self.moved_in_gpu_h, "restart_gpu_h": self.restart_gpu_h,
                "guest_work_gpu_h": guest_gpu_h, "export_submit_s": self.last.submit_s,
                "n_export_started": int(self.last.started), "export_ckpt_interval_s": self.last.ckpt_interval_s,
                "n_export_elastic": int(self.last.elastic)}


def _float(value) -> float:
    return math.nan if value is None else float(value)


def _count(value) -> int:
    """A counter input (absent or NaN = 0). [-]"""
    if value is None:
        return 0
    value = float(value)
    return 0 if math.isnan(value) else int(round(value))


__all__ = ["GUEST_SUBMIT_S", "MOVE_INPUTS", "MOVE_OUTPUTS", "JobMoves", "with_guest_slots"]
