"""What a user's OpenDSS file may do: describe a circuit and solve it, nothing else.

A ``.dss`` file is a script: besides defining lines, loads and regulators, OpenDSS commands
export, save, show (which writes a file and opens it in a viewer), plot, change folders and
run programs, ``Set`` options turn on files written during solves, and element properties
write traces (``DebugTrace``), load libraries (``UserModel``, ``DynaDLL``) or read data files.
A scenario runs no code and writes nothing outside its run folder, so :func:`dss_file_problems`
reads the file as OpenDSS will and refuses every line that does anything but describe and solve
the circuit, before OpenDSS sees the file.

It reads lines as OpenDSS's command parser does (DSS C-API ``ParserDel.pas``/``ExecCommands.pas``):

* the first token of a line is the command; tokens end at white space, ``,`` or ``=``; a token
  may be quoted or bracketed (``"..."``, ``'...'``, ``(...)``, ``[...]``, ``{...}``); ``!`` and
  ``//`` start a comment;
* a command is found by its whole name, else by the first command in OpenDSS's list that starts
  with the token (``Exp`` is ``Export``, ``S`` is ``Select``, ``Sa`` is ``Save``), case-insensitive;
  ``Set`` options and element properties are found the same way in their own lists;
* a line whose first token is ``name=value`` edits a property (``Line.l1.r1=0.1``).

The command, option and property lists are read from the OpenDSS engine itself
(``opendssdirect``'s ``Executive`` interface and each class's property names), so a newer
engine's commands are judged by the same rules: only the commands in :data:`ALLOWED_COMMANDS`
and the options in :data:`ALLOWED_OPTIONS` pass; anything else is refused with the file, line,
command and fix. ``Redirect``/``Compile`` may only name files inside the feeder's folder (each
checked the same way); ``BusCoords``-like commands and data files (``mult=(file=...)``,
``CSVFile=``) may only read inside it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

#: Commands a network file may use (OpenDSS's names, lower case): define elements, set solution
#: options, compute voltage bases and bus lists, solve, open and close switches.
ALLOWED_COMMANDS = frozenset({
    "new", "edit", "more", "m", "~", "select", "batchedit", "like", "set", "solve", "clear",
    "calcvoltagebases", "setkvbase", "buildy", "init", "makebuslist", "reprocessbuses", "interpolate",
    "setloadandgenkv", "setbusxy", "enable", "disable", "open", "close", "remove", "reset", "next",
    "allocateloads", "makeposseq", "updatestorage", "finishtimestep", "_initsnap", "_solvenocontrol",
    "_samplecontrols", "_docontrolactions", "_solvedirect", "_solvepflow", "quit", "//",
    # read another file: only inside the feeder's folder (checked below)
    "redirect", "compile", "buscoords", "latlongcoords", "giscoords",
})
#: Commands that run another script (checked recursively) or read a data file.
SCRIPT_COMMANDS = frozenset({"redirect", "compile"})
DATA_COMMANDS = frozenset({"buscoords", "latlongcoords", "giscoords"})
#: Why the best-known refused commands are refused (the rest: not a network definition command).
WHY = {
    **dict.fromkeys(("export", "save", "dump", "alignfile", "cvrtloadshapes", "rephase", "distribute", "vdiff",
                     "exportoverloads", "exportvviolations", "summary", "obfuscate"), "writes files"),
    **dict.fromkeys(("show", "plot", "visualize", "di_plot", "comparecases", "yearlycurves", "fileedit",
                     "formedit", "panel", "addbusmarker"), "writes files and opens a viewer"),
    "doscmd": "runs a program", "cd": "changes the folder OpenDSS reads and writes in",
    "uuids": "reads a file", "connect": "opens a network connection", "var": "defines script variables",
    "variable": "defines script variables",
}
#: ``Set`` options a network file may use: solution and load-model options, voltage bases, plot
#: markers (which only style plots). Options that write (``DemandInterval``, ``DataPath``,
#: ``Editor``, ``Log``, ``Recorder``, ``OverloadReport``, ``TraceControl``, ...) are not here.
ALLOWED_OPTIONS = frozenset(s.lower() for s in (
    "type", "element", "hour", "sec", "year", "frequency", "stepsize", "mode", "random", "number", "time",
    "class", "object", "circuit", "tolerance", "maxiterations", "h", "Loadmodel", "Loadmult", "normvminpu",
    "normvmaxpu", "emergvminpu", "emergvmaxpu", "%mean", "%stddev", "LDCurve", "%growth", "Genkw", "Genpf",
    "CapkVAR", "Addtype", "Allowduplicates", "Zonelock", "UEweight", "Lossweight", "UEregs", "Lossregs",
    "Voltagebases", "Algorithm", "Trapezoidal", "Autobuslist", "Controlmode", "Genmult", "Defaultdaily",
    "Defaultyearly", "Allocationfactors", "Cktmodel", "Pricesignal", "Pricecurve", "Terminal", "Basefrequency",
    "Harmonics", "Maxcontroliter", "Bus", "KeepList", "ReduceOption", "%Normal", "Casename", "Cfactors",
    "Numallociterations", "DefaultBaseFrequency", "EarthModel", "NeglectLoadY", "MinIterations", "KeepLoad",
    "Zmag", "SeasonRating", "SeasonSignal", "LineTypes", "LongLineCorrection", "LoadShapeClass",
    "Markercode", "Nodewidth", "Markswitches", "Switchmarkercode", "Daisysize", "Marktransformers",
    "TransMarkerCode", "TransMarkerSize", "MarkCapacitors", "MarkRegulators", "MarkPVSystems", "MarkStorage",
    "CapMarkerCode", "RegMarkerCode", "PVMarkerCode", "StoreMarkerCode", "CapMarkerSize", "RegMarkerSize",
    "PVMarkerSize", "StoreMarkerSize", "MarkFuses", "FuseMarkerCode", "FuseMarkerSize", "MarkReclosers",
    "RecloserMarkerCode", "RecloserMarkerSize", "MarkRelays", "RelayMarkerCode", "RelayMarkerSize",
))
#: Element properties that name a file OpenDSS reads (only inside the feeder's folder).
FILE_PROPERTIES = frozenset({"csvfile", "sngfile", "dblfile", "pqcsvfile"})
#: Element properties that load a shared library (run code): refused whatever their value.
LIBRARY_PROPERTIES = frozenset({"usermodel", "dynadll", "shaftmodel"})
#: ``file=`` inside an array value (``mult=(file=shape.csv)``) reads that file.
_FILE_IN_VALUE = re.compile(r"(?:^|[\s,(\[{])(?:file|sngfile|dblfile|csvfile)\s*=\s*([^\s,)\]}]+)", re.I)
#: A script variable in a token or in an array value (OpenDSS substitutes ``@name`` wherever a token starts).
_VARIABLE = re.compile(r"(?:^|[\s,(\[{|\"'=])@")
#: OpenDSS's parser: delimiters, white space, quote pairs.
_DELIMS, _SPACE, _OPEN, _CLOSE = ",=", " \t", "(\"'[{", ")\"']}"


@lru_cache(maxsize=1)
def dss_names() -> tuple[tuple[str, ...], tuple[str, ...], dict[str, tuple[str, ...]]]:
    """OpenDSS's command list, ``Set`` option list and each class's property list, in the engine's
    order and lower case (the order decides what an abbreviation means), read from the engine."""
    import opendssdirect  # loads the DSS C-API library: only for the OpenDSS engine

    dss = opendssdirect.NewContext()
    dss.Basic.AllowChangeDir(False)
    ex = dss.Executive
    commands = tuple(ex.Command(i).lower() for i in range(1, ex.NumCommands() + 1))
    options = tuple(ex.Option(i).lower() for i in range(1, ex.NumOptions() + 1))
    properties: dict[str, tuple[str, ...]] = {}
    dss.Text.Command("New Circuit.cosim_probe")  # a probe element of each class gives its property names
    for cls in dss.Basic.Classes():
        try:
            dss.Text.Command(f"New {cls}.cosim_probe")
        except Exception:  # a control without its element: created all the same, with its properties
            pass
        try:
            dss.Circuit.SetActiveClass(cls)
            dss.ActiveClass.Name("cosim_probe")
            properties[cls.lower()] = tuple(p.lower() for p in dss.Element.AllPropertyNames())
        except Exception:  # a class that cannot be probed: its lines are checked against every class
            continue
    dss.Text.Command("Clear")
    return commands, options, properties


def resolve(token: str, names: tuple[str, ...]) -> str:
    """``token`` as OpenDSS resolves it in ``names``: the whole name, else the first name that starts
    with it (DSS C-API ``THashList.FindAbbrev``); empty when none."""
    low = token.lower()
    if not low:
        return ""
    if low in names:
        return low
    return next((n for n in names if n.startswith(low)), "")


def parse_params(line: str) -> list[tuple[str, str]]:
    """``(name, value)`` pairs of one line as OpenDSS's parser reads them (name empty when positional);
    the parser's rules, re-stated: a token ends at white space, ``,``, ``=`` or a comment (``!``,
    ``//``); a quoted or bracketed token runs to its closing character; ``name=value`` pairs."""
    buf = line + " "
    size = len(buf)
    pos = 0
    last = " "

    def skip(p: int) -> int:
        while p < size - 1 and buf[p] in _SPACE:
            p += 1
        return p

    def token(p: int) -> tuple[str, int]:
        nonlocal last
        if p >= size:
            return "", p
        if buf[p] in _OPEN:
            end = _CLOSE[_OPEN.index(buf[p])]
            p += 1
            start = p
            while p < size - 1 and buf[p] != end:
                p += 1
            text = buf[start:p]
            if p < size - 1:
                p += 1
        else:
            start = p
            while p < size - 1:
                ch = buf[p]
                if ch == "!" or (ch == "/" and p + 1 < size and buf[p + 1] == "/"):
                    last = "!"
                    break
                if ch in _DELIMS:
                    last = ch
                    break
                if ch in _SPACE:
                    last = " "
                    break
                p += 1
            text = buf[start:p]
        if last == "!":
            return text, size
        if last == " ":
            p = skip(p)
        if p < size and buf[p] in _DELIMS:
            last = buf[p]
            p += 1
        return text, skip(p)

    pos = skip(pos)
    pairs = []
    while pos < size:
        before = pos
        last = " "
        text, pos = token(pos)
        name = ""
        if last == "=":
            name = text
            text, pos = token(pos)
        if name or text:  # OpenDSS stops a line at an empty value; going on past it only checks more
            pairs.append((name, text))
        elif pos <= before:
            break
    return pairs


