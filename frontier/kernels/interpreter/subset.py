"""The static check of a kernel's source against the documented rules of NKI 0.7: what the compiler would refuse.

NKI 0.7 (Neuron SDK 2.33) specializes a kernel by tracing it with Python: each NKI API call records an operation, and
"kernels can use all of Python for meta-programming, including constructs the previous specialization did not
support, such as generators and class inheritance" (NKI 0.7.0 release notes; the announcement "Announcing changes
to NKI specialization"). So Python itself (`is` / `is not`, comprehensions, generators, lambda, try, raise, del,
sets...) is not refused: the 0.3 migration guide's ban on `is` was a rule of the old specialization frontend, which
0.7 replaced (AWS's own nki-library writes `is not None`). What stays refused is what the documents still state
about the NKI API and a kernel's interface. `run` applies it before a kernel executes, to the kernel and to every
helper it calls (resolved through the kernel's globals and closure, transitively, and through a module of kernel
source that `load` bound, as in `tiles.chunks(...)`; the interpreter's own `nl`/`nisa` are not kernel code):

    dynamic-range  `nl.dynamic_range`             removed in NKI 0.7 (migration guide 0.6 -> 0.7): nl.fori_loop
    keyword-only   `*` in a kernel's signature    migration guide 0.3: "does not support the * separator in kernel
                                                  function signatures" (no later guide lifts it)
    dict-key       a dict key that is not a       language guide, NKI values: "dictionaries with string-value
                   string                         keys"
    nki-object     a class in kernel code that    language guide, class support: a class for use in a kernel must
                   does not derive from NKIObject inherit from NKIObject (0.7 adds inheritance between such classes)

Checked when the kernel runs, not here: a list as a kernel argument (migration guide 0.3: tuples; `loader.run`), a
compiled loop's variable used as a Python value, including `while` on it (`tensor.Scalar`, `tensor.Register`; the
0.6 -> 0.7 guide moves register-driven loops to while_loop).

Never stricter than the docs: a dict key is refused only when it is provably not a string (a number, arithmetic on
numbers, a tuple, a comparison, a loop variable over a range, a name only ever bound to such values); a key whose type
the source does not show is allowed. A class passes when one of its bases is named NKIObject or is a class of the same
source that passes.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from dataclasses import dataclass
from functools import lru_cache

from .errors import LanguageError

RULES = {
    "dynamic-range": "nl.dynamic_range was removed in NKI 0.7 (migration guide 0.6 -> 0.7): use nl.fori_loop",
    "keyword-only": "a kernel signature may not use the keyword-only separator `*` (NKI 0.3 migration guide)",
    "dict-key": "dict keys must be strings (NKI language guide: dictionaries with string-value keys)",
    "nki-object": "a class used in a kernel must inherit from nl.NKIObject (NKI language guide: class support)",
}


@dataclass(frozen=True)
class Violation:
    rule: str
    function: str
    file: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.function}): {self.rule}: {self.detail}"


STR, NUM, UNKNOWN = "str", "num", "?"
_NUM_CALLS = {"int", "float", "len", "min", "max", "abs", "round", "sum", "range", "bool"}
_STR_CALLS = {"str", "repr", "format"}
_STR_METHODS = {"format", "join", "lower", "upper", "strip", "replace"}
_RANGES = {"range", "affine_range", "sequential_range", "static_range"}
_DICT_METHODS = {"get", "setdefault", "pop"}


def _name_of_call(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


class _Function:
    """Type facts about one function body: which names hold dicts, which hold strings or numbers."""

    def __init__(self, fn: ast.AST):
        self.dicts: set[str] = set()
        kinds: dict[str, set] = {}
        assigns = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        assigns.append((t.id, node.value))
                        if isinstance(node.value, ast.Dict) or (isinstance(node.value, ast.Call)
                                                                and _name_of_call(node.value) == "dict"):
                            self.dicts.add(t.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                assigns.append((node.target.id, node.value))
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                it = node.iter
                numeric = isinstance(it, ast.Call) and _name_of_call(it) in _RANGES
                kinds.setdefault(node.target.id, set()).add(NUM if numeric else UNKNOWN)
        self.kinds = kinds
        for _ in range(3):  # names bound from other names: a few rounds settle them
            new = {k: set(v) for k, v in kinds.items()}
            for name, value in assigns:
                new.setdefault(name, set()).add(self.classify(value))
            self.kinds = new
        self.kinds = new

    def name_kind(self, name: str) -> str:
        ks = self.kinds.get(name)
        if not ks:
            return UNKNOWN
        if ks == {STR}:
            return STR
        if NUM in ks and STR not in ks and UNKNOWN not in ks:
            return NUM
        return UNKNOWN

    def classify(self, e: ast.AST) -> str:
        if isinstance(e, ast.Constant):
            return STR if isinstance(e.value, str) else NUM
        if isinstance(e, ast.JoinedStr):
            return STR
        if isinstance(e, ast.Name):
            return self.name_kind(e.id)
        if isinstance(e, ast.BinOp):
            sides = {self.classify(e.left), self.classify(e.right)}
            return STR if STR in sides else NUM if NUM in sides else UNKNOWN
        if isinstance(e, ast.UnaryOp):
            return NUM if isinstance(e.op, (ast.USub, ast.UAdd, ast.Not, ast.Invert)) else UNKNOWN
        if isinstance(e, (ast.Compare, ast.BoolOp, ast.Tuple, ast.List, ast.Dict, ast.Set)):
            return NUM  # not a string
        if isinstance(e, ast.IfExp):
            both = {self.classify(e.body), self.classify(e.orelse)}
            return both.pop() if len(both) == 1 else UNKNOWN
        if isinstance(e, ast.Call):
            name = _name_of_call(e)
            if isinstance(e.func, ast.Name) and name in _NUM_CALLS:
                return NUM
            if isinstance(e.func, ast.Name) and name in _STR_CALLS:
                return STR
            if isinstance(e.func, ast.Attribute) and name in _STR_METHODS:
                return STR
        return UNKNOWN


class _Checker(ast.NodeVisitor):
    def __init__(self, file: str, first_line: int, function: str):
        self.file, self.offset, self.function = file, first_line - 1, function
        self.found: list[Violation] = []
        self.calls: set[str] = set()
        self.scopes: list[_Function] = []
        self.classes: dict[str, ast.ClassDef] = {}

    def add(self, rule: str, node: ast.AST, detail: str = "") -> None:
        self.found.append(Violation(rule, self.function, self.file, self.offset + getattr(node, "lineno", 1),
                                    detail or RULES[rule]))

    def visit_FunctionDef(self, node):
        self.scopes.append(_Function(node))
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node):
        if node.attr == "dynamic_range":
            self.add("dynamic-range", node)
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        self.classes[node.name] = node
        exception = any(ast.unparse(b).split(".")[-1].endswith(("Error", "Exception")) for b in node.bases)
        if not exception and not any(self._nki_base(b) for b in node.bases):
            self.add("nki-object", node, f"{RULES['nki-object']}; class {node.name} has bases "
                                         f"({', '.join(ast.unparse(b) for b in node.bases) or 'none'})")
        self.generic_visit(node)

    def _nki_base(self, base: ast.AST) -> bool:
        name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else None
        if name == "NKIObject":
            return True
        parent = self.classes.get(name)
        return parent is not None and any(self._nki_base(b) for b in parent.bases)

    def _key(self, key: ast.AST, where: ast.AST) -> None:
        if key is not None and self.scopes and self.scopes[-1].classify(key) == NUM:
            self.add("dict-key", where, f"{RULES['dict-key']}; this key ({ast.unparse(key)}) is not a string")

    def visit_Dict(self, node):
        for k in node.keys:
            self._key(k, node)
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if isinstance(node.value, ast.Name) and self.scopes and node.value.id in self.scopes[-1].dicts:
            self._key(node.slice, node)
        self.generic_visit(node)

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Name):
            self.calls.add(f.id)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            self.calls.add(f"{f.value.id}.{f.attr}")  # a helper of another kernel module: `tiles.chunks(...)`
        if (isinstance(f, ast.Attribute) and f.attr in _DICT_METHODS and isinstance(f.value, ast.Name)
                and self.scopes and f.value.id in self.scopes[-1].dicts and node.args):
            self._key(node.args[0], node)
        self.generic_visit(node)


def _parse(code: types.CodeType) -> tuple[ast.AST, int]:
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError) as e:
        raise LanguageError(f"{code.co_qualname}: its source is not available to check ({e}); a kernel's source must "
                            "be readable, as the NKI compiler parses it") from None
    return ast.parse(textwrap.dedent("".join(lines))), first


@lru_cache(maxsize=None)
def _function_violations(code: types.CodeType) -> tuple[tuple[Violation, ...], frozenset]:
    """The violations in one function's source (nested functions included) and the names it calls."""
    if code.co_name == "<lambda>":  # an expression: nothing of the rules can be in it but a call, seen by its caller
        return (), frozenset()
    tree, first = _parse(code)
    checker = _Checker(code.co_filename, first, code.co_qualname)
    checker.visit(tree)
    return tuple(checker.found), frozenset(checker.calls)


