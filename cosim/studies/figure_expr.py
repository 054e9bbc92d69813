"""Figure expressions of a published case: arithmetic over KPI paths of its runs, parsed, never eval'd.

A figure is computed from ``kpis.json`` and the scenario as run. Its expression reads KPI values
by path and combines them with ``+ - * /``, parentheses, numbers and four functions::

    none:datacenter.hi.slo_attainment_mean_frac - polca:datacenter.hi.slo_attainment_mean_frac
    100 * (1 - vcc:accounting.carbon.total_t / none:accounting.carbon.total_t)
    mean(abs(b8:datacenter.b8.p_gpu_mean_mw / 0.2784 - 1), abs(b16:datacenter.b16.p_gpu_mean_mw / 0.31 - 1))

A reference is ``<variant>:<dotted path>`` (the variant's run) or a bare ``<dotted path>``
(the case's first variant); a path part that is a whole number indexes a list
(``dr.responder.events.0.baseline_mw``). A path under ``scenario`` reads the variant's scenario as
it ran, its variant and ``--set`` overrides applied (``big:scenario.entities.campus.n_gpus``), so
that a figure scaled by a parameter follows the parameter. Functions: ``abs(x)``, ``min(x, ...)``, ``max(x, ...)``,
``mean(x, ...)``. Nothing in a case is evaluated as Python.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

FUNCTIONS: dict[str, Callable[..., float]] = {
    "abs": lambda *a: abs(a[0]) if len(a) == 1 else _arity("abs", 1, len(a)),
    "min": lambda *a: min(a),
    "max": lambda *a: max(a),
    "mean": lambda *a: sum(a) / len(a),
}

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
                    r"|(?P<ref>[A-Za-z_]\w*(?::\w+)?(?:\.\w+)*)|(?P<op>[-+*/(),]))")


class ExprError(ValueError):
    """An expression that cannot be parsed; the message says where and what is allowed."""


class MissingKpi(LookupError):
    """A reference whose run has no such KPI (or no number there)."""


def _arity(name: str, want: int, got: int) -> float:
    raise ExprError(f"{name}() takes {want} argument, got {got}")


@dataclass(frozen=True)
class Ref:
    """A KPI reference: the variant (None: the case's first) and the path inside kpis.json."""

    variant: str | None
    path: tuple[str, ...]

    def __str__(self) -> str:
        return (f"{self.variant}:" if self.variant else "") + ".".join(self.path)


@dataclass(frozen=True)
class Node:
    """A parsed expression: ``op`` is ``num``, ``ref``, ``neg``, one of ``+-*/`` or a function name."""

    op: str
    args: tuple[Any, ...]


def tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExprError(f"cannot read {text[pos:pos + 12]!r} at character {pos + 1}; use numbers, "
                            "variant:kpi.path references, + - * / ( ) and abs/min/max/mean")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str):
        self.toks = tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            found = "the end" if tok is None else repr(tok[1])
            raise ExprError(f"expected {value or 'a value'!r}, found {found}")
        self.i += 1
        return tok

    def expr(self) -> Node:
        node = self.term()
        while (tok := self.peek()) and tok[1] in "+-" and tok[0] == "op":
            self.take()
            node = Node(tok[1], (node, self.term()))
        return node

    def term(self) -> Node:
        node = self.factor()
        while (tok := self.peek()) and tok[1] in "*/" and tok[0] == "op":
            self.take()
            node = Node(tok[1], (node, self.factor()))
        return node

    def factor(self) -> Node:
        kind, value = self.take()
        if value == "-" and kind == "op":
            return Node("neg", (self.factor(),))
        if value == "(":
            node = self.expr()
            self.take(")")
            return node
        if kind == "num":
            return Node("num", (float(value),))
        if kind == "ref":
            if (nxt := self.peek()) and nxt[1] == "(":
                return self.call(value)
            return Node("ref", (parse_ref(value),))
        raise ExprError(f"unexpected {value!r}")

    def call(self, name: str) -> Node:
        if name not in FUNCTIONS:
            raise ExprError(f"unknown function {name!r}; known: {', '.join(FUNCTIONS)}")
        self.take("(")
        args = [self.expr()]
        while (tok := self.peek()) and tok[1] == ",":
            self.take()
            args.append(self.expr())
        self.take(")")
        return Node(name, tuple(args))