class _Screen:
    """One pass over a feeder file and the files it redirects to."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands, self.options, self.properties = dss_names()
        self.found: list[str] = []
        self.seen: set[Path] = set()
        #: every file looked at (also those missing), with its state then: what the verdict depends on
        self.stamps: dict[Path, tuple[int, int] | None] = {}

    def refuse(self, where: str, what: str, fix: str) -> None:
        self.found.append(f"{where}: {what}; {fix}")

    def check_read(self, where: str, base: Path, name: str, what: str) -> list[Path]:
        """The file(s) ``name`` may mean (relative to the file that names it, or to the feeder's folder,
        where OpenDSS may resolve it); refused (empty) when either is outside the feeder's folder."""
        targets = list(dict.fromkeys((folder / name).resolve() for folder in (base, self.root)))
        if any(t != self.root and self.root not in t.parents for t in targets):
            self.refuse(where, f"{what} '{name}', outside the feeder's folder ({self.root})",
                        "copy that file into the feeder's folder and name it there")
            return []
        return targets

    def file(self, path: Path) -> None:
        path = path.resolve()
        if path not in self.stamps:
            self.stamps[path] = _stamp(path)
        if path in self.seen or not path.is_file():
            return
        self.seen.add(path)
        text = path.read_bytes().decode("latin-1")  # OpenDSS reads bytes: every byte is one character
        for number, raw in enumerate(text.splitlines(), 1):
            self.line(path, number, raw)

    def classes(self, cls: str) -> list[str]:
        """The classes a property may belong to: the named one, else every class (the active object
        is not always known from the text: a ``~`` line after a block comment, a bare element name)."""
        if cls and cls in self.properties:
            return [cls]
        return list(self.properties)

    def line(self, path: Path, number: int, raw: str) -> None:
        stripped = raw.strip()
        where = f"{path.name}:{number}: {stripped}"
        if stripped.lower().startswith("//!altdss"):  # DSS C-API runs the rest of such a comment
            stripped = stripped[len("//!altdss"):]
        pairs = parse_params(stripped)
        if not pairs:
            return
        variable = next((t for pair in pairs for t in pair if _VARIABLE.search(t)), None)
        if variable is not None:  # OpenDSS replaces @name by a variable's value (@result: the last answer)
            self.refuse(where, f"'{variable}' uses a script variable (@...), whose value the file does not show",
                        "write the value itself")
            return
        name, value = pairs[0]
        if name:  # "Line.l1.r1=0.1" or "r1=0.1": a property of an element (the active one without a class)
            obj, _, prop = name.rpartition(".")
            cls = obj.split(".")[0].lower() if "." in obj else ""
            self.properties_of(where, path.parent, self.classes(cls), [(prop, value), *pairs[1:]])
            return
        command = resolve(value, self.commands)
        if not command:
            return  # OpenDSS refuses an unknown command itself ("Unknown Command")
        if command not in ALLOWED_COMMANDS:
            how = "" if command == value.lower() else f" (OpenDSS reads '{value}' as '{command}')"
            why = WHY.get(command, "is not a command that describes or solves a circuit")
            self.refuse(where, f"'{command}'{how} {why}",
                        "remove the line: a network file may only define and solve the circuit (cosim reads "
                        "and records the results itself)")
            return
        args = pairs[1:]
        if command in ("new", "edit", "select", "batchedit"):
            obj = args[0][1] if args and args[0][0].lower() in ("", "object") else ""
            cls = obj.split(".")[0].lower() if "." in obj else ""
            if obj:
                args = args[1:]
            self.properties_of(where, path.parent, self.classes(cls), args)
        elif command in ("more", "m", "~"):  # the active element's class is not known for sure: every class
            self.properties_of(where, path.parent, self.classes(""), args)
        elif command in ("set", "solve"):
            self.set_options(where, path.parent, args)
        elif command in SCRIPT_COMMANDS | DATA_COMMANDS:
            if not args or not args[0][1]:
                return
            for target in self.check_read(where, path.parent, args[0][1], f"'{command}' reads"):
                if command in SCRIPT_COMMANDS:
                    self.file(target)
        else:
            self.values_read(where, path.parent, args)

    def values_read(self, where: str, base: Path, args: list[tuple[str, str]]) -> None:
        for _, value in args:
            for name in _FILE_IN_VALUE.findall(value):
                self.check_read(where, base, name, "it reads the data file")

    def set_options(self, where: str, base: Path, args: list[tuple[str, str]]) -> None:
        pointer = 0
        for name, value in args:
            if name:
                option = resolve(name, self.options)
                pointer = self.options.index(option) + 1 if option else 0
            else:
                pointer += 1
                option = self.options[pointer - 1] if 0 < pointer <= len(self.options) else ""
            if option and option not in ALLOWED_OPTIONS:
                shown = name or value
                how = "" if option == shown.lower() else f" (OpenDSS reads '{shown}' as '{option}')"
                given = f"{name}={value}" if name else value
                self.refuse(where, f"the option '{option}'{how} is not a circuit or solution option (it writes "
                            "files, changes folders or runs a program)", f"remove '{given}' from the line")
        self.values_read(where, base, args)

    def properties_of(self, where: str, base: Path, classes: list[str], args: list[tuple[str, str]]) -> None:
        for cls in classes:
            names = self.properties.get(cls, ())
            pointer = 0
            for name, value in args:
                if name:
                    prop = resolve(name, names)
                    pointer = names.index(prop) + 1 if prop else 0
                else:
                    pointer += 1
                    prop = names[pointer - 1] if 0 < pointer <= len(names) else ""
                    name = prop
                if self.property_problem(where, base, cls, prop, name, value):
                    return
        self.values_read(where, base, args)

    def property_problem(self, where: str, base: Path, cls: str, prop: str, name: str, value: str) -> bool:
        low = value.strip().lower()
        if prop == "debugtrace" and not low.startswith(("n", "f")):
            self.refuse(where, f"'{name}={value}' ({cls}.DebugTrace) writes a trace file into the feeder's folder "
                        "at every solve", f"remove '{name}={value}'")
        elif prop in LIBRARY_PROPERTIES and low not in ("", "none"):
            self.refuse(where, f"'{name}={value}' ({cls}.{prop}) loads a program library",
                        f"remove '{name}={value}' (cosim runs no code from a network file)")
        elif prop == "action" and low.startswith(("s", "d", "z")):
            self.refuse(where, f"'{name}={value}' ({cls}.Action) writes a file", f"remove '{name}={value}'")
        elif prop == "phasevoltagereport" and not low.startswith(("n", "f")):
            self.refuse(where, f"'{name}={value}' ({cls}.PhaseVoltageReport) writes a report file",
                        f"remove '{name}={value}'")
        elif prop in FILE_PROPERTIES and value:
            return not self.check_read(where, base, value, "it reads the data file")
        else:
            return False
        return True


