"""One FMI 2.0 co-simulation step in one C call (``adapters/fmu/_exchange.c``, built by ``make
build``): the same numbers, bit for bit, as the step made call by call from Python
(``set_inputs``, ``step``, ``outputs``), in both orders of reading the outputs, and a failing
call reported as the call-by-call path reports it. Where the library is not built, the adapter
makes its calls from Python and these comparisons are skipped (they fail under COSIM_REQUIRE_C_PARTS: make test
builds it)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from c_part_marks import needs_c_part

from cosim.adapters.fmu import FmuInstance, describe
from cosim.adapters.fmu import calls
from cosim.adapters.fmu.description import FmuError
from cosim.sdk import CPartWarning

built = needs_c_part(calls.EXCHANGE is not None, "adapters/fmu/_exchange.so")

INPUTS = {"DataHall": ("q_it_mw", "t_chw_supply_c"), "ChillerPlant": ("q_load_mw", "t_wet_c")}


def _bits(out: dict) -> dict:
    return {attr: struct.pack("<d", value) for attr, value in out.items()}


@built
@pytest.mark.parametrize("outputs_first", [False, True])
@pytest.mark.parametrize("model", sorted(INPUTS))
def test_exchange_gives_the_calls_one_by_one_bit_for_bit(shipped_fmus, unzip, model, outputs_first):
    iface = describe(model)
    one_call = FmuInstance(iface, unzip(iface.path), "a", {})
    by_calls = FmuInstance(iface, unzip(iface.path), "b", {})
    rng = np.random.default_rng(7)
    load, temp = INPUTS[model]
    for k in range(300):
        # plain floats, numpy floats and ints (converted as set_inputs converts them), loads from 0 to 2 MW
        value = rng.uniform(0.0, 2.0)
        inputs = {load: [value, np.float64(value), 1][k % 3], temp: float(rng.uniform(5.0, 25.0))}
        time_s = 60.0 * k
        got = one_call.exchange(inputs, time_s, 60.0, outputs_first)
        by_calls.set_inputs(inputs)
        if outputs_first:
            want = by_calls.outputs()
            by_calls.step(time_s, 60.0)
        else:
            by_calls.step(time_s, 60.0)
            want = by_calls.outputs()
        assert list(got) == list(want) and _bits(got) == _bits(want), f"step {k}"
    assert one_call.time_s == by_calls.time_s and one_call.n_steps == by_calls.n_steps == 300
    assert all(plan.exchange is not None for plan in one_call._set_plans.values())  # the C call did the steps
    one_call.close()
    by_calls.close()


@built
def test_a_failing_step_in_the_exchange_is_reported_as_call_by_call(shipped_fmus, unzip):
    """DataHall refuses a negative IT load in its doStep: the same message either way, naming FMU,
    time and value."""
    iface = describe("DataHall")
    messages = []
    for fused in (True, False):
        inst = FmuInstance(iface, unzip(iface.path), "hall_a", {})
        inst.exchange({"q_it_mw": 1.0}, 0.0, 60.0)
        with pytest.raises(FmuError) as err:
            if fused:
                inst.exchange({"q_it_mw": -1.0}, 60.0, 60.0)
            else:
                inst.set_inputs({"q_it_mw": -1.0})
                inst.step(60.0, 60.0)
        messages.append(str(err.value))
        inst.close()
    assert messages[0] == messages[1]
    assert "DataHall.fmu (hall_a) at t = 60 s" in messages[0] and "q_it = -1e+06" in messages[0]


@built
def test_a_failing_set_in_the_exchange_names_the_variable(foreign_fmu, unzip):
    """The inputs go to the FMU in one fmi2SetReal; when it fails, they are set one by one, so the
    message names the one the FMU refused (R), and nothing after the set was called."""
    iface = describe(str(foreign_fmu), interface="cs")
    inst = FmuInstance(iface, unzip(iface.path), "room", {})
    other = next(a for a in iface.inputs if a != "r_room_k_kw" and iface.ports[a].kind == "real")
    with pytest.raises(FmuError, match=r"rc_room.fmu \(room\) at t = 0 s, variable 'R'.*R must be > 0"):
        inst.exchange({"r_room_k_kw": -1.0, other: 1.0}, 0.0, 60.0)
    assert inst.n_steps == 0 and inst._set_plans[("r_room_k_kw", other)].exchange is not None
    inst.close()


def test_a_library_of_another_source_is_not_trusted(tmp_path):
    """An edited _exchange.c is not used until rebuilt (whatever the files' times), nor a library built by hand
    without the source's SHA-256: the steps are made from Python meanwhile."""
    source = Path(calls.__file__).with_name("_exchange.c")
    library = tmp_path / "_exchange.so"
    shutil.copy(source, tmp_path / "_exchange.c")
    shutil.copy(source.with_suffix(".so"), library)
    assert calls.load_exchange(library) is not None
    (tmp_path / "_exchange.c").write_text(source.read_text() + "/* edited */\n")
    os.utime(library, (library.stat().st_atime, (tmp_path / "_exchange.c").stat().st_mtime + 10))
    assert calls.load_exchange(library) is None
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found")
    by_hand = tmp_path / "by_hand" / "_exchange.so"
    by_hand.parent.mkdir()
    shutil.copy(source, by_hand.with_suffix(".c"))
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-std=c11", "-ffp-contract=off", "-fno-fast-math", "-o",
                    str(by_hand), str(source)], check=True)
    with pytest.warns(CPartWarning, match="another text"):  # (once per file and process, naming make build)
        assert calls.load_exchange(by_hand) is None