KERNEL_SOURCE = "__kernel_source__"  # set by `loader.load` on each module it runs with the stand-in nki


def _helpers(fn, names) -> list:
    """The Python functions `fn` calls by these names (its globals, then its closure), that are kernel code."""
    scope = dict(fn.__globals__)
    if fn.__closure__:
        scope.update({n: c.cell_contents for n, c in zip(fn.__code__.co_freevars, fn.__closure__)
                      if _cell_set(c)})
    out = []
    for name in sorted(names):
        head, _, attr = name.partition(".")
        f = scope.get(head)
        if attr:  # module.function: followed into kernel source that `load` bound, never into other libraries
            if not (isinstance(f, types.ModuleType) and getattr(f, KERNEL_SOURCE, False)):
                continue
            f = getattr(f, attr, None)
        f = getattr(f, "fn", f)  # a jitted kernel called from another
        if (isinstance(f, type) and f.__module__ != "builtins" and not issubclass(f, BaseException)
                and not _interpreter(f)):  # a Python exception is meta-programming, not an NKI value
            out.append(f)
        elif isinstance(f, types.FunctionType) and not _interpreter(f):
            out.append(f)
    return out


def _interpreter(obj) -> bool:
    return (obj.__module__ or "").startswith("frontier.kernels.interpreter")


