"""A pandapower JSON network is read as data (grid_models/_json_guard.py).

pandapower's reader imports an entry's ``_module`` before it checks it; the guard reads the file
with Python's json module first and lets through only the types real networks are written with:
every catalogue network and SimBench grid (and a net with a controller) saved by
``pandapower.to_json`` passes; any other module or class, ``builtins.eval`` as a function, and a
JSON nested 200,000 deep are refused with one message naming the file and the JSON path.
"""

from __future__ import annotations

import json
import sys
import warnings

import pandapower as pp
import pandapower.control as control
import pandapower.networks as pn
import pytest

from cosim.grid_models import catalogue, dss_feeders, load_network
from cosim.grid_models._json_guard import json_net_problem

NETS = [n for n in catalogue() if n not in dss_feeders()] + ["simbench:1-LV-rural1--0-sw", "simbench:1-MV-urban--0-sw"]


@pytest.mark.parametrize("spec", NETS)
def test_every_catalogue_and_simbench_net_saved_by_pandapower_passes_and_loads(spec, tmp_path):
    path = tmp_path / "net.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pp.to_json(load_network(spec), str(path))
    assert json_net_problem(path) == ""
    assert len(load_network(str(path)).bus) == len(load_network(spec).bus)


def test_a_net_with_a_pandapower_controller_passes(tmp_path):
    net = pn.mv_oberrhein()
    control.ConstControl(net, "load", "p_mw", element_index=[0])
    path = tmp_path / "net.json"
    pp.to_json(net, str(path))
    assert json_net_problem(path) == ""


def _net_with(tmp_path, entry: dict, table: str = "bus") -> str:
    """ieee33 as pandapower writes it, one cell of its ``name`` column replaced by ``entry``; the message."""
    data = json.loads(pp.to_json(load_network("ieee33")))
    frame = json.loads(data["_object"][table]["_object"])
    frame["data"][0][frame["columns"].index("name")] = entry
    data["_object"][table]["_object"] = json.dumps(frame)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as err:
        load_network(str(path))
    return str(err.value)


@pytest.mark.parametrize("entry", [
    {"_module": "this", "_class": "x", "_object": "1"},
    {"_module": "builtins", "_class": "function", "_object": "eval"},
    {"_module": "os", "_class": "system", "_object": "true"},
    {"_module": "numpy", "_class": "load", "_object": "/etc/passwd"},
    {"_module": "pandapower.timeseries.output_writer", "_class": "OutputWriter", "_object": "{}"},
    {"_module": "subprocess", "_object": "x"},
    {"_class": "function", "_object": "eval"},
])
def test_a_type_a_net_does_not_need_is_refused_before_import(entry, tmp_path):
    """``{"_module": "this"}`` used to print the Zen of Python (pandapower imported it); ``builtins.eval``
    entered the net. Inside a table's cell (a JSON string in a JSON string) as at the top."""
    sys.modules.pop("this", None)
    message = _net_with(tmp_path, entry)
    assert message.startswith("net.json: not a pandapower JSON network (")
    assert "$._object.bus._object(json).data[0]" in message and repr(entry.get("_module")) in message
    assert "this" not in sys.modules


def test_a_json_nested_200k_deep_is_a_clean_message(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError) as err:
        load_network(str(path))
    assert "deep.json" in str(err.value) and "nested deeper than" in str(err.value)


def test_nesting_past_the_limit_is_refused_with_its_path(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({"_module": "pandapower.auxiliary", "_class": "pandapowerNet",
                                "_object": {"bus": json.loads("[" * 80 + "]" * 80)}}))
    assert json_net_problem(path).startswith("nested deeper than 64 levels at $._object.bus")


def test_an_entry_spelt_with_escapes_inside_a_table_is_refused(tmp_path):
    """``"\\u005fmodule"`` is ``"_module"`` once pandas reads the table's JSON string: found all the same."""
    data = json.loads(pp.to_json(load_network("ieee33")))
    table = data["_object"]["bus"]["_object"]
    data["_object"]["bus"]["_object"] = table.replace('"columns":', '"x":{"\\u005fmodule":"this","\\u005fclass":"y"},'
                                                                    '"columns":', 1)
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    assert "'this'" in json_net_problem(path)
