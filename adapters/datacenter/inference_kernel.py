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
import functools
import struct
from pathlib import Path

import numpy as np

from cosim.adapters.datacenter.prefill import Cohort, WaitQueue, quantile
from cosim.sdk import library_agrees, load_library, note_acceleration

__all__ = ["KERNEL", "KernelWaitQueue", "ServeFleets", "numpy_loop", "wait_queue"]

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
    lib.cosim_dc_serve_fleets.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.cosim_dc_serve_fleets.restype = ctypes.c_int64
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


# -- the fleets of a cluster's step in one call ------------------------------------------------------------------
_LOOP = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ssize_t),
                         ctypes.POINTER(ctypes.c_ssize_t), ctypes.c_void_p)


def numpy_loop(ufunc: np.ufunc, check) -> tuple[int, int] | None:
    """``(function, data)`` of ``ufunc``'s float64 loop, the one ``ufunc(x)`` runs for a Python float ``x``, read
    from the ufunc object (numpy's public ``PyUFuncObject``: after the object's header, ``nin, nout, nargs,
    identity`` as ints, then the ``functions`` and ``data`` arrays, ``ntypes``, a reserved int, ``name`` and
    ``types``); or None: the object does not read as that layout (its name, type count and type table are
    compared with the ufunc's own), or the loop, called on one value at a time, is not ``ufunc``'s result to the bit
    on every value of ``check``."""
    base = id(ufunc)
    try:
        head = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)  # (ob_refcnt, ob_type)
        nin, nout, nargs, _ = (ctypes.c_int * 4).from_address(base + head)
        functions, data = (ctypes.c_void_p * 2).from_address(base + head + 16)
        ntypes = ctypes.c_int.from_address(base + head + 32).value
        name_p, types_p = (ctypes.c_void_p * 2).from_address(base + head + 40)
        if (nin, nout, nargs, ntypes) != (ufunc.nin, ufunc.nout, ufunc.nargs, ufunc.ntypes) or not name_p or not types_p \
                or ctypes.string_at(name_p) != ufunc.__name__.encode():
            return None
        table = ctypes.string_at(types_p, ntypes * nargs)
        if list(table) != [np.dtype(c).num for t in ufunc.types for c in t.replace("->", "")]:  # ('d->d', ... in order)
            return None
        index = ufunc.types.index("d->d")
        fn = ctypes.c_void_p.from_address(functions + index * ctypes.sizeof(ctypes.c_void_p)).value
        arg = ctypes.c_void_p.from_address(data + index * ctypes.sizeof(ctypes.c_void_p)).value if data else None
    except (ValueError, TypeError, OverflowError):
        return None
    if not fn:
        return None
    loop, one, out = _LOOP(fn), np.zeros(1), np.zeros(1)
    args = (ctypes.c_void_p * 2)(one.ctypes.data, out.ctypes.data)
    dims, steps = (ctypes.c_ssize_t * 1)(1), (ctypes.c_ssize_t * 2)(8, 8)
    with np.errstate(all="ignore"):
        for x in check:
            one[0] = x
            loop(args, dims, steps, arg)
            if not _same(float(out[0]), float(ufunc(float(x)))):
                return None
    return fn, arg or 0


