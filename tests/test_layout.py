"""The package's architecture, checked from the source: no import cycles, and each room imports only the rooms below
it (`frontier/__init__.py` draws the rooms). Imports inside functions count: a late import is still a dependency.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "frontier"

# The rooms, and what each may import besides itself. "vocabulary": the modules at the top of the package that name
# what a run is (`VOCABULARY`). A core room names the vocabulary modules it imports, one by one: what it really
# needs, no more (`test_each_core_room_uses_all_it_may_import_from_the_vocabulary` fails on an allowance no longer
# used). The kernels serve the model and never depend on it; the command line's core reaches the study only through
# `frontier.study.cli`.
ROOMS = ("vocabulary", "data", "kernels", "model", "optim", "train", "study", "cli")
VOCABULARY = ("config", "devices", "errors", "figures", "flags", "profiles", "recipes", "records")
CORE = ("data", "kernels", "model", "optim", "train")


def vocabulary(*names: str) -> set[str]:
    assert set(names) <= set(VOCABULARY), names
    return {f"frontier.{n}" for n in names}


ALLOWED = {
    "vocabulary": {"vocabulary"},
    "data": vocabulary("errors", "profiles"),  # the embedded corpus is prepared at a profile's sizes
    "kernels": vocabulary("config", "devices", "errors"),
    "model": {"data", "kernels"} | vocabulary("config", "errors"),
    "optim": {"kernels", "model"} | vocabulary("config", "errors"),
    # the trainer writes the run record (records) and reads the probe's shapes from the profile (profiles)
    "train": {"data", "kernels", "model", "optim"} | vocabulary("config", "devices", "errors", "profiles", "records"),
    "study": {"vocabulary", "data", "kernels", "model", "optim", "train"},
    "cli": set(ROOMS),
}
# Single imports allowed across the rules, each until the code it serves changes (none today).
PASSAGES: dict[str, set[str]] = {}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (resolved to the longest existing module name; `from pkg import
    mod` is an edge to `pkg.mod` where that is a module, else to `pkg`)."""
    mods = {module_name(root, p): p for p in root.rglob("*.py")}
    graph = {m: set() for m in mods}

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    for m, path in mods.items():
        pkg = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                t = known(t)
                if t is not None and t != m:
                    graph[m].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "vocabulary"  # the package itself: its public face imports nothing at load
    if parts[1] in ("cli", "__main__"):
        return "cli"
    if parts[1] in ROOMS:
        return parts[1]
    assert parts[1] in VOCABULARY, f"{module}: a module at the top of the package that no room names (VOCABULARY)"
    return "vocabulary"


def forbidden(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for m, targets in sorted(graph.items()):
        mine = room(m)
        for t in sorted(targets):
            theirs = room(t)
            if theirs == mine or theirs in ALLOWED[mine] or t in ALLOWED[mine] or t in PASSAGES.get(m, ()):
                continue
            out.append(f"{m} ({mine}) imports {t} ({theirs})")
    return out


def test_no_import_cycles():
    found = cycles(import_graph(PACKAGE))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_each_room_imports_only_what_it_may():
    found = forbidden(import_graph(PACKAGE))
    assert not found, "forbidden imports:\n" + "\n".join(found)


def test_each_core_room_uses_all_it_may_import_from_the_vocabulary():
    """The allowances are what the core rooms really import: one no longer used is struck from `ALLOWED` (and a
    passage no longer taken from `PASSAGES`)."""
    graph = import_graph(PACKAGE)
    for core in CORE:
        used = {t for m, ts in graph.items() if room(m) == core for t in ts if room(t) == "vocabulary"}
        used -= {t for m in PASSAGES for t in PASSAGES[m] if room(m) == core}
        allowed = {t for t in ALLOWED[core] if t.startswith("frontier.")}
        assert used == allowed, f"{core}: imports {sorted(used)} of the vocabulary, may import {sorted(allowed)}"
    for m, targets in PASSAGES.items():
        assert targets <= graph[m], f"{m} no longer imports {sorted(targets - graph[m])}: strike it from PASSAGES"


def test_the_core_commands_reach_the_study_only_through_its_command_line():
    graph = import_graph(PACKAGE)
    assert {t for t in graph["frontier.cli"] if room(t) == "study"} == {"frontier.study.cli"}


def test_the_check_finds_a_cycle_and_a_forbidden_import(tmp_path):
    """The checks above can fail: a package with both defects is caught."""
    pkg = tmp_path / "frontier"
    for d in ("kernels", "model", "study"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "model" / "gpt.py").write_text("from ..study import bench\n")
    (pkg / "study" / "bench.py").write_text("def f():\n    from ..model.gpt import GPT\n")
    (pkg / "kernels" / "ops.py").write_text("from frontier.model import gpt\n")
    g = import_graph(pkg)
    assert cycles(g) == [["frontier.model.gpt", "frontier.study.bench"]]
    assert forbidden(g) == ["frontier.kernels.ops (kernels) imports frontier.model.gpt (model)",
                            "frontier.model.gpt (model) imports frontier.study.bench (study)"]


@pytest.mark.parametrize("sub", ["data", "model", "optim", "train", "kernels", "study", "model/ngram"])
def test_each_subpackage_says_what_lives_there_and_what_it_may_import(sub):
    doc = ast.get_docstring(ast.parse((PACKAGE / sub / "__init__.py").read_text()))
    assert doc and "import" in doc.lower(), f"frontier/{sub}/__init__.py: say what lives there and what it may import"


def test_the_public_face_is_cheap_and_complete():
    """`import frontier` loads no torch (a core module never pulls in the study tools through it), and every public
    name resolves to what it says."""
    code = ("import sys, frontier; assert 'torch' not in sys.modules, 'import frontier loaded torch'; "
            "names = [n for n in frontier.__all__ if getattr(frontier, n) is None]; assert not names, names; "
            "from frontier import compare, experiments; "
            "assert callable(compare) and compare.__module__ == 'frontier.study.compare'; "
            "assert experiments.__name__ == 'frontier.study.experiments'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PACKAGE.parent)
