"""The tiny-coder grammar: a task is source -> filter -> map -> reducer.

Every piece carries its English phrase and its Python code, so one composition
yields the spec (what the model is shown) and the teacher's solutions (correct
in two styles, or with a bug mode injected) from the same place. Bug modes live
in the piece that can go wrong: OFF1 in a source's range, CMP in an inclusive
filter, DIV in a floor-division map or the mean, EMPTY in a guarded reducer.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolve.gym.notes import CMP, DIV, EMPTY, OFF1


@dataclass(frozen=True)
class Source:
    name: str
    elem: str  # "int" | "pair" | "word": what the filter and map see
    arg: str  # the function's first parameter
    noun: str
    loc: str
    comp: str  # comprehension clause
    loop: tuple[str, ...]  # loop header lines (relative indent)
    comp_off1: str | None = None  # OFF1 variants (None: the mode does not apply)
    loop_off1: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Filter:
    name: str
    elem: str
    adj: str  # before the noun ("positive ")
    post: str  # after the location (" greater than k")
    cond: str | None  # None: keep everything
    needs_k: bool = False
    cmp_bug: str | None = None  # CMP variant: strict where the spec is inclusive


@dataclass(frozen=True)
class Map:
    name: str
    elem: str
    out: str  # "int" | "str"
    phrase: str
    expr: str
    div_bug: str | None = None  # DIV variant: `/` for `//`


@dataclass(frozen=True)
class Reducer:
    name: str
    types: tuple[str, ...]  # map output types it accepts
    phrase: str
    body: str  # expression over ys; {d} is the empty default
    guard: bool = False  # needs an empty guard (EMPTY applies)
    div_bug: str | None = None


def _filters_int() -> list[Filter]:
    return [
        Filter("all", "int", "", "", None),
        Filter("pos", "int", "positive ", "", "x > 0"),
        Filter("neg", "int", "negative ", "", "x < 0"),
        Filter("even", "int", "even ", "", "x % 2 == 0"),
        Filter("odd", "int", "odd ", "", "x % 2 == 1"),
        Filter("nonzero", "int", "nonzero ", "", "x != 0"),
        Filter("mul3", "int", "", " divisible by 3", "x % 3 == 0"),
        Filter("gtk", "int", "", " greater than k", "x > k", True),
        Filter("ltk", "int", "", " less than k", "x < k", True),
        Filter("gek", "int", "", " that are at least k", "x >= k", True, "x > k"),
        Filter("lek", "int", "", " that are at most k", "x <= k", True, "x < k"),
    ]


SOURCES: dict[str, Source] = {s.name: s for s in [
    Source("list", "int", "xs", "numbers", "in xs", "for x in xs", ("for x in xs:",)),
    Source("range", "int", "n", "numbers", "from 1 to n", "for x in range(1, n + 1)",
           ("for x in range(1, n + 1):",), "for x in range(1, n)", ("for x in range(1, n):",)),
    Source("pairs", "pair", "xs", "adjacent pairs (a, b)", "in xs", "for a, b in zip(xs, xs[1:])",
           ("for i in range(len(xs) - 1):", "    a, b = xs[i], xs[i + 1]"),
           "for a, b in zip(xs, xs[1:-1])",
           ("for i in range(len(xs) - 2):", "    a, b = xs[i], xs[i + 1]")),
    Source("words", "word", "s", "words", "in s", "for w in s.split()", ("for w in s.split():",)),
]}

FILTERS: dict[tuple[str, str], Filter] = {(f.elem, f.name): f for f in [
    *_filters_int(),
    Filter("all", "pair", "", "", None),
    Filter("up", "pair", "", " with a < b", "a < b"),
    Filter("down", "pair", "", " with a > b", "a > b"),
    Filter("same", "pair", "", " with a == b", "a == b"),
    Filter("gapk", "pair", "", " whose gap abs(b - a) is at least k", "abs(b - a) >= k", True,
           "abs(b - a) > k"),
    Filter("all", "word", "", "", None),
    Filter("longk", "word", "", " with at least k letters", "len(w) >= k", True, "len(w) > k"),
    Filter("morek", "word", "", " with more than k letters", "len(w) > k", True),
    Filter("hasa", "word", "", " containing the letter a", "'a' in w"),
    Filter("cap", "word", "", " starting with a capital letter", "w[0].isupper()"),
]}

# Filters that make no sense over 1..n (always empty or always everything).
RANGE_SKIP = {"pos", "neg", "nonzero"}

MAPS: dict[tuple[str, str], Map] = {(m.elem, m.name): m for m in [
    Map("id", "int", "int", "", "x"),
    Map("double", "int", "int", ", each doubled", "2 * x"),
    Map("triple", "int", "int", ", each times 3", "3 * x"),
    Map("square", "int", "int", ", each squared", "x * x"),
    Map("abs", "int", "int", ", each as its absolute value", "abs(x)"),
    Map("neg", "int", "int", ", each negated", "-x"),
    Map("inc", "int", "int", ", each plus 1", "x + 1"),
    Map("add5", "int", "int", ", each plus 5", "x + 5"),
    Map("half", "int", "int", ", each halved and rounded down", "x // 2", "x / 2"),
    Map("third", "int", "int", ", each divided by 3 and rounded down", "x // 3", "x / 3"),
    Map("id", "pair", "pair", "", "(a, b)"),  # only counted, never returned
    Map("diff", "pair", "int", ", each as b - a", "b - a"),
    Map("gap", "pair", "int", ", each as abs(b - a)", "abs(b - a)"),
    Map("sum", "pair", "int", ", each as a + b", "a + b"),
    Map("max", "pair", "int", ", each as the larger of a and b", "max(a, b)"),
    Map("mid", "pair", "int", ", each as the mean of a and b rounded down", "(a + b) // 2", "(a + b) / 2"),
    Map("id", "word", "str", "", "w"),
    Map("len", "word", "int", ", each as its length", "len(w)"),
    Map("upper", "word", "str", ", each in upper case", "w.upper()"),
    Map("rev", "word", "str", ", each reversed", "w[::-1]"),
    Map("first", "word", "str", ", each as its first letter", "w[0]"),
]}

_INT = ("int",)
REDUCERS: dict[str, Reducer] = {r.name: r for r in [
    Reducer("sum", _INT, "Return their sum.", "sum(ys)"),
    Reducer("count", ("int", "str", "pair"), "Return how many there are.", "len(ys)"),
    Reducer("max", _INT, "Return the largest, or 0 if there are none.", "max(ys)", True),
    Reducer("min", _INT, "Return the smallest, or 0 if there are none.", "min(ys)", True),
    Reducer("mean", _INT, "Return their mean rounded down, or 0 if there are none.",
            "sum(ys) // len(ys)", True, "sum(ys) / len(ys)"),
    Reducer("first", ("int", "str"), "Return the first, or {d} if there are none.", "ys[0]", True),
    Reducer("last", ("int", "str"), "Return the last, or {d} if there are none.", "ys[-1]", True),
    Reducer("list", ("int", "str"), "Return them as a list.", "ys"),
    Reducer("join", ("str",), "Return them joined by spaces.", "' '.join(ys)"),
]}


@dataclass(frozen=True)
class Composition:
    source: Source
    filter: Filter
    map: Map
    reducer: Reducer

    @property
    def family(self) -> str:
        return self.source.name

    @property
    def names(self) -> list[str]:
        return [self.source.name, self.filter.name, self.map.name, self.reducer.name]

    @property
    def comp_id(self) -> str:
        return "-".join(self.names[1:])

    @property
    def args(self) -> list[str]:
        return [self.source.arg] + (["k"] if self.filter.needs_k else [])

    @property
    def default(self) -> str:
        return "''" if self.map.out == "str" else "0"

    def bug_modes(self) -> list[str]:
        modes = []
        if self.reducer.guard:
            modes.append(EMPTY)
        if self.map.div_bug or self.reducer.div_bug:
            modes.append(DIV)
        if self.filter.cmp_bug:
            modes.append(CMP)
        if self.source.comp_off1:
            modes.append(OFF1)
        return modes

    def spec(self) -> str:
        s, f = self.source, self.filter
        reducer = self.reducer.phrase.format(d=self.default)
        return f"Take the {f.adj}{s.noun} {s.loc}{f.post}{self.map.phrase}. {reducer}"

    def signature(self) -> str:
        return f"def f({', '.join(self.args)}):"

    def render(self, bugs: frozenset[str] | set[str] = frozenset(), style: int = 0, guard_style: int = 0) -> str:
        """A full function definition; ``bugs`` are the modes to inject (applicable ones only)."""
        s, f, m, r = self.source, self.filter, self.map, self.reducer
        cond = f.cmp_bug if CMP in bugs and f.cmp_bug else f.cond
        expr = m.div_bug if DIV in bugs and m.div_bug else m.expr
        off1 = OFF1 in bugs and s.comp_off1 is not None
        lines = [self.signature()]
        if style == 0:
            clause = s.comp_off1 if off1 else s.comp
            lines.append(f"    ys = [{expr} {clause}{f' if {cond}' if cond else ''}]")
        else:
            lines.append("    ys = []")
            head = s.loop_off1 if off1 else s.loop
            lines += ["    " + h for h in head]
            indent = "        "
            if cond:
                lines.append(f"{indent}if {cond}:")
                indent += "    "
            lines.append(f"{indent}ys.append({expr})")
        body = r.div_bug if DIV in bugs and r.div_bug else r.body
        if r.guard and EMPTY not in bugs:
            if guard_style == 0:
                lines += ["    if not ys:", f"        return {self.default}", f"    return {body}"]
            else:
                lines.append(f"    return {body} if ys else {self.default}")
        else:
            lines.append(f"    return {body}")
        return "\n".join(lines) + "\n"


def all_compositions() -> list[Composition]:
    """Every valid composition, in a fixed order."""
    out = []
    for src in SOURCES.values():
        filters = [f for (e, _), f in FILTERS.items() if e == src.elem]
        if src.name == "range":
            filters = [f for f in filters if f.name not in RANGE_SKIP]
        maps = [m for (e, _), m in MAPS.items() if e == src.elem]
        for f in filters:
            for m in maps:
                for r in REDUCERS.values():
                    if m.out not in r.types:
                        continue
                    if r.name == "count" and m.name != "id":
                        continue  # the map does not change a count
                    out.append(Composition(src, f, m, r))
    return out


def composition_from_names(names: list[str]) -> Composition:
    """Rebuild a composition from ``task.meta["composition"]``."""
    try:
        src = SOURCES[names[0]]
        return Composition(src, FILTERS[(src.elem, names[1])], MAPS[(src.elem, names[2])], REDUCERS[names[3]])
    except (KeyError, IndexError) as e:
        from evolve.errors import ConfigError

        raise ConfigError(f"unknown tiny-coder composition {names!r}") from e
