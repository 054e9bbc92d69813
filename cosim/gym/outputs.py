"""Reading simulators' outputs by name, as their ``get_data`` gives them, without its per-call dicts
(what an episode reads after every recording step, and each agent's observations)."""

from __future__ import annotations

from typing import Any

from cosim.sdk import CosimSim, tuple_getter


class OutputReader:
    """The outputs ``"<entity>.<attr>"`` of ``names`` now, as a list in that order, as each entity's
    ``get_data`` gives them (None for one not produced yet).

    An adapter that keeps :class:`cosim.sdk.CosimSim`'s ``get_data`` hands out ``out[eid][attr]``:
    those are read from its ``out`` directly (one ``itemgetter`` per entity; ``.get`` when one is
    missing), without the dicts ``get_data`` builds; an adapter with a ``get_data`` of its own is
    asked through it.
    """

    def __init__(self, engine, names: list[str]):
        self.n = len(names)
        grouped: dict[str, list[tuple[int, str]]] = {}
        for pos, name in enumerate(names):
            eid, attr = name.split(".", 1)
            grouped.setdefault(eid, []).append((pos, attr))
        self._groups = []
        for eid, items in grouped.items():
            obj = engine.entity_sim[eid].obj
            attrs = tuple(attr for _, attr in items)
            own = getattr(type(obj), "get_data", None) is CosimSim.get_data
            self._groups.append((obj, eid, own, attrs, tuple_getter(attrs), {eid: list(attrs)}))
        #: the values are read entity by entity: where each name's value sits among them (None: in order)
        read_order = [pos for items in grouped.values() for pos, _ in items]
        where = [0] * self.n
        for k, pos in enumerate(read_order):
            where[pos] = k
        self._order = None if where == list(range(self.n)) else tuple_getter(tuple(where))

    def __call__(self) -> list[Any]:
        values: list[Any] = []
        for obj, eid, own, attrs, getter, request in self._groups:
            if own:
                out = obj.out[eid]  # looked up at every read: an adapter may replace out[eid] each step
                try:
                    values.extend(getter(out))
                except KeyError:
                    values.extend([out.get(attr) for attr in attrs])
            else:
                data = obj.get_data(request)[eid]
                values.extend([data.get(attr) for attr in attrs])
        return values if self._order is None else list(self._order(values))
