"""Backends: what runs a model for ``opconv verify`` — opconv's own executors or a deployed runtime.

Every backend has the same interface::

    from opconv.backends import get_backend
    outputs = get_backend("onnxruntime").run(model, feeds, extra_outputs=("conv1_out",))

``model`` is anything :func:`opconv.load` takes (a path, a ModelProto, an :class:`opconv.Model`); ``feeds`` maps
the model's input names to arrays; the result maps the model's output names (as opconv reads them), then each
name of ``extra_outputs`` (intermediate values of the model: onnxruntime adds them as graph outputs, OpenVINO as
extra Results, opconv keeps them from its executor), to numpy arrays.  Runtimes are optional extras
(``pip install 'opconv[openvino]'``); a backend whose runtime is missing raises a one-line
:class:`~opconv.OpconvError` naming the extra.  Modules load on first use, so a conversion never imports a runtime.
"""

from __future__ import annotations

import importlib

from ..errors import OpconvError
from .base import Backend

#: backend name -> module of this package defining its class as ``BACKEND``
_MODULES = {"opconv": "reference", "onnxruntime": "onnxruntime", "openvino": "openvino", "iree": "iree"}

NAMES = tuple(_MODULES)

__all__ = ["Backend", "NAMES", "backends_for", "get_backend"]


def get_backend(name: str, **settings) -> Backend:
    """The backend called ``name`` (one of :data:`NAMES`), made with its ``settings`` (e.g. ``seed`` for
    ``opconv``, ``precision`` for ``openvino``)."""
    if name not in _MODULES:
        raise OpconvError(f"unknown backend {name!r}; the backends are {', '.join(NAMES)}")
    module = importlib.import_module(f".{_MODULES[name]}", __name__)
    return module.BACKEND(**settings)


def backends_for(dialect: str) -> list[str]:
    """The names of the backends that run models of ``dialect``."""
    return [
        name
        for name, module in _MODULES.items()
        if dialect in importlib.import_module(f".{module}", __name__).BACKEND.dialects
    ]
