"""The packages opconv imports are the ones pyproject.toml declares, and every declared one is used.

A module-level import must be the standard library, opconv itself or a runtime dependency; an import deferred
into a function (or under ``TYPE_CHECKING``) may also name a runtime of the optional extras, which the backends
load only when asked.  Read from the source with ``ast``, so a missing declaration fails here rather than on a
user's machine that lacks the package.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import sys

import pytest

from tests.imports import PACKAGE_DIR, package_imports

try:
    import tomllib
except ImportError:  # Python 3.10: the installed distribution's metadata carries the same declarations
    tomllib = None

# Extras that name a runtime `opconv verify --backend NAME` can use (the `test` extra is the test tooling).
RUNTIME_EXTRAS = ("onnxruntime", "openvino", "iree")


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement.strip(), maxsplit=1)[0]


def _declared() -> tuple[list[str], dict[str, list[str]]]:
    """(runtime dependencies, {extra: its requirements}) as distribution names."""
    if tomllib is not None:
        project = tomllib.loads((PACKAGE_DIR.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        extras = project.get("optional-dependencies", {})
        return (
            [_requirement_name(r) for r in project["dependencies"]],
            {extra: [_requirement_name(r) for r in reqs] for extra, reqs in extras.items()},
        )
    runtime, extras = [], {}
    for requirement in importlib.metadata.requires("opconv") or []:
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)", requirement)
        if extra:
            extras.setdefault(extra.group(1), []).append(_requirement_name(requirement))
        else:
            runtime.append(_requirement_name(requirement))
    return runtime, extras


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _import_names(distributions: list[str]) -> set[str]:
    """The top-level import names the installed ``distributions`` provide (protobuf provides ``google``)."""
    wanted = {_normalized(d) for d in distributions}
    provided = _packages_distributions()
    names = {top for top, dists in provided.items() if any(_normalized(d) in wanted for d in dists)}
    missing = wanted - {_normalized(d) for dists in provided.values() for d in dists}
    assert not missing, f"declared distributions not installed, cannot map them to import names: {sorted(missing)}"
    return names


def _third_party(imports):
    return [i for i in imports if i.target.split(".")[0] not in sys.stdlib_module_names | {"opconv"}]


def test_module_level_imports_are_runtime_dependencies():
    runtime, _ = _declared()
    allowed = _import_names(runtime)
    undeclared = [
        f"{i.where()}: {i.target}"
        for i in _third_party(package_imports())
        if not i.deferred and i.target.split(".")[0] not in allowed
    ]
    assert not undeclared, "imported at module level but not in pyproject's dependencies:\n" + "\n".join(undeclared)


def test_deferred_imports_are_runtime_dependencies_or_runtime_extras():
    runtime, extras = _declared()
    allowed = _import_names(runtime + [d for extra in RUNTIME_EXTRAS for d in extras[extra]])
    undeclared = [
        f"{i.where()}: {i.target}" for i in _third_party(package_imports()) if i.target.split(".")[0] not in allowed
    ]
    assert not undeclared, "imported but neither a dependency nor a runtime extra:\n" + "\n".join(undeclared)


@pytest.mark.parametrize("kind", ["dependencies", *RUNTIME_EXTRAS])
def test_every_declared_package_is_imported(kind):
    """A declaration nothing imports is stale.  The runtime extras' packages are loaded by name through
    importlib (opconv/backends), so for them the module name must appear in the backend's source."""
    runtime, extras = _declared()
    distributions = runtime if kind == "dependencies" else extras[kind]
    imported = {i.target.split(".")[0] for i in _third_party(package_imports())}
    backend_sources = "".join(p.read_text(encoding="utf-8") for p in (PACKAGE_DIR / "backends").glob("*.py"))
    for distribution in distributions:
        names = _import_names([distribution])
        used = names & imported if kind == "dependencies" else {n for n in names if f'"{n}' in backend_sources}
        assert used, f"{distribution} is declared ({kind}) but opconv never imports {sorted(names)}"
