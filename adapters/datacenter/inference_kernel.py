"""An inference fleet's requests of a step in C (``_inference.c``, built by ``make build``), when built.

:class:`.inference.Fleet` keeps its queue in a :class:`KernelWaitQueue` and hands a step's requests
(served, kept and dropped, the FIFO cohorts, the share that meets the TTFT deadline and the p99 of
the waits: :meth:`.prefill.WaitQueue.serve`) to ``cosim_dc_serve`` when the library is built, up to
date with its source and agrees with the Python form on this machine (:func:`_agrees_with_python`, at
import); else a :class:`.prefill.WaitQueue` does it in Python. Same numbers either way, to the bit:
every value is the same IEEE operation on the same operands (``_inference.c``), checked here and in
``tests/adapters/datacenter/test_dc_serve_kernel.py``.
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import numpy as np

from cosim.adapters.datacenter.prefill import Cohort, WaitQueue, quantile
from cosim.sdk import library_agrees, load_library

__all__ = ["KERNEL", "KernelWaitQueue", "wait_queue"]

_OUT, _DATA = 16, 32  # where the outputs and the cohorts start in the array (see _inference.c)
_INPUTS, _OUTPUTS = struct.Struct("8d"), struct.Struct("8d")


def _load(lib_path: Path = Path(__file__).with_name("_inference.so")):
    """The library, or None: not built from its source as it is now, not loadable (:func:`cosim.sdk.load_library`),
    or not the Python form's numbers."""
    lib = load_library(lib_path, keep_gil=True)
    if lib is None:
        return None
    lib.cosim_dc_serve.argtypes = [ctypes.c_void_p]
    lib.cosim_dc_serve.restype = None
    return library_agrees(lib, _agrees_with_python(lib))


class KernelWaitQueue:
    """:class:`.prefill.WaitQueue` with its state in one float64 array that ``cosim_dc_serve`` reads and
    writes: the step's inputs and outputs, the clock, and the cohorts ``(n_req, start_s, end_s)``, with
    room for the segments of the served waits (grown, before a step, when the cohorts might not fit).

    A copy (``copy.deepcopy``, pickle: a gym snapshot) takes the array and finds its own address.
    """

    def __init__(self, lib=None, room: int = 8):
        self.lib = lib
        self.count = 0  # cohorts queued (the array's [9], read back after each step)
        self._allocate(room)

    def _allocate(self, room: int) -> None:
        mem = np.zeros(_DATA + 3 * room + 3 * (room + 2))
        old = getattr(self, "mem", None)
        if old is not None:
            mem[:_DATA] = old[:_DATA]
            mem[_DATA:_DATA + 3 * self.count] = old[_DATA:_DATA + 3 * self.count]
        mem[10] = room
        self.mem, self.room = mem, room
        self._bind()

    def _bind(self) -> None:
        self.view = memoryview(self.mem).cast("B")
        self.address = self.mem.ctypes.data

    def __reduce__(self):
        # (a copy or an unpickled one: in C where this process uses the library, else prefill's Python queue)
        return _restore, (self.count, self.mem, self.room)

    @property
    def clock_s(self) -> float:
        return float(self.mem[8])

    @property
    def cohorts(self) -> list[Cohort]:
        """The queued cohorts, oldest first (copies: read-only)."""
        rows = self.mem[_DATA:_DATA + 3 * self.count].reshape(-1, 3).tolist()
        return [Cohort(*row) for row in rows]

    def serve(self, dt_s: float, offered_req: float, arrived_req: float, capacity_req: float, max_wait_s: float,
              limit_s: float, quiet: bool, q_frac: float = 0.99) -> tuple[float, float, float, float, float]:
        """:meth:`.prefill.WaitQueue.serve` in one C call."""
        if self.count >= self.room:
            self._allocate(2 * self.room)
        _INPUTS.pack_into(self.view, 0, dt_s, offered_req, arrived_req, capacity_req, max_wait_s, limit_s,
                          1.0 if quiet else 0.0, q_frac)
        self.lib.cosim_dc_serve(self.address)
        served, left, keep, n_seg, within, wait_q, python, count = _OUTPUTS.unpack_from(self.view, 8 * _OUT)
        self.count = int(count)
        if python:  # NaN among the waits, or several point masses to sort: Python's quantile
            if python == 2.0:
                raise RuntimeError("cosim_dc_serve: more segments than room (a bug)")
            wait_q = quantile(self.segments(int(n_seg)), q_frac) if served > 0 else 0.0
        return served, left, keep, within, wait_q

    def segments(self, n_seg: int) -> list[tuple]:
        """The last step's ``(n_req, wait_lo_s, wait_hi_s)`` segments. [-, s, s]"""
        start = _DATA + 3 * self.room
        return [tuple(row) for row in self.mem[start:start + 3 * n_seg].reshape(-1, 3).tolist()]

    def idle(self, dt_s: float) -> None:
        """:meth:`.prefill.WaitQueue.idle`."""
        self.count = 0
        self.mem[9] = 0.0
        self.mem[8] = float(self.mem[8]) + dt_s

    def clear(self) -> None:
        self.count = 0
        self.mem[9] = 0.0


