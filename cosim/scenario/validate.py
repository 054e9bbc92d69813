"""Validation: raw TOML data into a :class:`~cosim.scenario.schema.Scenario`, every problem named.

Each problem is ``key.path = value: what is wrong; what is allowed``; all of them are
collected, then raised at once as a :class:`~cosim.errors.ScenarioError`.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from importlib import import_module
from math import gcd
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from cosim import registry
from cosim.errors import Problem, ScenarioError, few
from cosim.roles import ROLES, missing_outputs
from cosim.scenario.record import recorded_columns as record_columns
from cosim.scenario.schema import (
    ENTITY_KEYS,
    FOREIGN_SECTIONS,
    SECTIONS,
    SIM_KEYS,
    ConnectSpec,
    EntitySpec,
    MAX_DURATION_S,
    RESERVED_SIM_PREFIX,
    RecordSpec,
    Scenario,
    ScenarioSection,
    SimSpec,
)
from cosim.sdk import ticks_per_s, to_ticks
from cosim.units import has_unit_suffix, unit_of

#: An adapter's ``check`` text with this prefix is a warning, not a problem (:meth:`cosim.sdk.CosimSim.check`).
WARNING = "warning: "


def _declared(scn: Scenario, section: str) -> dict[str, Any]:
    """The ids declared in a section (empty when the section is not a table: reported elsewhere)."""
    value = scn.raw.get(section, {})
    return value if isinstance(value, dict) else {}


def validate(raw: dict[str, Any], path: Path, allow_commands: bool = False) -> Scenario:
    """Validate raw TOML data; see :func:`load_scenario`."""
    problems: list[Problem] = []
    base_dir = path.resolve().parent
    for key in raw:
        if key in FOREIGN_SECTIONS:  # read by cosim.gym / cosim reproduce (cosim validate checks them through them)
            if not isinstance(raw[key], dict):
                reader = "cosim reproduce" if key == "reproduce" else "cosim.gym"
                problems.append(Problem(key, f"must be a table ([{key}] ...), read by {reader}", raw[key]))
        elif key not in SECTIONS:
            problems.append(Problem(key, f"unknown section; allowed: {', '.join((*SECTIONS, *FOREIGN_SECTIONS))}"))

    section = _model(ScenarioSection, raw.get("scenario"), "scenario", problems)
    sims = _table(raw.get("sims", {}), "sims", SimSpec, SIM_KEYS, problems)
    entities = _table(raw.get("entities", {}), "entities", EntitySpec, ENTITY_KEYS, problems)
    connects = _connects(raw.get("connect", []), problems)
    record = _model(RecordSpec, raw.get("record", {}), "record", problems)
    scn = Scenario(path, base_dir, section, sims, entities, connects, record or RecordSpec(), raw)

    _check_timing(raw.get("scenario"), scn.record, sims, problems)
    if not sims and isinstance(raw.get("sims", {}), dict) and not raw.get("sims"):
        problems.append(Problem("sims", "no simulators: a scenario needs at least one [sims.<id>] with an adapter"))
    _check_step_lengths(raw.get("scenario"), sims, problems)
    _check_commands(sims, allow_commands, problems)
    _check_sims(scn, problems)
    _check_entities(scn, problems)
    _check_roles(scn, problems)
    _check_connects(scn, problems)
    _check_cycles(scn, problems)
    if not problems:
        _check_load_traces(scn, problems)
    _check_record(scn, problems)
    _check_kpis(scn, problems)
    if not problems:
        check_engine(scn, problems)
    if not problems:
        _check_scenario_hooks(scn, problems)
    if problems:
        raise ScenarioError(path, problems)
    return scn


def _union_noise(err: dict, errors: list[dict]) -> bool:
    """A ``str | Model`` value that is a table fails the ``str`` branch too; that type mismatch
    says nothing when another branch at the same place has the real problem."""
    if not err["type"].endswith("_type"):
        return False
    base = err["loc"][:-1]
    return any(o is not err and o["loc"][:len(base)] == base and o["loc"] != err["loc"]
               and not o["type"].endswith("_type") for o in errors)


def _allowed_at(model: type[BaseModel], path: tuple) -> list[str] | None:
    """The keys of the (nested) table at ``path`` of ``model`` (``kpis.swing`` → ``band_hz``); None if unknown."""
    for part in path:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return list(model.model_fields)


#: The names pydantic gives the branches of a union in an error's location.
_UNION_BRANCHES = frozenset({"int", "float", "str", "bool", "list[str]", "list[float]"})


def _pydantic_problems(exc: ValidationError, prefix: str, allowed: list[str] | None = None,
                       model: type[BaseModel] | None = None) -> list[Problem]:
    found = []
    errors = exc.errors()
    for err in errors:
        if _union_noise(err, errors):
            continue
        # a union's branch ("int", "float") is no key of the file: scenario.step_s, not scenario.step_s.float
        loc = ".".join(str(p) for p in err["loc"] if p != "params" and p not in _UNION_BRANCHES)
        where = f"{prefix}.{loc}" if loc else prefix
        if err["type"] == "missing":
            found.append(Problem(where, "required key is missing"))
        elif err["type"] == "extra_forbidden":
            here = _allowed_at(model, err["loc"][:-1]) if model is not None else allowed
            hint = f"; allowed: {', '.join(here)}" if here else ""
            found.append(Problem(where, f"unknown key{hint}"))
        elif not loc and isinstance(err.get("input"), dict):
            # a check over several keys (a model validator): its message names the keys and values;
            # the whole table as the value would only hide it
            found.append(Problem(where, err["msg"].removeprefix("Value error, ")))
        else:
            found.append(Problem(where, err["msg"].removeprefix("Value error, "), err.get("input")))
    return found


def _model(cls: type[BaseModel], data: Any, prefix: str, problems: list[Problem]) -> Any:
    if data is None:
        problems.append(Problem(prefix, f"section [{prefix}] is missing"))
        return None
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        problems.extend(_pydantic_problems(exc, prefix, list(cls.model_fields), model=cls))
        return None


def _table(data: Any, prefix: str, cls: type[BaseModel], own_keys: tuple[str, ...], problems: list[Problem]) -> dict:
    if not isinstance(data, dict):
        problems.append(Problem(prefix, f"must be a table of [{prefix}.<id>] sections", data))
        return {}
    specs = {}
    for key, body in data.items():
        where = f"{prefix}.{key}"
        if not key.isidentifier():
            problems.append(Problem(where, "ids are letters, digits and _ (no dots, dashes or spaces)"))
            continue
        if prefix == "sims" and key.startswith(RESERVED_SIM_PREFIX):
            problems.append(Problem(where, f"sim ids starting with {RESERVED_SIM_PREFIX!r} are cosim's own (the "
                                    f"recorder runs as sims._recorder); rename it, e.g. {key.lstrip('_') or 'sim'!r}"))
            continue
        if not isinstance(body, dict):
            problems.append(Problem(where, "must be a table", body))
            continue
        split = {k: v for k, v in body.items() if k in own_keys}
        split["params"] = {k: v for k, v in body.items() if k not in own_keys}
        spec = _model(cls, split, where, problems)
        if spec is not None:
            specs[key] = spec
    return specs


def _connects(data: Any, problems: list[Problem]) -> list[ConnectSpec]:
    if not isinstance(data, list):
        problems.append(Problem("connect", "use [[connect]] blocks (an array of tables)", data))
        return []
    found = []
    for i, body in enumerate(data):
        spec = _model(ConnectSpec, body, f"connect[{i}]", problems)
        found.append(spec)
    return found


def _number(value: Any) -> bool:
    """A positive number no longer than the longest run (the schema names anything else)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= MAX_DURATION_S


