"""A run's results do not depend on how many BLAS threads the machine gives (cosim.run.blas).

OpenBLAS splits a dot product of more than 10,000 elements across its threads; the datacenter's
sums over its running jobs are such products when a cluster runs more than 10,000 jobs. Run in
processes of their own with ``OPENBLAS_NUM_THREADS`` 1 and 2, the same scenario gives the same bits
on both engines, with the look-ahead worker process, and stepped through a Session.

The control: the same run without the one-thread limit gives other bits with 2 threads than with 1
(the cluster's GPU power by ~2e-15 MW), so the scenario's sums do see how OpenBLAS splits them.
OpenBLAS splits a product the same way at every call (halves, added in order), so the difference is
the same on any machine where it runs 2 threads; on one with a single core it runs 1 whatever the
variable says, and the control is skipped there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from cosim.run import blas

#: 15,000 one-GPU jobs arrive in the first minute and run for days: 15,000 running jobs at every step
SCENARIO = """[scenario]
name = "blas"
start = 2024-01-01T00:00:00Z
duration_s = 900
step_s = 300
seed = 3
engine = "{engine}"
ahead = "{ahead}"

[sims.dc]
adapter = "datacenter"

[entities.campus]
sim = "dc"
model = "Cluster"
n_gpus = 16000

[entities.campus.training]
source = "synthetic"
n_jobs = 15000
span_s = 60
sizes_gpus = [1]
size_weights = [1.0]
duration_median_h = 100.0
duration_sigma_ln = 0.1
"""

#: Runs the scenario four ways in one process, and once more without the limit (the control); prints each
#: run's series as hex floats (exact bits) and the threads OpenBLAS runs outside the limit
RUNS = """
import contextlib, json, sys
from pathlib import Path
from threadpoolctl import threadpool_info
import cosim
from cosim.run import blas

tmp = Path(sys.argv[1])
out = {}
for engine, ahead in (("direct", "off"), ("direct", "on"), ("mosaik", "off")):
    path = tmp / f"{engine}_{ahead}.toml"
    path.write_text(sys.argv[2].format(engine=engine, ahead=ahead))
    result = cosim.run(path, out_dir=tmp / "runs")
    assert result.ok, result.reason
    assert (result.metadata["ahead"] is not None) == (ahead == "on"), result.metadata["ahead"]
    out[f"{engine}/{ahead}"] = result.timeseries().map(float.hex).to_dict(orient="list")
with cosim.Session(tmp / "direct_off.toml", out_dir=tmp / "runs", report=False) as session:
    session.step()
    session.run_until(900)
out["session"] = session.result.timeseries().map(float.hex).to_dict(orient="list")
limit, blas.one_thread = blas.one_thread, contextlib.nullcontext
try:
    result = cosim.run(tmp / "direct_off.toml", out_dir=tmp / "runs")
finally:
    blas.one_thread = limit
