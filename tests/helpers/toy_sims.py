"""Small adapters for testing the core without physics: a ramp source, a sink, a faulty sim."""

from __future__ import annotations

from cosim.sdk import CosimSim, EndRun, Params, model_meta


class RampParams(Params):
    p0_mw: float = 0.0
    slope_mw_h: float = 1.0


class RampSim(CosimSim):
    """``p_mw = p0_mw + slope_mw_h * t_h``; also echoes a delayed ``p_cap_mw`` setpoint."""

    META = {"api_version": "3.0", "type": "time-based",
            "models": {"Ramp": model_meta(inputs=["p_cap_mw"], outputs=["p_mw", "p_cap_mw"], params=RampParams, role="load")}}
    ModelParams = {"Ramp": RampParams}

    def create_entity(self, eid, model, params):
        self.out[eid] = {"p_mw": params.p0_mw, "p_cap_mw": None}
        self._params = getattr(self, "_params", {}) | {eid: params}

    def built_from(self):
        """A deep copy after set-up starts anew (its state is its params): the look-ahead blocks
        step copies of it (cosim.run.direct._Blocks)."""
        return frozenset() if type(self) is RampSim else None

    def step_entities(self, time_s, inputs):
        for eid, params in self._params.items():
            p = params.p0_mw + params.slope_mw_h * time_s / 3600.0
            cap = inputs.get(eid, {}).get("p_cap_mw")
            self.out[eid] = {"p_mw": min(p, cap) if cap is not None else p, "p_cap_mw": cap}


class SinkSim(CosimSim):
    """Sums its ``p_mw`` inputs and offers a cap ``p_cap_mw = 0.9 * p_sum_mw`` back."""

    META = {"api_version": "3.0", "type": "time-based",
            "models": {"Sink": model_meta(inputs=["p_mw"], outputs=["p_sum_mw", "p_cap_mw", "t_sink_c"], role="other")}}

    def create_entity(self, eid, model, params):
        self.out[eid] = {"p_sum_mw": 0.0, "p_cap_mw": 0.0}

    def built_from(self):
        return frozenset() if type(self) is SinkSim else None

    def step_entities(self, time_s, inputs):
        for eid in self.out:
            total = inputs.get(eid, {}).get("p_mw", 0.0)
            self.out[eid] = {"p_sum_mw": total, "p_cap_mw": 0.9 * total, "t_sink_c": 20.0 + total}


class FaultyParams(Params):
    fail_at_s: int = 600


class FaultySim(CosimSim):
    """Raises at ``fail_at_s``: to test that a failed run keeps what it recorded."""

    SimParams = FaultyParams
    META = {"api_version": "3.0", "type": "time-based", "models": {"Faulty": model_meta(outputs=["p_mw"], role="load")}}

    def create_entity(self, eid, model, params):
        self.out[eid] = {"p_mw": 1.0}

    def step_entities(self, time_s, inputs):
        if time_s >= self.params.fail_at_s:
            raise RuntimeError(f"injected failure at t = {time_s} s")


class NoiseParams(Params):
    sigma_mw: float = 1.0


class NoiseSim(CosimSim):
    """``p_mw`` drawn from the entity's own seeded generator: fails any test of seeding that
    passes without the seed reaching the simulators."""

    META = {"api_version": "3.0", "type": "time-based",
            "models": {"Noise": model_meta(outputs=["p_mw"], params=NoiseParams, role="load")}}
    ModelParams = {"Noise": NoiseParams}

    def create_entity(self, eid, model, params):
        self.out[eid] = {"p_mw": None}
        self._gen = getattr(self, "_gen", {}) | {eid: (self.rng(eid), params.sigma_mw)}

    def step_entities(self, time_s, inputs):
        for eid, (rng, sigma) in self._gen.items():
            self.out[eid] = {"p_mw": float(rng.normal(0.0, sigma))}


class SlowStartSim(RampSim):
    """A ramp whose module takes seconds to import in a fresh process (COSIM_TEST_SLOW_START_S):
    for the start-timeout test."""


