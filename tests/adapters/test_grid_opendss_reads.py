"""The OpenDSS engine's loadings and losses from one bulk read equal OpenDSS's own reads to the bit.

:class:`PdReads` takes every line's and transformer's loading and the circuit's losses from one
``PDElements.AllCurrents``; OpenDSS computes them with ``PDElements.AllPctNorm(False)`` and
``Circuit.Losses``. Compared bit for bit after every solve of IEEE 13 (regulators moving their
taps step by step in time-control mode, two capacitors), IEEE 34 and IEEE 123, with a load that
changes, a line opened and closed again and a fault on (the fault is a shunt PD element, left out
of the losses as OpenDSS leaves it out). With ``make build``'s ``_opendss_kernels.so`` the same
values come from the currents computed from the elements' Yprims while no Yprim can have changed:
compared with OpenDSS's own reads (and its currents, ``AllCurrents``) at every step of IEEE 8500 and
of the small feeders above.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from c_part_marks import needs_c_part

from cosim import grid_models
from cosim.adapters.grid.opendss_flow import OpenDssFlow
from cosim.adapters.grid import opendss_reads as reads_module
from cosim.adapters.grid.opendss_reads import PdReads

#: campus load at each solve [MW]
LOAD_MW = [0.2, 1.5, 1.5, 3.0, 3.0, 3.0, 0.4, 2.0, 2.5, 2.5, 1.0, 0.5]
#: whether make build built the Yprim kernel (adapters/grid/_opendss_kernels.c)
KERNEL = reads_module._library() is not None
#: bus of the campus, control mode and a scale of LOAD_MW the feeder carries
CASES = {"ieee13": ("671", "time", 1.0), "ieee34": ("860", "static", 0.2), "ieee123": ("76", "static", 1.0)}


@pytest.fixture(autouse=True)
def bulk_on_small_feeders(monkeypatch):
    """The bulk read on these small feeders too (it is used from BULK_MIN_ELEMENTS elements up)."""
    monkeypatch.setattr(reads_module, "BULK_MIN_ELEMENTS", 0)


def opendss_reads(flow: OpenDssFlow) -> tuple[np.ndarray, float]:
    """Loadings of the flow's lines and transformers [%] and losses [W], read by OpenDSS itself."""
    pct = np.asarray(flow._arrays.PDElements.AllPctNorm(False))
    return np.concatenate([pct[flow._line_pd], pct[flow._trafo_pd]]), flow.dss.Circuit.Losses()[0]


def solve(flow: OpenDssFlow, p_mw: float, k: int) -> None:
    assert flow.solve({"load": np.array([p_mw]), "sgen": np.zeros(0), "storage": np.zeros(0)},
                      {"load": np.array([0.4 * p_mw]), "sgen": np.zeros(0), "storage": np.zeros(0)}, time_s=20.0 * k)


@pytest.mark.parametrize("network", sorted(CASES))
def test_loadings_and_losses_equal_opendss_own_reads_to_the_bit(network):
    bus, mode, scale = CASES[network]
    flow = OpenDssFlow(grid_models.dss_file(network), control_mode=mode)
    flow.attach("load", bus, 0.0, 0.0, name="campus")
    taps = set()
    for k, p_mw in enumerate(LOAD_MW):
        if k == 4:
            flow.set_line_in_service(len(flow.info.lines) - 1, False)
        if k == 6:
            flow.set_line_in_service(len(flow.info.lines) - 1, True)
        solve(flow, scale * p_mw, k)
        losses_mw = flow.losses_mw
        flow_loading = np.concatenate([flow.line_loading_pct, flow.trafo_loading_pct])
        assert flow._pd_reads.exact is True  # the fast path was taken, not OpenDSS's own reads
        assert flow._pd_reads.kernel is KERNEL  # and the currents computed from the Yprims, where built
        loading, losses_w = flow._pd_reads.read()
        reference, reference_w = opendss_reads(flow)
        assert loading.tobytes() == reference.tobytes() == flow_loading.tobytes(), f"step {k}"
        assert np.float64(losses_w).tobytes() == np.float64(reference_w).tobytes(), f"step {k}"
        assert losses_mw == reference_w / 1e6
        taps.add(tuple(flow.tap_count))
    assert losses_w > 0 and loading.max() > 1.0
    if network == "ieee13":
        assert len(taps) > 2  # the regulators moved between solves
    flow.close()


