"""One running FMU instance (fmpy): set inputs, advance by doStep or the model-exchange
solver, read outputs; every failure becomes an FmuError naming FMU, variable and time, and
an FMU that ends the simulation itself raises FmuEnded (the run ends cleanly)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from ctypes import byref, c_double, c_size_t, c_uint32, c_void_p, cast, pointer
from math import isfinite as _isfinite
from operator import add as _add, mul as _mul
from typing import Any, NamedTuple

from cosim.adapters.fmu.calls import (
    EXCHANGE,
    FMI2_TRUE,
    FMI_WARNING,
    SET_FAILED,
    STEP_FAILED,
    ExchangeArgs,
    Fmi2Calls,
)

from cosim.adapters.fmu.description import (
    LOG,
    FmuEnded,
    FmuError,
    Interface,
    Port,
    binary_path,
)

DISCARD = 2  # fmi2Discard = fmi3Discard: the FMU could not do what was asked, and says so
FMI2_LAST_SUCCESSFUL_TIME, FMI2_TERMINATED = 2, 3  # fmi2StatusKind values
#: CVode's internal steps per communication step at most (SUNDIALS' default, 500, is too few
#: for a communication step many times the model's time scale: "mxstep steps taken before reaching tout")
MAX_CVODE_STEPS = 100_000


@contextmanager
def keep_cwd():
    """Restore the working directory after an fmpy call. fmpy changes into the FMU's binary
    folder to load the library and stays there when loading fails; cosim deletes that folder
    when the simulator ends, which would leave the process in a deleted directory."""
    try:
        cwd = os.getcwd()
    except OSError:  # already gone before this call: nothing to restore
        cwd = None
    try:
        yield
    finally:
        if cwd is not None:
            os.chdir(cwd)


# -- running one instance ------------------------------------------------------------------------------
class FmuInstance:
    """One running FMU instance (no mosaik): set inputs, step, read outputs, in scenario units.

    Model exchange follows the FMI mode rules: continuous inputs are set in continuous-time
    mode; discrete inputs and tunable parameters only in event mode (an input that changed
    enters it, the event iteration runs before the next integration). The solver keeps its
    state from one step to the next and restarts only after an input changed or an event.

    Args:
        iface: the FMU as :func:`describe` maps it.
        unzipdir: the FMU extracted (shared by the instances of one simulator).
        name: instance name (the entity id), used in messages.
        start_values: ``{attr: value}`` for inputs and parameters. [scenario units]
        start_s, step_s: simulation start and communication step. [s]
        solver, solver_step_s, rtol: model-exchange integration (see :class:`SimParams`).
        log: ask the FMU for debug messages.
    """

    def __init__(self, iface: Interface, unzipdir: str, name: str, start_values: dict[str, Any],
                 start_s: float = 0.0, step_s: float = 60.0, solver: str = "CVode",
                 solver_step_s: float | None = None, rtol: float = 1e-6, log: bool = False):
        self.iface = iface
        self.name = name
        self.label = f"{iface.path.name} ({name})"
        self.messages: list[str] = []
        self.n_steps = 0
        self.time_s = start_s
        self.fmi3 = iface.description.fmiVersion.startswith("3")
        self.me = iface.kind == "me"
        self.solver_name = solver
        self.solver_step_s = solver_step_s or step_s / 10
        self.rtol = rtol
        self.log = log
        self.solver = None
        self.n_restarts = 0  # model exchange: solver restarts after the first start [-]
        self._mode: str | None = None  # model exchange: "event", "continuous" (or "ended") once initialized
        self._restart = False  # model exchange: an input changed, the solver must restart
        self._held: dict[str, float] = {}  # model exchange: the value last set of each attribute [FMU unit]
        self._arrays: dict[int, list[float]] = {}  # array variables by value reference, every element [FMU unit]
        self._set_plans: dict[tuple[str, ...], _SetPlan | bool] = {}  # input names -> one-call plan (set_inputs)
        self._fmi2: Fmi2Calls | None = None  # FMI 2.0 co-simulation: its hot-path C calls
        self._ending: str | None = None  # the FMU ended the simulation at the end of the last step
        self._callback_error: BaseException | None = None
        bad = sorted(set(start_values) - set(iface.settable))
        if bad:
            raise FmuError(f"{self.label}: no input or parameter {', '.join(bad)}; settable: {', '.join(iface.settable)}")
        outputs = [iface.ports[a] for a in iface.outputs]
        fast = "Float64" if self.fmi3 else "Real"  # scalars read with one preallocated call per step
        self._out_real = [p for p in outputs if p.accessor == fast and p.size == 1]
        self._out_other = [p for p in outputs if p not in self._out_real]
        self._out_vr = (c_uint32 * len(self._out_real))(*[p.vr for p in self._out_real])
        self._out_n = c_size_t(len(self._out_real))
        self._out_buf = (c_double * len(self._out_real))()
        # Port.from_fmu (value * scale + offset) of every scalar real output, as columns
        self._out_attrs = tuple(p.attr for p in self._out_real)
        self._out_scales = tuple(p.scale for p in self._out_real)
        self._out_offsets = tuple(p.offset for p in self._out_real)
        self._exchanged = None  # the outputs in scenario units, as the C exchange writes them (exchange)
        self._instantiate(unzipdir, log)
        if self._fmi2 is not None and EXCHANGE is not None and not self._out_other:
            self._exchanged = (c_double * len(self._out_real))()
        self._initialize(start_values, start_s)

    # -- errors -----------------------------------------------------------------------------------
    def _logger(self, status: int, category, message) -> None:
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
        self.messages.append(text)
        del self.messages[:-20]  # the last few explain a failure; older ones are history
        if self.log:
            LOG.info("%s: %s", self.label, text)

    def _call(self, what, fn, variable: str | None = None, *args):
        """``fn(*args)``, its failure raised as an FmuError naming ``what`` (a text, or a callable
        giving it: nothing is formatted unless the call fails)."""
        try:
            return fn(*args)
        except (FmuError, FmuEnded):
            raise
        except Exception as exc:  # fmpy raises FMICallException, OSError, ctypes errors
            raise self._failed(what, exc, variable) from exc

    def _failed(self, what, exc: Exception, variable: str | None = None) -> FmuError:
        what = what() if callable(what) else what
        return FmuError(f"{self.label} at t = {self.time_s:g} s{self._var(variable)}: {what} failed: {exc}{self._said()}")

    def _said(self) -> str:
        return f"; the FMU said: {' | '.join(self.messages[-3:])}" if self.messages else ""

    @staticmethod
    def _var(variable: str | None) -> str:
        return f", variable {variable!r}" if variable else ""

    def _ended(self, time_s: float, why: str) -> FmuEnded:
        return FmuEnded(f"{self.label} ended the run at t = {time_s:g} s: {why}{self._said()}")

    # -- lifecycle ----------------------------------------------------------------------------------
    def _instantiate(self, unzipdir: str, log: bool) -> None:
        from fmpy import fmi2, fmi3  # fmpy: loaded only when an FMU runs

        md = self.iface.description
        part = md.coSimulation if self.iface.kind == "cs" else md.modelExchange
        common = dict(unzipDirectory=unzipdir, modelIdentifier=part.modelIdentifier, instanceName=self.name)
        if self.fmi3:
            cls = fmi3.FMU3Slave if self.iface.kind == "cs" else fmi3.FMU3Model
            self.fmu = self._load(lambda: cls(guid=md.instantiationToken, **common), unzipdir)
            self._log_cb = lambda env, status, category, message: self._logger(status, category, message)
            self._call("instantiate", lambda: self.fmu.instantiate(loggingOn=log, logMessage=self._log_cb))
            return
        cls = fmi2.FMU2Slave if self.iface.kind == "cs" else fmi2.FMU2Model
        self.fmu = self._load(lambda: cls(guid=md.guid, **common), unzipdir)
        self._callbacks = _fmi2_callbacks(self._logger)
        self._call("instantiate", lambda: self.fmu.instantiate(callbacks=self._callbacks, loggingOn=log))
        if self.iface.kind == "cs":
            self._fmi2 = Fmi2Calls(self.fmu)

    def _load(self, make, unzipdir: str):
        """fmpy's FMU object, which loads the shared library (and may change the working directory)."""
        inside = binary_path(self.iface)
        library = os.path.join(os.path.abspath(unzipdir), inside)
        if not os.path.isfile(library):
            raise FmuError(f"{self.label}: its binary {inside} is missing: the FMU has no binary for this platform")
        try:
            with keep_cwd():
                return make()
        except Exception as exc:  # fmpy wraps the OSError of dlopen (or a missing symbol) in Exception
            cause = exc.__context__ if isinstance(exc.__context__, OSError) else exc
            detail = str(cause).replace(library + ": ", "").replace(library, inside)
            raise FmuError(f"{self.label}: its binary {inside} does not load: {detail}") from exc

    def _initialize(self, start_values: dict[str, Any], start_s: float) -> None:
        ports = self.iface.ports
        values = [(ports[a], v) for a, v in start_values.items()]
        if not self.fmi3:
            self._call("fmi2SetupExperiment", lambda: self.fmu.setupExperiment(startTime=start_s))
        self._set(values, "setting start values")
        if self.fmi3:
            self._call("fmi3EnterInitializationMode", lambda: self.fmu.enterInitializationMode(startTime=start_s))
        else:
            self._call("fmi2EnterInitializationMode", self.fmu.enterInitializationMode)
        self._call("ExitInitializationMode", self.fmu.exitInitializationMode)
        if self.me:
            self._mode = "event"  # model exchange leaves initialization in event mode (FMI 2.0 3.2.3, 3.0 3.2.1)

    def close(self) -> None:
        """Terminate and free the instance (errors here are ignored: the run is over)."""
        fmu, self.fmu = getattr(self, "fmu", None), None
        if fmu is None:
            return
        for step in (fmu.terminate, fmu.freeInstance):
            try:
                step()
            except Exception:  # an FMU in an error state may refuse to terminate
                pass

    # -- values -------------------------------------------------------------------------------------
    def _number(self, port: Port, value: Any, what: str) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise FmuError(f"{self.label} at t = {self.time_s:g} s, variable {port.var!r} "
                           f"({port.attr} = {value!r}): {what}: not a number") from None
        if not _isfinite(number):
            raise FmuError(f"{self.label} at t = {self.time_s:g} s, variable {port.var!r} "
                           f"({port.attr} = {value!r}): {what}: not finite")
        return number

    def _set(self, values: list[tuple[Port, Any]], what: str) -> None:
        pending = [(port, self._number(port, value, what)) for port, value in values]
        if self._mode is not None:
            pending = self._changed(pending)
        arrays: dict[int, Port] = {}
        fast = "Float64" if self.fmi3 else "Real"
        batch: list[tuple[Port, float, float]] = []  # scalar reals: one set call for all of them
        for port, number in pending:
            si = port.to_fmu(number)
            if port.size > 1:  # an FMI 3.0 array is set whole, once, after its elements are gathered
                self._array(port)[port.index] = si
                arrays[port.vr] = port
                continue
            if port.kind == "real" and port.accessor == fast:
                batch.append((port, number, si))
                continue
            self._call(lambda: f"{what} ({port.attr} = {number:g})", lambda: self._set_one(port, [si]), port.var)
        if len(batch) > 1:
            try:
                getattr(self.fmu, "set" + fast)([p.vr for p, _, _ in batch], [si for _, _, si in batch])
                batch = []
            except Exception:  # noqa: BLE001 — set them one by one below: the failing one is named
                pass
        for port, number, si in batch:
            self._call(lambda: f"{what} ({port.attr} = {number:g})", lambda: self._set_one(port, [si]), port.var)
        for vr, port in arrays.items():
            self._call(f"{what} ({port.var}, {port.size} elements)", lambda: self._set_one(port, self._arrays[vr]),
                       port.var)

    def _changed(self, pending: list[tuple[Port, float]]) -> list[tuple[Port, float]]:
        """Model exchange: the values that changed; a discrete one enters event mode first."""
        changed = [(port, number) for port, number in pending if self._held.get(port.attr) != number]
        if any(not port.continuous_input for port, _ in changed) and self._mode == "continuous":
            self._call("EnterEventMode (a discrete input changed)", self.fmu.enterEventMode)
            self._mode = "event"
        for port, number in changed:
            self._held[port.attr] = number
        self._restart = self._restart or bool(changed)
        return changed

    def _array(self, port: Port) -> list[float]:
        if port.vr not in self._arrays:
            ports = [p for p in self.iface.ports.values() if p.vr == port.vr]
            values = [0.0] * port.size
            for p in ports:
                values[p.index] = p.start
            self._arrays[port.vr] = values
        return self._arrays[port.vr]

    def _set_one(self, port: Port, values: list[float]) -> None:
        if port.kind == "int":
            values = [int(round(v)) for v in values]
        elif port.kind == "bool":
            values = [bool(v) for v in values]
        getattr(self.fmu, "set" + port.accessor)([port.vr], values)

    def set_inputs(self, values: dict[str, Any]) -> None:
        """Set inputs and tunable parameters. [scenario units]

        A co-simulation FMU whose inputs this step are all scalar reals (the usual case) gets
        them in one set call through buffers kept per set of input names; anything else, or a
        call that fails (then the failing variable is named), goes through :meth:`_set`.
        """
        plan = self._set_plans.get(tuple(values))
        if plan is None:
            plan = self._new_set_plan(values)
        if plan:
            units, vr, buf, n, _ = plan
            self._fill(units, buf, values)
            calls = self._fmi2
            try:
                if calls is not None:
                    if calls.set_real(calls.component, vr, n, buf) <= FMI_WARNING:
                        return
                elif self.fmi3:
                    self.fmu.fmi3SetFloat64(self.fmu.component, vr, n.value, buf, n.value)
                    return
            except Exception:  # noqa: BLE001 — set them one by one below: the failing one is named
                pass
        self._set_each(values)

    def _set_each(self, values: dict[str, Any]) -> None:
        ports = self.iface.ports
        self._set([(ports[a], v) for a, v in values.items() if a in ports], "setting an input")

    def _fill(self, units, buf, values: dict[str, Any]) -> None:
        """``values`` in FMU units into a plan's buffer (``units``: see :class:`_SetPlan`)."""
        for (k, port, offset, scale), value in zip(units, values.values()):
            if type(value) is not float or not _isfinite(value):  # else _number would return it as it is
                value = self._number(port, value, "setting an input")
            buf[k] = (value - offset) / scale  # Port.to_fmu

    def _new_set_plan(self, values: dict[str, Any]) -> _SetPlan | bool:
        """The :class:`_SetPlan` of these input names, kept; ``False`` unless every name is a scalar
        real input of a co-simulation FMU (model exchange tracks changes: :meth:`_set`)."""
        names = tuple(values)
        ports = self.iface.ports
        fast = "Float64" if self.fmi3 else "Real"
        chosen = [ports.get(name) for name in names]
        if self.me or not chosen or any(p is None or p.size > 1 or p.kind != "real" or p.accessor != fast
                                        for p in chosen):
            plan = False
        else:
            units = tuple((k, p, p.offset, p.scale) for k, p in enumerate(chosen))
            vr, buf = (c_uint32 * len(chosen))(*[p.vr for p in chosen]), (c_double * len(chosen))()
            plan = _SetPlan(units, vr, buf, c_size_t(len(chosen)),
                            self._exchange_args(vr, buf) if self._exchanged is not None else None)
        self._set_plans[names] = plan
        return plan

    def _exchange_args(self, vr, buf):
        """A pointer to the C exchange's arguments for inputs ``vr`` in ``buf`` (see ``_exchange.c``)."""
        calls, n_out = self._fmi2, len(self._out_real)
        scale, offset = (c_double * n_out)(*self._out_scales), (c_double * n_out)(*self._out_offsets)
        args = ExchangeArgs(
            set_real=cast(calls.set_real, c_void_p).value, do_step=cast(calls.do_step, c_void_p).value,
            get_real=cast(calls.get_real, c_void_p).value, component=calls.component.value,
            in_vr=vr, n_in=len(vr), in_values=buf, out_vr=self._out_vr, n_out=n_out, out_fmu=self._out_buf,
            scale=scale, offset=offset, out=self._exchanged)
        return pointer(args)  # (the pointer keeps the arguments, which keep the arrays they point to)

    def exchange(self, values: dict[str, Any], time_s: float, step_s: float,
                 outputs_first: bool = False) -> dict[str, Any]:
        """One communication step: :meth:`set_inputs`, :meth:`step` from ``time_s`` over ``step_s``,
        and :meth:`outputs` after it (``outputs_first``: before it). [scenario units, s]

        An FMI 2.0 co-simulation FMU whose inputs are all scalar reals takes them in one C call
        (``_exchange.c``, when ``make build`` built it) that makes the same FMU calls with the same
        arguments and the same status checks as the three methods; a call that fails there is
        reported as they report it (a failing set goes on one input at a time, naming the one).
        """
        plan = self._set_plans.get(tuple(values))
        if plan is None:
            plan = self._new_set_plan(values)
        if not plan or plan[4] is None or self._ending:
            self.set_inputs(values)
            return self._step_and_read(time_s, step_s, outputs_first)
        units, _vr, buf, _n, args = plan
        self._fill(units, buf, values)
        x = args.contents
        x.t, x.h, x.outputs_first = time_s, step_s, outputs_first
        failed = EXCHANGE(args)
        if not failed:
            self.time_s = time_s + step_s
            self.n_steps += 1
            return dict(zip(self._out_attrs, self._exchanged[:]))
        return self._exchange_failed(failed, x.status, values, time_s, step_s, outputs_first)

    def _exchange_failed(self, failed: int, status: int, values: dict[str, Any], time_s: float, step_s: float,
                         outputs_first: bool) -> dict[str, Any]:
        """After the C exchange stopped at a failing call: what :meth:`set_inputs`, :meth:`step` and
        :meth:`outputs` do from there (so the run ends with the same message)."""
        if failed == SET_FAILED:  # nothing called after it: set them one by one, then go on
            self._set_each(values)
            return self._step_and_read(time_s, step_s, outputs_first)
        if failed == STEP_FAILED:
            self.time_s = time_s
            raise self._step_failed(time_s, status)
        if not outputs_first:  # the step itself went through
            self.time_s = time_s + step_s
            self.n_steps += 1
        exc = _call_failed("fmi2GetReal", status)
        raise self._failed("getting outputs", exc) from exc

    def _step_and_read(self, time_s: float, step_s: float, outputs_first: bool) -> dict[str, Any]:
        if outputs_first:
            out = self.outputs()
            self.step(time_s, step_s)
            return out
        self.step(time_s, step_s)
        return self.outputs()

    def outputs(self) -> dict[str, Any]:
        """Every output (model exchange: after the pending event iteration). [scenario units]"""
        if self._mode == "event":
            self._call("event iteration", lambda: self._settle(self.time_s))
        if self._out_real:
            calls = self._fmi2
            if calls is None:
                self._call("getting outputs", self._read_reals)
            else:
                status = calls.get_real(calls.component, self._out_vr, self._out_n, self._out_buf)
                if status > FMI_WARNING:
                    exc = _call_failed("fmi2GetReal", status)
                    raise self._failed("getting outputs", exc) from exc
            # Port.from_fmu of each, at C speed (the same two float operations; a slice of the
            # ctypes buffer is one list of floats, where iterating it would be one call per element)
            out: dict[str, Any] = dict(zip(self._out_attrs, map(_add, map(_mul, self._out_buf[:], self._out_scales),
                                                                self._out_offsets)))
        else:
            out = {}
        if self._out_other:
            read: dict[int, list] = {}
            for port in self._out_other:
                if port.vr not in read:
                    getter = getattr(self.fmu, "get" + port.accessor)
                    n = port.size
                    read[port.vr] = self._call("getting outputs",
                                               lambda: getter([port.vr], n) if self.fmi3 else getter([port.vr]), port.var)
                out[port.attr] = port.from_fmu(read[port.vr][port.index])
        return out

    def _read_reals(self) -> None:
        """The scalar real outputs into ``_out_buf`` through fmpy (model exchange, FMI 3.0)."""
        n = len(self._out_real)
        if self.fmi3:
            self.fmu.fmi3GetFloat64(self.fmu.component, self._out_vr, n, self._out_buf, n)
        else:
            self.fmu.fmi2GetReal(self.fmu.component, self._out_vr, n, self._out_buf)

    # -- time -----------------------------------------------------------------------------------------
    def step(self, time_s: float, step_s: float) -> None:
        """Advance from ``time_s`` over ``step_s`` with the inputs as set. [s]

        Raises:
            FmuError: a call failed.
            FmuEnded: the FMU asked to terminate, or discarded the step (the run ends cleanly).
        """
        if self._ending:
            raise FmuEnded(self._ending)
        self.time_s = time_s
        calls = self._fmi2
        if calls is not None:  # fmi2DoStep(c, t, h, noSetFMUStatePriorToCurrentPoint = fmi2True), as fmpy calls it
            calls.t.value, calls.h.value = time_s, step_s
            status = calls.do_step(calls.component, calls.t, calls.h, FMI2_TRUE)
            if status > FMI_WARNING:
                raise self._step_failed(time_s, status)
        elif self.me:
            self._call("model-exchange step", lambda: self._me_step(time_s + step_s))
        else:
            self._call("doStep", self._do_step, None, time_s, step_s)
        self.time_s = time_s + step_s
        self.n_steps += 1

    def _step_failed(self, time_s: float, status: int) -> Exception:
        """What an fmi2DoStep from ``time_s`` returning ``status`` (above warning) raises."""
        exc = _call_failed("fmi2DoStep", status)
        ended = self._discarded(time_s) if status == DISCARD else self._failed("doStep", exc)
        ended.__cause__ = exc
        return ended

    def _do_step(self, time_s: float, step_s: float) -> None:
        """FMI 3.0 co-simulation: one fmi3DoStep through fmpy."""
        end_s = time_s + step_s
        try:
            _event, terminate, _early, last_s = self.fmu.doStep(time_s, step_s)
        except Exception as exc:
            if getattr(exc, "status", None) != DISCARD:
                raise
            raise self._discarded(time_s) from exc
        if terminate:
            ended = self._ended(last_s, "it asked to terminate the simulation (fmi3DoStep)")
            if last_s < end_s - 1e-9:
                raise ended
            self._ending = str(ended)  # the step itself completed: its outputs are reported first

    def _discarded(self, time_s: float) -> FmuEnded:
        """A doStep that returned discard: the FMU stops (FMI 2.0 4.2.3; fmi2Terminated says whether it asked to)."""
        name = "fmi3DoStep" if self.fmi3 else "fmi2DoStep"
        if self.fmi3:
            return self._ended(time_s, f"{name} from t = {time_s:g} s returned discard")
        try:
            terminated = self.fmu.getBooleanStatus(FMI2_TERMINATED)
            last_s = self.fmu.getRealStatus(FMI2_LAST_SUCCESSFUL_TIME)
        except Exception:  # an FMU need not answer these
            terminated, last_s = False, time_s
        why = "it asked to terminate the simulation" if terminated else "it could not complete the step"
        return self._ended(last_s, f"{why} ({name} from t = {time_s:g} s returned discard)")

    # -- model exchange ---------------------------------------------------------------------------------
    def _settle(self, time_s: float) -> None:
        """Finish event mode (the event iteration) and enter continuous-time mode; the solver is
        made on the first call and restarted after any later event."""
        self._event_update(time_s)
        self.fmu.enterContinuousTimeMode()
        self._mode = "continuous"
        if self.solver is None:
            self.solver = self._make_solver(time_s)
            self._restart = False
        else:
            self._restart = True

    def _event_update(self, time_s: float) -> None:
        update = self.fmu.updateDiscreteStates if self.fmi3 else self.fmu.newDiscreteStates
        self.next_event_s = None
        for _ in range(100):
            needed, terminate, _nominals, _values, defined, next_time = update()
            if terminate:
                raise self._ended(time_s, "it asked to terminate the simulation (in its event iteration)")
            self.next_event_s = next_time if defined else None
            if not needed:
                return
        raise FmuError(f"{self.label} at t = {time_s:g} s: event iteration did not converge in 100 rounds")

    def _make_solver(self, time_s: float):
        from fmpy.simulation import ForwardEuler  # fmpy: loaded only when an FMU runs

        md = self.iface.description
        nx, nz = md.numberOfContinuousStates, md.numberOfEventIndicators
        fmu = self.fmu
        get_dx = fmu.getContinuousStateDerivatives if self.fmi3 else fmu.getDerivatives
        if self._fixed_step:
            return ForwardEuler(nx=nx, nz=nz, get_x=fmu.getContinuousStates, set_x=fmu.setContinuousStates,
                                get_dx=get_dx, get_z=fmu.getEventIndicators, input=_NoInput())
        from fmpy.sundials import CVodeSolver  # fmpy: loaded only when an FMU runs

        # CVode calls these from C: an exception there would be printed and lost, so it is kept
        # and raised after the solver returns (a failing or discarding FMU never goes unnoticed)
        guard = self._guarded
        return CVodeSolver(nx=nx, nz=nz, get_x=guard(fmu.getContinuousStates), set_x=guard(fmu.setContinuousStates),
                           get_dx=guard(get_dx), get_z=guard(fmu.getEventIndicators),
                           get_nominals=guard(fmu.getNominalsOfContinuousStates), set_time=guard(fmu.setTime),
                           input=_NoInput(), startTime=time_s, maxStep=self.solver_step_s,
                           relativeTolerance=self.rtol, maxNumSteps=MAX_CVODE_STEPS)

    @property
    def _fixed_step(self) -> bool:
        return self.solver_name == "Euler" or self.iface.description.numberOfContinuousStates == 0

    def _guarded(self, fn):
        def call(*args):
            try:
                return fn(*args)
            except Exception as exc:  # noqa: BLE001 — re-raised by _solver_step
                if self._callback_error is None:
                    self._callback_error = exc
                return None
        return call

    def _solver_step(self, time_s: float, target_s: float) -> tuple[bool, float]:
        state_event, _roots, reached_s = self.solver.step(time_s, target_s)
        if self._callback_error is not None:
            exc, self._callback_error = self._callback_error, None
            if getattr(exc, "status", None) == DISCARD:
                raise self._ended(time_s, f"it discarded an evaluation between t = {time_s:g} and {target_s:g} s "
                                          f"({exc})") from exc
            raise exc
        return state_event, reached_s

    def _me_step(self, end_s: float) -> None:
        time_s = self.time_s
        if self._mode == "event":
            self._settle(time_s)
        self.fmu.setTime(time_s)
        if self._restart:  # an input jumped since the last step: the multistep history no longer holds
            self.solver.reset(time_s)
            self.n_restarts += 1
            self._restart = False
        self._integrate(time_s, end_s)

    def _integrate(self, time_s: float, end_s: float) -> None:
        fixed = self._fixed_step
        while time_s < end_s - 1e-9:
            target = min(end_s, time_s + self.solver_step_s) if fixed else end_s
            if self.next_event_s is not None and time_s < self.next_event_s < target:
                target = self.next_event_s
            state_event, time_s = self._solver_step(time_s, target)
            self.fmu.setTime(time_s)
            step_event, terminate = self.fmu.completedIntegratorStep()
            if terminate:
                self._end_at(time_s, end_s, "it asked to terminate the simulation (completedIntegratorStep)")
                return
            time_event = self.next_event_s is not None and abs(time_s - self.next_event_s) < 1e-9
            if state_event or step_event or time_event:
                self.fmu.enterEventMode()
                self._mode = "event"
                try:
                    self._settle(time_s)
                except FmuEnded as ended:
                    self._mode = "ended"  # stays in event mode: outputs are read as they are
                    self._end_at(time_s, end_s, str(ended), whole=True)
                    return
                self.solver.reset(time_s)
                self.n_restarts += 1
                self._restart = False

    def _end_at(self, time_s: float, end_s: float, why: str, whole: bool = False) -> None:
        """The FMU ended the simulation at ``time_s``: at the end of the step its outputs are still
        reported (the next step raises); inside it, the step raises now."""
        ended = FmuEnded(why) if whole else self._ended(time_s, why)
        if time_s < end_s - 1e-9:
            raise ended
        self._ending = str(ended)


