"""Our own mutation operators, written with the standard library's ``ast`` (issue 39).

mutmut rewrites each function into a trampoline and switches a mutant on
after import, so it never mutates a decorated function and never sees a table
built at import time.  These operators change the source file itself, one
site at a time, so both are reached: a mutant of a module-level table is in
force from the first import.

The operators (``OPERATORS``):

* ``call-del``: a statement that is only a call (``f(x)``, ``await f(x)``)
  becomes ``pass``;
* ``return-none``: ``return X`` becomes ``return None`` (a bare ``return`` and
  ``return None`` are left alone: they would not change);
* ``negate``: the condition of an ``if``/``elif``, a ``while``, a conditional
  expression, an ``assert`` and a comprehension's ``if`` becomes ``not (...)``;
* ``loop-swap``: ``continue`` becomes ``break`` and ``break`` becomes
  ``continue``.

Nothing under ``if TYPE_CHECKING:`` is mutated (it never runs), and that test
itself is not negated (the negation would import typing-only names at run
time, a change of no behaviour the tests could see).

Each mutant is spliced into the original text (only the site's span changes,
padded with blank lines so that every other line keeps its number) and the
result is checked: it must parse to exactly the tree that ``ast`` gives when
the same change is made to the parsed module.  If the splice ever disagreed,
the whole mutated module would be written with ``ast.unparse`` instead (which
keeps the behaviour but not the comments), so a mutant always means what its
operator says.  Sites are listed in source order, so the same file always
gives the same mutants with the same ids.
"""

from __future__ import annotations

import ast
import copy
import difflib
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

OPERATORS = ("call-del", "return-none", "negate", "loop-swap")


@dataclass(frozen=True)
class Site:
    """One place one operator can change."""

    operator: str
    lineno: int
    col: int
    end_lineno: int
    end_col: int
    #: the line of the smallest statement holding the site: what line coverage records
    stmt_lineno: int
    #: dotted name of the enclosing function or class ("" at module level)
    scope: str
    #: whether the site runs when the module is imported (module or class body, not a function)
    import_time: bool
    #: the index of the changed node in ``ast.walk`` order, to find it again in a fresh parse
    walk_index: int

    @property
    def key(self) -> str:
        return f"{self.operator}@{self.lineno}:{self.col}"


@dataclass(frozen=True)
class Mutant:
    module: str
    site: Site
    source: str  # the mutated module
    diff: str

    @property
    def id(self) -> str:
        digest = hashlib.sha256(self.source.encode()).hexdigest()[:8]
        return f"{self.module}:{self.site.key}:{digest}"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _returns_something(node: ast.Return) -> bool:
    value = node.value
    return value is not None and not (isinstance(value, ast.Constant) and value.value is None)


class _Finder(ast.NodeVisitor):
    """Walk the tree once, recording each site with its statement, scope and timing."""

    def __init__(self, index: dict[int, int]) -> None:
        self.index = index  # id(node) -> position in ast.walk order
        self.sites: list[Site] = []
        self.scope: list[str] = []
        self.in_function = 0
        self.stmt: list[ast.stmt] = []

    def _add(self, operator: str, node: ast.AST) -> None:
        self.sites.append(
            Site(
                operator=operator,
                lineno=node.lineno,  # type: ignore[attr-defined]
                col=node.col_offset,  # type: ignore[attr-defined]
                end_lineno=node.end_lineno,  # type: ignore[attr-defined]
                end_col=node.end_col_offset,  # type: ignore[attr-defined]
                stmt_lineno=self.stmt[-1].lineno if self.stmt else node.lineno,  # type: ignore[attr-defined]
                scope=".".join(self.scope),
                import_time=self.in_function == 0,
                walk_index=self.index[id(node)],
            )
        )

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self.stmt.append(node)
            try:
                self._visit_stmt(node)
            finally:
                self.stmt.pop()
        else:
            self._visit_expr(node)

    def _visit_stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            # Decorators, defaults and bases run at import time, in the outer scope.
            for outer in (*node.decorator_list, *getattr(node, "bases", ())):
                self.visit(outer)
            if not isinstance(node, ast.ClassDef):
                for default in (*node.args.defaults, *node.args.kw_defaults):
                    if default is not None:
                        self.visit(default)
            self.scope.append(node.name)
            self.in_function += not isinstance(node, ast.ClassDef)
            try:
                for child in node.body:
                    self.visit(child)
            finally:
                self.in_function -= not isinstance(node, ast.ClassDef)
                self.scope.pop()
            return
        if isinstance(node, ast.Expr) and (
            isinstance(node.value, ast.Call)
            or (isinstance(node.value, ast.Await) and isinstance(node.value.value, ast.Call))
        ):
            self._add("call-del", node)
        elif isinstance(node, ast.Return) and _returns_something(node):
            self._add("return-none", node)
        elif isinstance(node, ast.If | ast.While | ast.Assert):
            self._add("negate", node.test)
        elif isinstance(node, ast.Continue | ast.Break):
            self._add("loop-swap", node)
        self.generic_visit(node)

    def _visit_expr(self, node: ast.AST) -> None:
        if isinstance(node, ast.IfExp):
            self._add("negate", node.test)
        elif isinstance(node, ast.comprehension):
            for cond in node.ifs:
                self._add("negate", cond)
        elif isinstance(node, ast.Lambda):
            # A lambda's body runs when it is called, like a function's.
            self.in_function += 1
            try:
                self.generic_visit(node)
            finally:
                self.in_function -= 1
            return
        self.generic_visit(node)


