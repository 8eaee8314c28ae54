"""The layer contract (issue 9): the tree reads studies → engine → store, with the command line
on top, and no module reaches into another's private names.

Read from the source with :mod:`ast` (every import counts, at module level or inside a
function), so it needs nothing installed. It fails when

1. a module imports a module of a higher layer (:data:`LAYERS`, lowest first);
2. two packages of one layer that must stay apart import each other's modules
   (``sweep`` / ``analysis``; one study / another);
3. anything but a study itself imports a study's modules: the engine, the report and the
   command line reach studies only through the registry, :mod:`rulelab.study_registry` (beside
   :mod:`rulelab.study`, issue 22: before, it was ``rulelab/studies/__init__.py`` and train,
   sweep, analysis and report imported up into ``studies/``), which names its studies by string;
4. any set of modules imports each other in a circle (two modules importing each other is the
   shortest circle);
5. a module imports a private name (``_x``) of another module;
6. generic code (anything outside ``rulelab/studies/<study>/`` but the registry) names a study
   (issue 22): a study's package or study name in a string beyond two help-text examples, a
   task name as a string, a class a study defines, a field only some studies' data or configs
   carry (``data.val_x``, ``--mnist-dir``). Every study-specific module lives in its study.

Before issue 9 the tree broke 1 (train ↔ analysis, analysis → train → sweep), 3 (the runner,
the planner's estimate, the recipe loader, stats and the report named study S or M), 4
(seven CLI modules in a circle; ``rulelab.cli`` importing itself) and 5 (``figures_m`` →
``html._CSS``, the CLI's ``_cli()`` helpers).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "rulelab"

# Lowest first. A module may import modules of its own layer and of lower ones.
LAYERS = [
    ("foundation", ("rulelab.errors", "rulelab.config", "rulelab.settings", "rulelab.grid",
                    "rulelab.study", "rulelab.study_registry",
                    "rulelab.studies=")),  # "=": that module only (re-exports the registry)
    ("data, models, optimizers, store", ("rulelab.tasks", "rulelab.models", "rulelab.optim",
                                         "rulelab.store", "rulelab.hardware")),
    ("engine", ("rulelab.engine",)),
    ("sweep, analysis", ("rulelab.sweep", "rulelab.analysis")),
    ("verify", ("rulelab.verify",)),  # checks a lab and retrains what is damaged (issue 24)
    ("report", ("rulelab.report",)),
    ("studies", ("rulelab.studies",)),
    ("command line", ("rulelab.cli", "rulelab.__main__", "rulelab=", "rulelab.api")),
]
APART = [("rulelab.sweep", "rulelab.analysis")]  # one layer, neither imports the other
# Private names imported across modules that their owner is to rename; empty, and it may only
# stay so.
PRIVATE_ALLOWED: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = modules()


def _resolve(name: str) -> str | None:
    """The module of ours ``name`` refers to (a module, or the package holding a name)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> list[tuple[str, list[str], int]]:
    """``(imported module, names taken from it, line)`` for every import of ours in
    ``module`` (module level and inside functions)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "rulelab" and (m := _resolve(a.name)):
                    out.append((m, [], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "rulelab":
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in MODULES:
                    out.append((sub, [], node.lineno))
                elif m := _resolve(base):
                    out.append((m, [a.name], node.lineno))
    return out


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            exact = p.endswith("=")
            p = p.rstrip("=")
            hit = module == p if exact else module == p or module.startswith(p + ".")
            if hit and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{module} is in no layer: add it to LAYERS"
    return rank


def study_of(module: str) -> str | None:
    """``rulelab.studies.<name>`` for a module of a study's package, else None."""
    parts = module.split(".")
    return ".".join(parts[:3]) if len(parts) >= 3 and parts[:2] == ["rulelab", "studies"] \
        else None


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_respect_the_layers(module):
    mine, own_study = layer_of(module), study_of(module)
    if module in COMPAT:  # re-exports a moved module (test_compatibility_modules_only_re_export)
        return
    for target, _, line in imports(module):
        where = f"{MODULES[module].relative_to(SRC)}:{line} imports {target}"
        assert layer_of(target) <= mine, (
            f"{where}: {LAYERS[layer_of(target)][0]} is above {LAYERS[mine][0]}")
        target_study = study_of(target)
        assert target_study is None or target_study == own_study, (
            f"{where}: only {target_study} itself imports its modules; others look it up in "
            "the registry, rulelab.study_registry")
        assert target != "rulelab.studies" or own_study, (
            f"{where}: the registry is rulelab.study_registry (rulelab.studies only re-exports "
            "it for old imports)")
        for a, b in APART:
            for x, y in ((a, b), (b, a)):
                inside = module == x or module.startswith(x + ".")
                assert not (inside and (target == y or target.startswith(y + "."))), (
                    f"{where}: {x} and {y} stay apart")


def test_no_import_circles():
    graph = {m: {t for t, _, _ in imports(m) if t != m} for m in MODULES}
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    self_imports = [m for m in MODULES if m in {t for t, _, _ in imports(m)}
                    and MODULES[m].name != "__init__.py"]
    assert not circles, f"modules importing each other in a circle: {circles}"
    assert not self_imports, f"modules importing themselves: {self_imports}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_names_of_other_modules(module):
    for target, names, line in imports(module):
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        if private and target != module and (module, target) not in PRIVATE_ALLOWED:
            raise AssertionError(f"{MODULES[module].relative_to(SRC)}:{line} imports private "
                                 f"{private} of {target}")