def test_a_fault_and_a_disabled_element_are_read_as_opendss_reads_them():
    flow = OpenDssFlow(grid_models.dss_file("ieee13"))
    flow.attach("load", "671", 0.0, 0.0, name="campus")
    flow.dss.Text.Command("New Fault.f1 phases=1 bus1=675.1 bus2=675.0 r=5 enabled=no")
    flow.dss.Text.Command("Line.684_652.enabled=no")
    for k, on in enumerate([False, True, False]):
        flow.dss.Text.Command(f"Fault.f1.enabled={'yes' if on else 'no'}")
        solve(flow, 1.0, k)
        loading, losses_w = flow.line_loading_pct, flow.losses_mw * 1e6
        reference, reference_w = opendss_reads(flow)
        assert flow._pd_reads.exact is True
        loading, losses_w = flow._pd_reads.read()
        assert loading.tobytes() == reference.tobytes() and losses_w == reference_w
    assert loading[flow.info.lines.index("684_652")] == 0.0  # disabled: no current, as AllPctNorm gives
    flow.close()


def test_a_small_circuit_is_read_through_opendss(monkeypatch):
    monkeypatch.setattr(reads_module, "BULK_MIN_ELEMENTS", 19)  # IEEE 13 has 18 PD elements
    flow = OpenDssFlow(grid_models.dss_file("ieee13"))
    solve(flow, 0.0, 0)
    assert math.isfinite(flow.losses_mw) and flow._pd_reads.exact is False
    said = flow.accelerations()[reads_module.ACCELERATION]  # the run's metadata.json says so, and why
    assert said["on"] is False and "18 power-delivery elements, fewer than 19" in said["detail"]
    flow.close()


def test_a_circuit_the_fast_path_cannot_match_is_read_through_opendss():
    """Seasonal ratings move a rating with the hour: such a circuit is read by OpenDSS's own calls."""
    flow = OpenDssFlow(grid_models.dss_file("ieee13"))
    flow.dss.Text.Command("Set SeasonRating=yes")
    solve(flow, 0.0, 0)
    assert math.isfinite(flow.losses_mw)
    assert flow._pd_reads.exact is False
    assert flow.accelerations()[reads_module.ACCELERATION] == {"on": False, "detail": "seasonal ratings"}
    loading, losses_w = flow._pd_reads.read()
    reference, reference_w = opendss_reads(flow)
    assert loading.tobytes() == reference.tobytes() and losses_w == reference_w


def test_the_check_finds_a_reading_that_differs():
    """The first-solve check compares every value: a loading off by one ulp is caught."""
    flow = OpenDssFlow(grid_models.dss_file("ieee13"))
    solve(flow, 0.0, 0)
    reads = PdReads(flow.dss, np.concatenate([flow._line_pd, flow._trafo_pd]))
    assert reads.check() is True
    reads._phase_rating = np.nextafter(reads._phase_rating, np.inf)  # one ulp more amps: every loading moves
    assert reads.check() is False
    assert reads.read()[0].tobytes() == opendss_reads(flow)[0].tobytes()
    flow.close()


def test_loadings_and_losses_are_read_only_when_asked_and_before_an_edit():
    """A solve reads no currents; the first read of a loading or the losses does (once); an edit of
    the circuit before anyone asked reads them first, so they are that solve's, not the edited
    circuit's (closing the flow clears the circuit: its last values stay)."""
    flow = OpenDssFlow(grid_models.dss_file("ieee13"))
    flow.attach("load", "671", 0.0, 0.0, name="campus")
    solve(flow, 1.0, 0)
    assert flow.losses_mw > 0 and flow._pd_reads.exact is True  # the first read checks the fast path
    calls = []
    read = flow._pd_reads.read
    flow._pd_reads.read = lambda *args: calls.append(1) or read(*args)
    solve(flow, 1.2, 1)
    assert calls == []
    losses_mw = flow.losses_mw
    assert calls == [1] and flow.trafo_loading_pct is not None and calls == [1]
    solve(flow, 1.4, 2)
    reference, reference_w = opendss_reads(flow)  # OpenDSS's own reads of this solve, before the edit
    flow.set_line_in_service(flow.info.lines.index("684_652"), False)
    assert calls == [1, 1]
    loading = np.concatenate([flow.line_loading_pct, flow.trafo_loading_pct])
    assert flow.losses_mw == reference_w / 1e6 != losses_mw and loading.tobytes() == reference.tobytes()
    flow.close()  # clears the circuit: the values of the last solve stay readable
    assert flow.losses_mw == reference_w / 1e6


