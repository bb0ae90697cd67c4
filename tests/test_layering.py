"""opconv's layers import each other in one direction only, and modules keep their private names private.

- ``opconv.dialects`` (formats, executors, kernels of one dialect) never imports ``opconv.converters``: a
  dialect stands alone, converters are built on dialects.
- A converter direction (``opconv.converters.onnx_to_openvino`` ...) never imports a sibling direction's private
  (``_``-prefixed) names or modules: what two directions share lives in a module both may import.
- No module imports another module's ``_``-prefixed name.

Read from the source with ``ast``; a deferred import (inside a function) counts the same.
"""

from __future__ import annotations

from tests.imports import PACKAGE_DIR, Import, package_imports

CONVERTERS = "opconv.converters"

# Imports allowed to break the rules, each with its reason (importer -> imported; a module covers the names
# imported from it). Empty: keep it so. test_no_stale_exceptions fails when an entry's import is gone.
REFACTOR_EXCEPTIONS: set[tuple[str, str]] = set()


def _private(segment: str) -> bool:
    return segment.startswith("_") and not segment.startswith("__")


def _imported(imp: Import) -> str:
    """The dotted thing ``imp`` brings in: ``target.name`` for ``from target import name``."""
    return f"{imp.target}.{imp.name}" if imp.name and imp.name != "*" else imp.target


# The direction packages (onnx_to_openvino, hlo_to_onnx, onnx_versions ...): the subpackages of the converters.
DIRECTIONS = frozenset(
    f"{CONVERTERS}.{init.parent.name}" for init in (PACKAGE_DIR / "converters").glob("*/__init__.py")
)


def _direction(module: str) -> str | None:
    """``opconv.converters.<direction>`` for a module inside a direction package, else None."""
    direction = ".".join(module.split(".")[:3])
    return direction if direction in DIRECTIONS else None


def _exception_for(imp: Import) -> tuple[str, str] | None:
    imported = _imported(imp)
    for importer, target in REFACTOR_EXCEPTIONS:
        if imp.importer == importer and (imported == target or imported.startswith(target + ".")):
            return importer, target
    return None


def _violations(rule) -> list[str]:
    return [
        f"{imp.where()}: {imp.importer} imports {_imported(imp)}"
        for imp in package_imports()
        if rule(imp) and _exception_for(imp) is None
    ]


def _dialect_imports_converter(imp: Import) -> bool:
    return imp.importer.startswith("opconv.dialects") and (
        _imported(imp) == CONVERTERS or _imported(imp).startswith(CONVERTERS + ".")
    )


def _reaches_sibling_private(imp: Import) -> bool:
    mine, theirs = _direction(imp.importer), _direction(_imported(imp))
    if mine is None or theirs is None or mine == theirs:
        return False
    inside = _imported(imp)[len(theirs) + 1 :].split(".")
    return any(_private(segment) for segment in inside)


def _imports_private_name(imp: Import) -> bool:
    return _private(imp.name) and imp.target != imp.importer


def test_dialects_never_import_converters():
    bad = _violations(_dialect_imports_converter)
    assert not bad, "a dialect imports the converters:\n" + "\n".join(bad)


def test_directions_never_import_a_sibling_directions_private_names():
    bad = _violations(_reaches_sibling_private)
    assert not bad, "a converter direction imports a sibling direction's private name or module:\n" + "\n".join(bad)


def test_no_module_imports_another_modules_private_name():
    bad = _violations(_imports_private_name)
    assert not bad, "private names imported from another module (make them public or move them):\n" + "\n".join(bad)


def test_no_stale_exceptions():
    """Every TEMPORARY exception still matches an import that breaks a rule: delete the ones that do not."""
    rules = (_dialect_imports_converter, _reaches_sibling_private, _imports_private_name)
    live = {_exception_for(imp) for imp in package_imports() if any(rule(imp) for rule in rules)}
    stale = sorted(REFACTOR_EXCEPTIONS - live)
    assert not stale, "exceptions whose import is gone, delete them from REFACTOR_EXCEPTIONS:\n" + "\n".join(
        f"{importer} -> {imported}" for importer, imported in stale
    )