# The registry names every study; compatibility modules re-export a module that moved into a
# study (``rulelab.tasks.mpsp`` → ``rulelab.studies.shortcut_saturation.task``) and hold nothing
# else (checked below).
REGISTRY = "rulelab.study_registry"
COMPAT = {"rulelab.studies", "rulelab.tasks.mpsp", "rulelab.tasks.modular",
          "rulelab.tasks.digits", "rulelab.models.mlp", "rulelab.models.feedforward"}
HELP_EXAMPLES = 2  # study names allowed in generic help texts (e.g. "shortcut-saturation/paper")


def _trees() -> dict[str, ast.Module]:
    return {m: ast.parse(p.read_text(), str(p)) for m, p in MODULES.items()}


def _docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, kinds) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _fields(cls: ast.ClassDef) -> set[str]:
    return {b.target.id for b in cls.body
            if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name)}


def study_words(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """What names a study, read from the study packages: ``names`` (packages and study names,
    both spellings), ``tasks`` (``Task(name=…)``), ``classes`` (top-level classes a study
    defines and generic code does not), ``data`` and ``flags`` (fields of a study's ``*Data``
    and ``*RunConfig`` classes that not every study's carry: read as attributes, or as flags)."""
    names, tasks, classes, generic_classes = set(), set(), set(), set()
    fields: dict[str, dict[str, set[str]]] = {}  # "Data"/"RunConfig" → study → fields
    for module, tree in trees.items():
        own = study_of(module)
        if own is None:
            generic_classes |= {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
            continue
        names |= {own.rpartition(".")[2], own.rpartition(".")[2].replace("_", "-")}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("Task", "Study"):
                for kw in node.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        (tasks if node.func.id == "Task" else names).add(kw.value.value)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes.add(node.name)
                for kind in ("Data", "RunConfig"):
                    if node.name.endswith(kind):
                        fields.setdefault(kind, {}).setdefault(own, set()).update(_fields(node))
    partial = {}
    for kind, per_study in fields.items():
        partial[kind] = set.union(*per_study.values()) - set.intersection(*per_study.values())
    return {"names": names, "tasks": tasks, "classes": classes - generic_classes,
            "data": partial["Data"], "flags": partial["RunConfig"]}


def study_mentions(module: str, tree: ast.Module, words: dict[str, set[str]]):
    """``(line, what)`` for each place ``module`` names a study; help-text examples (a study
    name inside a longer string) are marked ``"example"``."""
    docs, out = _docstrings(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in words["classes"] or \
                isinstance(node, ast.Attribute) and node.attr in words["data"] | words["classes"]:
            out.append((node.lineno, f"{getattr(node, 'id', getattr(node, 'attr', ''))} "
                                     "(a study's own)"))
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) \
                or id(node) in docs:
            continue
        text = node.value
        if text in words["tasks"] or text in words["names"]:
            out.append((node.lineno, f"{text!r} (a study's or task's name)"))
        elif text.startswith("--") and text[2:].replace("-", "_") in words["flags"]:
            out.append((node.lineno, f"{text} (a study's flag)"))
        elif any(n in text for n in words["names"]):
            out.append((node.lineno, "example"))
    return out


def test_generic_code_names_no_study():
    trees = _trees()
    words = study_words(trees)
    found, examples = [], []
    for module, tree in sorted(trees.items()):
        if study_of(module) or module in COMPAT or module == REGISTRY:
            continue
        for line, what in study_mentions(module, tree, words):
            where = f"{MODULES[module].relative_to(SRC)}:{line}"
            (examples if what == "example" else found).append(f"{where}: {what}")
    assert not found, "generic code names a study; move it into the study's folder or let " \
        "the study declare it:\n" + "\n".join(found)
    assert len(examples) <= HELP_EXAMPLES, (
        f"more than {HELP_EXAMPLES} help-text examples name a study:\n" + "\n".join(examples))


def test_compatibility_modules_only_re_export():
    """A compatibility module is a docstring and imports from where its code went."""
    trees = _trees()
    for module in COMPAT:
        body = trees[module].body
        rest = [n for n in body[1:] if not isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not rest, f"{module} holds code beyond re-exports (line {rest[0].lineno})"
        sources = {t for t, _, _ in imports(module)}
        assert len(sources) == 1, f"{module} re-exports {sources}, not one moved module"


def test_study_words_catch_a_study_name_in_generic_code():
    """Oracle: a generic module written the pre-issue-22 way fails the check."""
    trees = _trees()
    words = study_words(trees)
    assert {"mpsp", "modular", "digits", "sparse_parity"} <= words["tasks"]
    assert {"shortcut-saturation", "coexistence", "sparse_parity"} <= words["names"]
    assert "val_x" in words["data"] and "mnist_dir" in words["flags"]
    assert "train_x" not in words["data"]  # every study's data carries it: generic
    bad = ast.parse('PATH_FLAGS = ("--lab", "--mnist-dir")\nx = data.val_x\n'
                    'if cfg.task == "mpsp": pass\nHELP = "e.g. shortcut-saturation/paper"\n')
    what = sorted(w for _, w in study_mentions("rulelab.cli.x", bad, words))
    assert what == ["'mpsp' (a study's or task's name)", "--mnist-dir (a study's flag)",
                    "example", "val_x (a study's own)"], what


def test_the_contract_catches_what_it_forbids():
    """Oracle: the checks fire on the pre-issue-9 shapes of the tree."""
    assert layer_of("rulelab.engine.runner") < layer_of("rulelab.analysis.stored")
    assert layer_of("rulelab.studies") == 0 and layer_of("rulelab.studies.x.y") == 6
    assert study_of("rulelab.studies.coexistence.trainer") == "rulelab.studies.coexistence"
    assert study_of("rulelab.studies") is None
    assert layer_of("rulelab.cli.app") == len(LAYERS) - 1