def test_a_grid_whose_losses_and_loadings_nobody_asks_for_reads_no_currents():
    """The Grid asks OpenDSS for the currents only in a step where someone reads its losses, its
    largest loading or a line's loading (get_data, or ``out``), and then gives the same values."""
    from cosim.adapters.grid import GridSim

    def make() -> GridSim:
        sim = GridSim()
        sim.init("grid", 1.0, start_utc="2024-07-15T12:00:00Z", step_s=1, duration_s=3600, seed=1,
                 network="ieee13", engine="opendss")
        sim.create(1, "Grid", eid="grid")
        sim.create(1, "Load", eid="pcc", bus="671", p_mw=0.2)
        return sim

    narrow, whole = make(), make()
    asks = [["vm_min_pu", "p_import_mw"], ["losses_mw"], ["vm_min_pu"], ["line_671_692_loading_pct"], None]
    for t, attrs in enumerate(asks):
        inputs = {"pcc": {"p_mw": {"campus.p_mw": 0.5 + 0.3 * t}}}
        for sim in (narrow, whole):
            sim.step(t, inputs, 10**9)
        pending = narrow.flow._currents_pending
        got = narrow.get_data({"grid": attrs})["grid"] if attrs else narrow.out["grid"]
        expected = whole.out["grid"]
        assert pending and all(got[a] == expected[a] or got[a] != got[a] for a in got)
        reads_currents = attrs is None or any("loading" in a or "losses" in a for a in attrs)
        assert narrow.flow._currents_pending is not reads_currents


def test_on_ieee8500_the_kernel_gives_opendss_own_currents_loadings_and_losses_at_every_step():
    """IEEE 8500 (4,904 PD elements: the kernel is used without lowering BULK_MIN_ELEMENTS), a campus
    swinging between 0.2 and 4 MW so that regulators move, a line opened and closed: at every step
    the flow's loadings and losses equal OpenDSS's own reads, and the kernel's currents its
    ``AllCurrents``, to the bit; most reads come from the kernel without OpenDSS's currents."""
    flow = OpenDssFlow(grid_models.dss_file("ieee8500"))
    flow.attach("load", "m1166366", 0.0, 0.0, name="campus")
    reads, kernel_reads = None, []
    for k, p_mw in enumerate([0.2, 0.2, 4.0, 4.0, 4.0, 1.0, 1.0, 1.0, 0.2, 0.2]):
        if k in (6, 7):
            flow.set_line_in_service(flow.info.lines.index("tpx138236b0"), k == 7)
        solve(flow, p_mw, k)
        if reads is None:
            reads = flow._pd_reads
            if KERNEL:
                read = reads._kernel.read

                def read_counted(currents: bool = False, read=read):  # the reads of the kernel alone
                    kernel_reads.extend([] if currents else [k])
                    return read(currents)
                reads._kernel.read = read_counted
        loading = np.concatenate([flow.line_loading_pct, flow.trafo_loading_pct])
        reference, reference_w = opendss_reads(flow)
        assert loading.tobytes() == reference.tobytes() and flow.losses_mw == reference_w / 1e6, f"step {k}"
        assert reads.exact is True and reads.kernel is KERNEL
        assert flow._node_volts.read().tobytes() == np.asarray(flow._arrays.AllBusVmagPu).tobytes()
        if KERNEL:
            computed = reads._kernel._computed
            reads._kernel.read(currents=True)
            currents = reads.circuit.PDElements.AllCurrents
            assert reads._kernel.currents[computed].tobytes() == currents[computed].tobytes(), f"step {k}"
    assert flow.n_tap_changes > 0 and reference_w > 0 and loading.max() > 1.0
    if KERNEL:
        assert len(set(kernel_reads)) >= 4  # steps read without OpenDSS's currents (more reads: the syncs)
    flow.close()


@needs_c_part(KERNEL, "adapters/grid/_opendss_kernels.so")
def test_a_stale_yprim_is_read_again_and_a_kernel_that_cannot_match_is_dropped():
    """After a solve that may have changed a Yprim, the kernel's currents are compared with
    OpenDSS's: an element whose held Yprim is wrong is read again (the kernel stays, the values are
    OpenDSS's); when the kernel cannot match, it is dropped and OpenDSS's currents are read."""
    flow = OpenDssFlow(grid_models.dss_file("ieee13"))
    flow.attach("load", "671", 0.0, 0.0, name="campus")
    solve(flow, 1.0, 0)
    assert flow.losses_mw > 0
    reads = flow._pd_reads
    kernel = reads._kernel
    assert flow.accelerations()[reads_module.ACCELERATION]["on"] is True  # what the run's metadata.json says
    reference = opendss_reads(flow)
    kernel.y *= 1.5  # every held Yprim wrong: a read without the check gives other values
    assert not reads_module._same(reads.read(y_changed=False), reference)
    assert reads_module._same(reads.read(y_changed=True), reference) and reads.kernel
    assert reads_module._same(reads.read(y_changed=False), reference)  # read again: right from now on
    kernel.fits = False  # a kernel that cannot match (an element of too high an order)
    assert reads_module._same(reads.read(y_changed=True), reference) and not reads.kernel
    said = flow.accelerations()[reads_module.ACCELERATION]
    assert said["on"] is False and "could not match OpenDSS's" in said["detail"]
    solve(flow, 1.2, 1)
    assert reads_module._same(reads.read(y_changed=False), opendss_reads(flow))
    fresh = PdReads(flow.dss, np.concatenate([flow._line_pd, flow._trafo_pd]))
    fresh._kernel.rating *= 1.001  # the kernel's loadings are not OpenDSS's: the first check drops it
    assert fresh.check() is True and not fresh.kernel
    assert fresh.acceleration["on"] is False
    assert "the currents from the Yprims were not OpenDSS's" in fresh.acceleration["detail"]
    flow.close()


