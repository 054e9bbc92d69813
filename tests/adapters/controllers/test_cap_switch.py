"""Capacitor switching: the grid's ``cap_<id>_set_count`` input (OpenDSS engine) and the
``CapSwitch`` controller (OpenDSS ``CapControl`` voltage mode: ON below / OFF above, each after
its delay).

Physics checked: a shunt capacitor delivers Q = Q_rated · (V / V_rated)² (a constant
admittance), so every step closed raises the voltage at its bus (a radial feeder's voltage
rises with injected Q through the line reactance), strictly and monotonically.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

import cosim
from cosim.adapters.controllers.cap_switch import CapBank, CapSwitchParams

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_grid_opendss import make_sim, step  # noqa: E402

#: a 12.47 kV source, 5 km of line, a 3 MW / 1.5 Mvar load and a 3-step 3 x 300 kvar bank at its end
SMALL_DSS = """Clear
Set DefaultBaseFrequency=60
New Circuit.small basekv=12.47 bus1=b0 pu=1.0 phases=3 R1=0 X1=0.00001 R0=0 X0=0.00001
New Line.l01 bus1=b0 bus2=b1 phases=3 r1=0.3 x1=0.6 r0=0.3 x0=0.6 c1=0 c0=0 length=5 units=km
New Load.ld1 bus1=b1 phases=3 conn=wye model=1 kv=12.47 kw=3000 kvar=1500 vminpu=0.5 vmaxpu=1.5
New Capacitor.bank bus1=b1 phases=3 conn=wye kv=12.47 numsteps=3 kvar=[300 300 300] states=[0 0 0]
Set VoltageBases=[12.47]
CalcVoltageBases
"""


def test_each_closed_step_raises_the_bus_voltage_and_delivers_q_rated_v_squared(tmp_path):
    path = tmp_path / "small.dss"
    path.write_text(SMALL_DSS)
    sim = make_sim(str(path))
    vm, q = [], []
    for k in range(4):
        out = dict(step(sim, k, {"grid": {"cap_bank_set_count": float(k)}}))
        vm.append(out["bus_b1_vm_pu"])
        q.append(out["cap_bank_q_mvar"])
        assert out["cap_bank_in_service"] == (k > 0)
    assert all(b > a + 1e-3 for a, b in zip(vm, vm[1:])), vm  # strictly rising, > 1 mpu per 300 kvar step
    for k in range(4):
        assert q[k] == pytest.approx(0.3 * k * vm[k] ** 2, rel=1e-3)
    held = dict(step(sim, 4, {"grid": {"cap_bank_set_count": math.nan}}))  # NaN: left as it is
    assert held["bus_b1_vm_pu"] == pytest.approx(vm[3], abs=1e-4)  # re-solved: to the tolerance
    for bad in (7.0, -1.0):  # more steps than it has, or fewer than none: refused, naming input, value, range
        with pytest.raises(ValueError, match=rf"cap_bank_set_count = {bad:g}: capacitor bank has 3 steps; "
                                             "give a count from 0 to 3"):
            step(sim, 5, {"grid": {"cap_bank_set_count": bad}})


def test_ieee13_cap1_switched_out_lowers_675_on_every_phase():
    sim = make_sim(regulators="fixed")
    base = dict(step(sim))  # the published case: cap1 (3 x 200 kvar at 675) in
    out = dict(step(sim, 1, {"grid": {"cap_cap1_set_count": 0.0}}))
    assert base["cap_cap1_in_service"] and not out["cap_cap1_in_service"]
    for ph in "abc":
        assert out[f"bus_675_{ph}_vm_pu"] < base[f"bus_675_{ph}_vm_pu"] - 0.005, ph
    back = dict(step(sim, 2, {"grid": {"cap_cap1_set_count": 1.0}}))
    assert back["bus_675_a_vm_pu"] == pytest.approx(base["bus_675_a_vm_pu"], abs=1e-4)


def test_switching_logic_by_hand():
    bank = CapBank(CapSwitchParams(n_steps=2, on_below_pu=0.96, off_above_pu=1.04, delay_s=10, delay_off_s=5))
    assert [bank.update(t, 0.95) for t in (0, 5, 9)] == [0, 0, 0]
    assert bank.update(10, 0.95) == 1  # 10 s below: one step in, timer restarts
    assert bank.update(15, 0.95) == 1
    assert bank.update(16, 0.99) == 1  # inside the dead band: timers reset
    assert bank.update(17, 0.95) == 1 and bank.update(27, 0.95) == 2
    assert bank.update(40, 0.95) == 2  # no more steps
    assert bank.update(41, 1.05) == 2 and bank.update(46, 1.05) == 1  # 5 s above: one out
    assert bank.n_switchings == 3
    assert bank.update(47, math.nan) == 1  # no measurement: hold
    sched = CapBank(CapSwitchParams(n_steps=2, schedule=[{"at_s": 100, "n_steps": 2}, {"at_s": 50, "n_steps": 1}]))
    assert [sched.update(t, 0.90) for t in (0, 50, 99, 100)] == [0, 1, 1, 2]
    off = CapBank(CapSwitchParams(enabled=False, n_steps_initial=1))
    assert off.update(100, 0.5) == 1


def test_bad_settings_are_refused():
    with pytest.raises(ValidationError, match="dead band"):
        CapSwitchParams(on_below_pu=1.0, off_above_pu=0.99)
    with pytest.raises(ValidationError, match="n_steps"):
        CapSwitchParams(n_steps=1, schedule=[{"at_s": 0, "n_steps": 2}])


CLOSED_LOOP = """
[scenario]
name = "cap_ieee13"
start = 2024-07-15T12:00:00Z
duration_s = 30
step_s = 1

