"""One BLAS thread while a scenario's simulators run: the same bits on any machine.

OpenBLAS splits a dot product of more than ~10,000 elements across its threads (numpy's ``@``
over the running jobs of a very large cluster), and partial sums added in another order differ
in their last bits; how many threads it takes depends on the machine (its cores,
``OPENBLAS_NUM_THREADS``). So the simulators run with every BLAS library of the process on one
thread (threadpoolctl): a run's results do not depend on the machine's cores, and runs whose
products are small, which were single-threaded already, keep their bits.

Both engines take :func:`one_thread` where a run steps: :func:`cosim.run.runner.run_engine`
(``cosim run``, sweeps and their Dask workers), a :class:`cosim.Session`'s own calls (start,
steps, close: code between its steps keeps the process's setting), the HELICS federate on mosaik,
and the look-ahead worker process. BLAS libraries have one setting per process: the limit is
counted, so runs in several threads of one process (a Dask worker's tasks) hold it until the
last of them leaves, and it is undone then.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import scipy.linalg  # noqa: F401 — loads scipy's own OpenBLAS (a run imports it anyway), so that it is limited too
from threadpoolctl import OpenBLASController, get_cached_controller

_lock = threading.Lock()
_holders = 0
_limiter: Any = None


@contextmanager
def one_thread() -> Iterator[None]:
    """Every BLAS library of this process on one thread inside the block (re-entrant, thread-safe)."""
    global _holders, _limiter
    with _lock:
        if not _holders:
            # the BLAS libraries loaded now (threadpoolctl looks again only when modules were imported since)
            _limiter = get_cached_controller().limit(limits=1, user_api="blas")
            _release_openblas()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if not _holders:
                _limiter.restore_original_limits()
                _release_openblas()
                _limiter = None


def _release_openblas() -> None:
    """threadpoolctl lets only the thread that last set OpenBLAS's threads set them again until it lets
    go (OpenBLAS has one pool per process); the limit is set and undone under :data:`_lock`, perhaps
    by different threads (the last run to end undoes it), so this thread lets go at once."""
    OpenBLASController.clear_controlling_thread()
