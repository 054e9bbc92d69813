"""Ride-through envelopes as data: one TOML file per envelope, shipped or the user's own.

An envelope is a boundary in time since a disturbance began, which a quantity at a point of
connection must stay on one side of. A file (``scenarios/data/envelopes/<name>.toml`` for the
shipped ones, any path for a user's own) reads::

    [envelope]
    name = "itic_lower"
    title = "ITI (CBEMA) curve, lower boundary of the no-interruption region"
    quantity = "voltage"              # "voltage" [pu] or "frequency" [Hz]
    must_stay = "above"               # the quantity must stay at or "above" the boundary, or at or "below" it
    voltage_definition = "worst_phase"  # voltage envelopes: "positive_sequence" or "worst_phase"
    status = "published"              # "placeholder": values not (yet) public; refused for verdicts
    # [t_s, value]: from the disturbance's start, the boundary is ``value`` from ``t_s`` until the
    # next point's time; the last value holds on (the continuous-operation limit) [s, pu or Hz]
    points = [[0.0, 0.0], [0.02, 0.7], [0.5, 0.8], [10.0, 0.9]]

    [source]                          # where every value comes from
    document = "..."
    section = "..."                   # section, figure or table (one of them at least)
    table = "..."
    date = "..."                      # the document's date or edition
    url = "..."                       # optional
    note = "..."                      # optional: how the values were read

A *disturbance* is a stretch of the trajectory outside the continuous limit (below it for an
``above`` envelope, above it for a ``below`` one); the boundary's clock starts at its first step.
Checks (:func:`envelope_problems`, run by ``cosim validate`` on every envelope a scenario names):
the first point at ``t_s = 0``, times strictly increasing (two points at one time overlap), values
in range (0-2 pu; 40-70 Hz), the boundary tightening with time (non-decreasing for ``above``,
non-increasing for ``below``: a looser limit later would let a longer disturbance pass where a
shorter one fails), a known quantity, side and voltage definition, and a source naming a document,
a section or table and a date. A placeholder carries its source and why it has no values; a
verdict asked of it is refused.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: where the shipped envelopes live
ENVELOPE_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "data" / "envelopes"
QUANTITIES = {"voltage": ("pu", 0.0, 2.0), "frequency": ("Hz", 40.0, 70.0)}
SIDES = ("above", "below")
VOLTAGE_DEFINITIONS = ("positive_sequence", "worst_phase")
STATUSES = ("published", "placeholder")


@dataclass(frozen=True)
class Envelope:
    """A validated envelope (see the module docstring).

    Attributes:
        name: its id. title: what it is. quantity: ``voltage`` or ``frequency``.
        must_stay: ``above`` or ``below`` the boundary. voltage_definition: the voltage it applies to.
        status: ``published`` or ``placeholder``. points: ``((t_s, value), ...)`` [s, pu or Hz].
        source: the ``[source]`` table. path: the file it was read from.
    """

    name: str
    title: str
    quantity: str
    must_stay: str
    voltage_definition: str | None
    status: str
    points: tuple[tuple[float, float], ...]
    source: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def unit(self) -> str:
        return QUANTITIES[self.quantity][0]

    @property
    def continuous(self) -> float:
        """The continuous-operation limit: the last point's value. [pu or Hz]"""
        return self.points[-1][1]

    def outside(self, value: float) -> bool:
        """Whether ``value`` is outside the continuous limit (a disturbance)."""
        return value < self.continuous if self.must_stay == "above" else value > self.continuous

    def boundary(self, tau_s: float) -> float:
        """The boundary ``tau_s`` after the disturbance's start. [pu or Hz]"""
        level = self.points[0][1]
        for t_s, value in self.points:
            if t_s <= tau_s + 1e-12:
                level = value
        return level

    def tightest(self, tau0_s: float, tau1_s: float) -> float:
        """The tightest boundary over ``[tau0_s, tau1_s)`` (highest for ``above``, lowest for
        ``below``): a value held over that span must clear it. [pu or Hz]"""
        levels = [self.boundary(tau0_s)] + [v for t, v in self.points if tau0_s < t < tau1_s - 1e-12]
        return max(levels) if self.must_stay == "above" else min(levels)

    def time_limit(self, value: float) -> float:
        """How long after the disturbance's start ``value`` may be held: the first point whose
        boundary it no longer clears (inf when it clears the continuous limit). [s]"""
        for t_s, level in self.points:
            fails = value < level - 1e-12 if self.must_stay == "above" else value > level + 1e-12
            if fails:
                return t_s
        return math.inf


class EnvelopeError(ValueError):
    """An envelope that cannot be used, with every problem."""

    def __init__(self, where: str, problems: list[str]):
        self.where, self.problems = where, problems
        super().__init__(f"{where}: " + "; ".join(problems))


def shipped() -> list[str]:
    """The names of the shipped envelopes."""
    return sorted(p.stem for p in ENVELOPE_DIR.glob("*.toml"))


def resolve(ref: str, base_dir: Path | None = None) -> Path:
    """The file of envelope ``ref``: a shipped name, or a ``.toml`` path (relative to ``base_dir``).

    Raises:
        EnvelopeError: no such envelope (with the nearest shipped names) or file.
    """
    text = str(ref).strip()
    if text.lower().endswith(".toml") or "/" in text:
        path = Path(text)
        if not path.is_absolute() and base_dir is not None:
            path = (Path(base_dir) / path).resolve()
        if not path.is_file():
            raise EnvelopeError(text, [f"no envelope file at {path}; give a path relative to the scenario"])
        return path
    path = ENVELOPE_DIR / f"{text}.toml"
    if not path.is_file():
        names = shipped()
        near = difflib.get_close_matches(text, names, n=3, cutoff=0.4)
        hint = f"nearest: {', '.join(near)}" if near else f"shipped: {', '.join(names)}"
        raise EnvelopeError(text, [f"unknown envelope ({hint}); or give your own file as a path ending in .toml"])
    return path


