"""The default scheduling pass in C (``adapters/datacenter/_scheduler.c``, :mod:`.scheduler_kernel`) against the
Python pass (``policies/_base.py``): the same jobs start on the same GPUs with the same bookkeeping, pass for
pass, over random job mixes, pauses, holds, preemptions, speed changes, ties and NaNs in the expected ends;
only the passes it covers go to C; a copy packs its own arrays; a wrong free count is an error, not a
double booking."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import numpy as np
import pytest
from c_part_marks import needs_c_part

from cosim.adapters.datacenter import ClusterParams, build_cluster, scheduler_kernel
from cosim.adapters.datacenter.cluster import GpuCluster, Knobs
from cosim.adapters.datacenter.nodes import NodeSleep, SleepParams, Topology
from cosim.adapters.datacenter.policies import make_policy
from cosim.adapters.datacenter.policies.easy import Easy
from cosim.adapters.datacenter.scheduler import DONE, PAUSED, QUEUED, RUNNING, STATE_NAMES, Scheduler
from cosim.adapters.datacenter.training import Jobs

ROOT = Path(__file__).resolve().parents[3]

pytestmark = needs_c_part(scheduler_kernel.LIB is not None, "adapters/datacenter/_scheduler.so")


def _jobs(seed: int, n: int, n_gpus: int) -> Jobs:
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 3, 4, 8, 12, 16, 24, 40, n_gpus], n, p=[.2, .15, .1, .15, .15, .05, .1, .04, .04, .02])
    submit = np.sort(np.round(rng.uniform(-500, 3000, n), -1 if seed % 2 else 0))  # (rounded: equal submissions)
    works = np.round(rng.uniform(50, 1500, n), -2 if seed % 3 == 0 else 0)  # (rounded: equal expected ends)
    return Jobs(submit, sizes.astype(np.int64), works, rng.integers(0, 3, n).astype(np.int64), rng.random(n) < 0.4,
                np.full(n, 0.5))


def _sched(jobs: Jobs, n_gpus: int, policy: str, params: dict) -> Scheduler:
    s = Scheduler(jobs, n_gpus, policy, policy_params=params)
    s.stat_submit_s[::5] = -1.0  # some jobs' waits do not count (a warm-up's)
    return s


STATE_ARRAYS = ("state", "owner", "n_alloc", "first_start_s", "remaining_s", "speed", "end_s")


def _same(a: Scheduler, b: Scheduler) -> None:
    for name in STATE_ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x.view(np.uint8), y.view(np.uint8)), name
    assert (a.n_free, a.alloc_version, a.n_started, a.n_finished) == (b.n_free, b.alloc_version, b.n_started,
                                                                      b.n_finished)
    assert np.float64(a.wait_sum_s).tobytes() == np.float64(b.wait_sum_s).tobytes()
    np.testing.assert_array_equal(a.free_gpus(), b.free_gpus())
    np.testing.assert_array_equal(a.free_gpus(), np.flatnonzero(a.owner < 0))
    np.testing.assert_array_equal(a.free_per_node(), b.free_per_node())
    np.testing.assert_array_equal(a.free_per_node(), a.topology.free_per_node(a.owner))


def _drive(pair: tuple[Scheduler, Scheduler], seed: int, steps: int, dt: float = 20.0) -> int:
    """Step both schedulers alike (C pass in the first, Python in the second), comparing after every pass;
    the number of passes that started a job."""
    rng = np.random.default_rng(seed + 1000)
    c_sched, py_sched = pair
    n_started = 0
    for k in range(steps):
        t = k * dt
        ops = rng.random(6)
        for s in pair:
            s.admit(t)
        run = c_sched.running()
        if ops[0] < 0.15 and len(run):  # pause a running job (its GPUs freed), or hold one (GPUs kept)
            job = run[int(ops[1] * len(run)):][:1]
            for s in pair:
                (s.hold if ops[2] < 0.3 else lambda j: s.release(j, PAUSED, t))(job)
        paused = np.flatnonzero(c_sched.state == PAUSED)
        if ops[3] < 0.2 and len(paused):
            job = paused[:1]
            for s in pair:
                s.unhold(job[s.held[job]], 30.0) if s.held[job].all() else s.requeue(job, 30.0)
        if ops[4] < 0.05 and len(run):  # preempted: back to the queue with lost work
            for s in pair:
                s.preempt(run[:1], t, 40.0)
        if ops[5] < 0.1:  # capped speeds (ties, a NaN, a zero) change the expected ends
            run = c_sched.running()
            values = np.array([0.5, 1.0, 0.25, np.nan, 0.0, 1.0])[rng.integers(0, 6, len(run))]
            for s in pair:
                s.speed[run] = values
        started = [s.schedule(t) for s in pair]
        assert started[0] == started[1], f"pass at {t}"
        n_started += bool(started[0])
        _same(*pair)
        for s in pair:
            run = s.running()
            work = np.minimum(s.remaining_s[run], dt * np.nan_to_num(s.speed[run], nan=1.0))
            s.remaining_s[run] -= work
            s.release(run[s.remaining_s[run] <= 1e-9], DONE, t + dt)
            s.account(dt, t)
    return n_started


@pytest.mark.parametrize("policy,params", [("easy", {}), ("easy", {"n_backfill_jobs": 0}),
                                           ("easy", {"n_backfill_jobs": 3}), ("fifo", {})])
@pytest.mark.parametrize("seed", range(6))
def test_the_c_pass_starts_what_the_python_pass_starts(policy, params, seed, monkeypatch):
    n_gpus = [32, 48, 64][seed % 3]
    jobs = _jobs(seed, 60, n_gpus)
    c_sched, py_sched = _sched(jobs, n_gpus, policy, params), _sched(copy.deepcopy(jobs), n_gpus, policy, params)
    calls = {"c": 0}
    run_c = scheduler_kernel.EasyPass.run

    def counted(self, sched, time_s):
        if sched is py_sched:
            raise AssertionError("the Python scheduler's pass went to C")
        calls["c"] += 1
        return run_c(self, sched, time_s)

    monkeypatch.setattr(scheduler_kernel.EasyPass, "run", counted)
    py_sched._easy_pass = False  # (this one's passes in Python)
    assert _drive((c_sched, py_sched), seed, 300) >= 10
    assert calls["c"] >= 10


def test_a_cluster_steps_the_same_with_the_pass_in_c_or_in_python(monkeypatch):
    """rl_site's cluster under random pausing, a day at 5 min: every output of every step to the bit."""
    scenario = tomllib.loads((ROOT / "scenarios" / "rl_site.toml").read_text())
    entity = next(e for e in scenario["entities"].values() if e.get("model") == "Cluster")
    params = ClusterParams.model_validate({k: v for k, v in entity.items() if k not in ("sim", "model")})
    rng = np.random.default_rng(4)
    knobs = [Knobs(pause_flexible_frac=float(f)) for f in np.repeat(rng.random(96), 3)]
    runs = []
    for on in (True, False):
        monkeypatch.setattr(scheduler_kernel, "C_PASS", on)
        cluster = build_cluster(params, np.random.default_rng(7), 86_400.0, 0.0)
        outs = [cluster.step(k * 300.0, 300.0, knob, check=False) for k, knob in enumerate(knobs)]
        runs.append((outs, cluster))
        assert (cluster.sched._easy_pass not in (None, False)) is on
    (outs_c, cluster_c), (outs_py, cluster_py) = runs
    assert sum(o["n_jobs_running"] for o in outs_c) > 0
    for a, b in zip(outs_c, outs_py):
        assert a.keys() == b.keys()
        assert all(np.float64(a[k]).tobytes() == np.float64(b[k]).tobytes() for k in a), a
    _same(cluster_c.sched, cluster_py.sched)