def _tick_count(value: Any, n_per_s: int) -> int | None:
    """``value`` seconds in ticks, None when it is not a whole number of them."""
    try:
        return to_ticks(value, n_per_s)
    except ValueError:
        return None


def _check_timing(raw: Any, record: RecordSpec, sims: dict[str, SimSpec], problems: list[Problem]) -> None:
    """Step arithmetic in whole ticks, from the raw values so it is checked even when another key is wrong."""
    if not isinstance(raw, dict):
        return
    duration, step, tick = raw.get("duration_s"), raw.get("step_s"), raw.get("tick_s", 1.0)
    try:
        n_per_s = ticks_per_s(tick)
    except ValueError:
        return  # the schema names the bad tick_s
    for where, value in [("scenario.step_s", step), *((f"sims.{sid}.step_s", spec.step_s) for sid, spec in sims.items()),
                         ("record.step_s", record.step_s)]:
        if _number(value) and _tick_count(value, n_per_s) is None:
            problems.append(Problem(where, f"not a whole number of ticks (scenario.tick_s = {tick:g} s); give a "
                                    f"multiple of {tick:g} s, or a finer tick_s", value))
    if not (isinstance(duration, int) and not isinstance(duration, bool) and duration > 0 and _number(step)):
        return
    step_ticks, until = _tick_count(step, n_per_s), duration * n_per_s
    if step_ticks is None:
        return
    if until % step_ticks:
        low = (until - until % step_ticks) / n_per_s
        high = low + step_ticks / n_per_s
        problems.append(Problem("scenario.duration_s", f"not a multiple of step_s = {step}; use {_seconds(low or high)} "
                                f"or {_seconds(high)}", duration))
    record_ticks = _tick_count(record.step_s, n_per_s) if _number(record.step_s) else None
    if record_ticks is not None and record_ticks % step_ticks:
        problems.append(Problem("record.step_s", f"must be a multiple of scenario.step_s = {step}", record.step_s))


