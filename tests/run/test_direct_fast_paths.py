"""The direct engine's two shortcuts give what the long way gives, in every case of their kind.

* ``DirectEngine._collapsed_inputs`` (the inputs of a simulator whose step is CosimSim's, built
  collapsed) equals ``sum_inputs(DirectEngine._inputs(...))`` — values, key order and the
  fallback when an output is missing — over hand-made pulls with every shape a scenario can
  wire (several sources summed, a source connected twice, one source over two kinds of
  connection, None values, an entity with no output yet) and over every simulator of the
  default scenario at each of its first steps;
* the recorder's rows given as the sources' dicts (``ParquetRecorder.append_refs``) write the
  file the rows given cell by cell (``append_cells``) write: every cell type, flags, missing
  attributes and columns, row groups and a close mid-group, a whole-second, a sub-millisecond
  and a 0.1 s-tick start; and a source whose ``get_data`` hands out a dict it changes later is
  recorded as it was at each step (the recorder reads each row as it comes).
"""

from __future__ import annotations

import warnings
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow.parquet as pq
import pytest

import cosim
from c_part_marks import missing_c_part

from cosim.run import direct
from cosim.run import recorder as recorder_module
from cosim.run.recorder import ParquetRecorder
from cosim.sdk import sum_inputs


class _Src:
    """A stand-in source simulator: only its output cache is read."""

    newest_t = None  # the last entry not known: read by the scan

    def __init__(self, sid: str, outputs: dict[int, dict]):
        self.sid, self.cache = sid, dict(outputs)

    output_at = direct._Sim.output_at


def _pull(src, kind, entries):
    pull = direct._Pull(src, kind, direct.SHIFT[kind])
    pull.entries = [(se, sa, de, da, f"{src.sid}.{se}") for se, sa, de, da in entries]
    return pull


def _ordered(inputs):
    """Values and key order (dict equality ignores the order an adapter may iterate in)."""
    return [(eid, list(values.items())) for eid, values in inputs.items()] if inputs is not None else None


def _cases():
    a = _Src("s1", {-1: {"x": {"p_mw": -0.0, "q_mvar": 2.0, "n": 4}, "y": {"p_mw": 5.0}},  # time order, as cached
                    0: {"x": {"p_mw": 0.1, "q_mvar": None, "n": 3}, "y": {"p_mw": 1e8}}})
    b = _Src("s2", {0: {"z": {"p_mw": -1e8, "flag": True}, "w": {"p_mw": None}}})
    later = _Src("s3", {})  # has not stepped yet: no output at all
    yield "several sources summed in order, None skipped", [
        _pull(a, "direct", [("x", "p_mw", "d", "p_mw"), ("y", "p_mw", "d", "p_mw"), ("x", "q_mvar", "d", "q_mvar")]),
        _pull(b, "direct", [("z", "p_mw", "d", "p_mw"), ("w", "p_mw", "d", "q_mvar"), ("z", "flag", "e", "on")]),
    ], False
    yield "one source connected twice to one attribute (the last value, the first position)", [
        _pull(a, "direct", [("x", "n", "d", "k"), ("y", "p_mw", "d", "p_mw"), ("x", "p_mw", "d", "k")]),
    ], False
    yield "one source over a direct and a time-shifted connection to one attribute", [
        _pull(a, "direct", [("x", "p_mw", "d", "p_mw"), ("x", "q_mvar", "e", "q_mvar")]),
        _pull(a, "time_shifted", [("x", "p_mw", "d", "p_mw"), ("x", "n", "e", "n")]),
    ], False
    yield "sums of -0.0 and of a single value (sum() starts at 0)", [
        _pull(a, "time_shifted", [("x", "p_mw", "d", "p_mw"), ("x", "q_mvar", "d", "q_mvar")]),
        _pull(b, "direct", [("w", "p_mw", "d", "p_mw"), ("w", "p_mw", "d", "q_mvar")]),
    ], False
    yield "an attribute every source of which is None (left out), an entity with nothing", [
        _pull(a, "direct", [("x", "q_mvar", "d", "q_mvar")]),
        _pull(b, "direct", [("w", "p_mw", "e", "p_mw")]),
    ], False
    yield "an entity without an output yet: the long way (its warning)", [
        _pull(a, "direct", [("x", "p_mw", "d", "p_mw")]),
        _pull(later, "direct", [("v", "p_mw", "d", "p_mw")]),
    ], True
    yield "an attribute missing from an entity's output: the long way", [
        _pull(a, "direct", [("x", "p_mw", "d", "p_mw"), ("y", "q_mvar", "d", "q_mvar")]),
    ], True


