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
when it returns (a few µs: two calls into each BLAS library, made directly), not held while the caller has
control. BLAS libraries have one setting per process: the limit is counted, so a call inside
another (a Session's step inside an env step) or runs in several threads of one process (a Dask
worker's tasks) only count; the first one in sets it, the last one out undoes it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
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
    thread holds a setting of its own (a learner's ``threadpool_limits``): the run must not step on that
    thread count."""
    for get, put in _controls():
        threads = get()
        if threads is not None and threads != 1:
            put(1)
            _changed.append((put, threads))


def _restore() -> None:
    for put, threads in _changed:
        put(threads)
    _changed.clear()


_seen: Any = None  # the threadpoolctl controller _plan was made for
_plan: list[tuple[Callable[[], int | None], Callable[[int], Any]]] = []


def _controls() -> list[tuple[Callable[[], int | None], Callable[[int], Any]]]:
    """``(get threads, set threads)`` of each BLAS library loaded now (made again when threadpoolctl
    finds another set of libraries)."""
    global _seen, _plan
    controller = get_cached_controller()
    if controller is not _seen:
        _plan = [_control(library) for library in controller.lib_controllers if library.user_api == "blas"]
        _seen = controller
    return _plan


def _control(library: Any) -> tuple[Callable[[], int | None], Callable[[int], Any]]:
    """An OpenBLAS library's own get and set functions, as threadpoolctl calls them for its threading
    layer (``openblas_*_num_threads``, or OpenMP's per-thread ones), called directly: ~1 µs each instead
    of ~10 through threadpoolctl, whose checks of the controlling thread a limit has to clear anyway;
    for another library, or when they are not found, threadpoolctl's calls (:func:`_set_through`)."""
    if isinstance(library, OpenBLASController):
        openmp = library.threading_layer == "openmp"
        try:
            get = library._get_symbol("omp_get_max_threads" if openmp else "openblas_get_num_threads")
            put = library._get_symbol("omp_set_num_threads" if openmp else "openblas_set_num_threads")
        except Exception:  # noqa: BLE001 — another threadpoolctl: its own calls below
            get = put = None
        if get is not None and put is not None and get() == library.num_threads:
            return get, put
    return (lambda: library.num_threads), functools.partial(_set_through, library)


def _set_through(library: Any, threads: int) -> None:
    """``threads`` set by threadpoolctl, even while another thread holds a setting (it would otherwise
    ignore the call for OpenBLAS); this thread lets go of OpenBLAS at once (threadpoolctl lets only
    the thread that last set it set it again, and the limit is undone perhaps by another thread)."""
    OpenBLASController.clear_controlling_thread(force=True)
    library.set_num_threads(threads)
    OpenBLASController.clear_controlling_thread()