class _OwnStart(Easy):
    def try_start(self, sched, job, time_s, need=None):
        return super().try_start(sched, job, time_s, need)


@pytest.mark.parametrize("make", [
    lambda j: Scheduler(j, 32, "easy", locality="node"),
    lambda j: Scheduler(j, 32, "easy", locality="rack"),
    lambda j: Scheduler(j, 32, "easy", sleep=NodeSleep(Topology(32, 8), SleepParams())),
    lambda j: Scheduler(j, 32, "srpt"),
    lambda j: Scheduler(j, 32, "fgd"),
    lambda j: Scheduler(j, 32, _OwnStart()),
    lambda j: type("Sub", (Scheduler,), {})(j, 32, "easy"),
])
def test_passes_it_does_not_cover_stay_in_python(make):
    s = make(_jobs(1, 30, 32))
    s.admit(5000.0)
    s.schedule(5000.0)
    assert s._easy_pass is False and s.running().size > 0


def test_arrays_of_other_types_stay_in_python():
    jobs = _jobs(2, 30, 32)
    s = Scheduler(jobs, 32, "easy")
    assert scheduler_kernel.EasyPass.fits(s)
    s.jobs.prio = s.jobs.prio.astype(np.int32)
    assert not scheduler_kernel.EasyPass.fits(s)