def _slow_import() -> None:
    """Sleep at import, only in a simulator process (``python -m cosim.run.remote ...``)."""
    import os
    import sys
    import time

    delay = float(os.environ.get("COSIM_TEST_SLOW_START_S", "0"))
    if delay and sys.argv and sys.argv[0].endswith("remote.py"):
        time.sleep(delay)


_slow_import()


class EndingParams(Params):
    end_at_s: int = 600


class EndingSim(CosimSim):
    """A ramp that ends the run on purpose (:class:`cosim.sdk.EndRun`) at ``end_at_s``, as an FMU
    that asks to terminate does."""

    META = {"api_version": "3.0", "type": "time-based", "models": {"Ending": model_meta(outputs=["p_mw"], role="load")}}
    SimParams = EndingParams

    def create_entity(self, eid, model, params):
        self.out[eid] = {"p_mw": 1.0}

    def step_entities(self, time_s, inputs):
        if time_s >= self.params.end_at_s:
            raise EndRun(f"toy {self.sid} reached its end at t = {time_s} s")


class WarnParams(Params):
    warn_at_s: int = 600


class WarningSim(RampSim):
    """A ramp that gives a ``UserWarning`` at ``warn_at_s``: a warning given in the worker
    process that steps it ahead (cosim.run.ahead) must reach the parent as it would in-process."""

    SimParams = WarnParams

    def step_entities(self, time_s, inputs):
        super().step_entities(time_s, inputs)
        if time_s == self.params.warn_at_s:
            import warnings

            warnings.warn(f"toy {self.sid} warns at t = {time_s} s", UserWarning)


class KillParams(Params):
    kill_at_s: int = 600
    #: the test's own process: never killed (the sim must be stepped in a worker process)
    parent_pid: int = 0


class KillSelfSim(RampSim):
    """A ramp whose process dies (SIGKILL) at ``kill_at_s``, as a simulator that crashes its
    process would; it refuses to do so in ``parent_pid`` (only a worker process may die)."""

    SimParams = KillParams

    def step_entities(self, time_s, inputs):
        import os
        import signal

        super().step_entities(time_s, inputs)
        if time_s >= self.params.kill_at_s:
            if os.getpid() == self.params.parent_pid:
                raise RuntimeError("toy_kill_self: not stepped in a worker process")
            os.kill(os.getpid(), signal.SIGKILL)


class FaultySinkParams(Params):
    fail_at_s: int = 600


class FaultySinkSim(SinkSim):
    """A sink (it takes inputs, so it is never stepped ahead) that raises at ``fail_at_s``."""

    SimParams = FaultySinkParams

    def step_entities(self, time_s, inputs):
        if time_s >= self.params.fail_at_s:
            raise RuntimeError(f"injected sink failure at t = {time_s} s")
        super().step_entities(time_s, inputs)


class StallParams(Params):
    stall_at_s: int = 600
    sleep_s: float = 3.0


class StallSim(RampSim):
    """A ramp whose step at ``stall_at_s`` takes ``sleep_s`` of wall time (a hung simulator)."""

    SimParams = StallParams

    def step_entities(self, time_s, inputs):
        import time

        super().step_entities(time_s, inputs)
        if time_s == self.params.stall_at_s:
            time.sleep(self.params.sleep_s)


class OddOutputParams(Params):
    odd_at_s: int = 600


class OddOutputSim(RampSim):
    """A ramp whose ``p_mw`` at ``odd_at_s`` is a value pickle cannot send (a generator)."""

    SimParams = OddOutputParams

    def step_entities(self, time_s, inputs):
        super().step_entities(time_s, inputs)
        if time_s == self.params.odd_at_s:
            for eid in self.out:
                self.out[eid]["p_mw"] = (x for x in ())


class AliasRampSim(RampSim):
    """A ramp whose own ``get_data`` hands out its entity dicts, changed in place at every step
    (a reader must see each step's value, also through the worker process of cosim.run.ahead)."""

    def step_entities(self, time_s, inputs):
        for eid, params in self._params.items():
            self.out[eid]["p_mw"] = params.p0_mw + params.slope_mw_h * time_s / 3600.0
            self.out[eid]["p_cap_mw"] = None

    def get_data(self, outputs):
        return {eid: self.out[eid] for eid in outputs}