@pytest.mark.parametrize("name, pulls, falls_back", list(_cases()), ids=[c[0] for c in _cases()])
def test_collapsed_inputs_equal_summed_mosaik_inputs(name, pulls, falls_back):
    sim = direct._Sim("dst", object(), collapsible=True)
    sim.pulls = pulls
    engine = direct.DirectEngine.__new__(direct.DirectEngine)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = sum_inputs(engine._inputs(sim, 0))
    got = engine._collapsed_inputs(sim, 0)
    if falls_back:
        assert got is None and caught  # the step takes _inputs, which warns as mosaik does
    else:
        assert not caught
        assert _ordered(got) == _ordered(expected)
        for (_, mine), (_, theirs) in zip(_ordered(got), _ordered(expected)):
            for (_, v), (_, w) in zip(mine, theirs):
                assert type(v) is type(w) and (np.copysign(1, v) == np.copysign(1, w) if isinstance(v, float) else True)


#: inputs held from outside (a Session's set): a connected one, one whose every source is None in a
#: case above, one no connection feeds on a connected entity, one on an entity with no connection
HELD = {("e", "extra_mw"): 7.0, ("d", "q_mvar"): -0.0, ("zz", "p_mw"): 1.5, ("d", "p_mw"): 2.5, ("e", "p_mw"): 3.0}


@pytest.mark.parametrize("name, pulls", [c[:2] for c in _cases() if not c[2]], ids=[c[0] for c in _cases() if not c[2]])
def test_held_inputs_collapse_as_the_long_way_gives_them(name, pulls):
    """Held inputs replace their connections in their places (values and key order as ``_inputs``
    puts them and ``sum_inputs`` passes them on)."""
    engine = direct.DirectEngine.__new__(direct.DirectEngine)
    for k in range(1, len(HELD) + 1):
        sim = direct._Sim("dst", object(), collapsible=True, held=dict(list(HELD.items())[:k]))
        sim.pulls = pulls
        expected = sum_inputs(engine._inputs(sim, 0))
        got = engine._collapsed_inputs(sim, 0)
        assert _ordered(got) == _ordered(expected), k
        assert all(np.copysign(1, v) == np.copysign(1, w) for (_, a), (_, b) in zip(_ordered(got), _ordered(expected))
                   for (_, v), (_, w) in zip(a, b) if isinstance(v, float))


def test_collapsed_inputs_match_over_the_default_scenario(monkeypatch):
    """Every simulator of the default scenario at each of its first 30 steps (start of day:
    the controllers' first outputs, the cooling loop's time-shifted feedback)."""
    seen = []
    original = direct.DirectEngine._step_sim

    def checked(self, sim, t):
        if sim.sid != direct.RECORDER_SID:
            assert sim.collapsible, sim.sid  # every adapter we ship steps through CosimSim.step
            got = self._collapsed_inputs(sim, t)
            assert got is not None, sim.sid
            assert _ordered(got) == _ordered(sum_inputs(self._inputs(sim, t))), (sim.sid, t)
            seen.append(sim.sid)
        return original(self, sim, t)

    monkeypatch.setattr(direct.DirectEngine, "_step_sim", checked)
    with cosim.Session("scenarios/default.toml", overrides={"scenario.duration_s": 1800}) as s:
        s.run_until(1800)
    assert len(set(seen)) >= 6 and len(seen) >= 30 * 6


