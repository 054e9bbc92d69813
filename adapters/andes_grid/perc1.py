"""PERC1 as a native ANDES dynamic model, registered in a ``System`` at run time.

PERC1 (Power Electronic Reconnecting and Ceasing load) is PowerWorld's load characteristic for
aggregates of power-electronic loads such as datacenters, built on LDEV1, itself EPRI's
positive-sequence model of aggregated EV chargers (PowerWorld Simulator help, "Load
Characteristic Model: PERC1", Simulator 24, October 2025; EPRI 1-116982, Sundaresh & Matra, 2022).
This module defines the same ceasing and reconnection logic as ``adapters/ride_through.py``'s
``Perc1`` (its docstring gives the definition and the parameters), but as an ANDES model that the
transient-stability solver integrates at its own step:

* a discrete block (``Perc1Logic``, an ANDES ``Discrete``) evaluates, at every Newton iteration of
  every integration step, the share of the load connected: ceasing between ``Vt1`` and ``Vt0``
  (``Vt2``/``Vt3`` above), latched at the deepest voltage of the disturbance (committed once a
  step is accepted), reconnection of ``Frecon`` of the ceased share after ``Tdrecon`` back inside
  ``[Vt1, Vt2]`` over a ramp ``Trecon``, and the P share's frequency sensitivity ``Kpf`` outside the
  deadband ``[Fn - Dbfl, Fn + Dbfh]`` (the bus frequency of an ANDES ``BusFreq``), and the
  frequency trip: below ``Fl`` for ``Tfl`` or above ``Fh`` for ``Tfh`` (0 turns a side off) the whole
  load trips, latched for the rest of the run (the flag ``on`` goes to 0 and multiplies P and Q past
  the lead-lags). The time beyond a threshold starts at the crossing, interpolated linearly between
  the last accepted sub-step and the iterate, and the trip acts at the first sub-step whose time is
  at least the pickup time past it: within one ANDES step of the exact instant for a frequency
  that crosses once. ``ride_through``'s ``Perc1Params`` documents the definition and its source (the
  common under-/over-frequency trip of PSS/E's DER_A, not PowerWorld's PERC1 definition, which we
  could not read);
* two ANDES ``LeadLag`` blocks (``Tap``/``Tbp``, ``Taq``/``Tbq``) carry the shares to the P and Q
  the load draws from its bus, constant power: ``P = p0 * y_P``, ``Q = q0 * y_Q``.

ANDES builds its model list in ``andes.system.registry.RegistryLoader.import_models`` from the
fixed ``andes.models.file_classes`` and loads generated code for exactly those models; there is
no plug-in hook. ``register`` therefore does, for one ``System`` and without touching ANDES's
files, what ``import_models`` does for each model (instantiate, put in ``System.models`` and the
model's group), then generates the model's numerical code with ANDES's own ``Model.prepare``
into ``~/.andes/cosim_pycode/PERC1.py`` and, on the next runs, loads that file as
``CodegenManager._expand_pycode`` does (while its md5, ANDES's checksum of the model's
equations, matches; else it generates again, in memory).

Where it differs from the co-simulated ``Perc1``: the lead-lag outputs are not clipped to [0, 1]
(a lead above its lag can draw more than the demand for a moment); the time back inside the band
counts ANDES's accepted sub-steps (a step ANDES rejects and retries shorter is counted at the
length first tried); the frequency is an ANDES ``BusFreq`` measurement at the bus.

The device's own P (``p0``, ``q0``) is what cosim sets each step (the campus's demand); the device
draws nothing at ``t = 0`` (the power flow and the initialisation see the companion ``PQ`` load
that ``andes_grid`` keeps for that and empties from the first step).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np

from andes.core import Algeb, ExtAlgeb, IdxParam, Model, ModelData, NumParam
from andes.core.block import LeadLag
from andes.core.discrete import Discrete

from cosim.adapters.andes_grid.perc1_record import PARAMS
from cosim.adapters.ride_through import Perc1Params

#: The defaults of the native model: the co-simulated model's. [per PARAMS' units]
DEFAULTS = {name: Perc1Params.model_fields[key].default for name, (key, _u, _m) in PARAMS.items()}


class Perc1Logic(Discrete):
    """PERC1's ceasing/reconnection state machine; exports the target shares ``ps`` (P) and ``qs`` (Q).

    Within a step the shares follow the iterate's voltage (ceasing is monotone in the voltage, so
    the Newton iterations see one consistent characteristic); the latch, the time back in the band
    and the kept-off share are committed when the integration moves on to a new time (the values
    of the last call at the previous time are that step's converged ones).
    """

    def __init__(self, owner_params, v, f, name=None, tex_name=None, info=None):
        super().__init__(name=name, tex_name=tex_name, info=info)
        self.p = owner_params
        self.v, self.f = v, f
        self.export_flags = ["ps", "qs", "on"]
        self.export_flags_tex = ["p_s", "q_s", "on"]
        self.ps = np.array([1.0])
        self.qs = np.array([1.0])
        self.on = np.array([1.0])
        self.input_list.extend([v, f])
        self.has_check_var = True
        self.t_last = 0.0
        self.state = None

    def list2array(self, n):
        super().list2array(n)
        self.ps[:] = 1.0
        self.qs[:] = 1.0
        self.on[:] = 1.0
        nan = np.full(n, np.nan)
        self.state = {"ceased": np.zeros(n), "kept_off": np.zeros(n), "back_s": np.zeros(n),
                      "now": np.zeros(n),
                      # frequency trip: crossing instants (NaN: inside), latch, and the values at the last call
                      "low_since": nan.copy(), "high_since": nan.copy(), "tripped": np.zeros(n, dtype=bool),
                      "low_now": nan.copy(), "high_now": nan.copy(), "trip_now": np.zeros(n, dtype=bool),
                      "f_now": nan.copy(), "f_prev": nan.copy()}
        self.t_last = 0.0
        self.t_prev = 0.0

    def _param(self, name):
        return np.asarray(self.p[name].v, dtype=float)

    def _ceasing(self, v):
        vt0, vt1, vt2, vt3 = (self._param(k) for k in ("Vt0", "Vt1", "Vt2", "Vt3"))
        low = np.clip((vt1 - v) / np.maximum(vt1 - vt0, 1e-9), 0.0, 1.0)
        high = np.clip((v - vt2) / np.maximum(vt3 - vt2, 1e-9), 0.0, 1.0)
        now = np.maximum(low, high)
        return now

    def _commit(self, dt_s):
        """The step ending at ``t_last`` is accepted: latch, count time back, end a reconnection."""
        s = self.state
        now = s["now"]
        fcease, frecon = self._param("Fcease"), self._param("Frecon")
        tdrecon, trecon = self._param("Tdrecon"), self._param("Trecon")
        out = now > 0
        s["ceased"] = np.where(out, np.maximum(s["ceased"], now), s["ceased"])
        s["back_s"] = np.where(out, 0.0, np.where(s["ceased"] > 0, s["back_s"] + dt_s, 0.0))
        done = (s["ceased"] > 0) & ~out & (s["back_s"] - tdrecon >= trecon - 1e-9)
        s["kept_off"] = np.where(done, s["kept_off"] + fcease * s["ceased"] * (1 - frecon) * (1 - s["kept_off"]),
                                 s["kept_off"])
        s["ceased"] = np.where(done, 0.0, s["ceased"])
        s["back_s"] = np.where(done, 0.0, s["back_s"])
        s["low_since"], s["high_since"] = s["low_now"].copy(), s["high_now"].copy()
        s["tripped"] = s["trip_now"].copy()
        s["f_prev"] = s["f_now"].copy()

    def _since(self, since, beyond, f_hz, dae_t, threshold):
        """When the frequency went beyond ``threshold``: kept if already beyond, else the crossing
        interpolated between the last accepted sub-step (``t_prev``, its frequency) and this iterate."""
        f_prev = self.state["f_prev"]
        span = f_prev - f_hz
        frac = np.where(np.isfinite(f_prev) & (np.abs(span) > 1e-12),
                        np.clip((f_prev - threshold) / np.where(np.abs(span) > 1e-12, span, 1.0), 0.0, 1.0), 1.0)
        crossing = self.t_prev + frac * (dae_t - self.t_prev)
        return np.where(beyond, np.where(np.isnan(since), crossing, since), np.nan)

    def _trip(self, f_hz, dae_t):
        """The frequency trip at this iterate (latched once a step with it is accepted)."""
        s = self.state
        fl, fh = self._param("Fl"), self._param("Fh")
        low = (fl > 0) & (f_hz < fl)
        high = (fh > 0) & (f_hz > fh)
        s["low_now"] = self._since(s["low_since"], low, f_hz, dae_t, fl)
        s["high_now"] = self._since(s["high_since"], high, f_hz, dae_t, fh)
        s["f_now"] = f_hz.copy()
        s["trip_now"] = (s["tripped"] | (low & (dae_t - s["low_now"] >= self._param("Tfl") - 1e-9))
                         | (high & (dae_t - s["high_now"] >= self._param("Tfh") - 1e-9)))
        return s["trip_now"]

    def check_var(self, dae_t=0.0, *args, **kwargs):
        if self.state is None or len(self.state["ceased"]) != len(self.v.v):
            self.list2array(len(self.v.v))
        dae_t = float(dae_t)
        if dae_t > self.t_last + 1e-12:  # a new step: the previous one was accepted
            self._commit(dae_t - self.t_last)
            self.t_prev, self.t_last = self.t_last, dae_t
        fn = self._param("Fn")
        f_hz = np.asarray(self.f.v, dtype=float) * float(self.owner.system.config.freq)
        v = np.asarray(self.v.v, dtype=float)
        s = self.state
        now = self._ceasing(v)
        s["now"] = now
        fcease, frecon = self._param("Fcease"), self._param("Frecon")
        tdrecon, trecon = self._param("Tdrecon"), self._param("Trecon")
        ceased = np.maximum(s["ceased"], now)
        ramp = np.where(trecon > 0, np.clip((s["back_s"] - tdrecon) / np.where(trecon > 0, trecon, 1.0), 0.0, 1.0),
                        (s["back_s"] >= tdrecon).astype(float))
        reconnected = np.where((s["ceased"] > 0) & (now == 0), frecon * ramp, 0.0)
        share = (1.0 - s["kept_off"]) * (1.0 - fcease * ceased * (1.0 - reconnected))
        dev = f_hz - fn
        beyond = np.where(dev > self._param("Dbfh"), dev - self._param("Dbfh"),
                          np.where(dev < -self._param("Dbfl"), dev + self._param("Dbfl"), 0.0))
        self.ps[:] = share * (1.0 + self._param("Kpf") * beyond)
        self.qs[:] = share
        self.on[:] = np.where(self._trip(f_hz, dae_t), 0.0, 1.0)


class Perc1Data(ModelData):
    """PERC1's data (``PARAMS`` gives units and meanings)."""

    def __init__(self):
        super().__init__()
        self.bus = IdxParam(model="Bus", info="bus idx", mandatory=True)
        self.busf = IdxParam(model="BusFreq", info="the BusFreq measuring the bus frequency", mandatory=True)
        self.p0 = NumParam(default=0.0, info="active power demand (system base)", unit="pu")
        self.q0 = NumParam(default=0.0, info="reactive power demand (system base)", unit="pu")
        for name, (_key, unit, info) in PARAMS.items():
            setattr(self, name, NumParam(default=DEFAULTS[name], info=info, unit=unit, tex_name=name))


class Perc1Model(Model):
    """PERC1's equations: target shares from ``Perc1Logic``, lead-lags, constant P and Q at the bus."""

    def __init__(self, system, config):
        super().__init__(system, config)
        self.group = "DynLoad"
        self.flags.tds = True
        self.flags.pflow = False
        self.v = ExtAlgeb(model="Bus", src="v", indexer=self.bus, tex_name="V",
                          e_str="u * Indicator(dae_t > 0) * q0 * LQ_y * SH_on", ename="Q", tex_ename="Q")
        self.a = ExtAlgeb(model="Bus", src="a", indexer=self.bus, tex_name=r"\theta",
                          e_str="u * Indicator(dae_t > 0) * p0 * LP_y * SH_on", ename="P", tex_ename="P")
        self.f = ExtAlgeb(model="FreqMeasurement", src="f", indexer=self.busf, tex_name="f")
        self.SH = Perc1Logic({name: getattr(self, name) for name in PARAMS}, self.v, self.f, tex_name="SH")
        self.ps = Algeb(info="connected P share before the lead-lag", v_str="1", e_str="SH_ps - ps", tex_name="p_s")
        self.qs = Algeb(info="connected Q share before the lead-lag", v_str="1", e_str="SH_qs - qs", tex_name="q_s")
        self.LP = LeadLag(u=self.ps, T1=self.Tap, T2=self.Tbp, zero_out=True, info="P path lead-lag")
        self.LQ = LeadLag(u=self.qs, T1=self.Taq, T2=self.Tbq, zero_out=True, info="Q path lead-lag")


class PERC1(Perc1Data, Perc1Model):
    """Power Electronic Reconnecting and Ceasing load (see the module docstring)."""

    def __init__(self, system, config):
        Perc1Data.__init__(self)
        Perc1Model.__init__(self, system, config)


def pycode_dir() -> Path:
    from andes.utils.paths import get_dot_andes_path  # noqa: PLC0415
    return Path(get_dot_andes_path()) / "cosim_pycode"


def register(system) -> PERC1:
    """Add the ``PERC1`` model to ``system`` (loaded, not yet set up) and load its numerical code."""
    if "PERC1" in system.models:
        return system.models["PERC1"]
    model = PERC1(system=system, config=system._config_object)
    system.__dict__["PERC1"] = model
    system.models["PERC1"] = model
    model.config.check()
    system.__dict__[model.group].add_model("PERC1", model)
    path = pycode_dir()
    module = _import(path / "PERC1.py")
    if module is not None and getattr(module, "md5", None) == model.get_md5():
        system.codegen._expand_pycode(types.SimpleNamespace(PERC1=module))
    else:  # generate (~2 s): the calls are filled in memory, and the file is written for the next run
        model.prepare(quick=True, pycode_path=str(path))
    return model


def _import(file: Path):
    if not file.is_file():
        return None
    name = "cosim_andes_pycode_PERC1"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 — a broken cache file is regenerated
        return None
    sys.modules.pop(name, None)
    return module
