"""The package layout (ARCHITECTURE.md): every import of one devlint module by another, wherever
it stands in the file (a function's lazy import counts), points down the layers or across one,
and no modules import each other in a circle. Read with the standard library's `ast`."""
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

# lowest first; a module may import its own layer's modules and those of the layers below
LAYERS = [
    ("devlint", "devlint.core"),
    ("devlint.torchinfo",),
    ("devlint.semantic",),
    ("devlint.api",),
    ("devlint.analysis",),
    ("devlint.rules",),
    ("devlint.engine",),
    ("devlint.workspace",),
    ("devlint.confirm",),
    ("devlint.frontends", "devlint.__main__"),
]


def modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "devlint").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The devlint modules `name` imports (`from devlint import x` names module x)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]  # `import devlint.rules.dev001` -> the module
            if target and target != name:
                found.add(target)
    return found


def layer(name: str) -> int:
    for number, prefixes in enumerate(LAYERS):
        if any(name == p or (p != "devlint" and name.startswith(p + ".")) for p in prefixes):
            return number
    raise AssertionError(f"{name} is in no layer: add its package to LAYERS and ARCHITECTURE.md")


MODULES = modules()
GRAPH = {name: imports(name, path, MODULES) for name, path in MODULES.items()}


def test_every_module_has_a_layer():
    for name in GRAPH:
        layer(name)


def test_no_import_points_up_the_layers():
    upward = sorted(f"{name} (layer {layer(name)}) imports {target} (layer {layer(target)})"
                    for name, targets in GRAPH.items() for target in targets if layer(target) > layer(name))
    assert upward == []


def test_no_import_circle():
    circles = []
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def walk(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                circles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                walk(target, path + [target])
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            walk(name, [name])
    assert circles == []


def test_the_walk_sees_imports_of_every_form():
    known = {"devlint": SRC, "devlint.core": SRC, "devlint.core.syntax": SRC, "devlint.engine": SRC}
    source = "from devlint.core import syntax\ndef f():\n    from devlint import engine\nimport devlint.engine\n"
    tree = Path(__file__).parent / "__layers_probe__.py"
    try:
        tree.write_text(source)
        assert imports("devlint.x", tree, known) == {"devlint.core.syntax", "devlint.engine"}
    finally:
        tree.unlink()