def _seconds(value: float) -> str:
    return f"{value:g}" if value != int(value) else str(int(value))


def _route(scn: Scenario, where: str, texts: list[str], problems: list[Problem]) -> None:
    """An adapter's check results: ``"warning: ..."`` texts are warnings, the rest problems."""
    for text in texts:
        if text.startswith("warning: "):
            scn.warnings.append(f"{where}: {text.removeprefix('warning: ')}")
        else:
            problems.append(Problem(where, text))


def _check_scenario_hooks(scn: Scenario, problems: list[Problem]) -> None:
    """Each adapter's whole-scenario warnings and problems (:meth:`cosim.sdk.CosimSim.check_scenario`),
    once per class."""
    for cls in dict.fromkeys(registry.adapter_class(spec.adapter) for spec in scn.sims.values()):
        for found in cls.check_scenario(scn):
            (problems if isinstance(found, Problem) else scn.warnings).append(found)


def _check_step_lengths(raw: Any, sims: dict[str, SimSpec], problems: list[Problem]) -> None:
    """A simulator whose step is longer than the run steps once, at the start: a typo, not a study."""
    duration = raw.get("duration_s") if isinstance(raw, dict) else None
    if not (isinstance(duration, int) and not isinstance(duration, bool) and duration > 0):
        return
    for sid, spec in sims.items():
        if spec.step_s is not None and spec.step_s > duration:
            problems.append(Problem(f"sims.{sid}.step_s", f"longer than the run (duration_s = {duration}): it would "
                                    f"step once, at the start; give a step <= {duration}", spec.step_s))


def _check_commands(sims: dict[str, SimSpec], allow_commands: bool, problems: list[Problem]) -> None:
    """``cmd`` starts a program of the scenario's choosing: only when the user allows it."""
    for sid, spec in sims.items():
        if spec.cmd and not allow_commands:
            problems.append(Problem(f"sims.{sid}.cmd", "starts a program, and a scenario runs programs only when "
                                    "asked: pass --allow-commands on the command line (allow_commands=True in "
                                    "Python) if you trust this scenario", spec.cmd))


def _check_sims(scn: Scenario, problems: list[Problem]) -> None:
    for sim_id, spec in list(scn.sims.items()):
        where = f"sims.{sim_id}"
        try:
            cls = registry.adapter_class(spec.adapter)
        except registry.UnknownAdapterError:
            known = ", ".join(registry.available())
            problems.append(Problem(f"{where}.adapter", f"unknown adapter; known: {known}", spec.adapter))
            del scn.sims[sim_id]
            continue
        if spec.cmd and spec.connect:
            problems.append(Problem(where, "give either cmd or connect, not both"))
        try:
            params = cls.SimParams.model_validate(spec.params, context={"base_dir": scn.base_dir})
        except ValidationError as exc:
            allowed = list(SIM_KEYS) + list(cls.SimParams.model_fields)
            problems.extend(_pydantic_problems(exc, where, allowed))
            del scn.sims[sim_id]
            continue
        try:
            scn.metas[sim_id] = cls.meta_for(params)
            if scn.scenario is not None:
                sim_ctx = dataclasses.replace(scn.context, step_s=scn.sim_step_s(sim_id))  # the sim's own step
                _route(scn, where, cls.check(params, sim_ctx), problems)
        except ValueError as exc:
            problems.append(Problem(where, str(exc)))
            del scn.sims[sim_id]
            continue
        scn.sim_params[sim_id] = params.model_dump(mode="json", exclude_unset=True)
        scn.sim_models[sim_id] = params
        _check_meta_units(scn.metas.get(sim_id, {}), where, problems)