def dss_file_problems(path: Path) -> list[str]:
    """Lines of ``path`` (and of the files it redirects to) that would do anything but describe and solve
    a circuit: write, show, plot, export or save, run programs or load libraries, change folders, or read
    outside the feeder's folder; each names the file, line, command and the fix. Empty when the file
    only describes a circuit."""
    path = Path(path)
    key = path.absolute()
    known = _SCREENED.get(key)
    if known is not None and all(_stamp(p) == stamp for p, stamp in known[0].items()):
        return list(known[1])
    screen = _Screen(path.parent.resolve())
    screen.file(path)
    _SCREENED[key] = (screen.stamps, list(screen.found))
    return screen.found


#: verdicts of dss_file_problems by file, with the state of every file each depended on (a feeder is
#: screened by validation, by the run's compile and by the size check: once while its files are unchanged)
_SCREENED: dict[Path, tuple[dict[Path, tuple[int, int] | None], list[str]]] = {}


def _stamp(path: Path) -> tuple[int, int] | None:
    """A file's modification time and size, None when it is not a file. [ns, bytes]"""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size) if path.is_file() else None


def quoted(path: Path) -> str:
    """``path`` as one OpenDSS token: in the first pair of quotes or brackets whose closing character it
    does not hold (a ``]`` in a folder name would otherwise end the token early)."""
    text = str(path)
    for begin, end in zip(_OPEN, _CLOSE):
        if end not in text:
            return f"{begin}{text}{end}"
    raise ValueError(f"{path}: the path holds every closing quote and bracket OpenDSS knows; rename its folder")


def refusal(path: Path, problems: list[str]) -> str:
    """One message for the problems of ``path``: the first in full, and how many more."""
    more = f" (and {len(problems) - 1} more such line{'s' if len(problems) > 2 else ''})" if len(problems) > 1 else ""
    return f"{path.name} does more than describe a circuit: {problems[0]}{more}"