out["unlimited"] = result.timeseries().map(float.hex).to_dict(orient="list")
out["threads"] = sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})
print(json.dumps(out))
"""


def _runs(tmp_path, threads: int) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads)}
    where = tmp_path / f"threads{threads}"
    where.mkdir()
    out = subprocess.run([sys.executable, "-c", RUNS, str(where), SCENARIO], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_same_bits_with_one_or_two_blas_threads(tmp_path):
    one, two = _runs(tmp_path, 1), _runs(tmp_path, 2)
    assert one.pop("threads") == [1]
    threads, one_unlimited, two_unlimited = two.pop("threads"), one.pop("unlimited"), two.pop("unlimited")
    assert set(one) == {"direct/off", "direct/on", "mosaik/off", "session"}
    running = [float.fromhex(v) for v in one["direct/off"]["campus.n_jobs_running"]]
    assert max(running) > 10_000  # products long enough for OpenBLAS to split them across threads
    for way in one:
        assert one[way] == two[way], way
        assert one[way] == one["direct/off"], way  # and the same on both engines, every way of stepping
    assert one_unlimited == one["direct/off"]  # on one thread the limit changes nothing
    if 2 not in threads:
        pytest.skip(f"the control needs OpenBLAS on 2 threads; it runs {threads} here (one core)")
    assert two_unlimited != one_unlimited, "the control: without the limit, 2 threads give other bits"


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def _threads_by_library() -> dict[str, int]:
    return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.fixture
def two_threads():
    """The process's setting at 2 threads, so that the limit has something to change (with
    OPENBLAS_NUM_THREADS=1 or one core, the asserts below would hold whatever the limit did)."""
    from threadpoolctl import OpenBLASController, threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        OpenBLASController.clear_controlling_thread()  # (threadpoolctl lets only the setting thread set OpenBLAS again)
        if 2 not in _blas_threads():
            pytest.skip("no BLAS library here runs on 2 threads")
        yield


def test_one_thread_inside_and_the_setting_back_after(two_threads):
    before = _blas_threads()
    assert 2 in before
    with blas.one_thread():
        assert _blas_threads() == {1}
        with blas.one_thread():  # re-entrant: the inner block does not undo the outer one
            pass
        assert _blas_threads() == {1}
        x = np.arange(20_000.0)
        assert x @ x == pytest.approx(float((x * x).sum()))
    assert _blas_threads() == before


def test_limited_in_a_thread_while_another_holds_its_own_setting():
    """A run in a worker thread (a Dask task) while the main thread holds a setting of its own (a learner's
    ``threadpool_limits``, which makes that thread OpenBLAS's controlling one): the run still steps on one
    thread, and the main thread's setting is back after it."""
    from threadpoolctl import threadpool_limits

    seen = {}

    def run():
        with blas.one_thread():
            seen["inside"] = _blas_threads()

    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        if 2 not in before:
            pytest.skip("no BLAS library here runs on 2 threads")
        worker = threading.Thread(target=run)
        worker.start()
        worker.join(10)
        assert seen["inside"] == {1}
        assert _blas_threads() == before


def test_held_until_the_last_thread_leaves(two_threads):
    """Two runs in threads of one process (a Dask worker's tasks): the first to end keeps the limit."""
    first_in, first_out, second_done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with blas.one_thread():
            first_in.set()
            first_out.wait(5)

    def second():
        first_in.wait(5)
        with blas.one_thread():
            first_out.set()
            worker.join(5)  # the first run has ended; this one still runs
            seen["after_first"] = _blas_threads()
        second_done.set()

    worker = threading.Thread(target=first)
    other = threading.Thread(target=second)
    before = _blas_threads()
    assert 2 in before
    worker.start()
    other.start()
    other.join(10)
    assert second_done.is_set()
    assert seen["after_first"] == {1}
    assert _blas_threads() == before


def test_a_gym_step_limits_once_and_leaves_the_learners_setting_between_steps(monkeypatch):
    """An env step takes the limit once (its scenario steps inside only count) and undoes it before it
    returns: a learner's numpy between two steps runs with the process's own setting."""
    from threadpoolctl import threadpool_limits

    from cosim.gym import CosimEnv
    from cosim.run.direct import DirectEngine

    limits, inside = [], []
    limit, step = blas._limit, DirectEngine.step
    monkeypatch.setattr(blas, "_limit", lambda: (limits.append(1), limit())[1])
    monkeypatch.setattr(DirectEngine, "step", lambda self, *a: (inside.append(_blas_threads()), step(self, *a))[1])
    env = CosimEnv(Path(__file__).resolve().parents[2] / "scenarios" / "rl_site.toml", {"scenario.duration_s": 3600}, guards=False)
    with threadpool_limits(limits=2, user_api="blas"):  # the learner's setting
        learners = _threads_by_library()  # (a library built for one thread, such as kvxopt's, stays at 1)
        assert 2 in learners.values()
        env.reset(seed=1)
        limits.clear()
        for _ in range(3):
            env.step(env.idle_action())
            assert _threads_by_library() == learners  # back to the learner's between steps
    assert len(limits) == 3  # one per env step, not one per scenario step (three each)
    env.close()
    assert len(inside) >= 9 and all(threads == {1} for threads in inside)


def test_openblas_is_set_through_its_own_functions(two_threads):
    """The limit calls each OpenBLAS library's own get and set functions (not threadpoolctl's checks
    around them): what they read and set is what threadpoolctl reads."""
    import ctypes

    from threadpoolctl import OpenBLASController, get_cached_controller

    libraries = [lib for lib in get_cached_controller().lib_controllers if lib.user_api == "blas"]
    controls = blas._controls()
    assert len(controls) == len(libraries)
    for library, (get, put) in zip(libraries, controls):
        if isinstance(library, OpenBLASController):
            assert isinstance(get, ctypes._CFuncPtr) and isinstance(put, ctypes._CFuncPtr)
        assert get() == library.num_threads
    with blas.one_thread():
        assert all(get() == 1 == library.num_threads for library, (get, _) in zip(libraries, controls))
    assert [get() for get, _ in controls] == [library.num_threads for library in libraries]