def _check_values(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Arguments to compare numpy's loops on: the ranges the fleets' curves take (ln of batches 0.05-1e4, exp of
    fitted polynomials) and wider, with the edges."""
    edges = np.array([0.0, -0.0, 1.0, -1.0, 1e-300, 5e-324, 700.0, -745.0, 709.78, np.inf, -np.inf, np.nan])
    return {"exp": np.concatenate([rng.uniform(-20.0, 20.0, 1000), rng.uniform(-750.0, 750.0, 200), edges]),
            "log": np.concatenate([np.exp(rng.uniform(-10.0, 12.0, 1000)), rng.uniform(0.0, 1e6, 200), np.abs(edges)])}


@functools.lru_cache(maxsize=1)
def numpy_loops() -> tuple[int, int, int, int] | None:
    """(exp's loop, its data, log's loop, its data) for :class:`ServeFleets`, or None (see :func:`numpy_loop`); said
    for the runs' ``metadata.json`` (``accelerations``, ``numpy_ufunc_loops``) when first asked."""
    check = _check_values(np.random.default_rng(1357))
    exp, log = numpy_loop(np.exp, check["exp"]), numpy_loop(np.log, check["log"])
    found = None if exp is None or log is None else (*exp, *log)
    n = len(check["exp"]) + len(check["log"])
    note_acceleration("numpy_ufunc_loops", found is not None,
                      f"numpy {np.__version__}: np.exp and np.log's float64 loops "
                      + (f"read from the ufunc objects, the ufuncs' numbers on {n} values: inference fleets without a "
                         "power cap or MIG slices step in C (adapters/datacenter/_inference.c), others in Python"
                         if found is not None else
                         "not read (the ufunc object's layout or the loops' numbers not numpy's): the fleets' step in "
                         "Python"))
    return found


_FLEETS, _FLEET, _COEFS = 32, 64, 8  # (_inference.c: FLEETS, FLEET, COEFS)
#: a fleet's doubles in the array (_inference.c's F_ names), named as :class:`.inference.Fleet` names them, with units
_F = dict(rate_req_s=0, output_tokens=1, idle_w=2, b_min=3, b_max=4, power_at_b_min_w=5, input_tokens=6,
          prefill_tok_s=7, max_wait_s=8, ttft_slo_s=9, itl_slo_ms=10, max_batch=11, n_replicas_active=12, n_table=13,
          n_active_gpus=14, idle_gpus_w=15, other_w=16, liquid_frac=17, n_power=18, n_tput=19, n_itl_p99=20,
          queue_req=22, coef_power=24, coef_tput=24 + _COEFS, coef_itl_p99=24 + 2 * _COEFS,
          out=48, python_quantile=60, n_segments=61, prefill_s=62)
#: positions in Fleet.advance's tuple (out): requests served, the TTFT p99
_SERVED, _TTFT_P99_MS = 5, 9
_RATE, _QUEUE = _F["rate_req_s"], _F["queue_req"]
#: the keys of GpuCluster._serve's dict, in its order (the C function's sums)
SERVE_KEYS = ("p_it_w", "p_gpu_w", "tokens_per_s", "good_req", "done_req", "dropped_req", "queued_req", "itl_p99_ms",
              "n_gpus_busy", "liquid_w", "ttft_good_req", "itl_good_req", "ttft_p99_ms")


def fleet_key(knobs) -> tuple:
    """What of ``knobs`` the fleets' step reads (caps, batch and replica limits, demand), as one comparable value."""
    return (knobs.p_cap_w, knobs.p_cap_infer_w, knobs.n_batch_max, knobs.replicas_frac,
            tuple(knobs.fleet_batch_max.items()), tuple(knobs.fleet_replicas_frac.items()),
            tuple(knobs.fleet_demand_ratio.items()))


class ServeFleets:
    """:meth:`.cluster.GpuCluster._serve` for one set of knobs in one C call (``cosim_dc_serve_fleets``): each
    fleet's :meth:`.inference.Fleet.advance` (its arrival rate drawn here, as there) and the sums of them, when
    every fleet is of the plain kind it covers (see :meth:`make`); the same numbers by the same operations, numpy's
    own ``log`` and ``exp`` included (:func:`numpy_loops`). Made for one knobs object and the fleets' settings under
    it; :meth:`fits` tells whether it still holds. Not copied (a copy's queues have other addresses): a copied
    cluster makes its own."""

    __slots__ = ("knobs", "key", "rows", "mem", "ptrs", "addresses", "queues", "tables", "rate")

    @classmethod
    def make(cls, cluster, knobs, tighter, arrival_rate) -> "ServeFleets | None":
        """The plan of ``cluster``'s fleets under ``knobs`` (``tighter``: the cluster's rule for a global and a
        fleet's knob; ``arrival_rate``: :func:`.inference.arrival_rate`, which imports this module), or None where
        the C function does not cover them: no library or numpy loops, a MIG pool or fleet, a power cap on the
        fleets, a fleet with no replica active, a queue in Python, curves of more than 8 coefficients."""
        loops = numpy_loops() if KERNEL is not None else None
        p_cap_w = knobs.p_cap_infer_w if knobs.p_cap_infer_w is not None else knobs.p_cap_w
        if loops is None or cluster.mig_pool is not None or p_cap_w is not None or not cluster.fleets:
            return None
        plan = cls.__new__(cls)
        plan.rate = arrival_rate
        n = len(cluster.fleets)
        plan.knobs, plan.key, plan.rows = knobs, fleet_key(knobs), []
        plan.mem = np.zeros(_FLEETS + _FLEET * n)
        plan.ptrs = np.zeros(4 + 3 * n, np.int64)
        plan.ptrs[:4] = loops
        plan.mem[0], plan.mem[3] = n, 0.99
        plan.queues, plan.tables = [], []
        for k, (setup, n_nodes) in enumerate(zip(cluster.fleets, cluster.fleet_nodes)):
            fleet, curves = setup.fleet, setup.fleet.curves
            if setup.mig is not None or not isinstance(fleet.waits, KernelWaitQueue):
                return None
            active = tighter(knobs.replicas_frac, knobs.fleet_replicas_frac.get(setup.name))
            active = 1.0 if active is None else active
            max_batch = tighter(knobs.n_batch_max, knobs.fleet_batch_max.get(setup.name))
            _, max_batch, n_active, tput_list, batch_list = fleet._settings_for(max_batch, active)
            coefs = curves._coef_lists
            if n_active == 0 or any(len(c) > _COEFS for c in coefs):
                return None
            n_active_gpus = round(fleet.replicas * active) * curves.gpus_per_replica  # (_serve's site constants)
            n_gpus = fleet.n_gpus
            f = plan.mem[_FLEETS + _FLEET * k:_FLEETS + _FLEET * (k + 1)]
            values = dict(output_tokens=fleet.output_tokens, idle_w=fleet.idle_w, b_min=curves.b_min, b_max=curves.b_max,
                          power_at_b_min_w=curves._power_at_b_min, input_tokens=fleet.input_tokens,
                          prefill_tok_s=fleet.prefill_tok_s, max_wait_s=fleet.max_wait_s, ttft_slo_s=fleet.ttft_slo_s,
                          itl_slo_ms=fleet.itl_slo_ms, max_batch=max_batch, n_replicas_active=n_active, n_table=len(batch_list),
                          n_active_gpus=n_active_gpus, idle_gpus_w=(n_gpus - n_active_gpus) * setup.gpu.idle_w,
                          other_w=n_nodes * setup.node.other_w(n_active_gpus / max(n_gpus, 1)),
                          liquid_frac=setup.node.liquid_frac, n_power=len(coefs[0]), n_tput=len(coefs[1]),
                          n_itl_p99=len(coefs[3]))
            for name, value in values.items():
                f[_F[name]] = value
                if float(f[_F[name]]) != value and value == value:  # (a number a double does not hold exactly)
                    return None
            for name, coef in (("coef_power", coefs[0]), ("coef_tput", coefs[1]), ("coef_itl_p99", coefs[3])):
                f[_F[name]:_F[name] + len(coef)] = coef
            tput, grid = np.array(tput_list, float), np.array(batch_list, float)  # (the lists' values, as arrays)
            plan.tables += [tput, grid]
            plan.ptrs[4 + 3 * k:7 + 3 * k] = (fleet.waits.address, tput.ctypes.data, grid.ctypes.data)
            plan.queues.append(fleet.waits.mem)
            demand = knobs.fleet_demand_ratio.get(setup.name)
            plan.rows.append((setup, fleet, fleet.waits, f, demand, (fleet.max_batch, fleet.replicas)))
        plan.addresses = (plan.mem.ctypes.data, plan.ptrs.ctypes.data)
        return plan

    def __deepcopy__(self, memo):
        return None  # (a copy's queues are other arrays: the copied cluster makes its own plan)

    def __reduce__(self):
        return type(None), ()

    def fits(self, knobs) -> bool:
        """Made for knobs with ``knobs``' values for the fleets (:func:`fleet_key`; then kept for ``knobs``) and the
        fleets as they are: the same replicas and batch limits, the same queue arrays."""
        if knobs is not self.knobs:
            if fleet_key(knobs) != self.key:  # (another action that leaves the fleets' knobs be keeps the plan)
                return False
            self.knobs = knobs
        for (_, fleet, waits, _, _, key), mem in zip(self.rows, self.queues):
            if waits.mem is not mem or fleet.waits is not waits or (fleet.max_batch, fleet.replicas) != key:
                return False
        return True

    def step(self, time_s: float, dt_s: float, quiet: bool, start_hour_utc: float) -> dict[str, float]:
        """``_serve``'s dict of the step (its fleets' queues and ``queue_req`` advanced)."""
        mem, rate_of = self.mem, self.rate
        mem[1], mem[2] = dt_s, 1.0 if quiet else 0.0
        for setup, fleet, _, f, demand, _ in self.rows:
            rate = rate_of(setup.arrivals, setup.rate_req_s, time_s, dt_s, start_hour_utc,
                           setup.diurnal_amp_frac, setup.peak_hour_utc, setup.rng)
            if demand is not None:
                rate *= demand
            f[_RATE], f[_QUEUE] = rate, fleet.queue_req
        done = KERNEL.cosim_dc_serve_fleets(*self.addresses)
        if done == -1:  # a queue without room for this step's cohort (nothing stepped): grown, as serve grows it
            for k, (_, _, waits, _, _, _) in enumerate(self.rows):
                if waits.count >= waits.room:
                    waits._allocate(2 * waits.room)
                self.queues[k] = waits.mem
                self.ptrs[4 + 3 * k] = waits.address
            done = KERNEL.cosim_dc_serve_fleets(*self.addresses)
        if done != 0:
            raise RuntimeError(f"cosim_dc_serve_fleets returned {done}: more segments than room (a bug)")
        for _, fleet, waits, f, _, _ in self.rows:
            fleet.queue_req = float(f[_QUEUE])
            waits.count = int(waits.mem[9])
        values = mem[8:22].tolist()
        if values[13] and not quiet:  # a fleet's quantile left to Python (WaitQueue.serve's): its TTFT p99, the max
            ttft = 0.0
            for _, _, waits, f, _, _ in self.rows:
                out = _F["out"]
                served, fleet_ttft = float(f[out + _SERVED]), float(f[out + _TTFT_P99_MS])
                if f[_F["python_quantile"]] != 0.0:
                    q_frac = float(mem[3])
                    wait_q = quantile(waits.segments(int(f[_F["n_segments"]])), q_frac) if served > 0 else 0.0
                    fleet_ttft = 1e3 * (wait_q + float(f[_F["prefill_s"]])) if served > 0 else 0.0
                ttft = max(ttft, fleet_ttft)
            values[12] = ttft
        return dict(zip(SERVE_KEYS, values))


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
