"""Every import statement of the opconv package, read from the source with ``ast`` (nothing is imported).

Shared by the dependency test (top-level packages against pyproject's declarations) and the layering test
(which opconv module may import which).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "opconv"


@dataclass(frozen=True)
class Import:
    """One imported name: ``from target import name`` (``name`` empty for ``import target``)."""

    path: Path  # the importing file
    line: int
    importer: str  # the importing module, dotted
    target: str  # the module imported from, absolute and dotted
    name: str
    deferred: bool  # inside a def or an `if TYPE_CHECKING:` block: not imported when the module loads

    def where(self) -> str:
        return f"{self.path.relative_to(PACKAGE_DIR.parent)}:{self.line}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports_of(path: Path) -> list[Import]:
    importer = module_name(path)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    found = []

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend(Import(path, child.lineno, importer, a.name, "", deferred) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:  # relative: resolved against the importer's package
                    base = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.extend(Import(path, child.lineno, importer, target, a.name, deferred) for a in child.names)
            function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            visit(child, deferred or function or _is_type_checking(child))

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


@functools.cache
def package_imports() -> tuple[Import, ...]:
    return tuple(imp for path in sorted(PACKAGE_DIR.rglob("*.py")) for imp in _imports_of(path))
