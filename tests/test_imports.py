"""No import circles inside jaxmarl_llm, lazy (function-level) imports included.

A circle hidden behind an import inside a function works until someone moves
that import to the top of its module (or imports the modules in another
order), then fails with a half-initialised module. This test reads every
module's imports with `ast` (every `import` statement anywhere in the file),
builds the graph of jaxmarl_llm-internal imports and fails listing a circle.

Edges: `import a.b.c` and `from a.b import c` (c a submodule) -> module a.b.c;
`from a.b import name` -> a.b (a package: its __init__). Importing a module
also runs its parent packages' __init__ files, so those are edges too, except
the importer's own ancestors (already running when it is imported: a package
__init__ re-exporting its submodules is not a circle).
"""

from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "jaxmarl_llm"


def find_modules(root: str = ROOT, package: str = PACKAGE) -> dict[str, str]:
    """{dotted module name: file path} of every .py file under the package (a package's name -> its __init__.py)."""
    modules = {}
    for folder, dirs, files in os.walk(os.path.join(root, package)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            parts = os.path.relpath(os.path.join(folder, name), root)[: -len(".py")].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = os.path.join(folder, name)
    return modules


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def imported_modules(module: str, path: str, modules: dict[str, str]) -> set[str]:
    """The package-internal modules `module` (file `path`) imports anywhere in its code."""
    is_package = os.path.basename(path) == "__init__.py"
    with open(path) as f:
        tree = ast.parse(f.read(), filename=path)
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importer's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                targets.add(sub if sub in modules else source)
    deps = set()
    own = set(_ancestors(module))
    for target in targets:
        if target.split(".")[0] != PACKAGE:
            continue
        while target not in modules and "." in target:  # e.g. `import a.b.C`-style names of non-modules
            target = target.rsplit(".", 1)[0]
        deps.update(m for m in [*_ancestors(target), target] if m in modules and m not in own)
    deps.discard(module)
    return deps


def import_graph(root: str = ROOT) -> dict[str, set[str]]:
    modules = find_modules(root)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component with more than one module (or a self-loop): [a, b, ..., a]."""
    return [_circle_in(c, graph) for c in tangles(graph)]


def tangles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (or a self-loop): every module of a circle."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def connect(v: str) -> None:  # Tarjan, iterative (deep graphs must not hit the recursion limit)
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    components.append(set(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return components


def _circle_in(component: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest circle through the component's first module (breadth-first inside the component)."""
    start = min(component)
    parent, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    path = [v]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if w in component and w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(component)


def test_cycle_finder_finds_a_hand_made_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"a"}}
    cycles = find_cycles(graph)
    assert sorted(map(tuple, cycles)) == [("a", "b", "c", "a"), ("e", "e")]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_edges_follow_python_import_semantics(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from jaxmarl_llm.sub.leaf import X\n")  # re-export: no circle
    (pkg / "sub" / "leaf.py").write_text("X = 1\n")
    (pkg / "user.py").write_text("def f():\n    from jaxmarl_llm.sub import leaf, X\n    import jaxmarl_llm.other\n")
    (pkg / "other.py").write_text("from jaxmarl_llm import user\n")
    graph = import_graph(str(tmp_path))
    assert graph["jaxmarl_llm.sub"] == {"jaxmarl_llm.sub.leaf"}
    assert graph["jaxmarl_llm.sub.leaf"] == set()
    assert graph["jaxmarl_llm.user"] == {"jaxmarl_llm.sub", "jaxmarl_llm.sub.leaf", "jaxmarl_llm.other"}
    assert find_cycles(graph) == [["jaxmarl_llm.other", "jaxmarl_llm.user", "jaxmarl_llm.other"]]


def test_no_import_cycles():
    graph = import_graph()
    edges = sum(len(deps) for deps in graph.values())
    assert len(graph) > 50 and edges > 50, f"only {len(graph)} modules / {edges} edges found: is the walk broken?"
    knots = tangles(graph)
    assert not knots, "import circles (lazy imports included):\n" + "\n".join(
        f"{' -> '.join(_circle_in(k, graph))}   (all modules of this tangle: {', '.join(sorted(k))})" for k in knots)


if __name__ == "__main__":  # print the circles (and every module caught in them) without pytest
    g = import_graph()
    for k in tangles(g):
        print(" -> ".join(_circle_in(k, g)), "  |", ", ".join(sorted(k)))


# The house, top floor first: a room may import its own room and rooms on lower floors, never a room on its own
# floor or above (rooms on one floor know nothing of each other). A room is a folder under jaxmarl_llm (train's
# sub-folders are rooms of their own); FLOOR_OF_MODULE places the package's top-level modules.
FLOORS = (
    ("run",),                      # the machinery that runs any trainer: entry, TRAINERS, runner, checkpoints, cli
    ("train",),                    # what a researcher forks: lm_rl, mlp_ppo, sft, dpo, optim
    ("train.lm",),                 # the LM trainer's parts: plan, seats, rollout, scoring, paths, setup, weights
    ("train.config",),             # defaults and start-up checks per trainer
    ("data",),                     # scripted teachers, transcript collection, JSONL files
    ("evaluation",),               # held-out evaluation, matches against built-in players
    ("parallel", "policies"),      # mesh and multi-host; what an agent is
    ("envs", "algos", "models"),   # environments, pure losses, models: none knows the others
    ("gametheory",),               # small imperfect-information games as trees: best responses, CFR+
    ("tokenizers",),               # text <-> ids
    ("errors",),                   # the errors every floor raises: the leaf
)
TRAINER_MODULES = ("lm_rl", "mlp_ppo", "sft", "dpo")


def room_of(module: str) -> str | None:
    """'jaxmarl_llm.train.lm.rollout' -> 'train.lm'; the package itself -> None."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    if len(parts) >= 2 and parts[0] == "train" and f"train.{parts[1]}" in _FLOOR:
        return f"train.{parts[1]}"
    return parts[0]


_FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """'a -> b (why)' for every import of a room on the importer's floor or above (package __init__ files without
    imports of their own, run only as ancestors, are not edges)."""
    bad = []
    for module, deps in sorted(graph.items()):
        src = room_of(module)
        for dep in sorted(deps):
            dst = room_of(dep)
            if src is None or dst is None or src == dst or (module.startswith(dep + ".") and not graph.get(dep)):
                continue
            if src not in _FLOOR or dst not in _FLOOR:
                bad.append(f"{module} -> {dep} (room {src if src not in _FLOOR else dst} is on no floor: add it)")
            elif _FLOOR[dst] <= _FLOOR[src]:
                where = "on the same floor as" if _FLOOR[dst] == _FLOOR[src] else "above"
                bad.append(f"{module} -> {dep} ({dst} is {where} {src})")
    return bad


def test_floor_checker_finds_an_upward_import():
    graph = {"jaxmarl_llm.models.lora": {"jaxmarl_llm.train.lm_rl"}, "jaxmarl_llm.train.lm_rl": set(),
             "jaxmarl_llm.envs.core": {"jaxmarl_llm.algos.gae"}, "jaxmarl_llm.algos.gae": set(),
             "jaxmarl_llm.train.lm.rollout": {"jaxmarl_llm.train", "jaxmarl_llm.policies.lm_policy"},
             "jaxmarl_llm.train": set(), "jaxmarl_llm.policies.lm_policy": set()}
    assert upward_imports(graph) == [
        "jaxmarl_llm.envs.core -> jaxmarl_llm.algos.gae (algos is on the same floor as envs)",
        "jaxmarl_llm.models.lora -> jaxmarl_llm.train.lm_rl (train is above models)"]


def test_imports_only_go_down():
    graph = import_graph()
    rooms = {room_of(m) for m in graph} - {None}
    assert rooms <= set(_FLOOR), f"rooms on no floor: {sorted(rooms - set(_FLOOR))} (add them to FLOORS)"
    bad = upward_imports(graph)
    assert not bad, "imports that go up or sideways:\n" + "\n".join(bad)


def test_no_trainer_imports_another():
    graph = import_graph()
    trainers = {f"{PACKAGE}.train.{name}" for name in TRAINER_MODULES}
    assert trainers <= set(graph)
    bad = [f"{t} -> {d}" for t in sorted(trainers) for d in sorted(graph[t] & trainers)]
    assert not bad, "a trainer imports another trainer (move what they share to train/lm or optim):\n" + "\n".join(bad)
