"""Tests of the grid model catalogue: discovery, loading, caching and the SimBench profiles."""

from __future__ import annotations

import pandapower as pp
import pytest

from cosim import grid_models
from grid_models import simbench as sb_model

SIMBENCH = "simbench:1-MV-rural--0-sw"


def test_catalogue_lists_every_module_with_a_description():
    entries = grid_models.catalogue()
    assert {"ieee33", "cigre_mv", "simbench"} <= set(entries)
    assert all(text and "\n" not in text for text in entries.values())


def test_a_new_module_is_picked_up_without_a_list(tmp_path, monkeypatch):
    (tmp_path / "toy_feeder.py").write_text(
        '"""Two buses and a line."""\nimport pandapower.networks as pn\n\ndef build():\n    return pn.example_simple()\n'
    )
    (tmp_path / "_helper.py").write_text('"""Private."""\ndef build():\n    return None\n')
    monkeypatch.setattr(grid_models, "__path__", [*grid_models.__path__, str(tmp_path)])
    grid_models.catalogue.cache_clear()
    try:
        entries = grid_models.catalogue()
        assert entries["toy_feeder"] == "Two buses and a line."
        assert "_helper" not in entries
        assert len(grid_models.load_network("toy_feeder").bus) > 0
    finally:
        grid_models.catalogue.cache_clear()


def test_unknown_name_lists_the_catalogue():
    with pytest.raises(ValueError, match="ieee33.*simbench:<code>"):
        grid_models.load_network("ieee34")


def test_load_network_returns_independent_copies():
    first = grid_models.load_network("ieee33")
    first.load["p_mw"] = 0.0
    pp.create_bus(first, vn_kv=12.66)
    second = grid_models.load_network("ieee33")
    assert second.load.p_mw.sum() == pytest.approx(3.715)  # Baran & Wu total load [MW]
    assert len(second.bus) == 33


def test_ieee33_uses_the_papers_bus_numbers():
    """Baran & Wu number buses 1..33 from the substation; bus 18 ends the main feeder."""
    net = grid_models.load_network("ieee33")
    assert net.bus.name.iloc[0] == "1" and net.bus.name.iloc[17] == "18"
    assert set(net.ext_grid.bus) == {0}
    assert sorted(net.line.name[~net.line.in_service]) == ["12_22", "18_33", "21_8", "25_29", "9_15"]


def test_network_params_reach_build():
    assert len(grid_models.load_network("cigre_mv").sgen) == 9  # default with_der="pv_wind"
    assert len(grid_models.load_network("cigre_mv", with_der=False).sgen) == 0
    with pytest.raises(ValueError, match="network_params"):
        grid_models.load_network("ieee33", voltage_kv=20)


def test_json_file_relative_to_base_dir(tmp_path):
    net = grid_models.load_network("cigre_mv")
    pp.to_json(net, str(tmp_path / "feeder.json"))
    loaded = grid_models.load_network("feeder.json", base_dir=tmp_path)
    assert list(loaded.bus.name) == list(net.bus.name)
    assert grid_models.load_profiles("feeder.json", base_dir=tmp_path) is None
    with pytest.raises(ValueError, match="not found"):
        grid_models.load_network("missing.json", base_dir=tmp_path)


def test_an_edited_json_file_is_read_again(tmp_path):
    """The in-process cache follows the file: a notebook that edits its feeder between runs gets the
    edited net, and the grid adapter's element list follows it too."""
    from cosim.adapters.grid import GridSim

    net = grid_models.load_network("cigre_mv")
    path = tmp_path / "feeder.json"
    pp.to_json(net, str(path))
    sim_params = GridSim.SimParams.model_validate({"network": str(path)})
    before = GridSim.meta_for(sim_params)
    assert grid_models.load_network(str(path)).line.max_i_ka.iloc[0] == net.line.max_i_ka.iloc[0]
    net.line.loc[net.line.index[0], "max_i_ka"] = 0.123
    pp.create_bus(net, vn_kv=20.0, name="new bus")
    pp.to_json(net, str(path))
    assert grid_models.load_network(str(path)).line.max_i_ka.iloc[0] == 0.123
    after = GridSim.meta_for(sim_params)
    assert len(after["models"]["Grid"]["attrs"]) > len(before["models"]["Grid"]["attrs"])


def test_simbench_net_and_profiles_from_the_cache():
    """SimBench 1-MV-rural--0-sw (Meinecke et al. 2020): 97 buses, 96 loads, 102 sgens, 2016 in 15 min."""
    net = grid_models.load_network(SIMBENCH)
    assert (len(net.bus), len(net.load), len(net.sgen)) == (97, 96, 102)
    assert (sb_model.cache_dir() / f"simbench-{__import__('simbench').__version__}-1-MV-rural--0-sw.pkl").is_file()
    profiles = grid_models.load_profiles(SIMBENCH)
    assert set(profiles) == {"load.p_mw", "load.q_mvar", "sgen.p_mw"}
    assert profiles["load.p_mw"].shape == (366 * 96, 96)
    pv = net.sgen.index[net.sgen.type == "PV_MV"]
    june_21 = slice(172 * 96, 173 * 96 - 1)
    assert profiles["sgen.p_mw"].loc[0, pv].max() == 0.0  # 1 January, midnight: no PV
    assert profiles["sgen.p_mw"].loc[june_21, pv].max().min() > 0.0  # every plant produces on 21 June
    assert grid_models.profile_step_s(SIMBENCH) == 900


def test_simbench_cache_dir_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert sb_model.cache_dir() == tmp_path / "cosim"


def test_bad_simbench_code_is_a_value_error():
    with pytest.raises(ValueError, match="SimBench"):
        grid_models.load_network("simbench:not a code")


@pytest.mark.parametrize("text, reason", [
    ("this is not json {", "not JSON"),
    ("", "not JSON"),
    ('{"a": 1, "b": [1, 2]}', "JSON, but an object with keys a, b"),
    ("[1, 2, 3]", "JSON, but a list"),
])
def test_a_json_file_that_is_not_a_net_says_why_and_how_to_fix(tmp_path, text, reason):
    """Not JSON, or JSON of something else: one ValueError naming the file, the reason and the fix
    (before: pandapower's internal exception, e.g. "AttributeError: 'dict' object has no attribute
    'version'", and no fix)."""
    (tmp_path / "mine.json").write_text(text)
    with pytest.raises(ValueError) as caught:
        grid_models.load_network("mine.json", base_dir=tmp_path)
    message = str(caught.value)
    assert message.startswith("mine.json: not a pandapower JSON network")
    assert reason in message and "pandapower.to_json" in message