def test_a_copy_packs_its_own_arrays_and_both_go_on_alike():
    jobs = _jobs(3, 60, 48)
    s = Scheduler(jobs, 48, "easy")
    reference = Scheduler(copy.deepcopy(jobs), 48, "easy")
    reference._easy_pass = False
    for k in range(40):
        for x in (s, reference):
            x.admit(k * 20.0)
            x.schedule(k * 20.0)
            x.remaining_s[x.running()] -= 20.0
            x.release(x.running()[x.remaining_s[x.running()] <= 0], DONE, k * 20.0 + 20.0)
    twin = copy.deepcopy(s)
    assert twin._easy_pass is None  # dropped: the pack held the original's addresses
    for k in range(40, 120):
        for x in (s, twin, reference):
            x.admit(k * 20.0)
            x.schedule(k * 20.0)
            x.remaining_s[x.running()] -= 20.0
            x.release(x.running()[x.remaining_s[x.running()] <= 0], DONE, k * 20.0 + 20.0)
        _same(s, reference)
        _same(twin, reference)
    assert twin._easy_pass and twin._easy_pass.arrays[0] is twin.state


def test_a_replaced_array_is_packed_again():
    s = Scheduler(_jobs(4, 30, 32), 32, "easy")
    s.admit(100.0)
    s.schedule(100.0)
    first = s._easy_pass
    s.remaining_s = s.remaining_s.copy()
    s.dirty = True
    s.schedule(200.0)
    assert s._easy_pass is not first and s._easy_pass.arrays[7] is s.remaining_s


def test_a_wrong_free_count_raises_instead_of_booking_a_gpu_twice():
    s = Scheduler(_jobs(5, 30, 16), 16, "easy")
    s.admit(5000.0)
    s.owner[:] = 99  # every GPU held by a job, behind the scheduler's back
    with pytest.raises(RuntimeError, match="free GPUs"):
        s.schedule(5000.0)
    assert (s.owner == 99).all() and not (s.state == RUNNING).any() and s.n_free == 16


def test_a_negative_backfill_count_takes_the_python_pass():
    policy = make_policy("easy", {}, None)
    policy.n_backfill_jobs = lambda: -3  # (a slice up to 3 from the end, which only the Python pass reads so)
    jobs = _jobs(6, 40, 32)
    s, reference = Scheduler(jobs, 32, policy), Scheduler(copy.deepcopy(jobs), 32, policy)
    reference._easy_pass = False
    for k in range(60):
        for x in (s, reference):
            x.admit(k * 50.0)
            x.schedule(k * 50.0)
        _same(s, reference)


@pytest.mark.parametrize("seed", range(4))
def test_the_queue_order_is_numpys_lexsort_whatever_the_submission_times(seed):
    """Priority, then submission time (a NaN last), then id, as ``Scheduler.queue_order``'s lexsort, on a table
    whose submission times are not in id order (jobs queued from outside the admission, as transient.py writes
    states): the jobs a pass starts, in their order, are the Python pass's."""
    rng = np.random.default_rng(seed)
    n = 50
    submit = np.round(rng.uniform(0, 100, n), -1)
    submit[rng.integers(0, n, 3)] = np.nan
    jobs = Jobs(submit, rng.choice([1, 2, 4, 8], n).astype(np.int64), rng.uniform(50, 500, n),
                rng.integers(0, 3, n).astype(np.int64), np.zeros(n, bool), np.full(n, 0.5))
    s, reference = Scheduler(jobs, 40, "easy"), Scheduler(copy.deepcopy(jobs), 40, "easy")
    reference._easy_pass = False
    for x in (s, reference):
        x.state[:] = QUEUED
        x.next_arrival = n
    order = reference.queue_order().tolist()
    started = s.schedule(0.0)
    assert started == reference.schedule(0.0)
    assert len(started) > 3 and started[:3] == order[:3]  # (the head of the queue starts first)
    _same(s, reference)


