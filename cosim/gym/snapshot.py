"""Simulators set up once and handed out as copies at a gym reset, instead of being built again.

A simulator whose ``built_from()`` (:meth:`cosim.sdk.CosimSim.built_from`) names the
scenario-wide ``init`` arguments its set-up depends on is copied (``copy.deepcopy``) right after
the engine set it up, before its first step, and kept under those arguments' values. The next
episode of the same scenario whose values agree takes a copy of it, with the attributes
``init`` keeps the arguments in (``start_utc``, ``duration_s``, ``seed``) set to the new
episode's, and the engine wires it as it would a new one (``DirectEngine.start(built)``). The
copies share the kept simulator's ``meta`` (the META ``init`` returned), which no one edits after
``init``.
A simulator that says None (the default) is built at every reset, as before.

The copies of one scenario object are shared by every env made from it (the copies of a vector
env): :func:`kept_for`.
"""

from __future__ import annotations

import copy
import weakref
from collections import OrderedDict
from datetime import datetime
from typing import Any

from cosim.scenario import Scenario
from cosim.sdk import parse_utc

#: copies kept per simulator of a scenario (least recently used dropped first): a start window of
#: two months, one copy per start day of the simulators whose set-up depends on the start
MAX_KEPT = 64
#: the ``init`` arguments a copy may be set up under other values of
ARGS = ("start_utc", "duration_s", "seed")

_STORES: dict[int, "Kept"] = {}


def kept_for(scn: Scenario) -> "Kept":
    """The store of set-up copies shared by the envs of ``scn`` (dropped with it)."""
    store = _STORES.get(id(scn))
    if store is None:
        store = _STORES[id(scn)] = Kept()
        weakref.finalize(scn, _STORES.pop, id(scn), None)
    return store


def init_args(scn: Scenario) -> dict[str, Any]:
    """The scenario-wide ``init`` arguments of ``scn``, as the direct engine passes them."""
    return {"start_utc": scn.scenario.start.isoformat(), "duration_s": scn.scenario.duration_s,
            "seed": scn.scenario.seed}


class Kept:
    """Set-up copies of one scenario's simulators, by sim id and the values they depend on."""

    def __init__(self, max_kept: int = MAX_KEPT):
        self.max_kept = max_kept
        self._copies: dict[str, OrderedDict[tuple, Any]] = {}  # sim id -> the values set up under -> copy
        self._depends: dict[str, tuple[str, ...]] = {}  # sim id -> the arguments its set-up depends on
        self.n_taken = 0  # copies handed out (a figure for tests and benchmarks)
        self._told: dict[str, set[datetime]] = {}  # sim id -> the starts prepare_starts was given

    def _key(self, sid: str, args: dict[str, Any]) -> tuple:
        return tuple(args[name] for name in self._depends[sid])

    def take(self, scn: Scenario) -> dict[str, Any]:
        """``{sim id: a fresh copy}`` of every kept simulator that fits ``scn`` (its seed and start)."""
        args = init_args(scn)
        built: dict[str, Any] = {}
        for sid in self._depends:
            if sid not in scn.sims:
                continue
            copies, key = self._copies[sid], self._key(sid, args)
            kept = copies.get(key)
            if kept is None:
                continue
            copies.move_to_end(key)
            meta = getattr(kept, "meta", None)  # META is read, never edited, after init: one copy serves all
            obj = copy.deepcopy(kept, {} if meta is None else {id(meta): meta})
            obj.start_utc, obj.duration_s, obj.seed = parse_utc(args["start_utc"]), int(args["duration_s"]), \
                int(args["seed"])
            built[sid] = obj
        self.n_taken += len(built)
        return built

    def keep(self, scn: Scenario, engine: Any, built: dict[str, Any], starts: list[datetime] = ()) -> None:
        """Copy the simulators ``engine`` has just set up itself (not ``built``, not stepped yet)
        that say a copy is a faithful start (``built_from()`` not None); and tell each simulator
        the ``starts`` the episodes to come may have that it was not told of yet
        (``prepare_starts``: a start day not seen before then sets up faster)."""
        args = init_args(scn)
        for sim in engine.sims:
            if sim.sid in built or sim.sid not in scn.sims:
                continue
            told = self._told.setdefault(sim.sid, set())
            new = [start for start in starts if start not in told]
            prepare = getattr(sim.obj, "prepare_starts", None)  # (a CosimSim's; a plain mosaik sim has none)
            if new and prepare is not None:
                prepare(new)
            told.update(new)
            built_from = getattr(sim.obj, "built_from", None)
            depends = built_from() if built_from is not None else None
            if depends is None:
                continue
            unknown = set(depends) - set(ARGS)
            if unknown:
                raise ValueError(f"{type(sim.obj).__name__}.built_from() names {sorted(unknown)}; "
                                 f"it may name only {', '.join(ARGS)}")
            self._depends[sim.sid] = tuple(name for name in ARGS if name in depends)
            copies = self._copies.setdefault(sim.sid, OrderedDict())
            copies[self._key(sim.sid, args)] = copy.deepcopy(sim.obj)
            while len(copies) > self.max_kept:
                copies.popitem(last=False)