class SlowParams(Params):
    step_wall_s: float = 0.005


class SlowRampSim(RampSim):
    """A ramp whose every step takes ``step_wall_s`` of wall time (a heavy head simulator)."""

    SimParams = SlowParams

    def step_entities(self, time_s, inputs):
        import time

        time.sleep(self.params.step_wall_s)
        super().step_entities(time_s, inputs)


class FinalizeFailSim(RampSim):
    """A ramp whose ``finalize`` raises (and warns first): both must reach the run from a worker process."""

    def finalize(self):
        import warnings

        warnings.warn(f"toy {self.sid} warns at finalize", UserWarning)
        raise RuntimeError(f"toy {self.sid} failed to finalize")


class KillAtFinalizeSim(KillSelfSim):
    """A ramp whose process dies (SIGKILL) in ``finalize``, never in ``parent_pid`` (the test's own)."""

    def step_entities(self, time_s, inputs):
        RampSim.step_entities(self, time_s, inputs)

    def finalize(self):
        import os
        import signal

        if os.getpid() == self.params.parent_pid:
            raise RuntimeError("toy_kill_at_finalize: not finalized in a worker process")
        os.kill(os.getpid(), signal.SIGKILL)


class InitFailSim(RampSim):
    """A ramp whose entities cannot be made: a failure while the run is being set up."""

    def create_entity(self, eid, model, params):
        raise RuntimeError(f"toy {self.sid}: injected failure while creating {eid}")


class FollowSim(CosimSim):
    """A load that draws what its ``p_mw`` input says (consumer sign)."""

    META = {"api_version": "3.0", "type": "time-based",
            "models": {"Follow": model_meta(inputs=["p_mw"], outputs=["p_mw", "p_it_mw"], role="load")}}

    def create_entity(self, eid, model, params):
        self.out[eid] = {"p_mw": 0.0, "p_it_mw": 0.0}

    def step_entities(self, time_s, inputs):
        for eid in self.out:
            p_mw = inputs.get(eid, {}).get("p_mw", 0.0)
            self.out[eid] = {"p_mw": p_mw, "p_it_mw": p_mw}


class HintParams(Params):
    fail_at_s: int = -1
    warn_at_s: int = -1


class HintSim(CosimSim):
    """``p2_mw = 2 * p_mw`` of its input, served from what the look-ahead hint announced for the
    step when it announced one with the step's own inputs (``HintSim.hints``: the length of
    every hint, in order; ``HintSim.served``: the steps served so)."""

    SimParams = HintParams
    META = {"api_version": "3.0", "type": "time-based",
            "models": {"Hint": model_meta(inputs=["p_mw"], outputs=["p2_mw"], role="other")}}
    hints: list[int] = []
    served: list[int] = []

    def create_entity(self, eid, model, params):
        self.out[eid] = {"p2_mw": None}
        self._ahead: dict[int, dict] = {}

    def look_ahead(self, steps):
        HintSim.hints.append(len(steps))
        self._ahead = {t: (inputs, {eid: 2.0 * v.get("p_mw", 0.0) for eid, v in inputs.items()}) for t, inputs in steps}

    def step_entities(self, time_s, inputs):
        if time_s == self.params.fail_at_s:
            raise RuntimeError(f"toy hint fails at t = {time_s} s")
        if time_s == self.params.warn_at_s:
            import warnings

            warnings.warn(f"toy hint warns at t = {time_s} s", UserWarning)
        announced_inputs, announced = self._ahead.pop(self.time_ticks, (None, {}))
        if announced_inputs != inputs:  # not the announced step: computed as usual
            announced = {}
        for eid in self.out:
            if eid in announced:
                HintSim.served.append(self.time_ticks)
            self.out[eid] = {"p2_mw": announced.get(eid, 2.0 * inputs.get(eid, {}).get("p_mw", 0.0))}
