"""OutputReader (cosim/gym/outputs.py) gives what each entity's get_data gives, in the order asked."""

from __future__ import annotations

from cosim.gym.outputs import OutputReader
from cosim.sdk import CosimSim


class Plain(CosimSim):
    """An adapter keeping CosimSim's get_data (its outputs read from ``out`` directly)."""

    def __init__(self, out):
        self.out, self._getters = out, {}


class Own(Plain):
    """An adapter with a get_data of its own (asked through it)."""

    def get_data(self, outputs):
        return {eid: {a: ("own", self.out[eid].get(a)) for a in attrs} for eid, attrs in outputs.items()}


class Engine:
    def __init__(self, **sims):
        self.entity_sim = {eid: type("S", (), {"obj": obj})() for eid, obj in sims.items()}


def test_values_come_as_get_data_gives_them_in_the_order_asked():
    plain = Plain({"a": {"x_mw": 1.0, "y_mw": 2.0}})
    own = Own({"b": {"z_mw": 3.0}})
    names = ["a.y_mw", "b.z_mw", "a.x_mw", "a.missing_mw"]
    read = OutputReader(Engine(a=plain, b=own), names)
    expected = [plain.get_data({"a": ["y_mw"]})["a"]["y_mw"], ("own", 3.0), 1.0, None]
    assert read() == expected
    plain.out["a"] = {"x_mw": 5.0, "y_mw": 6.0, "missing_mw": 7.0}  # an adapter replacing its dict each step
    assert read() == [6.0, ("own", 3.0), 5.0, 7.0]
