"""The mosaik engine checks each get_data answer against sets of outputs taken once (mosaik 3.6 rebuilds an
entity's output set at every check): an answer within them passes without mosaik's check; anything else
(an attribute the model does not declare, an entity never created) still goes to mosaik's own check, which
warns. A run on mosaik with the kept check equals the direct engine's (tests/run/test_engines_equal.py)."""

from __future__ import annotations

from types import SimpleNamespace

import cosim

from cosim.run.mosaik_engine import _keep_output_checks


class _Everything:
    """Like mosaik's OutSet: every attribute but a few (it cannot be iterated)."""

    def __contains__(self, attr: str) -> bool:
        return attr != "never"


def _world(outputs: dict[str, object]):
    seen: list[dict] = []
    entities = {eid: SimpleNamespace(model_mock=SimpleNamespace(output_attrs=attrs)) for eid, attrs in outputs.items()}
    factory = SimpleNamespace(entities=entities, validate_output_dict=seen.append)
    world = SimpleNamespace(_async_world=SimpleNamespace(_factories={"grid": factory}))
    return world, factory, seen


def test_answers_within_the_outputs_skip_mosaiks_check_and_others_reach_it():
    world, factory, seen = _world({"feeder": frozenset({"vm_min_pu", "p_mw"}), "any": _Everything()})
    _keep_output_checks(world)
    factory.validate_output_dict({"feeder": {"vm_min_pu": 1.0}, "any": {"whatever": 2.0}})
    assert seen == []
    wrong = {"feeder": {"vm_min_pu": 1.0, "q_kvar": 0.0}}  # not declared by the model
    factory.validate_output_dict(wrong)
    unknown = {"ghost": {"p_mw": 0.0}}  # an entity never created
    factory.validate_output_dict(unknown)
    refused = {"any": {"never": 0.0}}
    factory.validate_output_dict(refused)
    assert seen == [wrong, unknown, refused]


def test_the_sets_are_taken_once():
    """What makes it fast: the model's output set is read when the check is kept, not at each answer."""
    reads = []

    class Mock:
        @property
        def output_attrs(self):
            reads.append(1)
            return frozenset({"p_mw"})

    seen: list[dict] = []
    factory = SimpleNamespace(entities={"campus": SimpleNamespace(model_mock=Mock())}, validate_output_dict=seen.append)
    _keep_output_checks(SimpleNamespace(_async_world=SimpleNamespace(_factories={"dc": factory})))
    for _ in range(100):
        factory.validate_output_dict({"campus": {"p_mw": 1.0}})
    assert len(reads) == 1 and seen == []


GRID_ONLY = """
[scenario]
name = "feeder"
start = 2024-07-15T00:00:00Z
duration_s = 900
step_s = 300
engine = "mosaik"

[sims]
grid = { adapter = "grid", network = "ieee33" }

[entities]
feeder = { sim = "grid", model = "Grid" }
"""


def test_mosaik_asks_the_kept_check_of_every_answer_in_a_run(write_scenario, tmp_path, monkeypatch):
    """The speed-up works only while mosaik looks the check up on its factory at each answer: a mosaik that bound
    it earlier (or renamed it) would run its own check again, and so would an engine that stopped installing the
    kept one; either way this test fails (the results would stay right)."""
    from cosim.run import mosaik_engine

    asked: list[str] = []  # the installed check, at each answer
    theirs: list[str] = []  # mosaik's own check
    keep = mosaik_engine._keep_output_checks

    def counted(world, calls: list[str]) -> None:  # each factory's check as it is now, its calls counted
        for sid, factory in world._async_world._factories.items():
            def check(eid_dict, inner=factory.validate_output_dict, sid=sid) -> None:
                calls.append(sid)
                inner(eid_dict)

            factory.validate_output_dict = check

    def counting(world) -> None:
        counted(world, theirs)
        keep(world)
        counted(world, asked)

    monkeypatch.setattr(mosaik_engine, "_keep_output_checks", counting)
    result = cosim.run(write_scenario(GRID_ONLY), out_dir=tmp_path / "runs")
    assert result.ok and result.metadata["engine"] == "mosaik"
    assert asked.count("grid") == 3  # one answer per step of the grid, each checked by the installed check ...
    assert theirs == []  # ... which passed them without mosaik's own