def parse_ref(text: str) -> Ref:
    variant, sep, path = text.partition(":")
    if not sep:
        variant, path = None, text
    return Ref(variant, tuple(path.split(".")))


#: The top-level key under which :func:`with_scenario` puts the scenario (no KPI block has it).
SCENARIO_KEY = "scenario"


def with_scenario(kpis: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """``kpis`` with the run's scenario table (as run, overrides applied) under ``scenario``.

    Raises:
        ValueError: a KPI block already wrote a top-level ``scenario`` key (rename the block).
    """
    if SCENARIO_KEY in kpis:
        raise ValueError(f"kpis.json has a top-level {SCENARIO_KEY!r} key, which figure expressions keep for "
                         "the scenario; rename that KPI block")
    return {**kpis, SCENARIO_KEY: raw}


def parse(text: str) -> Node:
    """The expression tree of ``text``.

    Raises:
        ExprError: naming what could not be read.
    """
    if not isinstance(text, str) or not text.strip():
        raise ExprError("give an expression, e.g. \"run:datacenter.campus.delay_gpu_h\"")
    parser = _Parser(text)
    node = parser.expr()
    if parser.peek() is not None:
        raise ExprError(f"unexpected {parser.peek()[1]!r} after a complete expression")
    return node


def refs(node: Node) -> list[Ref]:
    """Every KPI reference in ``node``, in reading order."""
    if node.op == "ref":
        return [node.args[0]]
    if node.op == "num":
        return []
    return [r for a in node.args for r in refs(a)]


def lookup(kpis: Any, path: tuple[str, ...]) -> float:
    """The number at ``path`` in a kpis.json object.

    Raises:
        MissingKpi: naming the first part that is not there and what is there instead.
    """
    here = kpis
    for depth, part in enumerate(path):
        if isinstance(here, list) and part.isdigit() and int(part) < len(here):
            here = here[int(part)]
        elif isinstance(here, dict) and part in here:
            here = here[part]
        else:
            where = ".".join(path[:depth]) or "(top)"
            known = list(here) if isinstance(here, dict) else (f"0..{len(here) - 1}" if isinstance(here, list) else [])
            shown = ", ".join(map(str, known[:12])) if isinstance(known, list) else known
            raise MissingKpi(f"no {part!r} under {where}; there: {shown or 'nothing'}")
    if isinstance(here, bool) or not isinstance(here, (int, float)) or not math.isfinite(float(here)):
        raise MissingKpi(f"{'.'.join(path)} is {here!r}, not a number")
    return float(here)


def evaluate(node: Node, kpis_of: Callable[[str | None], Any]) -> float:
    """The value of ``node``; ``kpis_of(variant)`` gives that run's kpis.json object.

    Raises:
        MissingKpi: a reference is not there. ZeroDivisionError: a division by zero.
    """
    if node.op == "num":
        return node.args[0]
    if node.op == "ref":
        ref = node.args[0]
        try:
            return lookup(kpis_of(ref.variant), ref.path)
        except MissingKpi as exc:
            raise MissingKpi(f"{ref}: {exc}") from None
    values = [evaluate(a, kpis_of) for a in node.args]
    if node.op == "neg":
        return -values[0]
    if node.op in "+-*/":
        a, b = values
        if node.op == "/" and b == 0:
            raise ZeroDivisionError(f"division by zero in {_show(node)}")
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else math.nan}[node.op]
    return float(FUNCTIONS[node.op](*values))


def _show(node: Node) -> str:
    if node.op == "num":
        return f"{node.args[0]:g}"
    if node.op == "ref":
        return str(node.args[0])
    if node.op == "neg":
        return f"-{_show(node.args[0])}"
    if node.op in "+-*/":
        return f"({_show(node.args[0])} {node.op} {_show(node.args[1])})"
    return f"{node.op}({', '.join(_show(a) for a in node.args)})"