def _restore(count: int, mem: np.ndarray, room: int) -> WaitQueue | KernelWaitQueue:
    """A queue from a copied or pickled :class:`KernelWaitQueue`'s state: in C where this process uses the
    library, else a :class:`.prefill.WaitQueue` with the same clock and cohorts (a snapshot pickled where the
    library ran, unpickled where it is not built)."""
    if KERNEL is None:
        queue = WaitQueue()
        queue.clock_s = float(mem[8])
        queue.cohorts.extend(Cohort(*row) for row in mem[_DATA:_DATA + 3 * count].reshape(-1, 3).tolist())
        return queue
    queue = KernelWaitQueue.__new__(KernelWaitQueue)
    queue.lib, queue.count, queue.mem, queue.room = KERNEL, count, mem, room
    queue._bind()
    return queue


def wait_queue() -> WaitQueue | KernelWaitQueue:
    """A fleet's queue: in C when the library is loaded, else in Python."""
    return WaitQueue() if KERNEL is None else KernelWaitQueue(KERNEL)


def _agrees_with_python(lib) -> bool:
    """``cosim_dc_serve`` against :meth:`.prefill.WaitQueue.serve` on random step sequences (queues that
    build and drain, drops, tiny and huge values, zero and NaN among them), bit for bit in every output,
    the clock and the cohorts; False (Python does the work) when one does not agree. Run once per
    process, at import."""
    rng = np.random.default_rng(2468)
    for case in range(40):
        py, c = WaitQueue(), KernelWaitQueue(lib, room=1 + case % 3)
        scale = 10.0 ** int(rng.integers(-3, 6))
        dt_s = float(rng.choice([0.1, 1.0, 60.0, 300.0, 7.3]))
        for _ in range(30):
            offered = float(rng.uniform(0.0, 2.0) * scale) + sum(h.n_req for h in py.cohorts)
            arrived = float(rng.uniform(0.0, 1.0) * scale) * (rng.random() < 0.9)
            capacity = float(rng.uniform(0.0, 1.5) * scale) * (rng.random() < 0.95)
            if case % 10 == 9 and rng.random() < 0.1:
                capacity = float("nan")
            args = (dt_s, offered, arrived, capacity, float(rng.choice([0.0, 30.0, 120.0])),
                    float(rng.uniform(-1.0, 3.0)), bool(rng.random() < 0.2), float(rng.choice([0.5, 0.99, 1.0])))
            if rng.random() < 0.05:
                py.idle(dt_s)
                c.idle(dt_s)
                continue
            expect, got = py.serve(*args), c.serve(*args)
            if not all(_same(x, y) for x, y in zip(expect, got)) or not _same(py.clock_s, c.clock_s):
                return False
            rows = [(h.n_req, h.start_s, h.end_s) for h in py.cohorts]
            if len(rows) != c.count or not all(_same(x, y) for r, s in zip(rows, c.cohorts)
                                               for x, y in zip(r, (s.n_req, s.start_s, s.end_s))):
                return False
    return True


def _same(a: float, b: float) -> bool:
    return (a != a and b != b) or np.float64(a).view(np.uint64) == np.float64(b).view(np.uint64)


KERNEL = _load()