def _rl_site_params(**training) -> ClusterParams:
    scenario = tomllib.loads((ROOT / "scenarios" / "rl_site.toml").read_text())
    entity = next(e for e in scenario["entities"].values() if e.get("model") == "Cluster")
    values = {k: v for k, v in entity.items() if k not in ("sim", "model")}
    values["training"] = {**values["training"], **training}
    return ClusterParams.model_validate(values)


@pytest.mark.parametrize("hold", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_the_pause_knob_in_c_pauses_and_resumes_as_python(hold, seed, monkeypatch):
    """``pause_flexible_frac`` stepped through 0, 1, repeats and random values, with a facility limit that pauses
    jobs of its own now and then (the knob must leave those alone) and with paused jobs held on their GPUs or
    not: every output of every step and every job and GPU array, to the bit, with the knob in C or in Python."""
    params = _rl_site_params(hold_paused_gpus=hold)
    rng = np.random.default_rng(seed)
    fracs = np.concatenate([[0.0, 1.0, 1.0, 0.0, 0.0], np.repeat(rng.random(40), rng.integers(1, 4, 40)),
                            [0.0] * 3, rng.choice([0.0, 0.25, 0.5, 1.0], 40)])
    limits = np.where(rng.random(len(fracs)) < 0.15, rng.uniform(0.3, 0.9, len(fracs)), np.nan)
    knobs = [Knobs(pause_flexible_frac=float(f), p_limit_mw=None if np.isnan(m) else float(m))
             for f, m in zip(fracs, limits)]
    runs = []
    for on in (True, False):
        monkeypatch.setattr(scheduler_kernel, "C_PASS", on)
        cluster = build_cluster(params, np.random.default_rng(seed), 86_400.0, 0.0)
        outs, seen = [], np.zeros(3, int)  # steps with jobs paused by the limit, by the knob, held
        for k, knob in enumerate(knobs):
            outs.append(cluster.step(k * 300.0, 300.0, knob, check=False))
            seen += [(cluster.paused_by == 2).any(), (cluster.paused_by == 1).any(), cluster.sched.held.any()]
        assert seen[0] > 0 and seen[1] > 20 and bool(seen[2] > 0) == hold, seen
        runs.append((outs, cluster))
        assert (cluster._pause_knob not in (None, False)) is on
    (outs_c, c), (outs_py, py) = runs
    assert max(o["n_jobs_paused"] for o in outs_c) > 0 and (c.paused_by == 0).any()
    for a, b in zip(outs_c, outs_py):
        assert all(np.float64(a[k]).tobytes() == np.float64(b[k]).tobytes() for k in a), a
    _same(c.sched, py.sched)
    for name in ("paused_by", "ckpt_work_s"):
        assert np.array_equal(getattr(c, name).view(np.uint8), getattr(py, name).view(np.uint8)), name
    for name in ("extra_work_s", "held", "work_done_s"):
        assert np.array_equal(getattr(c.sched, name).view(np.uint8), getattr(py.sched, name).view(np.uint8)), name


@pytest.mark.parametrize("seed", range(8))
def test_the_pause_knob_in_c_on_random_job_states(seed, monkeypatch):
    """One knob call on the same random states, reasons and holds both ways (a cluster copied): the same jobs
    pause or resume with the same costs, the same GPUs freed, and the pass marked due whenever Python marks it
    (also when the knob asks for more paused jobs than any left to pause)."""
    rng = np.random.default_rng(seed)
    base = build_cluster(_rl_site_params(hold_paused_gpus=bool(seed % 2)), np.random.default_rng(seed), 86_400.0,
                         0.0)
    for k in range(20):
        base.step(k * 300.0, 300.0, Knobs(pause_flexible_frac=float(rng.random())), check=False)
    sched = base.sched
    n = len(sched.state)
    unfinished = np.flatnonzero((sched.state >= QUEUED) & (sched.state <= PAUSED))
    limit = rng.choice(unfinished, min(len(unfinished), int(rng.integers(0, 6))), replace=False)
    base._pause(limit[sched.state[limit] != PAUSED], 2, 6000.0)  # paused by the limit: not the knob's to resume
    if seed == 7:  # every flexible job paused by the limit: the knob finds none to pause, yet marks the pass due
        flexible = np.flatnonzero(base.jobs.flexible & (sched.state >= QUEUED) & (sched.state <= RUNNING))
        base._pause(flexible, 2, 6000.0)
    used = 0
    for frac in (0.0, 1.0, float(rng.random()), 0.5, float(rng.random()), 0.0, 1.0):
        clusters = []
        for on in (True, False):
            monkeypatch.setattr(scheduler_kernel, "C_PASS", on)
            c = copy.deepcopy(base)
            c.sched.dirty = False
            c._pause_flexible(Knobs(pause_flexible_frac=frac), 6000.0)
            clusters.append(c)
        c, py = clusters
        used += bool(c._pause_knob)  # (made at the first call that changes a job: not when the knob already holds)
        assert py._pause_knob is None
        _same(c.sched, py.sched)
        assert c.sched.dirty == py.sched.dirty
        for name in ("paused_by", "ckpt_work_s"):
            assert np.array_equal(getattr(c, name).view(np.uint8), getattr(py, name).view(np.uint8)), name
        for name in ("extra_work_s", "held", "work_done_s"):
            assert np.array_equal(getattr(c.sched, name).view(np.uint8), getattr(py.sched, name).view(np.uint8))
        base = py  # the next knob from where this one left the jobs
    assert n == len(base.sched.state) and used >= 3


def test_a_cluster_of_a_subclass_keeps_the_python_knob():
    cluster = build_cluster(_rl_site_params(), np.random.default_rng(1), 86_400.0, 0.0)
    cluster.__class__ = type("Sub", (GpuCluster,), {})
    cluster._pause_knob = None  # (as made for the subclass from the start)
    cluster.step(0.0, 300.0, Knobs(pause_flexible_frac=0.5), check=False)
    assert cluster._pause_knob is False and (cluster.paused_by == 1).any()



def _views(s: Scheduler) -> tuple:
    s._views_key = s._counts_key = s._waiting_key = None  # (made anew from the state as it is)
    running = s.running()
    return (running, s.count_by_class(), s.count_by_state(), copy.deepcopy(s.count_lists()), s.waiting_gpus(),
            running.flags.writeable)


@pytest.mark.parametrize("seed", range(5))
def test_the_state_views_in_c_are_the_python_forms(seed, monkeypatch):
    """Running jobs, jobs per state and class, per state, their lists and the waiting GPUs from one C pass: the
    values, types and shapes the Python forms give, on random states written from outside; with a class outside the
    table, what the Python forms give (or raise)."""
    rng = np.random.default_rng(seed)
    s = Scheduler(_jobs(seed, 80, 32), 32, "easy")
    for _ in range(25):
        s.state[:] = rng.integers(0, len(STATE_NAMES), len(s.state))
        made = {}
        for on in (True, False):
            monkeypatch.setattr(scheduler_kernel, "C_PASS", on)
            made[on] = _views(s)
        assert s._state_views
        for c, py in zip(made[True], made[False]):
            if isinstance(py, np.ndarray):
                assert c.dtype == py.dtype and c.shape == py.shape and np.array_equal(c, py)
            else:
                assert c == py and type(c) is type(py)
        counts, rows = made[True][3]
        assert all(type(x) is int for x in counts + [x for row in rows for x in row])
    s.jobs.prio[3] = 3  # a class the table does not hold: the C pass leaves it to the Python forms, whatever they do
    for state in (0, len(STATE_NAMES) - 1):
        s.state[3] = state
        outcomes = []
        for on in (True, False):
            monkeypatch.setattr(scheduler_kernel, "C_PASS", on)
            try:
                outcomes.append(repr(_views(s)))
            except ValueError as exc:
                outcomes.append(type(exc))
        assert outcomes[0] == outcomes[1]