def find_sites(source: str) -> list[Site]:
    """Every site of every operator in ``source``, in source order."""
    tree = ast.parse(source)
    index = {id(node): i for i, node in enumerate(ast.walk(tree))}
    finder = _Finder(index)
    finder.visit(tree)
    return sorted(finder.sites, key=lambda s: (s.lineno, s.col, s.operator, s.walk_index))


def _negated(test: ast.expr) -> ast.expr:
    return ast.UnaryOp(op=ast.Not(), operand=test)


def _replace(tree: ast.Module, target: ast.AST, new: ast.AST) -> None:
    """Put ``new`` where ``target`` is in ``tree`` (one field or one list slot)."""
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is target:
                        value[i] = new
                        return
    raise LookupError("site not found in the tree")


def _new_node(site: Site, node: ast.AST) -> ast.AST:
    if site.operator == "call-del":
        return ast.Pass()
    if site.operator == "return-none":
        return ast.Return(value=ast.Constant(value=None))
    if site.operator == "negate":
        return _negated(node)  # type: ignore[arg-type]
    if site.operator == "loop-swap":
        return ast.Continue() if isinstance(node, ast.Break) else ast.Break()
    raise ValueError(site.operator)


def _splice_text(site: Site, segment: str) -> str:
    if site.operator == "negate":
        return f"not ({segment})"
    text = {"call-del": "pass", "return-none": "return None"}.get(site.operator)
    if text is None:
        text = "continue" if segment == "break" else "break"
    return text + "\n" * segment.count("\n")


def _splice(source: str, site: Site) -> str:
    lines = source.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: site.lineno - 1]) + _char_col(
        lines[site.lineno - 1], site.col
    )
    end = sum(len(line) for line in lines[: site.end_lineno - 1]) + _char_col(
        lines[site.end_lineno - 1], site.end_col
    )
    return source[:start] + _splice_text(site, source[start:end]) + source[end:]


def _char_col(line: str, byte_col: int) -> int:
    """``ast`` columns count UTF-8 bytes; string slicing counts characters."""
    return len(line.encode()[:byte_col].decode())


def _dump(tree: ast.AST) -> str:
    return ast.dump(tree, include_attributes=False)


def mutate(module: str, source: str, site: Site) -> Mutant:
    """The mutant of ``source`` at ``site``, checked against the changed tree."""
    tree = ast.parse(source)
    node = next(n for i, n in enumerate(ast.walk(tree)) if i == site.walk_index)
    _replace(tree, node, _new_node(site, copy.deepcopy(node)))
    ast.fix_missing_locations(tree)
    mutated = _splice(source, site)
    try:
        same = _dump(ast.parse(mutated)) == _dump(tree)
    except SyntaxError:
        same = False
    if not same:
        mutated = ast.unparse(tree) + "\n"
    diff = "".join(
        difflib.unified_diff(
            source.splitlines(keepends=True),
            mutated.splitlines(keepends=True),
            fromfile=f"a/{module}",
            tofile=f"b/{module}",
            n=1,
        )
    )
    return Mutant(module=module, site=site, source=mutated, diff=diff)


def mutants(
    module: str, source: str, keep: Callable[[Site], bool] | None = None
) -> Iterator[Mutant]:
    """Every mutant of ``source``, in source order (``keep`` may narrow the sites)."""
    for site in find_sites(source):
        if keep is None or keep(site):
            yield mutate(module, source, site)
