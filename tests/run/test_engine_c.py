"""The direct engine's bookkeeping in C (``cosim/run/_engine.c``, built by ``make build``) gives what its Python
forms give, to the object: the collapsed inputs of a step (:func:`cosim.run.direct.collapse_inputs`), the
recorder's row as its sources' dicts (:func:`cosim.run.direct.recorded_refs`) and a simulator's answer to a
request (:meth:`cosim.sdk.CosimSim._data_of`), over randomly wired pulls, caches, held inputs and requests of
every shape the engine makes (several sources summed, None values, outputs missing, -0.0, an entity asked for
all its outputs, some, or ones it lacks), and the same exceptions where a source raises."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pandas as pd
import pytest
from c_part_marks import needs_c_part

import cosim
from cosim import sdk
from cosim.run import direct

C = sdk.ENGINE_C
pytestmark = needs_c_part(C is not None, "cosim/run/_engine.so")

#: values an output takes: floats of both signs of zero, ints, bools, None (nothing to say), text, an object
VALUES = [0.0, -0.0, 1.5, -2.25, 1e8, 3, 0, True, False, None, "on", (1, 2)]


class _Src:
    """A source simulator as the engine reads it: a cache read by ``newest``/``newest_t`` or ``output_at``."""

    def __init__(self, sid, cache, newest):
        self.sid, self.cache = sid, cache
        self.newest_t, self.newest = (max(cache), cache[max(cache)]) if newest and cache else (None, None)

    output_at = direct._Sim.output_at


class _Failing(_Src):
    def output_at(self, limit):
        raise ValueError("cache broken")


def _outcome(form, *args):
    """What ``form(*args)`` gives, or the type and text of what it raises (summing "on" and 1.5 is a TypeError
    either way)."""
    try:
        return form(*args)
    except Exception as error:  # noqa: BLE001
        return ("raised", type(error).__name__, str(error))


def _ordered(value):
    """Keys, order, types and signs of zero: dicts compare equal in any order and 0.0 == -0.0."""
    if isinstance(value, dict):
        return [(k, _ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return (type(value).__name__, repr(value))


def _random_wiring(rng: random.Random):
    """Pulls of 1-3 sources into 1-3 destination entities, each source's cache of 1-3 steps with entities whose
    outputs may lack an attribute, and the held inputs of a Session (connected ones and others)."""
    attrs, dsts = ["p_mw", "q_mvar", "n", "flag"], ["d", "e", "f"]
    pulls, sources = [], []
    for s in range(rng.randint(1, 3)):
        cache = {}
        for when in sorted(rng.sample(range(-1, 4), rng.randint(0, 3))):
            cache[when] = {eid: {a: rng.choice(VALUES) for a in attrs if rng.random() > 0.05}
                           for eid in ("x", "y", "z") if rng.random() > 0.05}
        src = _Src(f"s{s}", cache, rng.random() < 0.5)
        sources.append(src)
        for kind in rng.sample(["direct", "time_shifted"], rng.randint(1, 2)):
            pull = direct._Pull(src, kind, direct.SHIFT[kind])
            pull.entries = [(se, sa, de, da, f"{src.sid}.{se}") for se, sa, de, da in
                            ((rng.choice("xyz"), rng.choice(attrs), rng.choice(dsts), rng.choice(attrs))
                             for _ in range(rng.randint(1, 6)))]
            pulls.append(pull)
    held = {}
    for _ in range(rng.choice([0, 0, 1, 3])):
        held[rng.choice(dsts + ["g"]), rng.choice(attrs + ["extra_mw"])] = rng.choice(VALUES)
    return pulls, sources, held


def test_collapsed_inputs_equal_the_python_form_over_random_wirings():
    rng = random.Random(20261207)
    outcomes = {"inputs": 0, "None": 0, "held": 0, "summed": 0}
    for case in range(1500):
        pulls, _, held = _random_wiring(rng)
        sim = direct._Sim("dst", object(), collapsible=True, held=held)
        sim.pulls = pulls
        reads, collapse = direct._input_plan(sim)
        for t in (0, 2, 5):
            expected = _outcome(direct.collapse_inputs, reads, collapse, held, t)
            got = _outcome(C.collapsed_inputs, reads, collapse, held, t)
            assert _ordered(got) == _ordered(expected), (case, t)
            if isinstance(expected, tuple):
                outcomes["raised"] = outcomes.get("raised", 0) + 1
                continue
            if expected is None:
                outcomes["None"] += 1
                continue
            outcomes["inputs"] += 1
            outcomes["held"] += bool(held)
            outcomes["summed"] += any(where.__class__ is not int for _, wheres, _ in collapse for _, where in wheres)
            for eid, values in expected.items():  # the very objects, not copies
                assert all(got[eid][a] is v for a, v in values.items() if not isinstance(v, (int, float)))
    assert min(outcomes.values()) >= 100, outcomes  # every kind of case met often


def test_recorded_refs_are_the_sources_own_dicts():
    rng = random.Random(7)
    for case in range(800):
        _, sources, _ = _random_wiring(rng)
        plan = [(src, rng.choice([0, 1]), [rng.choice("xyzw") for _ in range(rng.randint(0, 4))]) for src in sources]
        for t in (0, 1, 4):
            expected, got = direct.recorded_refs(plan, t), C.recorded_refs(plan, t)
            assert len(got) == len(expected), case
            for mine, theirs in zip(got, expected):
                assert mine is theirs or (mine == theirs == {}), case  # a missing entity: an empty dict
            empties = {id(d) for d in got if d == {} and not any(d is s for src in sources for s in src.cache.values())}
            assert len(empties) <= 1  # one empty dict per row, as the Python form shares one


class _Sim(sdk.CosimSim):
    """A CosimSim whose outputs are set by the test (``out`` a plain attribute or, as the Grid's, a property)."""

    def __init__(self, out):
        self._own, self._getters = out, {}

    @property
    def out(self):
        return self._own


def test_data_of_equals_the_python_form_over_random_requests():
    rng = random.Random(11)
    attrs = ["p_mw", "q_mvar", "vm_pu", "n", "flag"]
    kinds = {"all": 0, "some": 0, "missing": 0}
    for case in range(1500):
        out = {eid: {a: rng.choice(VALUES) for a in rng.sample(attrs, rng.randint(0, 5))} for eid in ("a", "b", "c")}
        sim = _Sim(out)
        request = {}
        for eid in rng.sample(list(out), rng.randint(1, 3)):
            choice = rng.random()
            if choice < 0.3:  # every output it has, in another order
                request[eid] = rng.sample(list(out[eid]), len(out[eid]))
                kinds["all"] += 1
            elif choice < 0.7:  # some it has, maybe twice
                request[eid] = [rng.choice(list(out[eid]))] * rng.randint(1, 2) if out[eid] else []
                kinds["some"] += 1
            else:  # one or more it lacks
                request[eid] = rng.sample(attrs, rng.randint(1, 3)) + ["absent_mw"]
                kinds["missing"] += 1
        plan = sim._data_plan(request)
        expected, got = sdk.CosimSim._data_of(sim, plan), C.data_of(sim, plan)
        assert _ordered(got) == _ordered(expected), case
        for eid in got:
            assert got[eid] is not out[eid]  # a copy: the adapter's dict changes later
    assert min(kinds.values()) >= 300, kinds


def test_a_source_that_raises_raises_through_either_form():
    broken = _Failing("s", {0: {"x": {"p_mw": 1.0}}}, newest=False)
    sim = direct._Sim("dst", object(), collapsible=True)
    sim.pulls = [direct._Pull(broken, "direct", 0)]
    sim.pulls[0].entries = [("x", "p_mw", "d", "p_mw", "s.x")]
    reads, collapse = direct._input_plan(sim)
    for form in (direct.collapse_inputs, C.collapsed_inputs):
        with pytest.raises(ValueError, match="cache broken"):
            form(reads, collapse, {}, 0)
    for form in (direct.recorded_refs, C.recorded_refs):
        with pytest.raises(ValueError, match="cache broken"):
            form([(broken, 0, ["x"])], 0)
    for form in (sdk.CosimSim._data_of, C.data_of):
        with pytest.raises(KeyError):  # an entity the simulator does not have: the request's own mistake
            form(_Sim({}), _Sim({})._data_plan({"nobody": ["p_mw"]}))


def test_the_engine_steps_through_the_c_forms():
    """The direct engine and CosimSim's readers call the C forms when built (the tests above are theirs)."""
    assert direct._collapse is C.collapsed_inputs and direct._recorded_refs is C.recorded_refs
    assert sdk._data_of is C.data_of


# -- the stepping loop ------------------------------------------------------------------------------------------
def _session_series(path, overrides, tmp_path, name, python_loop, monkeypatch, held=()):
    """The time series of a Session stepped to its end by the C loop or the Python one, with inputs held from
    outside at given times (``(t_s, entity, attr, value)``)."""
    with monkeypatch.context() as patch:
        if python_loop:
            patch.setattr(direct, "_step_due", None)
        with cosim.Session(path, overrides={"scenario.ahead": "off", **overrides}, out_dir=tmp_path / name) as s:
            for t_s, entity, attr, value in held:
                s.run_until(t_s)
                s.set(entity, attr, value)
            while not s.done:
                s.step()
    return s.result.folder.timeseries()


CASES = {  # every path of the loop: inputs collapsed, a reader's first step, held inputs, 0.1 s ticks, the recorder
    "default scenario, 6 h, a battery held and released": (
        "scenarios/default.toml", {"scenario.duration_s": 21_600},
        [(3_600, "bess", "p_set_mw", 0.5), (7_200, "bess", "p_set_mw", None)]),
    "rl_site, 1 day of 5 min steps, its agent's inputs held": (
        "scenarios/rl_site.toml", {}, [(3_600, "campus", "p_cap_w", 450.0), (36_000, "bess", "p_set_mw", -0.4)]),
    "a datacenter at 0.1 s ticks": ("tests/scenarios/datacenter_short.toml", {"scenario.tick_s": 0.1}, []),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_c_loop_steps_as_the_python_loop(case, tmp_path, monkeypatch):
    path, overrides, held = CASES[case]
    c_series = _session_series(path, overrides, tmp_path, "c", False, monkeypatch, held)
    python_series = _session_series(path, overrides, tmp_path, "python", True, monkeypatch, held)
    assert len(c_series) > 100 and len(c_series.columns) > 5
    pd.testing.assert_frame_equal(c_series, python_series, check_exact=True)


class _Misbehaving(sdk.CosimSim):
    """A simulator whose step returns what ``NEXT`` says, or whose output says an earlier time."""

    META = {"api_version": "3.0", "type": "time-based",
            "models": {"Odd": sdk.model_meta(inputs=[], outputs=["p_mw"], role="load")}}
    NEXT = None  # (t, step_ticks) -> the next time returned

    def create_entity(self, eid, model, params):
        self.out[eid] = {"p_mw": 0.0}

    def step_entities(self, time_s, inputs):
        self.out["odd"] = {"p_mw": 1.0}

    def get_data(self, outputs):
        data = super().get_data(outputs)
        return {**data, "time": self.time_ticks - 1} if self.NEXT == "early output" else data


@pytest.mark.parametrize("misstep", ["None", "float", "the same time", "early output"])
def test_a_bad_next_time_or_output_time_fails_alike_in_either_loop(misstep, tmp_path, monkeypatch, write_scenario):
    """mosaik's checks of what a step returns and of the output's time: the same error from the C loop and the
    Python one (the C loop calls the Python checks)."""
    from cosim import registry

    def step_collapsed(self, time, inputs):
        nxt = sdk.CosimSim.step_collapsed(self, time, inputs)
        return {"None": None, "float": float(nxt), "the same time": int(time)}.get(misstep, nxt)

    odd = type("OddSim", (_Misbehaving,), {"NEXT": misstep})
    if misstep != "early output":
        odd.step_collapsed = step_collapsed
    monkeypatch.setattr(sys.modules[__name__], "OddSim", odd, raising=False)
    registry.register("test_odd", f"{__name__}:OddSim")
    try:
        path = write_scenario(ODD)
        errors = []
        for python_loop in (False, True):
            with monkeypatch.context() as patch:
                if python_loop:
                    patch.setattr(direct, "_step_due", None)
                with cosim.Session(path, out_dir=tmp_path / str(python_loop)) as s:
                    with pytest.raises(Exception) as raised:
                        s.run_until(600)
                errors.append((type(raised.value), str(raised.value)))
    finally:
        registry.unregister("test_odd")
    assert errors[0] == errors[1]
    assert {"None": "must always return", "float": "must be of type int", "the same time": "must be later",
            "early output": "is not >= time"}[misstep] in errors[0][1]


ODD = """
[scenario]
name = "odd"
start = 2024-07-15T00:00:00Z
duration_s = 600
step_s = 60

[sims]
odd = { adapter = "test_odd" }

[entities]
odd = { sim = "odd", model = "Odd" }
"""


def test_a_library_built_for_another_python_is_not_taken(tmp_path):
    """Extension code built for another major.minor version of Python is refused with a warning naming the file
    and the fix (its objects may be laid out otherwise): the Python forms run."""
    import hashlib
    import subprocess
    import sysconfig

    source = Path(sdk.__file__).with_name("run") / "_engine.c"
    copy, lib = tmp_path / "_engine.c", tmp_path / "_engine.so"
    copy.write_bytes(source.read_bytes())
    digest = hashlib.sha256(copy.read_bytes()).hexdigest()
    other = (sys.hexversion & ~0xFF0000) | ((((sys.hexversion >> 16) & 0xFF) + 1) << 16)  # the next minor version
    subprocess.run(["gcc", "-O0", "-fPIC", "-shared", "-std=c11", f'-DCOSIM_SOURCE_SHA256="{digest}"',
                    f"-DCOSIM_BUILT_FOR_HEXVERSION={other:#x}UL", f"-I{sysconfig.get_paths()['include']}",
                    "-o", str(lib), str(copy)], check=True, capture_output=True)
    with pytest.warns(sdk.CPartWarning, match=r"was built for Python 3\.\d+, not this 3\.\d+.*make build"):
        assert sdk._engine_c(lib) is None
    assert sdk.c_parts()[str(lib.resolve())]["status"] == "not loadable"
    same = tmp_path / "same.so"  # the same source built for this Python is taken
    subprocess.run(["gcc", "-O0", "-fPIC", "-shared", "-std=c11", f'-DCOSIM_SOURCE_SHA256="{digest}"',
                    f"-I{sysconfig.get_paths()['include']}", "-o", str(same), str(copy)], check=True)
    (tmp_path / "same.c").write_bytes(copy.read_bytes())
    assert sdk._engine_c(same) is not None


def test_a_library_whose_module_fails_to_start_is_not_taken_and_says_so(tmp_path):
    """A C part whose module cannot be made (its init raises) is refused with a warning naming the file, the
    error and the fix, and recorded "not loadable": the Python forms run. (A stand-in library with the same
    entry points, its init raising.)"""
    import hashlib
    import subprocess
    import sysconfig

    source = tmp_path / "_engine.c"
    source.write_text(
        "#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n"
        "const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }\n"
        "unsigned long cosim_python_hexversion(void) { return PY_VERSION_HEX; }\n"
        "PyObject *cosim_engine_module(void) {\n"
        "    PyErr_SetString(PyExc_RuntimeError, \"the builtin sum not found\");\n    return NULL;\n}\n")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    lib = tmp_path / "_engine.so"
    subprocess.run(["gcc", "-O0", "-fPIC", "-shared", "-std=c11", f'-DCOSIM_SOURCE_SHA256="{digest}"',
                    f"-I{sysconfig.get_paths()['include']}", "-o", str(lib), str(source)], check=True, capture_output=True)
    with pytest.warns(sdk.CPartWarning, match=r"_engine\.so could not make its module \(RuntimeError: the builtin "
                                              r"sum not found\).*make build"):
        assert sdk._engine_c(lib) is None
    assert sdk.c_parts()[str(lib.resolve())]["status"] == "not loadable"


def test_a_plan_of_another_shape_is_refused_not_read_past():
    """The plans are the engine's own; one of another shape (a bug there) raises a TypeError or IndexError
    instead of reading memory past its items."""
    src = _Src("s", {0: {"x": {"p_mw": 1.0}}}, newest=True)
    bad_calls = [
        lambda: C.collapsed_inputs([(src, 0, [("x",)])], [], {}, 0),  # a group of one item
        lambda: C.collapsed_inputs([(src, 0, [("x", lambda d: d["p_mw"], True)])], [("d", [("p_mw",)], True)], {}, 0),
        lambda: C.collapsed_inputs([(src, 0, [("x", lambda d: d["p_mw"], True)])], [("d", [("p_mw", 5)], True)], {}, 0),
        lambda: C.collapsed_inputs([(src, 0, [("x", lambda d: d["p_mw"], True)])], [("d", [("p_mw", (0, 9))], False)],
                                   {}, 0),
        lambda: C.recorded_refs([(src, 0)], 0),
        lambda: C.data_of(_Sim({"x": {"p_mw": 1.0}}), [("x", ("p_mw",))]),
        lambda: C.data_of(_Sim({"x": {"p_mw": 1.0}}), [("x", ["p_mw"], lambda d: (d["p_mw"],), ("p_mw",))]),  # attrs
    ]
    for k, call in enumerate(bad_calls):
        with pytest.raises((TypeError, IndexError)):
            call()


def test_a_step_set_on_the_simulator_object_itself_is_called_by_either_loop(tmp_path, monkeypatch):
    """An adapter object whose ``step_collapsed`` or ``seconds`` is replaced on the object (a user's probe) is
    stepped through it by the C loop too, as Python's attribute lookup finds it: the same run either way."""
    calls = {}

    def series(python_loop):
        calls[python_loop] = 0
        with monkeypatch.context() as patch:
            if python_loop:
                patch.setattr(direct, "_step_due", None)
            with cosim.Session("tests/scenarios/golden_short.toml", overrides={"scenario.ahead": "off"},
                               out_dir=tmp_path / str(python_loop)) as s:
                sim = next(x for x in s.engine.sims if isinstance(x.obj, sdk.CosimSim))
                plain = sim.obj.step_collapsed

                def probed(time, inputs):
                    calls[python_loop] += 1
                    return plain(time, inputs)

                sim.obj.step_collapsed = probed
                while not s.done:
                    s.step()
        return s.result.folder.timeseries()

    pd.testing.assert_frame_equal(series(False), series(True), check_exact=True)
    assert calls[False] == calls[True] > 10
