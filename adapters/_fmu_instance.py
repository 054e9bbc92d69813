"""One running FMU instance (fmpy): set inputs, advance by doStep or the model-exchange
solver, read outputs; every failure becomes an FmuError naming FMU, variable and time."""

from __future__ import annotations

import time as _time
from ctypes import byref, c_double, c_uint32
from typing import Any

from cosim.adapters._fmu_describe import (
    LOG,
    FmuError,
    Interface,
    Port,
)


# -- running one instance ------------------------------------------------------------------------------
class FmuInstance:
    """One running FMU instance (no mosaik): set inputs, step, read outputs, in scenario units.

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
        self.fmu_time_s = 0.0  # wall time spent inside FMU calls [s]
        self.n_steps = 0
        self.time_s = start_s
        self.fmi3 = iface.description.fmiVersion.startswith("3")
        self.solver_name = solver
        self.solver_step_s = solver_step_s or step_s / 10
        self.rtol = rtol
        self.log = log
        bad = sorted(set(start_values) - set(iface.settable))
        if bad:
            raise FmuError(f"{self.label}: no input or parameter {', '.join(bad)}; settable: {', '.join(iface.settable)}")
        outputs = [iface.ports[a] for a in iface.outputs]
        fast = "Float64" if self.fmi3 else "Real"  # read with one preallocated call per step
        self._out_real = [p for p in outputs if p.accessor == fast]
        self._out_other = [p for p in outputs if p.accessor != fast]
        self._out_vr = (c_uint32 * len(self._out_real))(*[p.vr for p in self._out_real])
        self._out_buf = (c_double * len(self._out_real))()
        self._call("instantiate", lambda: self._instantiate(unzipdir, log))
        self._initialize(start_values, start_s)

    # -- errors -----------------------------------------------------------------------------------
    def _logger(self, status: int, category, message) -> None:
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
        self.messages.append(text)
        del self.messages[:-20]  # the last few explain a failure; older ones are history
        if self.log:
            LOG.info("%s: %s", self.label, text)

    def _call(self, what: str, fn, variable: str | None = None):
        start = _time.perf_counter()
        try:
            return fn()
        except FmuError:
            raise
        except Exception as exc:  # fmpy raises FMICallException, OSError, ctypes errors
            said = f"; the FMU said: {' | '.join(self.messages[-3:])}" if self.messages else ""
            var = f", variable {variable!r}" if variable else ""
            raise FmuError(f"{self.label} at t = {self.time_s:g} s{var}: {what} failed: {exc}{said}") from exc
        finally:
            self.fmu_time_s += _time.perf_counter() - start

    # -- lifecycle ----------------------------------------------------------------------------------
    def _instantiate(self, unzipdir: str, log: bool) -> None:
        from fmpy import fmi2, fmi3  # fmpy: loaded only when an FMU runs

        md = self.iface.description
        part = md.coSimulation if self.iface.kind == "cs" else md.modelExchange
        common = dict(unzipDirectory=unzipdir, modelIdentifier=part.modelIdentifier, instanceName=self.name)
        if self.fmi3:
            cls = fmi3.FMU3Slave if self.iface.kind == "cs" else fmi3.FMU3Model
            self.fmu = cls(guid=md.instantiationToken, **common)
            self._log_cb = lambda env, status, category, message: self._logger(status, category, message)
            self.fmu.instantiate(loggingOn=log, logMessage=self._log_cb)
            return
        cls = fmi2.FMU2Slave if self.iface.kind == "cs" else fmi2.FMU2Model
        self.fmu = cls(guid=md.guid, **common)
        self._callbacks = _fmi2_callbacks(self._logger)
        self.fmu.instantiate(callbacks=self._callbacks, loggingOn=log)

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
        if self.iface.kind == "me":
            self._start_continuous_time(start_s)

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
    def _set(self, values: list[tuple[Port, Any]], what: str) -> None:
        for port, value in values:
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise FmuError(f"{self.label} at t = {self.time_s:g} s, variable {port.var!r} "
                               f"({port.attr} = {value!r}): {what}: not a number") from None
            if number != number or number in (float("inf"), float("-inf")):
                raise FmuError(f"{self.label} at t = {self.time_s:g} s, variable {port.var!r} "
                               f"({port.attr} = {value!r}): {what}: not finite")
            si = port.to_fmu(number)
            self._call(f"{what} ({port.attr} = {number:g})", lambda: self._set_one(port, si), port.var)

    def _set_one(self, port: Port, si: float) -> None:
        value = si if port.kind == "real" else int(round(si)) if port.kind == "int" else bool(si)
        getattr(self.fmu, "set" + port.accessor)([port.vr], [value])

    def set_inputs(self, values: dict[str, Any]) -> None:
        """Set inputs and tunable parameters. [scenario units]"""
        ports = self.iface.ports
        self._set([(ports[a], v) for a, v in values.items() if a in ports], "setting an input")

    def outputs(self) -> dict[str, Any]:
        """Every output. [scenario units]"""
        out: dict[str, Any] = {}
        if self._out_real:
            self._call("getting outputs", self._read_reals)
            for port, value in zip(self._out_real, self._out_buf):
                out[port.attr] = port.from_fmu(value)
        for port in self._out_other:
            getter = getattr(self.fmu, "get" + port.accessor)
            out[port.attr] = port.from_fmu(self._call("getting outputs", lambda: getter([port.vr])[0], port.var))
        return out

    def _read_reals(self) -> None:
        n = len(self._out_real)
        if self.fmi3:
            self.fmu.fmi3GetFloat64(self.fmu.component, self._out_vr, n, self._out_buf, n)
        else:
            self.fmu.fmi2GetReal(self.fmu.component, self._out_vr, n, self._out_buf)

    # -- time -----------------------------------------------------------------------------------------
    def step(self, time_s: float, step_s: float) -> None:
        """Advance from ``time_s`` over ``step_s`` with the inputs as set. [s]"""
        self.time_s = time_s
        if self.iface.kind == "cs":
            self._call("doStep", lambda: self._do_step(time_s, step_s))
        else:
            self._call("model-exchange step", lambda: self._integrate(time_s + step_s))
        self.time_s = time_s + step_s
        self.n_steps += 1

    def _do_step(self, time_s: float, step_s: float) -> None:
        if self.fmi3:
            event, terminate, early, last = self.fmu.doStep(time_s, step_s)
            if terminate:
                raise FmuError(f"{self.label} at t = {time_s:g} s: the FMU asked to terminate the simulation")
        else:
            self.fmu.doStep(currentCommunicationPoint=time_s, communicationStepSize=step_s)

    def _start_continuous_time(self, time_s: float) -> None:
        from fmpy.simulation import ForwardEuler  # fmpy: loaded only when an FMU runs

        self._event_update()
        self._call("EnterContinuousTimeMode", self.fmu.enterContinuousTimeMode)
        md = self.iface.description
        nx, nz = md.numberOfContinuousStates, md.numberOfEventIndicators
        args = dict(nx=nx, nz=nz, get_x=self.fmu.getContinuousStates, set_x=self.fmu.setContinuousStates,
                    get_dx=self.fmu.getContinuousStateDerivatives if self.fmi3 else self.fmu.getDerivatives,
                    get_z=self.fmu.getEventIndicators, input=_NoInput())
        if self.solver_name == "Euler" or nx == 0:
            self.solver = ForwardEuler(**args)
        else:
            from fmpy.sundials import CVodeSolver  # fmpy: loaded only when an FMU runs

            self.solver = CVodeSolver(get_nominals=self.fmu.getNominalsOfContinuousStates, set_time=self.fmu.setTime,
                                      startTime=time_s, maxStep=self.solver_step_s, relativeTolerance=self.rtol, **args)

    def _event_update(self) -> None:
        update = self.fmu.updateDiscreteStates if self.fmi3 else self.fmu.newDiscreteStates
        self.next_event_s = None
        for _ in range(100):
            needed, terminate, _nominals, _values, defined, next_time = update()
            if terminate:
                raise FmuError(f"{self.label} at t = {self.time_s:g} s: the FMU asked to terminate the simulation")
            self.next_event_s = next_time if defined else None
            if not needed:
                return
        raise FmuError(f"{self.label} at t = {self.time_s:g} s: event iteration did not converge in 100 rounds")

    def _integrate(self, end_s: float) -> None:
        fixed = self.solver_name == "Euler" or self.iface.description.numberOfContinuousStates == 0
        time_s = self.time_s
        self.fmu.setTime(time_s)
        if not fixed:  # inputs may have jumped since the last step: restart the multistep history
            self.solver.reset(time_s)
        while time_s < end_s - 1e-9:
            target = min(end_s, time_s + self.solver_step_s) if fixed else end_s
            if self.next_event_s is not None and time_s < self.next_event_s < target:
                target = self.next_event_s
            state_event, _roots, time_s = self.solver.step(time_s, target)
            self.fmu.setTime(time_s)
            completed = self.fmu.completedIntegratorStep()
            step_event = completed[0]
            time_event = self.next_event_s is not None and abs(time_s - self.next_event_s) < 1e-9
            if state_event or step_event or time_event:
                self.fmu.enterEventMode()
                self._event_update()
                self.fmu.enterContinuousTimeMode()
                self.solver.reset(time_s)


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

