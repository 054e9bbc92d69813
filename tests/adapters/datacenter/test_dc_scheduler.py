"""Scheduler invariants (property-based): no GPU booked twice, gang all-or-nothing, no job lost,
priority order kept, EASY backfill never delays the head's reservation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.adapters.datacenter.scheduler import DONE, PAUSED, QUEUED, REJECTED, RUNNING, STATE_NAMES, Scheduler
from cosim.adapters.datacenter.training import Jobs


def make_jobs(sizes, works, submits, prios, flexible=None) -> Jobs:
    order = np.argsort(submits, kind="stable")
    n = len(sizes)
    flexible = np.zeros(n, bool) if flexible is None else np.asarray(flexible, bool)
    return Jobs(np.asarray(submits, float)[order], np.asarray(sizes, np.int64)[order],
                np.asarray(works, float)[order], np.asarray(prios, np.int64)[order], flexible[order],
                np.full(n, 0.5))


def check_invariants(s: Scheduler) -> None:
    held = np.bincount(s.owner[s.owner >= 0], minlength=len(s.jobs))
    running = s.state == RUNNING
    # gang: a running job holds exactly its GPUs; nothing else holds any
    np.testing.assert_array_equal(held[running], s.jobs.n_gpus[running])
    assert held[~running].sum() == 0
    assert s.n_free == int((s.owner < 0).sum()) >= 0


def run(s: Scheduler, dt: float, steps: int, pause_every: int = 0) -> None:
    for k in range(steps):
        t = k * dt
        s.admit(t)
        if pause_every and k % pause_every == 1 and k < steps // 2:  # pause + requeue a flexible job
            flex = s.running()[s.jobs.flexible[s.running()]]
            s.release(flex[:1], PAUSED, t)
            s.requeue(np.flatnonzero(s.state == PAUSED)[:1], 30.0)
        s.schedule(t)
        check_invariants(s)
        run_ = s.running()
        s.remaining_s[run_] -= dt
        done = run_[s.remaining_s[run_] <= 0]
        s.release(done, DONE, t + dt)
        check_invariants(s)
        if s.next_arrival == len(s.jobs) and np.isin(s.state, (DONE, REJECTED)).all():
            break


job_lists = st.lists(
    st.tuples(st.sampled_from([1, 2, 4, 8, 16, 32, 64]), st.floats(1, 600), st.floats(0, 2000),
              st.integers(0, 2), st.booleans()),
    min_size=1, max_size=60)


@settings(max_examples=40, deadline=None)
@given(job_lists, st.sampled_from([8, 16, 32]), st.sampled_from(["easy", "fifo"]), st.sampled_from([0, 3]))
def test_no_double_booking_gang_and_no_job_lost(jobs, n_gpus, policy, pause_every):
    sizes, works, submits, prios, flexible = map(list, zip(*jobs))
    s = Scheduler(make_jobs(sizes, works, submits, prios, flexible), n_gpus, policy)
    steps = 2 * int((2000 + sum(works)) / 10 + 30 * 600 / 10) + 10  # room for every restore cost
    run(s, 20.0, steps, pause_every)
    too_big = s.jobs.n_gpus > n_gpus
    # every job ends done, or rejected because it can never fit
    assert (s.state[too_big] == REJECTED).all()
    assert (s.state[~too_big] == DONE).all()
    assert (s.first_start_s[~too_big] >= s.jobs.submit_s[~too_big]).all()


@settings(max_examples=40, deadline=None)
@given(job_lists)
def test_fifo_starts_in_priority_then_submission_order(jobs):
    sizes, works, submits, prios, _ = map(list, zip(*jobs))
    s = Scheduler(make_jobs(sizes, works, [0.0] * len(jobs), prios), 64, "fifo")
    order = s.jobs.prio * 1e6 + np.arange(len(jobs))  # all submitted at once
    run(s, 10.0, int(sum(works) / 10) + 10)
    first = s.first_start_s
    ranked = np.argsort(order, kind="stable")
    assert (np.diff(first[ranked]) >= 0).all()


def test_easy_backfills_short_job_without_delaying_head():
    """Four GPUs: A (2 GPUs, 100 s) runs; head B needs 4 -> reserved at t=100; C (1 GPU, 50 s)
    fits in the hole before then; D (1 GPU, 500 s) would delay B and waits."""
    jobs = make_jobs([2, 4, 1, 1], [100, 100, 50, 500], [0, 1, 2, 3], [1, 1, 1, 1])
    s = Scheduler(jobs, 4, "easy")
    run(s, 1.0, 1000)
    assert s.first_start_s[0] == 0.0
    assert s.first_start_s[2] == 2.0  # backfilled at once: ends at 52 s, before B's reservation
    assert s.first_start_s[1] == 100.0  # the head is not delayed
    assert s.first_start_s[3] >= 100.0  # would run past 100 s on GPUs B needs: waits


def test_fifo_does_not_backfill():
    jobs = make_jobs([2, 4, 1], [100, 100, 50], [0, 1, 2], [1, 1, 1])
    s = Scheduler(jobs, 4, "fifo")
    run(s, 1.0, 400)
    assert s.first_start_s[2] >= s.first_start_s[1] == 100.0


def test_job_larger_than_partition_is_rejected_not_clipped():
    s = Scheduler(make_jobs([16, 2], [10, 10], [0, 0], [0, 0]), 8)
    s.admit(0.0)
    assert s.state.tolist() == [REJECTED, QUEUED]


def test_a_pass_gives_each_job_the_lowest_free_gpus_as_start_does():
    """schedule() lists the free GPUs once per pass; every job it starts must get the GPUs
    start() would give it, one job after another (checked on a fragmented partition)."""
    jobs = make_jobs([4, 2, 8, 1, 4, 2, 8], [100, 50, 300, 20, 200, 80, 60], [0, 0, 0, 0, 10, 10, 10], [0] * 7)
    s, by_hand = Scheduler(jobs, 24, "easy"), Scheduler(jobs, 24, "easy")
    for sched in (s, by_hand):
        sched.admit(0.0)
        for job in range(4):
            sched.start(job, 0.0)
        sched.release(np.array([1, 3]), DONE, 5.0)  # holes at the GPUs of jobs 1 and 3
        sched.admit(10.0)
    started = s.schedule(10.0)
    assert len(started) >= 2
    for job in started:
        by_hand.start(job, 10.0)
    np.testing.assert_array_equal(s.owner, by_hand.owner)


def test_start_trusts_only_the_lowest_free_gpus_of_the_free_list_as_it_still_is():
    """start() skips its are-they-free check for the array lowest_free() handed out, while the free list it
    came from is still the list: GPUs it handed out before a release or another start are checked again (a
    second booking raises), an equal array that is not the one handed out is checked, and the handed-out
    view cannot be written (it is the free list's own memory)."""
    jobs = make_jobs([4, 4, 4, 2], [100, 100, 100, 100], [0, 0, 0, 0], [0] * 4)
    s = Scheduler(jobs, 12, "fifo")
    s.admit(0.0)
    gpus = s.lowest_free(4)
    np.testing.assert_array_equal(gpus, [0, 1, 2, 3])
    with pytest.raises(ValueError):
        gpus[0] = 7  # a view of the free list: read-only
    s.start(0, 0.0, gpus)
    with pytest.raises(RuntimeError, match="held by other jobs"):
        s.start(1, 0.0, gpus)  # handed out before job 0 started on them: no longer trusted
    stale = s.lowest_free(4)  # [4..7]
    s.start(1, 0.0, np.array([4, 5, 6, 7]))  # an equal array, not the one handed out: checked, and free
    with pytest.raises(RuntimeError, match="held by other jobs"):
        s.start(2, 0.0, stale)
    s.release(np.array([0]), DONE, 1.0)
    again = s.lowest_free(4)
    s.release(np.array([1]), DONE, 1.0)  # the list it came from is dropped: checked (and free)
    s.start(2, 1.0, again)
    assert s.lowest_free(9) is None and len(s.lowest_free(8)) == 8
    np.testing.assert_array_equal(s.owner, [2, 2, 2, 2] + [-1] * 8)
    np.testing.assert_array_equal(s.free_gpus(), np.flatnonzero(s.owner < 0))
    assert s.n_free == 8


def _views_match(s: Scheduler) -> None:
    """The cached per-state views equal a fresh pass over the state array."""
    np.testing.assert_array_equal(s.running(), np.flatnonzero(s.state == RUNNING))
    fresh = np.array([[np.count_nonzero((s.state == state) & (s.jobs.prio == level)) for level in range(3)]
                      for state in range(len(STATE_NAMES))])
    np.testing.assert_array_equal(s.count_by_class(), fresh)
    assert s.count_lists() == (fresh.sum(axis=1).tolist(), fresh.tolist())
    assert [s.count(state) for state in range(len(STATE_NAMES))] == fresh.sum(axis=1).tolist()
    waiting = (s.state == QUEUED) | (s.state == PAUSED)
    assert s.waiting_gpus() == int(s.jobs.n_gpus[waiting].sum())


def test_cached_state_views_follow_every_state_change():
    """running(), the per-state/class counts and the waiting GPUs are cached between state changes
    (scheduler.py ``_views``): after starts, releases, pauses, requeues and a write to ``state`` from
    outside the class (as transient.py does) they must equal a fresh count; the shared running list
    is read-only, so no caller can change the cache by accident."""
    rng = np.random.default_rng(3)
    n = 40
    jobs = make_jobs(rng.choice([1, 2, 4, 8], n).tolist(), rng.uniform(20, 300, n).tolist(),
                     rng.uniform(0, 400, n).tolist(), rng.integers(0, 3, n).tolist(), rng.random(n) < 0.5)
    s = Scheduler(jobs, 16, "easy")
    for k in range(120):
        t = 10.0 * k
        s.admit(t)
        _views_match(s)
        if k % 7 == 3 and len(s.running()):  # pause one running job, requeue a paused one
            s.release(s.running()[:1], PAUSED, t)
            _views_match(s)
            s.requeue(np.flatnonzero(s.state == PAUSED)[:1], 5.0)
        if k % 11 == 5 and (s.state == QUEUED).any():  # a writer outside the class, then back
            job = int(np.flatnonzero(s.state == QUEUED)[0])
            s.state[job] = PAUSED
            _views_match(s)
            s.state[job] = QUEUED
        s.schedule(t)
        _views_match(s)
        running = s.running()
        s.remaining_s[running] -= 10.0
        s.release(running[s.remaining_s[running] <= 0], DONE, t + 10.0)
        _views_match(s)
    assert s.count(DONE) > 0
    with pytest.raises(ValueError):
        s.running()[:1] = 0


def test_views_follow_a_job_moved_into_a_slot_within_one_apply():
    """Export a queued guest and import another job into the same slot in one apply: the state
    array ends as it was (QUEUED), but size and class changed; the cached views (waiting GPUs,
    jobs per state and class) must follow (review 2026-12-01: they kept the old guest's)."""
    from cosim.adapters.datacenter import ClusterParams, build_cluster
    from cosim.adapters.datacenter.moves import ExportRecord, JobMoves
    from cosim.adapters.datacenter.states import PAUSED, QUEUED

    spec = {"n_jobs": 4, "sizes_gpus": [8], "size_weights": [1.0], "flexible_frac": 0.0,
            "class_fracs": [0.0, 1.0, 0.0], "n_guest_slots": 1, "warmup_h": 0.0}
    c = build_cluster(ClusterParams.model_validate({"node": "DGX-H100", "n_gpus": 8, "training": spec}),
                      np.random.default_rng(0), 7200.0)
    moves = JobMoves(c, 1)
    for k in range(3):
        c.step(k * 300.0, 300.0)
    moves.import_job(ExportRecord(8, 5000.0, 0.5, 1), 0.0, 900.0)
    s = c.sched
    s.waiting_gpus()  # the views are made with the first guest
    moves.apply({"n_export_req": 1, "n_export_max_gpus": 8, "n_import_seq": 1, "n_import_gpus": 1,
                 "import_work_s": 100.0, "import_power_frac": 0.5, "n_import_prio": 0, "import_restart_s": 0.0,
                 "import_submit_s": 600.0, "n_import_started": 0, "import_ckpt_interval_s": math.nan,
                 "n_import_elastic": 0}, 900.0)
    waiting = (s.state == QUEUED) | (s.state == PAUSED)
    assert s.waiting_gpus() == int(c.jobs.n_gpus[waiting].sum())
    assert s.count_by_class()[QUEUED].tolist() == [int(((s.state == QUEUED) & (c.jobs.prio == k)).sum()) for k in range(3)]


@pytest.mark.parametrize("dropped", ["import_submit_s", "n_import_started", "import_ckpt_interval_s", "import_work_s"])
def test_an_import_with_part_of_its_channel_unconnected_is_refused(dropped):
    """A scenario wiring only part of the import channel (e.g. the channel of before the move
    statistics) would silently drop the guest out of the wait / JCT statistics: it is an error
    naming what to connect, and nothing is imported."""
    from cosim.adapters.datacenter import ClusterParams, build_cluster
    from cosim.adapters.datacenter.moves import IMPORT_RECORD_INPUTS, JobMoves

    spec = {"n_jobs": 4, "sizes_gpus": [8], "size_weights": [1.0], "flexible_frac": 0.0,
            "class_fracs": [0.0, 1.0, 0.0], "n_guest_slots": 1, "warmup_h": 0.0}
    c = build_cluster(ClusterParams.model_validate({"node": "DGX-H100", "n_gpus": 8, "training": spec}),
                      np.random.default_rng(0), 7200.0)
    moves = JobMoves(c, 1, "entities.down")
    inputs = {"n_import_seq": 1, **dict.fromkeys(IMPORT_RECORD_INPUTS, 1.0)}
    del inputs[dropped]
    with pytest.raises(ValueError, match=rf"^entities\.down: a job import needs {dropped} connected"):
        moves.apply(inputs, 900.0)
    assert moves.n_import_done == 0