[sims.grid]
adapter = "grid"
engine = "opendss"
network = "ieee13"
regulators = "fixed"
[sims.caps]
adapter = "cap_switch"

[entities.feeder]
sim = "grid"
model = "Grid"
[entities.cap]
sim = "caps"
model = "CapSwitch"
on_below_pu = 0.98
off_above_pu = 1.04
delay_s = 5

[[connect]]
src = "feeder"
dst = "cap"
attrs = [["bus_675_a_vm_pu", "vm_pu"]]
[[connect]]
src = "cap"
dst = "feeder"
attrs = [["n_steps_closed", "cap_cap1_set_count"]]
time_shifted = true
initial_data = { n_steps_closed = 0.0 }

[record]
include = ["feeder.bus_675_a_vm_pu", "feeder.cap_cap1_in_service", "cap.*"]
"""


def test_closed_loop_switches_cap1_in_after_its_delay(tmp_path):
    """IEEE 13 with cap1 switched out at the start: 675a sits below the 0.98 pu ON setting, so
    after 5 s the controller closes the bank (one switching) and 675a rises by > 5 mpu."""
    path = tmp_path / "cap.toml"
    path.write_text(CLOSED_LOOP)
    run = cosim.run(path, out_dir=tmp_path / "out", overrides={"scenario.engine": "direct"})
    assert run.ok, run.reason
    ts = run.timeseries()
    v, closed = ts["feeder.bus_675_a_vm_pu"], ts["cap.n_steps_closed"]
    assert closed.iloc[0] == 0 and closed.iloc[-1] == 1 and ts["cap.n_switchings"].iloc[-1] == 1
    first = int(closed.to_numpy().nonzero()[0][0])
    assert 4 <= first <= 6
    assert v.iloc[-1] > v.iloc[0] + 0.005 and (v.iloc[:first] < 0.98).all()


def test_pandapower_shunt_steps_raise_the_bus_voltage(tmp_path):
    """The pandapower engine's ``shunt_<id>_set_count``: a 3-step capacitor (q_mvar < 0 per step,
    pandapower's sign) at the end of a 12.47 kV line; each step raises the bus strictly, as on OpenDSS."""
    import pandapower as pp

    net = pp.create_empty_network(f_hz=60.0)
    b0, b1 = (pp.create_bus(net, vn_kv=12.47, name=f"b{i}") for i in range(2))
    pp.create_ext_grid(net, b0, vm_pu=1.0)
    pp.create_line_from_parameters(net, b0, b1, length_km=5.0, r_ohm_per_km=0.3, x_ohm_per_km=0.6,
                                   c_nf_per_km=0.0, max_i_ka=0.4, name="l01")
    pp.create_load(net, b1, p_mw=3.0, q_mvar=1.5, name="ld1")
    pp.create_shunt(net, b1, q_mvar=-0.3, p_mw=0.0, step=0, max_step=3, name="bank")
    pp.to_json(net, str(tmp_path / "small.json"))
    sim = make_sim(str(tmp_path / "small.json"), engine="pandapower")
    assert "shunt_bank_set_count" in sim.meta["models"]["Grid"]["attrs"]
    vm = [dict(step(sim, k, {"grid": {"shunt_bank_set_count": float(k)}}))["bus_b1_vm_pu"] for k in range(4)]
    assert all(b > a + 1e-3 for a, b in zip(vm, vm[1:])), vm
    with pytest.raises(ValueError, match="shunt_bank_set_count = 9: the shunt has steps 0 to 3"):
        step(sim, 4, {"grid": {"shunt_bank_set_count": 9.0}})


def test_the_input_owns_the_capacitor_from_a_first_command_equal_to_its_state(tmp_path):
    """A CapControl that wants the bank open (its bus reads ~120 V on the PT, above OFFsetting):
    the first command, 3 (the bank's present state, all closed), already disables it, so the bank
    stays closed (it used to return before taking ownership, and the CapControl opened it)."""
    path = tmp_path / "owned.dss"
    path.write_text(SMALL_DSS.replace("states=[0 0 0]", "states=[1 1 1]").replace(
        "Set VoltageBases", "New CapControl.cc capacitor=bank element=Line.l01 terminal=2 type=voltage "
                            "PTratio=60 ONsetting=90 OFFsetting=100 delay=0 delayoff=0\nSet VoltageBases"))
    free = make_sim(str(path))
    assert dict(step(free))["cap_bank_q_mvar"] < 0.01  # left alone, the CapControl opens every step
    sim = make_sim(str(path))
    out = dict(step(sim, 0, {"grid": {"cap_bank_set_count": 3.0}}))
    assert out["cap_bank_q_mvar"] == pytest.approx(0.9 * out["bus_b1_vm_pu"] ** 2, rel=1e-3)
    assert dict(step(sim, 1, {"grid": {"cap_bank_set_count": 3.0}}))["cap_bank_q_mvar"] == pytest.approx(
        out["cap_bank_q_mvar"], rel=1e-3)
