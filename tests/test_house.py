"""The house's shape (toktok/'s imports, the run description, function length), read with ``ast``.

(a) No import cycle among toktok's modules: every ``import``/``from ... import`` counts, at the
top of a module or deferred inside a function, so a cycle hidden in a function body is one too.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "toktok"


def _module_name(path: Path) -> str:
    """``toktok/count/read.py`` -> ``toktok.count.read``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The toktok modules ``name`` imports (a package's ``__init__`` is a module of its own)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:  # ``from . import remote`` imports the module toktok.count.remote
                if f"{target}.{a.name}" in known:
                    out.add(f"{target}.{a.name}")
                elif target in known:
                    out.add(target)
    out.discard(name)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _imports(name, path, known) for name, path in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_walker_sees_imports_at_the_top_and_in_functions():
    graph = import_graph()
    assert "toktok.count.files" in graph["toktok.count.read"]
    assert "toktok.count.remote" in graph["toktok.count.read"]  # ``from . import remote``
    assert "toktok.errors" in graph["toktok.count.remote"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_in_toktok():
    cycles = _cycles(import_graph())
    assert not cycles, f"import cycles in toktok/: {cycles}; move what both sides need below both"


# --- (b) the run description: finished at the edge, read-only afterwards ----------------------


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in graph[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_nothing_the_pipeline_runs_can_call_back_into_config():
    """The pipeline and every module it reaches (the stages, the ground) read the ``RunSpec``:
    none imports toktok.config, so none can call ``phase_list``, ``thread_count``, ``name_of``..."""
    graph = import_graph()
    reached = _reachable(graph, "toktok.pipeline") | {"toktok.pipeline"}
    assert "toktok.spec" in reached and "toktok.count.local" in reached
    importers = sorted(m for m in reached if "toktok.config" in graph[m])
    assert not importers, f"{importers} import toktok.config: take the RunSpec (toktok.spec) instead"
    assert "toktok.config" not in graph["toktok.spec"]


def test_the_run_description_is_finished_and_frozen(tmp_path):
    import dataclasses

    import pytest

    from toktok.config import TrainConfig, available_cores
    from toktok.spec import RunSpec

    cfg = TrainConfig(["data_fixtures/corpus/"], str(tmp_path / "o"), merges=7, budget="2MB", threads=10**6,
                      memory_limit="64MB")
    spec = cfg.describe()
    assert isinstance(spec, RunSpec)
    assert spec.budget == 2_000_000 and spec.memory_limit == 64_000_000  # sizes are ints
    assert spec.text_of("budget") == "2MB" and spec.name_of("budget") == "--budget"
    assert [(p.name, p.merges) for p in spec.phases] == [("main", 7)]  # the one phase, resolved
    assert spec.threads == available_cores() and "more than the" in spec.threads_warning
    assert spec.use_hardcoded is True and spec.layout.folder == tmp_path / "o"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 1
    with pytest.raises(TypeError):
        spec.options["seed"] = 1
    cfg.seed = 5  # the config may change after; the description does not
    assert spec.seed == 0 and spec.to_dict()["seed"] == 0
    with pytest.raises(AttributeError):
        spec.no_such_option


# --- (d) short functions ----------------------------------------------------------------------

#: The compiled (Numba) kernels, which may be longer: splitting one costs calls in its hot loop
#: and the kernels' compile time. Each is checked to be compiled (``njit`` or ``internal``).
KERNELS = {
    "toktok/merge/loop.py": {"_rounds", "_positions", "_loop"},
    "toktok/merge/rankbpe.py": {"_heap_parts"},
    "toktok/merge/segment.py": {"_segment"},
    "toktok/merge/table.py": {"_initial_pairs", "_pairs_by_left"},
}
MAX_LINES = 80


def _functions():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield rel, node


def test_no_function_over_80_lines_outside_the_kernels():
    long = []
    for rel, node in _functions():
        lines = node.end_lineno - node.lineno + 1
        if node.name in KERNELS.get(rel, ()):
            decorators = {ast.unparse(d).split("(")[0] for d in node.decorator_list}
            assert decorators & {"njit", "internal", "numba.njit"}, f"{rel}: {node.name} is not a compiled kernel"
        elif lines > MAX_LINES:
            long.append(f"{rel}: {node.name} ({lines} lines)")
    assert not long, f"functions over {MAX_LINES} lines: {long}; split them into named steps"
    listed = {(rel, name) for rel, names in KERNELS.items() for name in names}
    assert listed <= {(rel, node.name) for rel, node in _functions()}, "a listed kernel no longer exists"


#: The most lines a module under toktok/ may hold: a module longer than that holds more than one
#: concern (issue 48 split ``count/pretokenize.py`` into ``count/scan/`` and ``count/read.py``
#: into it and ``count/sources.py``).
MAX_MODULE_LINES = 800
#: Modules allowed past it, each for a documented reason: none today. (A documented copy of the
#: Numba merge loop, were one kept beside it, would be listed here.)
LONG_MODULES: dict[str, str] = {}


def test_no_module_over_800_lines():
    long = {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted(PKG.rglob("*.py"))}
    over = {rel: n for rel, n in long.items() if n > MAX_MODULE_LINES and rel not in LONG_MODULES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}; split them by concern"
    assert set(LONG_MODULES) <= set(long), "a module allowed to be long no longer exists"


# --- (e) the pipeline calls the stages' entries ----------------------------------------------

#: The most toktok modules ``pipeline.py`` may import (issue 31 asks for 12; 30 before the stages
#: got entries): the stages' entries (``count.stage``, ``merge.stage``, ``formats.export``,
#: ``insight.stage``, ``verify``), the starting vocabulary (``start``), the run's rooms
#: (``resume``, ``store``, ``budget``, ``alloc``) and the ground it reads and returns (``spec``,
#: ``summary``). Never raise it: a new need goes behind an entry.
PIPELINE_IMPORTS = 12


def test_the_pipeline_imports_few_toktok_modules():
    """Counted with the walker above: every ``from .x import``, ``from .x.y import`` and deferred
    import of a toktok module anywhere in pipeline.py, each module once."""
    imported = sorted(import_graph()["toktok.pipeline"])
    assert len(imported) <= PIPELINE_IMPORTS, (
        f"pipeline.py imports {len(imported)} toktok modules (at most {PIPELINE_IMPORTS}): {imported}; "
        "call the stage's one entry (count.stage.run, merge.stage.run, formats.export.write, insight.stage.record, "
        "verify.check, resume.restore, start.vocabulary)")
    for entry in ("toktok.count.stage", "toktok.merge.stage", "toktok.formats.export", "toktok.insight.stage",
                  "toktok.verify", "toktok.resume", "toktok.start"):
        assert entry in imported
    inside = {"toktok.count.local", "toktok.count.read", "toktok.formats.hf", "toktok.formats.tiktoken",
              "toktok.insight.runfile", "toktok.merge", "toktok.merge.learn", "toktok.merge.warm", "toktok._kernels",
              "toktok.warmstart", "toktok.vocab", "toktok.patterns", "toktok.options", "toktok.rundir"}
    assert not inside & set(imported), f"pipeline.py reaches into a stage: {sorted(inside & set(imported))}"


# --- (f) stages are functions of their inputs ------------------------------------------------

#: The stages' modules and the entries the pipeline calls in them: each takes what it reads as
#: arguments and returns what it produced; none takes the pipeline's state (``pipeline._Run``).
STAGES = {
    "toktok/count/stage.py": {"engine", "resolve", "start", "run"},
    "toktok/merge/stage.py": {"budget", "most_merges", "segmenter", "warm_up", "run"},
    "toktok/formats/export.py": {"ahead", "chat_text", "write"},
    "toktok/insight/stage.py": {"ahead", "record"},
    "toktok/verify/__init__.py": {"start", "begin", "check"},
    "toktok/start.py": {"vocabulary", "reserve"},
    "toktok/resume.py": {"check_out", "open_run", "restore", "abandon"},
}


def _state_only_fields() -> set[str]:
    """The fields, properties and methods of ``pipeline._Run`` that no other class of toktok has
    (a dataclass field, a NamedTuple's, ``self.X = ...`` or a method): what only the pipeline's
    state offers, so that a parameter read through them is the state under another name."""
    run, others = set(), set()
    for path in sorted(PKG.rglob("*.py")):
        for cls in (n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)):
            names = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
            names |= {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            names |= {t.attr for n in ast.walk(cls) if isinstance(n, (ast.Assign, ast.AnnAssign))
                      for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
                      for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                      if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
            if path.name == "pipeline.py" and cls.name == "_Run":
                run |= names
            else:
                others |= names
    assert {"staging", "merge_index", "add_merged", "take_parity"} <= run  # the walker reads the state
    return run - others


def test_no_stage_entry_takes_the_pipelines_state():
    """Every function of the stages' modules (entries and helpers): no parameter named ``run``,
    typed as the pipeline's state, or read through what only the state has (``x.merge_index``,
    ``x.staging``, ``x.add_merged(...)``): a stage takes plain values and named services."""
    only = _state_only_fields()
    bad = []
    for rel, entries in STAGES.items():
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert entries <= defined, f"{rel}: entries {sorted(entries - defined)} no longer exist"
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            params = {a.arg for a in args} - {"self", "cls"}
            for a in args:
                typed = ast.unparse(a.annotation) if a.annotation is not None else ""
                if a.arg == "run" or "_Run" in typed or "pipeline" in typed:
                    bad.append(f"{rel}: {node.name}({a.arg}: {typed or '?'})")
            read = {(n.value.id, n.attr) for n in ast.walk(node)
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in params}
            bad += [f"{rel}: {node.name} reads {p}.{attr}" for p, attr in sorted(read) if attr in only]
    assert not bad, f"stage functions that take the pipeline's state: {bad}; pass what they read instead"


def test_the_pipelines_state_is_private_to_it():
    """``_Run`` is named in pipeline.py only (code, comments and docstrings of every other module
    of toktok/), and nothing but the edge imports the pipeline."""
    import re

    named = sorted(p.relative_to(ROOT).as_posix() for p in PKG.rglob("*.py")
                   if p.name != "pipeline.py" and re.search(r"\b_Run\b", p.read_text(encoding="utf-8")))
    assert not named, f"{named} name the pipeline's state _Run: take the values it holds as arguments"
    graph = import_graph()
    importers = sorted(m for m, deps in graph.items() if "toktok.pipeline" in deps)
    assert set(importers) <= {"toktok.api", "toktok.cli"}, f"{importers} import the pipeline"