def _check_meta_units(meta: dict[str, Any], where: str, problems: list[Problem]) -> None:
    for model, desc in meta.get("models", {}).items():
        for attr in desc.get("attrs", []):
            if not has_unit_suffix(attr):
                problems.append(Problem(f"{where} ({model})", "attribute has no unit suffix (e.g. _mw, _pu, _c)", attr))
        if desc.get("role") not in ROLES:
            problems.append(Problem(f"{where} ({model})", f"the adapter's model declares no role; give it one in its "
                                    f"META (model_meta(..., role=...)): {', '.join(ROLES)}", desc.get("role")))


def _check_roles(scn: Scenario, problems: list[Problem]) -> None:
    """An entity given another role reports that role's power; a column role names a power
    output of the entity (a column in MW)."""
    for eid, spec in scn.entities.items():
        outputs = scn.outputs(eid)
        lacking = missing_outputs(spec.role, outputs) if spec.role else []
        if lacking:
            problems.append(Problem(f"entities.{eid}.role", f"a {spec.role} entity reports {', '.join(lacking)}; "
                                    f"{eid} ({spec.model}) does not: give its columns roles instead "
                                    f"(roles = {{ <attr>_mw = \"{spec.role}\" }})", spec.role))
        for attr, role in spec.roles.items():
            where = f"entities.{eid}.roles.{attr}"
            if attr not in outputs:
                problems.append(Problem(where, f"{eid} has no output {attr!r}; outputs: {few(outputs)}", role))
            elif unit_of(attr) != "mw":
                problems.append(Problem(where, f"a role counts a power column in MW; {attr} is in {unit_of(attr)!r}",
                                        role))


def _check_entities(scn: Scenario, problems: list[Problem]) -> None:
    for eid, spec in list(scn.entities.items()):
        where = f"entities.{eid}"
        if spec.sim not in scn.sims:
            if spec.sim not in _declared(scn, "sims"):
                problems.append(Problem(f"{where}.sim", f"unknown sim; known: {', '.join(_declared(scn, 'sims')) or 'none'}", spec.sim))
            del scn.entities[eid]
            continue
        models = scn.metas[spec.sim].get("models", {})
        if spec.model not in models:
            adapter = scn.sims[spec.sim].adapter
            problems.append(Problem(f"{where}.model", f"adapter {adapter!r} has no such model; known: {', '.join(models)}", spec.model))
            del scn.entities[eid]
            continue
        cls = registry.adapter_class(scn.sims[spec.sim].adapter)
        params_cls = cls.ModelParams.get(spec.model)
        if params_cls is None:
            if spec.params:
                problems.append(Problem(where, f"model {spec.model} takes no params", sorted(spec.params)))
            scn.entity_params[eid] = {}
            continue
        try:
            params = params_cls.model_validate(spec.params, context={"base_dir": scn.base_dir})
        except ValidationError as exc:
            problems.extend(_pydantic_problems(exc, where, list(ENTITY_KEYS) + list(params_cls.model_fields)))
            del scn.entities[eid]
            continue
        scn.entity_params[eid] = params.model_dump(mode="json", exclude_unset=True)
        scn.entity_extra_inputs[eid] = cls.entity_inputs(spec.model, params)
        if scn.scenario is not None:
            try:
                ctx = dataclasses.replace(scn.context, step_s=scn.sim_step_s(spec.sim))  # the sim's own step
                _route(scn, where, cls.check_entity(spec.model, params, ctx, scn.sim_models.get(spec.sim)), problems)
                scn.warnings.extend(time_constant_warnings(where, params, ctx.step_s))
            except ValueError as exc:
                problems.append(Problem(where, str(exc)))


