"""The FMU's C functions as the adapter calls them every step (FMI 2.0 co-simulation): through
the functions fmpy loaded, with ctypes arguments built once (:class:`Fmi2Calls`), or all of one
step in one call of ``_exchange.c`` (:data:`EXCHANGE`, when ``make build`` built it)."""

from __future__ import annotations

import random
from ctypes import CFUNCTYPE, POINTER, Structure, c_double, c_int, c_size_t, c_uint32, c_void_p, cast
from pathlib import Path

from cosim.sdk import library_agrees, load_library

FMI_WARNING = 1  # fmi2Warning: statuses above it are failures (fmpy raises on them)
FMI2_TRUE = c_int(1)  # fmi2True, as fmpy passes noSetFMUStatePriorToCurrentPoint to fmi2DoStep


class Fmi2Calls:
    """fmi2SetReal, fmi2DoStep and fmi2GetReal of one FMI 2.0 co-simulation instance, as the
    adapter calls them every step: the very functions fmpy loaded (the same addresses, cast to a
    prototype without argument types) with the same C arguments, passed as ctypes objects built
    once (the instance pointer; sizes as size_t, times as fmi2Real: ``c_double`` holds the float
    as it is, as fmpy's ``c_double`` conversion does), so neither fmpy's wrapper nor ctypes'
    per-argument conversion runs. Each call returns the FMU's status: the caller raises one
    above warning as fmpy would (``instance._call_failed``)."""

    __slots__ = ("set_real", "do_step", "get_real", "component", "t", "h")

    def __init__(self, fmu):
        functions = fmu._functions  # fmpy's loaded functions by name (fmpy 0.3)
        as_loaded = CFUNCTYPE(c_int)  # returns fmi2Status; arguments as given
        self.set_real, self.do_step, self.get_real = (cast(functions[name], as_loaded)
                                                       for name in ("fmi2SetReal", "fmi2DoStep", "fmi2GetReal"))
        self.component = c_void_p(fmu.component)
        self.t, self.h = c_double(), c_double()  # fmi2DoStep's communication point and step size [s]


class ExchangeArgs(Structure):
    """``cosim_fmi2_exchange_t`` of ``_exchange.c``, field by field."""

    _fields_ = [("set_real", c_void_p), ("do_step", c_void_p), ("get_real", c_void_p), ("component", c_void_p),
                ("in_vr", POINTER(c_uint32)), ("n_in", c_size_t), ("in_values", POINTER(c_double)),
                ("out_vr", POINTER(c_uint32)), ("n_out", c_size_t), ("out_fmu", POINTER(c_double)),
                ("scale", POINTER(c_double)), ("offset", POINTER(c_double)), ("out", POINTER(c_double)),
                ("t", c_double), ("h", c_double), ("outputs_first", c_int), ("status", c_int)]


SET_FAILED, STEP_FAILED, GET_FAILED = 1, 2, 3  # cosim_fmi2_exchange's answers other than 0


def load_exchange(lib_path: Path = Path(__file__).with_name("_exchange.so")):
    """``cosim_fmi2_exchange`` of ``adapters/fmu/_exchange.so`` (``make build``), or None: not built from
    its C source as it is now (an edited source is not trusted until rebuilt), not loadable
    (:func:`cosim.sdk.load_library`), or its unit conversion not Python's numbers on this machine
    (:func:`converts_as_python`); then each step makes its FMU calls from Python."""
    lib = load_library(lib_path)
    try:
        exchange, convert = lib.cosim_fmi2_exchange, lib.cosim_scale_offset
    except AttributeError:  # (None: no library)
        return None
    exchange.argtypes, exchange.restype = None, c_int  # one pointer, passed as it is
    convert.argtypes, convert.restype = [c_size_t, c_void_p, c_void_p, c_void_p, c_void_p], None
    return exchange if library_agrees(lib, converts_as_python(convert)) else None


def converts_as_python(convert) -> bool:
    """``value * scale + offset`` in C (no fused multiply-add) gives Python's bits on probe values:
    signed zeros, infinities, NaN, subnormals, unit factors and random magnitudes."""
    rng = random.Random(20261207)
    specials = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 5e-324, -2.2e-308, 1e308, 293.15]
    factors = [1.0, -1.0, 1e-6, 1e6, 1e-3, 3.6e6, 1 / 3.6e6, 0.0]
    offsets = [0.0, -0.0, -273.15, 273.15, 1e-300]
    cases = [(v, s, o) for v in specials for s in factors for o in offsets]
    cases += [(rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30), rng.uniform(-1, 1) * 10.0 ** rng.randint(-8, 8),
               rng.uniform(-1, 1) * 10.0 ** rng.randint(-8, 8)) for _ in range(4000)]
    n = len(cases)
    values, scales, offs, out = ((c_double * n)(*column) for column in (*zip(*cases), [0.0] * n))
    convert(n, values, scales, offs, out)
    return bytes(out) == bytes((c_double * n)(*[v * s + o for v, s, o in cases]))


EXCHANGE = load_exchange()