def _class_violations(cls) -> list[Violation]:
    """A class kernel code instantiates must derive from nl.NKIObject (the interpreter's, or any named NKIObject)."""
    if any(base.__name__ == "NKIObject" for base in cls.__mro__):
        return []
    try:
        file, line = inspect.getsourcefile(cls) or "?", inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        file, line = "?", 0
    bases = ", ".join(b.__name__ for b in cls.__bases__)
    return [Violation("nki-object", cls.__qualname__, file, line, f"{RULES['nki-object']}; class {cls.__name__} "
                      f"has bases ({bases})")]


def _cell_set(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def violations(fn) -> list[Violation]:
    """Every rule the kernel `fn` and the helpers it calls (transitively) break, in source order per function."""
    found, seen, todo = [], set(), [fn]
    while todo:
        f = todo.pop(0)
        if isinstance(f, type):
            if f not in seen:
                seen.add(f)
                found += _class_violations(f)
            continue
        if f.__code__ in seen:
            continue
        seen.add(f.__code__)
        own, calls = _function_violations(f.__code__)
        found += own
        if f is fn:
            found += _signature_violations(f)
        todo += _helpers(f, calls)
    return found


def _signature_violations(fn) -> list[Violation]:
    if not fn.__code__.co_kwonlyargcount:
        return []
    return [Violation("keyword-only", fn.__qualname__, fn.__code__.co_filename, fn.__code__.co_firstlineno,
                      RULES["keyword-only"])]


def check_kernel(fn) -> None:
    """Raise LanguageError naming every rule `fn` (and what it calls) breaks; nothing when the source is in the
    language."""
    found = violations(fn)
    if found:
        shown = "\n  ".join(str(v) for v in found[:8])
        more = f"\n  ... and {len(found) - 8} more" if len(found) > 8 else ""
        raise LanguageError(f"kernel {fn.__qualname__} is outside the NKI language ({len(found)} violation(s)):\n  "
                            f"{shown}{more}")


def check_module(module) -> dict[str, list[Violation]]:
    """kernel name -> its violations, for every @nki.jit kernel of a module loaded by `load`."""
    out = {}
    for name, obj in vars(module).items():
        fn = getattr(obj, "fn", None)
        if isinstance(fn, types.FunctionType) and not name.startswith("_"):
            out[name] = violations(fn)
    return out