def envelope_problems(data: Any) -> list[str]:
    """Every problem of an envelope file's content (``[envelope]`` and ``[source]``), key by key."""
    if not isinstance(data, dict) or not isinstance(data.get("envelope"), dict):
        return ["[envelope]: missing; an envelope file has an [envelope] table and a [source] table"]
    env, problems = data["envelope"], []
    for key in ("name", "title"):
        if not isinstance(env.get(key), str) or not env.get(key):
            problems.append(f"envelope.{key}: give a non-empty string")
    quantity = env.get("quantity")
    if quantity not in QUANTITIES:
        problems.append(f"envelope.quantity = {quantity!r}: give one of {', '.join(QUANTITIES)}")
    if env.get("must_stay") not in SIDES:
        problems.append(f"envelope.must_stay = {env.get('must_stay')!r}: give \"above\" (the quantity must stay at or "
                        "above the boundary) or \"below\"")
    if quantity == "voltage" and env.get("voltage_definition") not in VOLTAGE_DEFINITIONS:
        problems.append(f"envelope.voltage_definition = {env.get('voltage_definition')!r}: unknown voltage definition; "
                        f"give one of {', '.join(VOLTAGE_DEFINITIONS)}")
    status = env.get("status", "published")
    if status not in STATUSES:
        problems.append(f"envelope.status = {status!r}: give \"published\" or \"placeholder\"")
    problems += _point_problems(env.get("points", []), quantity, env.get("must_stay"), status == "placeholder")
    source = data.get("source")
    if not isinstance(source, dict) or not source.get("document"):
        problems.append("[source].document: name the document every value comes from")
    elif status == "published":
        if not (source.get("section") or source.get("table")):
            problems.append("[source]: give the section or table the values are read from")
        if not source.get("date"):
            problems.append("[source].date: give the document's date or edition")
    return problems


def _point_problems(points: Any, quantity: Any, side: Any, placeholder: bool) -> list[str]:
    if placeholder and points in ([], None):
        return []
    if not isinstance(points, list) or not points or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                         and math.isfinite(x) for x in p) for p in points):
        return ["envelope.points: give [[t_s, value], ...], numbers, at least one point"]
    problems = []
    times = [float(p[0]) for p in points]
    values = [float(p[1]) for p in points]
    if times[0] != 0:
        problems.append(f"envelope.points[0] = {points[0]}: the first point is at t_s = 0 (the disturbance's start)")
    for k in range(1, len(times)):
        if times[k] == times[k - 1]:
            problems.append(f"envelope.points[{k}] = {points[k]}: overlaps points[{k - 1}] (same t_s); one value "
                            "per time: the boundary steps at each point's t_s")
        elif times[k] < times[k - 1]:
            problems.append(f"envelope.points[{k}] = {points[k]}: t_s not increasing (after {times[k - 1]:g} s); "
                            "sort the points by time")
    if quantity in QUANTITIES:
        unit, low, high = QUANTITIES[quantity]
        for k, v in enumerate(values):
            if not low <= v <= high:
                problems.append(f"envelope.points[{k}] = {points[k]}: {v:g} {unit} is outside {low:g}-{high:g} {unit}")
    if side in SIDES:
        for k in range(1, len(values)):
            looser = values[k] < values[k - 1] if side == "above" else values[k] > values[k - 1]
            if looser:
                problems.append(f"envelope.points[{k}] = {points[k]}: the boundary loosens with time (after "
                                f"{values[k - 1]:g}); a must_stay = \"{side}\" boundary only tightens")
    return problems


def load(ref: str, base_dir: Path | None = None) -> Envelope:
    """The envelope ``ref`` (a shipped name or a file path), checked.

    Raises:
        EnvelopeError: naming the file and every problem.
    """
    path = resolve(ref, base_dir)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise EnvelopeError(str(path), [f"not valid TOML: {exc}"]) from None
    problems = envelope_problems(data)
    if problems:
        raise EnvelopeError(str(path), problems)
    env = data["envelope"]
    return Envelope(name=env["name"], title=env["title"], quantity=env["quantity"], must_stay=env["must_stay"],
                    voltage_definition=env.get("voltage_definition") if env["quantity"] == "voltage" else None,
                    status=env.get("status", "published"),
                    points=tuple((float(t), float(v)) for t, v in env.get("points", [])),
                    source=dict(data["source"]), path=path)


def verdict_problems(refs: dict[str, list[str]], base_dir: Path | None, where: str) -> list[tuple[str, str]]:
    """``(key, message)`` for every envelope a scenario names that cannot give a verdict: unknown,
    invalid, or a placeholder."""
    problems = []
    for entity, names in refs.items():
        for k, ref in enumerate(names):
            key = f"{where}.{entity}[{k}]"
            try:
                envelope = load(ref, base_dir)
            except EnvelopeError as exc:
                problems += [(key, f"{ref!r}: {exc.where}: {p}") for p in exc.problems]
                continue
            if envelope.status == "placeholder":
                note = envelope.source.get("note", "")
                problems.append((key, f"{ref!r} is a placeholder (no published values: {note}) and gives no verdict; "
                                      "drop it, or give your own envelope file with the values you hold"))
    return problems