# -- the recorder's rows as dicts ------------------------------------------------------------
COLUMNS = ["a.p_mw", "a.converged", "a.text", "b.vm_pu", "b.q_mvar", "nobody.p_mw", "b.line_in_service",
           "c.soc_frac", "c.converged", "c.p_mw"]
#: column -> (source dict, attribute) in the plan; "nobody.p_mw" has no source; source c gives only
#: plain numbers (read as one block), a and b odd cells and a missing output (read column by column)
FILLS = [(0, "p_mw"), (0, "converged"), (0, "text"), (1, "vm_pu"), (1, "q_mvar"), None, (1, "line_in_service"),
         (2, "soc_frac"), (2, "converged"), (2, "p_mw")]


def _rows(n: int):
    """Source dicts of n steps with every kind of cell the recorder meets."""
    odd = [None, True, False, 0.7, np.float32(1.5), np.int64(3), np.nan, "word", np.array([2.5]), [1, 2], np.bool_(True),
           "2.5", -0.0, 10**20]
    for k in range(n):
        a = {"p_mw": 0.1 * k, "converged": odd[k % len(odd)], "text": odd[(k + 3) % len(odd)]}
        b = {"vm_pu": odd[(k + 5) % len(odd)], "q_mvar": float(k), "line_in_service": k % 3 == 0}
        if k % 4 == 1:
            del b["q_mvar"]  # an entity that did not give this output at this step
        plain = [None, True, 0.25, np.float32(1.5), np.int64(3), np.nan, 7, np.bool_(False)]
        c = {"p_mw": plain[k % len(plain)], "soc_frac": plain[(k + 1) % len(plain)], "converged": k % 2 == 0,
             "unrecorded": "word"}
        yield [a, b, c]