class _NoInput:
    """fmpy's solvers call ``input.apply``; inputs are held over a mosaik step, so it does nothing."""

    def apply(self, *args, **kwargs) -> None:
        return None


def _fmi2_callbacks(logger):
    from fmpy import calloc, free  # fmpy: loaded only when an FMU runs
    from fmpy.fmi2 import (  # fmpy: loaded only when an FMU runs
        fmi2CallbackAllocateMemoryTYPE,
        fmi2CallbackFreeMemoryTYPE,
        fmi2CallbackFunctions,
        fmi2CallbackLoggerTYPE,
    )

    callbacks = fmi2CallbackFunctions()
    callbacks.logger = fmi2CallbackLoggerTYPE(lambda env, name, status, category, message: logger(status, category, message))
    callbacks.allocateMemory = fmi2CallbackAllocateMemoryTYPE(calloc)
    callbacks.freeMemory = fmi2CallbackFreeMemoryTYPE(free)
    try:  # fmpy's native proxy formats printf-style messages before they reach Python
        from fmpy.logging import addLoggerProxy  # fmpy: loaded only when an FMU runs

        addLoggerProxy(byref(callbacks))
    except Exception:
        pass
    return callbacks


class _SetPlan(NamedTuple):
    """How :meth:`FmuInstance.set_inputs` sets one set of input names (scalar reals of a
    co-simulation FMU) in one call. Unpacked as a tuple on the hot path."""

    units: tuple  # (index, port, offset, scale) of each input, in the order of the names
    vr: Any  # their value references (c_uint32 array)
    buf: Any  # their values in FMU units (c_double array)
    n: c_size_t
    exchange: Any  # pointer to the C exchange's arguments for these inputs, or None (not built, not fit)


def _call_failed(function: str, status: int) -> Exception:
    """The exception fmpy raises for ``function`` returning ``status`` (FMICallException)."""
    from fmpy.fmi1 import FMICallException  # fmpy loads ctypes and lxml: imported where used

    return FMICallException(function=function, status=status)
