"""Published cases re-run from shipped scenarios and checked against the papers' numbers.

A case is one file ``scenarios/published/<name>.toml`` (found by scanning; no list to edit). It
is either a full scenario with a ``[reproduce]`` section, or a sidecar holding only the section
and naming its base scenario (``scenario = "../oversubscription.toml"``)::

    [reproduce]
    title = "POLCA: 30 % more inference servers under the same power budget"
    source = "Patel et al., POLCA, arXiv:2308.12908 (2023)"
    scenario = "../oversubscription.toml"        # only in a sidecar

    [reproduce.set]                               # overrides of every variant (optional)
    "record.include" = ["hi.*", "lo.*", "polca.*"]

    [reproduce.variants]                          # name -> --set overrides (TOML values), in order
    polca = {}
    none = { "entities.polca.enabled" = false }

    [reproduce.quick]                             # overrides of every variant under --quick
    "scenario.duration_s" = 21_600

    [[reproduce.figures]]
    name = "high-priority SLO attainment lost to capping"
    expr = "none:datacenter.hi.slo_attainment_mean_frac - polca:datacenter.hi.slo_attainment_mean_frac"
    published = 0.01                              # the paper's number
    source = "abstract: 'minimal performance loss'; <1 % P50 latency impact (Sec. 6)"
    check = "at_most"                             # within (default) | at_most | at_least
    tolerance = 0.0                               # absolute, or tolerance_frac (relative to published)
    unit = "-"
    quick = true                                  # false: not checked under --quick (needs the full run)

Figures are computed from each run's ``kpis.json`` and the scenario it ran (``scenario.<key>``,
e.g. ``scenario.entities.campus.n_gpus``; :mod:`.figure_expr`). A figure
passes when ``|ours - published| <= tol`` (within), ``ours <= published + tol`` (at_most) or
``ours >= published - tol`` (at_least); a case passes when every run finished ok and every
figure checked passed. :func:`run_cases` runs the cases, :func:`write_outputs` writes
``reproduce.json`` and ``reproduce.html``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from cosim.errors import Problem, ScenarioError, few
from cosim.run import run_scenario
from cosim.scenario import load_scenario, read_toml
from cosim.studies import figure_expr
from cosim.studies.executor import check_workers, run_tasks
from cosim.studies.reproduce_page import write_html

#: Where the shipped cases live (the repository's scenarios/published/).
CASES_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "published"
CHECKS = ("within", "at_most", "at_least")
CASE_KEYS = ("title", "source", "scenario", "set", "variants", "quick", "figures")
FIGURE_KEYS = ("name", "expr", "published", "source", "check", "tolerance", "tolerance_frac", "unit", "quick", "note")


@dataclass
class Figure:
    """One published number and how ours is computed and judged."""

    name: str
    expr: str
    published: float
    source: str
    check: str = "within"
    tolerance: float | None = None
    tolerance_frac: float | None = None
    unit: str = ""
    quick: bool = True
    note: str = ""

    @property
    def tol(self) -> float:
        """The allowed difference. [the figure's unit]"""
        if self.tolerance is not None:
            return self.tolerance
        return (self.tolerance_frac or 0.0) * abs(self.published)

    def tolerance_text(self) -> str:
        if self.tolerance_frac is not None:
            return f"±{100 * self.tolerance_frac:g} %"
        return f"±{self.tol:g}" if self.tol else "0"

    def judge(self, ours: float) -> bool:
        if self.check == "at_most":
            return ours <= self.published + self.tol
        if self.check == "at_least":
            return ours >= self.published - self.tol
        return abs(ours - self.published) <= self.tol


@dataclass
class Case:
    """A published case read from its file."""

    name: str
    file: Path
    title: str
    source: str
    scenario: Path
    variants: dict[str, dict[str, Any]]
    quick: dict[str, Any]
    figures: list[Figure]
    common: dict[str, Any] = field(default_factory=dict)


@dataclass
class FigureResult:
    name: str
    expr: str
    published: float
    source: str
    unit: str
    check: str
    tolerance: str
    ours: float | None = None
    passed: bool | None = None
    reason: str = ""
    note: str = ""


@dataclass
class CaseResult:
    name: str
    title: str
    source: str
    file: str
    quick: bool
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    figures: list[FigureResult] = field(default_factory=list)

    @property
    def checked(self) -> bool:
        """Whether any figure was judged (under ``--quick`` a case of full-run figures only has none)."""
        return any(f.passed is not None for f in self.figures)

    @property
    def passed(self) -> bool:
        """Every run ok, at least one figure judged, none failed: nothing checked is not a pass."""
        return (all(r["status"] == "ok" for r in self.runs.values()) and self.checked
                and all(f.passed is not False for f in self.figures))

    @property
    def verdict(self) -> str:
        """``PASS``, ``FAIL`` or ``NOT CHECKED`` (every run ok, but no figure judged in this mode)."""
        if self.passed:
            return "PASS"
        ok = all(r["status"] == "ok" for r in self.runs.values()) and all(f.passed is not False for f in self.figures)
        return "NOT CHECKED" if ok and not self.checked else "FAIL"


# -- reading cases --------------------------------------------------------------------------------
def case_files(cases_dir: Path = CASES_DIR) -> list[Path]:
    """Every case file in ``cases_dir``, by name."""
    return sorted(Path(cases_dir).glob("*.toml"))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _figure(raw: Any, where: str, variants: list[str], problems: list[Problem]) -> Figure | None:
    if not isinstance(raw, dict):
        problems.append(Problem(where, "give a table with name, expr, published, source", raw))
        return None
    n = len(problems)
    problems += [Problem(f"{where}.{k}", f"unknown key; allowed: {', '.join(FIGURE_KEYS)}") for k in raw
                 if k not in FIGURE_KEYS]
    for key in ("name", "expr", "source"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            problems.append(Problem(f"{where}.{key}", "give a non-empty string", raw.get(key)))
    if not _number(raw.get("published")):
        problems.append(Problem(f"{where}.published", "give the paper's number (a finite number)", raw.get("published")))
    check = raw.get("check", "within")
    if check not in CHECKS:
        problems.append(Problem(f"{where}.check", f"use one of {', '.join(CHECKS)}", check))
    for key in ("tolerance", "tolerance_frac"):
        if key in raw and (not _number(raw[key]) or raw[key] < 0):
            problems.append(Problem(f"{where}.{key}", "give a number >= 0", raw[key]))
    if "tolerance" in raw and "tolerance_frac" in raw:
        problems.append(Problem(f"{where}", "give tolerance (absolute) or tolerance_frac (relative), not both"))
    if check == "within" and "tolerance" not in raw and "tolerance_frac" not in raw:
        problems.append(Problem(f"{where}.tolerance", "a 'within' figure needs tolerance or tolerance_frac "
                                                     "(0 for an exact match)"))
    for key in ("unit", "note"):
        if key in raw and not isinstance(raw[key], str):
            problems.append(Problem(f"{where}.{key}", "give a string", raw[key]))
    if "quick" in raw and not isinstance(raw["quick"], bool):
        problems.append(Problem(f"{where}.quick", "give true or false", raw["quick"]))
    if isinstance(raw.get("expr"), str):
        try:
            tree = figure_expr.parse(raw["expr"])
        except figure_expr.ExprError as exc:
            problems.append(Problem(f"{where}.expr", str(exc), raw["expr"]))
        else:
            for ref in figure_expr.refs(tree):
                if ref.variant is not None and ref.variant not in variants:
                    problems.append(Problem(f"{where}.expr", f"unknown variant {ref.variant!r} in {ref}; "
                                                             f"variants: {few(variants)}", raw["expr"]))
    if len(problems) > n:
        return None
    return Figure(raw["name"], raw["expr"], float(raw["published"]), raw["source"], check,
                  None if "tolerance" not in raw else float(raw["tolerance"]),
                  None if "tolerance_frac" not in raw else float(raw["tolerance_frac"]),
                  raw.get("unit", ""), raw.get("quick", True), raw.get("note", ""))


def _overrides(raw: Any, where: str, problems: list[Problem]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        problems.append(Problem(where, "give a table of dotted keys and TOML values, e.g. "
                                       "{ \"entities.polca.enabled\" = false }", raw))
        return {}
    return dict(raw)


def load_case(path: str | Path) -> Case:
    """Read and check one case file (not its runs: :func:`check_case` validates those).

    Raises:
        ScenarioError: every problem of the ``[reproduce]`` section, with key, value and fix.
    """
    path = Path(path)
    raw = read_toml(path)
    body = raw.get("reproduce")
    if not isinstance(body, dict):
        raise ScenarioError(path, [Problem("reproduce", "a published case needs a [reproduce] section "
                                                        "(title, source, variants, figures)", body)])
    problems = [Problem(f"reproduce.{k}", f"unknown key; allowed: {', '.join(CASE_KEYS)}") for k in body
                if k not in CASE_KEYS]
    for key in ("title", "source"):
        if not isinstance(body.get(key), str) or not body[key].strip():
            problems.append(Problem(f"reproduce.{key}", "give a non-empty string", body.get(key)))
    scenario = path
    if "scenario" in body:
        if not isinstance(body["scenario"], str):
            problems.append(Problem("reproduce.scenario", "give the base scenario's path, relative to this file",
                                    body["scenario"]))
        else:
            scenario = (path.resolve().parent / body["scenario"]).resolve()
            if "scenario" in raw:
                problems.append(Problem("reproduce.scenario", "this file is a scenario itself; drop the key, or "
                                                              "drop its [scenario] to make it a sidecar"))
            elif not scenario.is_file():
                problems.append(Problem("reproduce.scenario", f"no such file: {scenario}", body["scenario"]))
    elif "scenario" not in raw:
        problems.append(Problem("reproduce.scenario", "this file has no [scenario]: name the base scenario, "
                                                      "e.g. scenario = \"../oversubscription.toml\""))
    variants_raw = body.get("variants")
    variants: dict[str, dict[str, Any]] = {}
    if not isinstance(variants_raw, dict) or not variants_raw:
        problems.append(Problem("reproduce.variants", "give at least one variant, e.g. [reproduce.variants] "
                                                      "run = {}", variants_raw))
    else:
        for name, value in variants_raw.items():
            if not name.isidentifier():
                problems.append(Problem(f"reproduce.variants.{name}", "use letters, digits and '_' "
                                                                      "(it names the run in expressions)"))
            variants[name] = _overrides(value, f"reproduce.variants.{name}", problems)
    quick = _overrides(body.get("quick", {}), "reproduce.quick", problems)
    common = _overrides(body.get("set", {}), "reproduce.set", problems)
    figures_raw = body.get("figures")
    figures: list[Figure] = []
    if not isinstance(figures_raw, list) or not figures_raw:
        problems.append(Problem("reproduce.figures", "give at least one [[reproduce.figures]] entry", figures_raw))
    else:
        for i, item in enumerate(figures_raw):
            fig = _figure(item, f"reproduce.figures[{i}]", list(variants), problems)
            if fig is not None:
                figures.append(fig)
    if problems:
        raise ScenarioError(path, problems)
    return Case(path.stem, path, body["title"], body["source"], scenario, variants, quick, figures, common)


def variant_overrides(case: Case, variant: str, quick: bool, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The overrides one run of ``case`` gets: the case's ``set``, its variant's, the quick ones, then ``extra``."""
    return {**case.common, **case.variants[variant], **(case.quick if quick else {}), **(extra or {})}


def check_case(case: Case, quick: bool, extra: dict[str, Any] | None = None) -> None:
    """Validate every run of ``case`` before any starts.

    Raises:
        ScenarioError: the problems of the first variant that has some, named after it.
    """
    for variant in case.variants:
        try:
            load_scenario(case.scenario, variant_overrides(case, variant, quick, extra))
        except ScenarioError as exc:
            raise ScenarioError(f"{case.file} (variant {variant!r} of {case.scenario.name})", exc.problems) from None


def load_cases(names: list[str] | None = None, cases_dir: Path = CASES_DIR) -> list[Case]:
    """The cases called ``names`` (all when empty), each read and checked.

    Raises:
        ScenarioError: an unknown name (the known ones listed) or a malformed case.
    """
    files = {p.stem: p for p in case_files(cases_dir)}
    unknown = [n for n in names or [] if n not in files]
    if unknown:
        raise ScenarioError(cases_dir, [Problem("NAME", f"no such case; known: {few(sorted(files))}", n)
                                        for n in unknown])
    return [load_case(files[n]) for n in (names or sorted(files))]


# -- running ---------------------------------------------------------------------------------------
def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_variant(scenario: Path, overrides: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Run one variant of a case into ``out_dir`` (a Dask task: module-level, its result picklable).

    Returns:
        ``run_dir``, ``status``, ``reason``, ``wall_s`` and ``kpis`` (with the scenario as run, for
        ``scenario.<key>`` in figures; None unless the run finished ok or degraded).
    """
    started = time.perf_counter()
    scn = load_scenario(scenario, overrides)
    run = run_scenario(scn, out_dir, progress=False, report=False)
    wall_s = time.perf_counter() - started
    kpis = figure_expr.with_scenario(run.kpis, scn.raw) if run.status in ("ok", "degraded") else None
    return {"run_dir": str(run.run_dir), "status": run.status, "reason": run.reason, "wall_s": round(wall_s, 2),
            "kpis": kpis}


def judge_case(case: Case, quick: bool, runs: dict[str, dict[str, Any]]) -> CaseResult:
    """The result of ``case`` from its variants' :func:`run_variant` outputs (a lost task: ``status`` failed)."""
    result = CaseResult(case.name, case.title, case.source, str(case.file), quick)
    kpis = {}
    for variant in case.variants:
        run = runs[variant]
        result.runs[variant] = {k: run[k] for k in ("run_dir", "status", "reason", "wall_s")}
        kpis[variant] = run.get("kpis")
    first = next(iter(case.variants))
    for fig in case.figures:
        result.figures.append(judge_figure(fig, lambda v: kpis.get(v or first), quick))
    return result


def run_case(case: Case, out_dir: Path, quick: bool, extra: dict[str, Any] | None = None,
             progress: Callable[[str], None] | None = _say, counter: list[int] | None = None,
             total: int = 0) -> CaseResult:
    """Run every variant of ``case`` into ``out_dir/<case>/<variant>/`` and judge its figures."""
    runs = {}
    for variant in case.variants:
        if counter is not None:
            counter[0] += 1
        tag = f"[{counter[0]}/{total}] " if counter is not None and total else ""
        if progress:
            progress(f"reproduce: {tag}{case.name}: {variant} ...")
        run = run_variant(case.scenario, variant_overrides(case, variant, quick, extra), out_dir / case.name / variant)
        runs[variant] = run
        if progress:
            progress(f"reproduce: {tag}{case.name}: {variant}: {run['status']} in {run['wall_s']:.1f} s"
                     + (f" ({run['reason']})" if run["reason"] else ""))
    return judge_case(case, quick, runs)


def judge_figure(fig: Figure, kpis_of: Callable[[str | None], Any], quick: bool) -> FigureResult:
    """Compute ``fig`` from the runs' KPIs and judge it (not checked: quick run of a full-only figure)."""
    out = FigureResult(fig.name, fig.expr, fig.published, fig.source, fig.unit, fig.check, fig.tolerance_text(),
                       note=fig.note)
    if quick and not fig.quick:
        return out

    def of(variant: str | None) -> Any:
        value = kpis_of(variant)
        if value is None:
            raise figure_expr.MissingKpi(f"run {variant or 'first'} did not finish ok")
        return value

    try:
        out.ours = figure_expr.evaluate(figure_expr.parse(fig.expr), of)
    except (figure_expr.MissingKpi, ZeroDivisionError, ValueError) as exc:
        out.passed, out.reason = False, str(exc)
        return out
    out.passed = fig.judge(out.ours)
    if not out.passed:
        out.reason = f"{_fmt(out.ours)} is outside {_expected(fig)}"
    return out


def _expected(fig: Figure) -> str:
    if fig.check == "at_most":
        return f"<= {_fmt(fig.published + fig.tol)}"
    if fig.check == "at_least":
        return f">= {_fmt(fig.published - fig.tol)}"
    return f"{_fmt(fig.published)} ± {_fmt(fig.tol)}"


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def run_cases(cases: list[Case], out_dir: Path, quick: bool = False, extra: dict[str, Any] | None = None,
              progress: Callable[[str], None] | None = _say, workers: int | None = 0,
              scheduler: str | None = None) -> list[CaseResult]:
    """Validate every case's runs, then run them: one after another in this process (``workers=0``,
    no ``scheduler``), or every variant of every case as one task on Dask (``workers`` local worker
    processes, None for the default of :mod:`.executor`, or a running ``scheduler``).

    Raises:
        ScenarioError: a case whose runs do not validate (nothing was started), or a bad ``workers``.
    """
    check_workers(workers)
    for case in cases:
        check_case(case, quick, extra)
    total = sum(len(c.variants) for c in cases)
    if scheduler is None and workers == 0:
        counter = [0]
        return [run_case(c, out_dir, quick, extra, progress, counter, total) for c in cases]
    calls, owners = [], []
    for case in cases:
        for variant in case.variants:
            calls.append((case.scenario, variant_overrides(case, variant, quick, extra), out_dir / case.name / variant))
            owners.append((case.name, variant))
    runs: dict[str, dict[str, dict[str, Any]]] = {c.name: {} for c in cases}
    keys = [f"reproduce-{name}-{variant}" for name, variant in owners]
    for done, (i, run, error) in enumerate(run_tasks(run_variant, calls, workers, scheduler, keys), start=1):
        name, variant = owners[i]
        if error is not None:  # the task raised or its worker was lost: the run did not finish
            run = {"run_dir": str(calls[i][2]), "status": "failed", "reason": error, "wall_s": 0.0, "kpis": None}
        runs[name][variant] = run
        if progress:
            progress(f"reproduce: [{done}/{total}] {name}: {variant}: {run['status']} in {run['wall_s']:.1f} s"
                     + (f" ({run['reason']})" if run["reason"] else ""))
    return [judge_case(c, quick, runs[c.name]) for c in cases]


# -- output ----------------------------------------------------------------------------------------
def status_of(fig: FigureResult) -> str:
    if fig.passed is None:
        return "not checked (full run only)"
    return "pass" if fig.passed else "FAIL"


def format_table(results: list[CaseResult]) -> str:
    """The figures of every case as aligned text: figure, published (source), ours, tolerance, result."""
    lines = []
    for res in results:
        lines.append(f"{res.name}: {res.title} — {res.verdict}")
        lines.append(f"  source: {res.source}")
        bad = [f"{v}: {r['status']} ({r['reason']})" for v, r in res.runs.items() if r["status"] != "ok"]
        lines += [f"  run {b}" for b in bad]
        rows = [("figure", "published", "source", "ours", "tolerance", "result")]
        for f in res.figures:
            check = {"within": "", "at_most": "≤ ", "at_least": "≥ "}[f.check]
            src = f.source if len(f.source) <= 38 else f.source[:35] + "..."
            rows.append((f.name, f"{check}{f.published:.4g} {f.unit}".strip(), src, _fmt(f.ours), f.tolerance,
                         status_of(f)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for j, row in enumerate(rows):
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
            if j == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        for f in res.figures:
            if f.passed is False and f.reason:
                lines.append(f"  FAIL {f.name}: {f.reason}")
        lines.append("")
    n_pass = sum(r.passed for r in results)
    unchecked = sum(r.verdict == "NOT CHECKED" for r in results)
    lines.append(f"{n_pass} of {len(results)} cases reproduce"
                 + (f"; {unchecked} not checked in this mode (full-run figures only: run without --quick)"
                    if unchecked else ""))
    return "\n".join(lines)


def to_json(results: list[CaseResult], quick: bool) -> dict[str, Any]:
    return {"created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "quick": quick,
            "passed": all(r.passed for r in results),
            "cases": [{**asdict(r), "passed": r.passed, "verdict": r.verdict} for r in results]}


def write_outputs(results: list[CaseResult], out_dir: Path, quick: bool) -> tuple[Path, Path]:
    """``reproduce.json`` and ``reproduce.html`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = to_json(results, quick)
    json_path = out_dir / "reproduce.json"
    json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    html_path = write_html(data, out_dir / "reproduce.html")
    return json_path, html_path