@pytest.mark.parametrize("start, ticks_per_s", [
    (datetime(2024, 1, 1, tzinfo=timezone.utc), 1),
    (datetime(2024, 12, 31, 23, 59, 0, 500, tzinfo=timezone.utc), 1),  # sub-millisecond: datetimes
    (datetime(2024, 7, 15, 6, tzinfo=timezone.utc), 10),  # 0.1 s ticks
])
@pytest.mark.parametrize("form", ["C", "Python"])
def test_rows_as_dicts_write_the_file_rows_of_cells_write(tmp_path, start, ticks_per_s, form, monkeypatch):
    if form == "Python":  # the cells gathered and packed in Python (the engine's C part not built)
        monkeypatch.setattr(recorder_module, "_PUT_REFS", None)
    elif recorder_module._PUT_REFS is None:
        missing_c_part("cosim/run/_engine.so")
    step = 7 * ticks_per_s + 3  # whole seconds and a fraction
    by_cells = ParquetRecorder(tmp_path / "cells" / "ts.parquet", COLUMNS, chunk_rows=16)
    by_refs = ParquetRecorder(tmp_path / "refs" / "ts.parquet", COLUMNS, chunk_rows=16)
    (tmp_path / "cells").mkdir(), (tmp_path / "refs").mkdir()
    by_refs.set_plan(FILLS, start, ticks_per_s)
    for k, refs in enumerate(_rows(45)):  # two whole row groups and a part
        ticks = k * step
        stamp = start + timedelta(seconds=ticks // ticks_per_s, milliseconds=(ticks % ticks_per_s) * 1000 // ticks_per_s)
        by_cells.append_cells(stamp, [None if f is None else refs[f[0]].get(f[1]) for f in FILLS])
        by_refs.append_refs(ticks, refs)
    by_cells.close(), by_refs.close()
    a, b = pq.read_table(tmp_path / "cells" / "ts.parquet"), pq.read_table(tmp_path / "refs" / "ts.parquet")
    assert a.schema == b.schema and a.num_rows == b.num_rows == 45
    assert a.equals(b), [(c, a[c].to_pylist()[:12], b[c].to_pylist()[:12]) for c in a.column_names
                         if not a[c].equals(b[c])]
    assert b["a.text"].null_count > 0 and b["nobody.p_mw"].null_count == 45


def test_a_plan_must_cover_the_columns(tmp_path):
    rec = ParquetRecorder(tmp_path / "ts.parquet", COLUMNS)
    with pytest.raises(ValueError, match="a plan of 2 columns for a recorder of 10"):
        rec.set_plan(FILLS[:2], datetime(2024, 1, 1, tzinfo=timezone.utc), 1)
    rec.close()


@pytest.mark.parametrize("form", ["C", "Python"])
def test_a_source_reusing_its_output_dict_is_recorded_step_by_step(tmp_path, form, monkeypatch):
    """A simulator of someone else's whose ``get_data`` returns the same dict every step,
    changed in place: the recorder reads each row as it comes, so each step keeps its own values."""
    if form == "Python":
        monkeypatch.setattr(recorder_module, "_PUT_REFS", None)
    shared = {"p_mw": 1.0, "n": np.int64(1), "arr": np.array(1.0)}
    rec = ParquetRecorder(tmp_path / "ts.parquet", ["s.p_mw", "s.n", "s.arr"], chunk_rows=16)
    rec.set_plan([(0, "p_mw"), (0, "n"), (0, "arr")], datetime(2024, 1, 1, tzinfo=timezone.utc), 1)
    for k in range(3):
        shared["p_mw"], shared["n"] = float(k), np.int64(10 * k)
        shared["arr"][()] = 100.0 * k  # a value changed in place too
        rec.append_refs(60 * k, [shared])
    rec.close()
    table = pq.read_table(tmp_path / "ts.parquet")
    assert table["s.p_mw"].to_pylist() == [0.0, 1.0, 2.0] and table["s.n"].to_pylist() == [0.0, 10.0, 20.0]
    assert table["s.arr"].to_pylist() == [0.0, 100.0, 200.0]


def test_reading_the_newest_output_first_equals_the_backwards_scan():
    """``_Sim.output_at`` returns the last cached entry without a scan when its time is within the
    limit; an output time cached again keeps its old place in the order (the last entry is then
    another one). Every limit reads what mosaik's backwards scan over the cache reads."""
    sim = direct._Sim("s", None)
    sim.cache[-1] = {"seed": {}}  # initial data, cached before any step

    def scan(limit):
        return next((sim.cache[w] for w in reversed(sim.cache) if w <= limit), {})

    for out_t in (0, 60, 180, 120, 60, 240, 180):  # output times (some later than the step, some again)
        sim.keep(out_t, {"at": {"n": out_t, "k": len(sim.cache)}})
        for limit in range(-2, 300, 30):
            got, want = sim.output_at(limit), scan(limit)
            assert got is want or got == want == {}, (out_t, limit)
    sim.cache.clear()
    sim.newest_t = sim.newest = None
    assert sim.output_at(1000) == {}


def test_a_data_reader_gives_what_get_data_gives_at_every_call():
    """``CosimSim.data_reader`` (what the engine reads a simulator's outputs through after each step)
    answers as ``get_data`` of the same request: every output asked for (a copy in the entity's own
    order), some of them, one missing (None), outputs replaced or changed after it was made; a new
    dict each call, which the entity's later changes do not reach."""
    from cosim.sdk import CosimSim

    sim = CosimSim()
    sim.out = {"a": {"x_mw": 1.0, "y_mw": 2.0}, "b": {"z_mw": 3.0}}
    request = {"a": ["y_mw", "x_mw"], "b": ["z_mw", "w_mw"]}
    read = sim.data_reader(request)
    for change in (None, ("a", {"y_mw": 5.0}), ("b", {"z_mw": 4.0, "w_mw": 6.0}), ("a", {"x_mw": 7.0, "y_mw": 8.0})):
        if change is not None:
            sim.out[change[0]] = change[1]
        got, want = read(), sim.get_data(request)
        assert got == want and [list(v) for v in got.values()] == [list(v) for v in want.values()]
        kept = {eid: dict(values) for eid, values in got.items()}
        sim.out["a"]["y_mw"] = -1.0  # changed in place after the read
        assert got == kept
