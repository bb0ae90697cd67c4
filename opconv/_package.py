"""The ``opconv`` package keeps its API functions when a submodule of the same name is imported."""

from __future__ import annotations

import sys
from types import ModuleType


def keep_functions_over_submodules(package: str, names: tuple[str, ...]) -> None:
    """Make the module ``package`` ignore the submodule imports that would replace its functions ``names``.

    Importing a submodule (opconv/verify.py) sets the package attribute of that name to the module.  Such
    a submodule is loaded on first use only (a conversion never needs verification), so without this the
    function ``opconv.verify`` would turn into a module halfway through a program.
    """
    class Package(ModuleType):
        def __setattr__(self, name: str, value) -> None:
            if name in names and isinstance(value, ModuleType):
                return
            super().__setattr__(name, value)

    sys.modules[package].__class__ = Package