@pytest.mark.parametrize("network", sorted(CASES))
def test_node_voltages_equal_opendss_all_bus_vmag_pu_and_fall_back_to_it_when_they_differ(network):
    """The node voltage magnitudes the flow reads (from YNodeVarray, computed as AllBusVmagPu computes
    them where the library is built) are AllBusVmagPu's to the bit; a reader whose first reading
    differs (here: one base voltage 0.1 % off) reads AllBusVmagPu from then on."""
    from cosim.adapters.grid.opendss_reads import NodeVolts

    bus, mode, scale = CASES[network]
    flow = OpenDssFlow(grid_models.dss_file(network), control_mode=mode)
    flow.attach("load", bus, 0.0, 0.0, name="campus")
    solve(flow, scale * 1.0, 0)
    volts = flow._node_volts
    assert volts.exact is KERNEL or (volts.exact is False and not KERNEL)
    assert volts.read().tobytes() == np.asarray(flow._arrays.AllBusVmagPu).tobytes()
    kv = {b.lower(): v for b, v in zip(flow.info.buses, flow.info.bus_kv_base)}
    other = NodeVolts(flow._arrays, kv)
    other.base[3] *= 1.001
    assert other.read().tobytes() == np.asarray(flow._arrays.AllBusVmagPu).tobytes() and other.exact is False
    flow.close()


def _currents_match_opendss(flow: OpenDssFlow, where: str) -> None:
    """The flow's loadings and losses are OpenDSS's own reads, and the kernel's currents from its held Yprims
    are ``PDElements.AllCurrents``, to the bit."""
    losses_mw, loading = flow.losses_mw, np.concatenate([flow.line_loading_pct, flow.trafo_loading_pct])
    reference, reference_w = opendss_reads(flow)
    assert loading.tobytes() == reference.tobytes() and losses_mw == reference_w / 1e6, where
    kernel = flow._pd_reads._kernel
    assert kernel is not None, where  # still computing the currents from the Yprims
    kernel.read(currents=True)
    currents = np.asarray(flow._arrays.PDElements.AllCurrents)
    assert kernel.currents[kernel._computed].tobytes() == currents[kernel._computed].tobytes(), where


@needs_c_part(KERNEL, "adapters/grid/_opendss_kernels.so")
def test_every_edit_of_the_circuit_is_seen_by_the_held_yprims():
    """Each input path that edits a PD element (regulator taps held by count or by ratio, a capacitor's
    steps taken and released, a line opened and closed) and edits made on the engine directly (a line's
    length, an impedance through the API: what a future input might do without telling the flow) are
    followed by a solve whose loadings, losses and kernel currents are OpenDSS's. The flow learns of every
    edit from OpenDSS (``Solution.SystemYChanged``), not from each call site; with the regulators fixed
    and a steady load no control acts, so nothing else would make it read the Yprims again."""
    flow = OpenDssFlow(grid_models.dss_file("ieee13"), regulators="fixed")
    flow.attach("load", "671", 0.0, 0.0, name="campus")
    line = flow.info.lines.index("684_652")
    edits = {
        "tap count": lambda: flow.set_tap_count(0, 5),
        "tap ratio": lambda: flow.hold_taps_pu({flow.ids["reg"][1]: 1.025}),
        "capacitor steps": lambda: flow.set_cap_count(0, 0),
        "capacitor released": lambda: flow.release_cap(0),
        "line opened": lambda: flow.set_line_in_service(line, False),
        "line closed": lambda: flow.set_line_in_service(line, True),
        "length by command": lambda: flow.dss.Text.Command("Line.632_670.length=1000"),
        "impedance by the API": lambda: (flow.dss.Lines.Name("670_671"), flow.dss.Lines.R1(0.5)),
    }
    solve(flow, 1.0, 0)
    solve(flow, 1.0, 1)  # settled: the next solves would keep the held Yprims
    _currents_match_opendss(flow, "settled")
    for k, (what, edit) in enumerate(edits.items(), start=2):
        edit()
        solve(flow, 1.0, k)
        assert flow.dss.Solution.ControlIterations() == 1, what  # no control acted: only the edit says so
        _currents_match_opendss(flow, what)
    flow.close()
