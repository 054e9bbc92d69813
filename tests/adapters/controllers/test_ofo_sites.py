"""OFO over several datacenter sites (adapters/controllers/ofo/, ``sites``): each site's
sensitivity column against the analytic three-bus radial feeder, the shared voltage duals
throttling the site that moves the violated bus most, the per-site attribute names, and the
params' checks.

Source of the analytic columns: the linearised branch flow (Baran & Wu, IEEE Trans. Power
Delivery 4(2), 1989, LinDistFlow: v_k² = v_0² - 2 Σ_{lines l on the path to k} (r_l P_l + x_l Q_l),
so at v ≈ 1 a load at bus i lowers bus k by (R + tanφ X) of the impedance the two paths share,
per MW on a 1 MVA base). Src -(Z1)- mid -(Z2)- far: ∂v_mid/∂P_far = ∂v_mid/∂P_mid = ∂v_far/∂P_mid
= -(R1 + tanφ X1)/Z_base and ∂v_far/∂P_far = -(R1 + R2 + tanφ (X1 + X2))/Z_base.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from cosim import grid_models
from cosim.adapters._grid_backend import opendss_circuit_info, phase_set
from cosim.adapters._grid_opendss import OpenDssFlow, bus_position
from cosim.adapters.controllers.ofo import (
    FeederSensitivity,
    OFOController,
    OFOParams,
    OFOSim,
    OFOSimParams,
    SiteControl,
)

KV_LL = 12.47
R1, X1, R2, X2 = 1.0, 2.0, 1.5, 3.0  # ohm
THREE_BUS = f"""Clear
New Circuit.threebus basekv={KV_LL} pu=1.0 phases=3 bus1=src MVAsc3=1000000 MVAsc1=1000000
New Line.l1 bus1=src bus2=mid phases=3 r1={R1} x1={X1} r0={R1} x0={X1} c1=0 c0=0 length=1 units=none
New Line.l2 bus1=mid bus2=far phases=3 r1={R2} x1={X2} r0={R2} x0={X2} c1=0 c0=0 length=1 units=none
Set VoltageBases=[{KV_LL}]
CalcVoltageBases
"""
SITES = [{"name": "near", "dc_bus": "mid", "p_flex_mw": 0.6}, {"name": "end", "dc_bus": "far", "p_flex_mw": 0.6}]


@pytest.fixture()
def three_bus(tmp_path) -> Path:
    path = tmp_path / "threebus.dss"
    path.write_text(THREE_BUS)
    return path


def params(network: Path, **kw) -> OFOParams:
    return OFOParams(**{"network": str(network), "sites": SITES, "margin_pu": 0.0, **kw})


def test_each_site_has_its_own_column_and_the_downstream_one_sees_the_shared_impedance(three_bus):
    """Columns ``dc_near`` and ``dc_end`` (each site's bus perturbed alone, tanφ = 0.25 each) match
    LinDistFlow to 3 % at a light operating point (0.2 MW each, v >= 0.995)."""
    model = FeederSensitivity(params(three_bus))
    cols = model.compute([0.2, 0.2], [0.05, 0.05], 0.0, 0.0, {})
    names = model.flow.phase_attrs
    mid = [names.index(f"bus_mid_{ph}_vm_pu") for ph in "abc"]
    far = [names.index(f"bus_far_{ph}_vm_pu") for ph in "abc"]
    z_base = KV_LL**2
    shared = -(R1 + 0.25 * X1) / z_base
    whole = -(R1 + R2 + 0.25 * (X1 + X2)) / z_base
    assert cols["dc_near"][mid] == pytest.approx(shared, rel=0.03)
    assert cols["dc_near"][far] == pytest.approx(shared, rel=0.03)  # past the near site: the same drop
    assert cols["dc_end"][mid] == pytest.approx(shared, rel=0.03)   # the shared line only
    assert cols["dc_end"][far] == pytest.approx(whole, rel=0.03)
    assert whole < 2 * shared  # the end site moves the far bus more than twice as much


def test_the_site_that_moves_the_violated_bus_most_is_throttled_more(three_bus):
    """Closed loop on the three-bus feeder itself (the plant is a second copy solved at each step's
    powers): 1.8 MW (tanφ 0.25) at each site puts the far bus under 0.95 pu; the shared duals throttle
    the end site more (its column is larger at the far bus, same costs and swings), both sites stay
    inside [u_min, 1], and the far bus ends in band (within 1e-3 pu)."""
    p = params(three_bus, u_min_frac=0.0)
    ctl = OFOController(p, FeederSensitivity(p))
    plant = FeederSensitivity(p)
    names = plant.flow.phase_attrs
    base_mw = np.array([1.8, 1.8])
    flex = np.array([s["p_flex_mw"] for s in SITES])
    first_far = None
    for t in range(300):
        p_mw = base_mw - flex * (1.0 - ctl.us)
        v = plant._voltages({"load": p_mw, "storage": np.zeros(0), "sgen": np.zeros(0)},
                            {"load": 0.25 * p_mw, "storage": np.zeros(0), "sgen": np.zeros(0)})
        measured = dict(zip(names, v.tolist()))
        first_far = measured["bus_far_a_vm_pu"] if first_far is None else first_far
        site = {"p_dc_near_mw": p_mw[0], "q_dc_near_mvar": 0.25 * p_mw[0],
                "p_dc_end_mw": p_mw[1], "q_dc_end_mvar": 0.25 * p_mw[1]}
        ctl.update(t, measured, site)
        assert ((0.0 <= ctl.us) & (ctl.us <= 1.0)).all()
    assert first_far < 0.945
    assert ctl.us[1] < ctl.us[0] - 0.1 and ctl.us[1] < 0.9
    assert min(measured[f"bus_far_{ph}_vm_pu"] for ph in "abc") > 0.95 - 1e-3
    out = ctl.outputs()
    assert out["allowance_near_frac"] == ctl.us[0] and out["allowance_end_frac"] == ctl.us[1]
    assert out["n_batch_max_end"] < out["n_batch_max_near"]


def test_per_site_attributes_are_named_after_the_sites(three_bus):
    """With ``[sims.<id>] sites`` the meta has ``allowance_<site>_frac`` ... instead of the one
    site's knobs, the inputs ``p_dc_<site>_mw`` / ``q_dc_<site>_mvar``; the entity's sites must be
    the sim's; without sites the meta is unchanged."""
    sim = OFOSimParams(sites=["near", "end"])
    desc = OFOSim.meta_for(sim)["models"]["OFO"]
    for site in ("near", "end"):
        assert {f"allowance_{site}_frac", f"n_batch_max_{site}", f"p_cap_{site}_w", f"p_limit_{site}_mw"} <= set(
            desc["attrs"])
    assert not {"allowance_frac", "n_batch_max", "p_cap_w", "p_limit_mw"} & set(desc["attrs"])
    assert {"lambda_under_sum_per_pu", "p_bat_set_mw", "n_sensitivity_updates"} <= set(desc["attrs"])
    # the one-site powers are not inputs with sites (they were declared and then ignored: a
    # connection to them left the sensitivities at 0 MW); the per-site ones are
    inputs = set(desc["inputs"])
    assert not {"p_dc_mw", "q_dc_mvar"} & inputs and {"p_dc_near_mw", "q_dc_end_mvar", "p_bat_mw"} <= inputs
    # without sites: what a one-site controller reports is exactly what the meta declares (the
    # meta is built from OUTPUTS, so OUTPUTS <= meta was true by construction)
    plain = OFOSim.meta_for(OFOSimParams())["models"]["OFO"]
    one = OFOParams(network=str(three_bus), dc_bus="mid", p_flex_mw=0.5)
    assert set(OFOController(one).outputs()) == set(plain["outputs"])
    assert {"allowance_frac", "n_batch_max", "p_cap_w", "p_limit_mw"} <= set(plain["outputs"])
    p = params(three_bus)
    assert {"p_dc_near_mw", "q_dc_end_mvar"} <= set(OFOSim.entity_inputs("OFO", p))
    outs = set(OFOController(p).outputs())
    assert outs <= set(desc["attrs"]) and set(desc["attrs"]) - outs <= {
        "p_dc_mw", "q_dc_mvar", "p_bat_mw", "replicas_frac", "p_dc_near_mw", "q_dc_near_mvar", "p_dc_end_mw",
        "q_dc_end_mvar"}
    assert OFOSim.check_entity("OFO", p, None, sim) == []
    problems = OFOSim.check_entity("OFO", p, None, OFOSimParams(sites=["near"]))
    assert len(problems) == 1 and "sites" in problems[0]
    assert OFOSim.check_entity("OFO", p, None, OFOSimParams())


@pytest.mark.parametrize(("kw", "key"), [
    ({"sites": [SITES[0], {**SITES[1], "name": "near"}]}, "near.*given twice"),
    ({"sites": [SITES[0], {**SITES[1], "dc_bus": "nowhere"}]}, r"sites\[1\]\.dc_bus = 'nowhere'"),
    ({"sites": SITES, "dc_bus": "mid"}, "dc_bus = 'mid' and sites"),
    ({"sites": []}, "dc_bus"),
    ({"sites": [{**SITES[0], "name": "Near"}, SITES[1]]}, "name = 'Near'"),
    ({"sites": [{**SITES[0], "p_flex_mw": 0.0}, SITES[1]]}, "p_flex_mw"),
    ({"sites": SITES, "p_flex_mw": 0.5}, "p_flex_mw: with sites"),
])
def test_bad_site_params_give_one_error_naming_the_key(three_bus, kw, key):
    with pytest.raises(ValidationError, match=key) as info:
        OFOParams(**{"network": str(three_bus), **kw})
    assert len(info.value.errors()) == 1


@pytest.mark.parametrize(("network", "buses", "paths"), [
    ("ieee13", ("632", "671", "675"), [(0, 1), (0, 2), (1, 2)]),  # 632 -> 671 -> 675
    ("ieee34", ("850", "840"), [(0, 1)]),                           # 850 -> ... -> 834 -> 836 -> 840
    ("ieee123", ("8", "23", "60"), [(0, 1), (0, 2)]),               # 8 -> 13 -> 18 -> 23, 8 -> 13 -> 52 -> 60
])
def test_default_params_give_a_column_per_site_on_the_ieee_feeders(network, buses, paths):
    """With the controller's defaults (perturbation 0.05 MW, the model's own regulators settled
    once) at 0.5 MW / 0.1 Mvar per site, every site's column lowers every site's bus on every phase,
    and for a site downstream of another its own column lowers its bus more than the upstream
    site's does (its path has the shared impedance and more: ∂v_k/∂P_k < ∂v_k/∂P_j < 0 for j
    upstream of k, LinDistFlow as above)."""
    sites = [{"name": f"s{i}", "dc_bus": b, "p_flex_mw": 0.3} for i, b in enumerate(buses)]
    model = FeederSensitivity(OFOParams(network=network, sites=sites))
    cols = model.compute([0.5] * len(buses), [0.1] * len(buses), 0.0, 0.0, {})
    names = model.flow.phase_attrs
    rows = {bus: [names.index(n) for n in names if n.startswith(f"bus_{bus}_")] for bus in buses}
    for bus in buses:
        for j in range(len(buses)):
            assert (cols[f"dc_s{j}"][rows[bus]] < 0).all(), (bus, buses[j])
    for up, down in paths:
        at = rows[buses[down]]
        assert (cols[f"dc_s{down}"][at] < cols[f"dc_s{up}"][at]).all(), (buses[up], buses[down])


def test_shift_when_throttled_signals_the_site_whose_power_is_dearer_at_the_duals(three_bus):
    """``shift_when_throttled``: with an under-voltage dual at the far bus, the end site throttled (allowance
    0.5, above its floor) and the near site at 1, the end site's price per MW, (λ̄ - λ)ᵀ J_end / p_flex,
    is higher (its column at the far bus is (R1 + R2 + tanφ (X1 + X2)) vs (R1 + tanφ X1) per MW:
    LinDistFlow, module docstring), so ``exhausted_end_frac`` is 1 (0 without the flag: the end site
    is above its floor) and ``exhausted_near_frac`` 0; with the near site throttled too, no site is
    unthrottled, so both are 0."""
    rows, cols = [], []
    for flag in (False, True):
        p = params(three_bus, u_min_frac=0.0, shift_when_throttled=flag)
        model = FeederSensitivity(p)
        ctl = OFOController(p, model)
        names = model.flow.phase_attrs
        v = dict(zip(names, [1.0] * len(names)))
        v.update({f"bus_far_{ph}_vm_pu": 0.94 for ph in "abc"})
        site = {"p_dc_near_mw": 1.0, "q_dc_near_mvar": 0.25, "p_dc_end_mw": 1.0, "q_dc_end_mvar": 0.25}
        ctl.update(0, v, site)  # the duals at the far bus turn positive
        ctl.us[:] = [1.0, 0.5]
        out = ctl.outputs()
        rows.append((out["exhausted_near_frac"], out["exhausted_end_frac"]))
        ctl.us[:] = [0.8, 0.5]
        cols.append(ctl.outputs()["exhausted_end_frac"])
    assert rows == [(0.0, 0.0), (0.0, 1.0)]
    assert cols == [0.0, 0.0]


@pytest.mark.parametrize("bus, exclude", [("814", None), ("852", None), ("840", ["840"])])
def test_a_site_on_an_unmonitored_bus_is_refused(bus, exclude):
    """A site on a bus left out of the monitored bus-phases (IEEE 34's regulator terminals by
    default, or exclude_buses) would never see its own duals: refused, naming key and value."""
    extra = {} if exclude is None else {"exclude_buses": exclude}
    with pytest.raises(ValidationError, match=rf"sites\[0\]\.dc_bus = '{bus}'.*exclude_buses"):
        OFOParams.model_validate({"network": "ieee34", "sites": [{"name": "a", "dc_bus": bus, "p_flex_mw": 0.1}], **extra})
    ok = OFOParams.model_validate({"network": "ieee34", "sites": [{"name": "a", "dc_bus": "890", "p_flex_mw": 0.1}]})
    assert OFOSim.check_entity("OFO", ok, None, OFOSimParams(sites=["a"])) == []


@pytest.mark.parametrize("phases", ["xyz", "", "aa", "abcd"])
def test_bad_dc_phases_are_refused_at_validation(phases):
    """dc_phases passed validation and failed when the controller built, naming neither key nor value."""
    with pytest.raises(ValidationError, match=r"dc_phases = "):
        OFOParams.model_validate({"network": "ieee34", "sites": [{"name": "a", "dc_bus": "890", "dc_phases": phases}]})
    with pytest.raises(ValidationError, match=r"dc_phases = "):
        OFOParams.model_validate({"network": "ieee13", "dc_bus": "671", "dc_phases": phases})


def test_the_site_checks_find_buses_as_the_grid_does(tmp_path):
    """OFO's validation compared bus names as lower-case strings where the grid finds them with
    locate_bus, which also takes the sanitised id (review 2026-12-02): both use one rule now. Every
    bus of the shipped feeders and of a feeder whose names sanitise differently, by name in either
    case, padded, and by id: the same position either way."""
    odd = tmp_path / "odd_names.dss"
    odd.write_text("Clear\nNew Circuit.odd basekv=12.47 pu=1.0 bus1=Src-Bus\n"
                   "New Line.l1 bus1=Src-Bus bus2=Load-Bus.1.2.3 r1=0.1 x1=0.2 length=1\n"
                   "New Load.ld bus1=Load-Bus kW=100 kvar=20 kV=12.47\n"
                   "Set voltagebases=[12.47]\nCalcvoltagebases\n")
    for path in (grid_models.dss_file("ieee13"), grid_models.dss_file("ieee34"), odd):
        info = opendss_circuit_info(path)
        flow = OpenDssFlow(path)
        for name, bus_id in zip(info.buses, info.ids["bus"]):
            for ref in (name, name.upper(), f" {name} ", bus_id):
                assert bus_position(info, ref) == flow.locate_bus(ref), (path, ref)
        assert bus_position(info, "no_such_bus") is None
        flow.close()
    info = opendss_circuit_info(odd)
    assert "load-bus" in info.buses and "load_bus" in info.ids["bus"]  # the case the old check missed


@pytest.mark.parametrize("phases", ["abc", "ABC", "cba", " bc ", "Ca", "b"])
def test_dc_phases_read_as_the_grid_element_reads_its_phases(phases):
    """OFO's dc_phases check refused "ABC", which the grid element takes: both read phases through
    one helper, so a site's phases normalise as the element's do."""
    site = SiteControl(name="a", dc_bus="890", dc_phases=phases)
    assert site.dc_phases == phase_set(phases) == "".join(ph for ph in "abc" if ph in phases.lower())


def test_an_unknown_excluded_bus_is_refused_naming_it():
    """exclude_buses went unchecked at validation (an unknown name was dropped from the site check
    and failed later, when the controller built): now it is a validation error with key and value."""
    with pytest.raises(ValidationError, match=r"exclude_buses\[1\] = 'nowhere'.*unknown bus"):
        OFOParams.model_validate({"network": "ieee34", "exclude_buses": ["800", "nowhere"],
                                  "sites": [{"name": "a", "dc_bus": "890", "p_flex_mw": 0.1}]})