def time_constant_warnings(where: str, params: Any, step_s: float) -> list[str]:
    """A declared time constant (``Params.TIME_CONSTANTS``) that is positive and shorter than the
    simulator's step: the step holds inputs longer than the response lasts, so what the model
    delivers depends on the step, not on the constant."""
    found = []
    for name in getattr(type(params), "TIME_CONSTANTS", ()):
        value: Any = params
        for part in name.split("."):
            value = getattr(value, part, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < step_s - 1e-12:
            found.append(f"{where}.{name} = {value:g} s is shorter than its simulator's step ({step_s:g} s): the "
                         f"step cannot resolve it and the response follows the step instead; run with step_s (and "
                         f"tick_s) <= {value:g} s, or state why the coarse step is enough")
    return found


def _check_connects(scn: Scenario, problems: list[Problem]) -> None:
    declared = _declared(scn, "entities")
    known_entities = ", ".join(declared) or "none"
    for i, conn in enumerate(scn.connect):
        if conn is None:
            continue
        where = f"connect[{i}]"
        ok = True
        for end in ("src", "dst"):
            name = getattr(conn, end)
            if name not in scn.entities:
                ok = False
                if name not in declared:
                    problems.append(Problem(f"{where}.{end}", f"unknown entity; known: {known_entities}", name))
        if not ok:
            continue
        if scn.entities[conn.src].sim == scn.entities[conn.dst].sim:
            problems.append(Problem(where, "src and dst belong to the same sim; connect entities of different sims"))
        if conn.time_shifted and conn.weak:
            problems.append(Problem(where, "choose time_shifted or weak, not both"))
        _check_attr_pairs(scn, conn, where, problems)


#: Roles whose power inputs are draws (consumer sign: > 0 draws from the grid).
LOAD_ROLES = ("load", "it")


def _check_load_traces(scn: Scenario, problems: list[Problem]) -> None:
    """A trace (a signals file) that feeds the power of a load or an IT entity must not go negative:
    a negative draw is generation, which a load never is (it used to fail at t = 0, or run on)."""
    for i, conn in enumerate(scn.connect):
        if conn is None or conn.src not in scn.entities or conn.dst not in scn.entities:
            continue
        role = scn.role(conn.dst)
        sid = scn.entities[conn.src].sim
        if role not in LOAD_ROLES or sid not in scn.sim_models:
            continue
        cls = registry.adapter_class(scn.sims[sid].adapter)
        make_series = getattr(cls, "make_series", None)
        if make_series is None:
            continue
        fed = [(src, dst) for src, dst in conn.pairs() if dst.startswith("p_") and unit_of(dst) == "mw"]
        if not fed:
            continue
        try:
            series = make_series(scn.sim_models[sid])
        except Exception:  # noqa: BLE001 — the sim's own check names what is wrong with its file
            continue
        for src_attr, dst_attr in fed:
            if src_attr not in series.names:
                continue
            column = series.values[:, series.names.index(src_attr)]
            lowest = int(column.argmin()) if len(column) else None
            if lowest is not None and column[lowest] < 0:
                file = getattr(series, "path", None)
                problems.append(Problem(
                    f"connect[{i}]", f"{conn.src}.{src_attr} feeds {conn.dst}.{dst_attr}, the draw of a {role} "
                    f"entity (consumer sign: > 0 draws from the grid), but {getattr(file, 'name', 'its file')} goes "
                    f"negative ({column[lowest]:g} MW at row {lowest + 1} of its data): a load never generates; "
                    "fix the trace (or its from_unit/scale), or feed a generator's input instead"))


def _check_attr_pairs(scn: Scenario, conn: ConnectSpec, where: str, problems: list[Problem]) -> None:
    src_meta, dst_meta = scn.model_meta(conn.src), scn.model_meta(conn.dst)
    outputs = src_meta.get("outputs", src_meta.get("attrs", []))
    inputs = [*dst_meta.get("inputs", dst_meta.get("attrs", [])), *scn.entity_extra_inputs.get(conn.dst, [])]
    # any_inputs means "any name" only for models that declare no inputs of their own (the recorder)
    any_name = dst_meta.get("any_inputs") and not dst_meta.get("inputs")
    for j, (src_attr, dst_attr) in enumerate(conn.pairs()):
        at = f"{where}.attrs[{j}]"
        for name in (src_attr, dst_attr):
            if not has_unit_suffix(name):
                problems.append(Problem(at, "attribute name has no unit suffix (e.g. _mw, _pu, _c)", name))
        if src_attr not in outputs:
            problems.append(Problem(at, f"{conn.src} has no output {src_attr!r}; outputs: {few(outputs)}", src_attr))
        if not any_name and dst_attr not in inputs:
            problems.append(Problem(at, f"{conn.dst} has no input {dst_attr!r}; inputs: {few(inputs) or 'none'}", dst_attr))
        elif unit_of(src_attr) and unit_of(dst_attr) and unit_of(src_attr) != unit_of(dst_attr):
            problems.append(Problem(at, f"unit mismatch: {src_attr} is in {unit_of(src_attr)}, {dst_attr} in {unit_of(dst_attr)}"))
        if (conn.time_shifted or conn.weak) and src_attr not in conn.initial_data:
            problems.append(Problem(f"{where}.initial_data", f"a delayed connection needs a start value for {src_attr!r}"))
    sources = [a for a, _ in conn.pairs()]
    if conn.initial_data and not (conn.time_shifted or conn.weak):
        problems.append(Problem(f"{where}.initial_data", "start values apply to delayed connections only; mark it "
                                "time_shifted = true (or weak = true), or drop initial_data"))
        return
    for key in conn.initial_data:
        if key not in sources:
            problems.append(Problem(f"{where}.initial_data.{key}", f"not an attribute this connection carries; "
                                    f"give start values for: {', '.join(sources)}"))


def _check_cycles(scn: Scenario, problems: list[Problem]) -> None:
    """A loop of undelayed connections between sims has no order to step in."""
    edges: dict[str, set[str]] = {}
    for conn in scn.connect:
        if conn is None or conn.time_shifted or conn.weak:
            continue
        if conn.src in scn.entities and conn.dst in scn.entities:
            edges.setdefault(scn.entities[conn.src].sim, set()).add(scn.entities[conn.dst].sim)
    cycle = _find_cycle(edges)
    if cycle:
        loop = " -> ".join(cycle)
        problems.append(Problem("connect", f"feedback loop without delay: {loop}; mark one of its "
                                           "connections time_shifted = true (or weak = true) with initial_data"))


def _check_kpis(scn: Scenario, problems: list[Problem]) -> None:
    """``[kpis.<block>]``: each a table of a block that takes parameters, checked by the block's own
    model and ``check``; every block with parameters gets its defaults when the scenario gives none.

    The KPI blocks live a layer above (they read runs): they are found as a run finds them
    (``cosim.kpis.blocks()``, every module on its search path), not imported here, and a block's
    parameters are its own (``Block.params``, ``Block.check``): no list of them is kept here."""
    raw = scn.raw.get("kpis", {})
    if not isinstance(raw, dict):
        problems.append(Problem("kpis", "must be a table of [kpis.<block>] tables, e.g. [kpis.swing] band_hz = "
                                "[0.1, 2.0]", raw))
        return
    kpis = import_module("cosim.kpis")
    blocks = {block.name: block for block in kpis.blocks()}
    takes = sorted(name for name, block in blocks.items() if block.params is not None)
    for name, table in raw.items():
        where = f"kpis.{name}"
        block = blocks.get(name)
        if block is None or block.params is None:
            what = "unknown key: this KPI block takes no parameters" if block is not None else "unknown key: no KPI block by this name"
            problems.append(Problem(where, f"{what}; allowed (the blocks with parameters): {', '.join(takes)}"))
            continue
        if not isinstance(table, dict):
            problems.append(Problem(where, f"must be a table of the {name} block's parameters: "
                                    f"{', '.join(block.params.model_fields)}", table))
            continue
        params = _model(block.params, table, where, problems)
        if params is None:
            continue
        if block.check is not None:
            ctx = kpis.ParamsContext(where, *_kpi_context(scn))
            params, found = block.check(params, ctx)
            problems.extend(found)
            scn.warnings.extend(ctx.warnings)
        scn.kpis[name] = params
    for name in takes:
        scn.kpis.setdefault(name, blocks[name].params())


def _kpi_context(scn: Scenario) -> tuple:
    """What a block's ``check`` reads of the scenario (:class:`cosim.kpis._block.ParamsContext`)."""
    try:
        dt_s: float | None = float(scn.record_step_s)
        duration_s: float | None = float(scn.scenario.duration_s)
    except Exception:  # noqa: BLE001 — the timing problems are reported elsewhere
        dt_s = duration_s = None
    recorded = None
    if len(scn.entities) == len(_declared(scn, "entities")):
        recorded = frozenset(record_columns(scn))
    return dt_s, duration_s, scn.base_dir, tuple(scn.entities), recorded


def _check_record(scn: Scenario, problems: list[Problem]) -> None:
    """A pattern that matches no output is most likely a typo that would silently drop data."""
    if len(scn.entities) != len(_declared(scn, "entities")):
        return  # some entities are invalid; their outputs are unknown
    names = [f"{eid}.{attr}" for eid in scn.entities for attr in scn.outputs(eid)]
    if not names:
        return  # nothing to record: the patterns cannot be judged (the default "*" included)
    for key in ("include", "exclude"):
        for i, pattern in enumerate(getattr(scn.record, key) or ()):
            if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
                problems.append(Problem(f"record.{key}[{i}]", f"matches no output; outputs look like {few(names, 4)}", pattern))


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


# -- engines ---------------------------------------------------------------------------------
def check_engine(scn: Scenario, problems: list[Problem]) -> None:
    """What the chosen engine cannot run, or where mosaik's result would depend on its scheduling."""
    direct = scn.scenario.engine == "direct"
    for sid, spec in scn.sims.items():
        remote = "process = \"subprocess\"" if spec.process == "subprocess" else "cmd" if spec.cmd else \
            "connect" if spec.connect else None
        if direct and remote:
            problems.append(Problem(f"sims.{sid}", f"{remote} runs the simulator outside this process, which only "
                                    "mosaik can do; drop it or set scenario.engine = \"mosaik\""))
    edges = _sim_edges(scn, delayed=False)
    for i, conn in enumerate(scn.connect):
        if not conn.weak:
            continue
        src, dst = scn.entities[conn.src].sim, scn.entities[conn.dst].sim
        if not _reaches(edges, dst, src):
            problems.append(Problem(f"connect[{i}]", f"a weak connection needs {dst!r} to feed {src!r} back through "
                                    "undelayed connections (else what it delivers depends on mosaik's scheduling); "
                                    "use time_shifted = true instead"))
    if not direct and scn.scenario.rt_factor and any(c.weak for c in scn.connect):
        problems.append(Problem("scenario.rt_factor", "mosaik 3.6 cannot pace simulators joined by weak connections "
                                "in real time (it fails in its scheduler); use time_shifted connections or "
                                "engine = \"direct\"", scn.scenario.rt_factor))
    if scn.scenario.ahead == "on" and not direct:
        problems.append(Problem("scenario.ahead", "stepping the simulators that take no inputs ahead in a worker "
                                "process is the direct engine's; set scenario.engine = \"direct\" or drop "
                                "scenario.ahead", "on"))
    if scn.scenario.ahead == "on" and scn.scenario.rt_factor:
        problems.append(Problem("scenario.ahead", "a run paced in real time (rt_factor) steps every simulator on "
                                "the wall clock; drop scenario.ahead or rt_factor", "on"))
    if not direct:
        scn.warnings.extend(_pruning_hazards(scn))


def _sim_edges(scn: Scenario, delayed: bool) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for conn in scn.connect:
        if (conn.time_shifted or conn.weak) == delayed:
            edges.setdefault(scn.entities[conn.src].sim, set()).add(scn.entities[conn.dst].sim)
    return edges


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def _pruning_hazards(scn: Scenario) -> list[str]:
    """mosaik 3.6 prunes a simulator's output cache by the slowest simulator's progress: a delayed
    connection from a slower source into a faster destination can then deliver None at their
    common step times, depending on its scheduling. The direct engine reads the cache cleanly."""
    found = []
    until = scn.until_ticks
    for i, conn in enumerate(scn.connect):
        if not (conn.time_shifted or conn.weak):
            continue
        src_s, dst_s = scn.sim_step_s(scn.entities[conn.src].sim), scn.sim_step_s(scn.entities[conn.dst].sim)
        src_step, dst_step = scn.ticks(src_s), scn.ticks(dst_s)
        common = src_step * dst_step // gcd(src_step, dst_step)
        if src_step > dst_step and common < until:
            found.append(f"connect[{i}]: a delayed connection from a {src_s} s simulator into a {dst_s} s one: "
                         f"mosaik 3.6 may deliver None at their common steps (every {_seconds(common / scn.ticks_per_s)} "
                         "s); the direct engine does not (scenario.engine = \"direct\"), or give both the same step")
    return found



