"""One BLAS thread while a scenario's simulators run: the same bits on any machine.

OpenBLAS splits a dot product of more than ~10,000 elements across its threads (numpy's ``@``
over the running jobs of a very large cluster), and partial sums added in another order differ
in their last bits; how many threads it takes depends on the machine (its cores,
``OPENBLAS_NUM_THREADS``). So the simulators run with every BLAS library of the process on one
thread (threadpoolctl): a run's results do not depend on the machine's cores, and runs whose
products are small, which were single-threaded already, keep their bits.

Both engines take :func:`one_thread` where a run steps: :func:`cosim.run.runner.run_engine`
(``cosim run``, sweeps and their Dask workers), a :class:`cosim.Session`'s own calls (start,
steps, close), the gym envs' steps and resets (one limit around a whole decision, whose
scenario steps the Session then takes inside it), the HELICS federate on mosaik, and the
look-ahead worker process. Code between those calls (a learner's torch or numpy between two env
steps) runs with the process's own setting: the limit is set when a call comes in and undone
when it returns (~10 µs: two calls into each BLAS library), not held while the caller has
control. BLAS libraries have one setting per process: the limit is counted, so a call inside
another (a Session's step inside an env step) or runs in several threads of one process (a Dask
worker's tasks) only count; the first one in sets it, the last one out undoes it.
"""

from __future__ import annotations

import threading
from typing import Any

import scipy.linalg  # noqa: F401 — loads scipy's own OpenBLAS (a run imports it anyway), so that it is limited too
from threadpoolctl import OpenBLASController, get_cached_controller

_lock = threading.Lock()
_holders = 0
_changed: list[tuple[Any, int]] = []  # (library, its threads before) of the libraries the limit changed


class _OneThread:
    """The context manager :func:`one_thread` hands out (one object for all: it keeps no state of
    its own; a class rather than a generator, so that a call inside another costs a lock and a count)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _holders
        with _lock:
            if not _holders:
                _limit()
            _holders += 1

    def __exit__(self, *exc: Any) -> None:
        global _holders
        with _lock:
            _holders -= 1
            if not _holders:
                _restore()


_ONE_THREAD = _OneThread()


def one_thread() -> _OneThread:
    """Every BLAS library of this process on one thread inside the block (re-entrant, thread-safe)."""
    return _ONE_THREAD


def _limit() -> None:
    """Each BLAS library loaded now on one thread (threadpoolctl looks for libraries again only when modules
    were imported since it last looked; one already on one thread is left alone). Set even while another
    thread holds a setting of its own (a learner's ``threadpool_limits``): threadpoolctl would otherwise ignore
    this thread's call, and the run would step on that thread count."""
    OpenBLASController.clear_controlling_thread(force=True)
    for library in get_cached_controller().lib_controllers:
        if library.user_api == "blas":
            threads = library.num_threads
            if threads is not None and threads != 1:
                library.set_num_threads(1)
                _changed.append((library, threads))
    _release_openblas()


def _restore() -> None:
    OpenBLASController.clear_controlling_thread(force=True)  # (as _limit)
    for library, threads in _changed:
        library.set_num_threads(threads)
    _changed.clear()
    _release_openblas()


def _release_openblas() -> None:
    """threadpoolctl lets only the thread that last set OpenBLAS's threads set them again until it lets
    go (OpenBLAS has one pool per process); the limit is set and undone under :data:`_lock`, perhaps
    by different threads (the last run to end undoes it), so this thread lets go at once."""
    OpenBLASController.clear_controlling_thread()
