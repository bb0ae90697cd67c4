"""Conversions between dialects and between ONNX opset versions.

Each direction registers a function ``(model, **options) -> Model`` here under
``(source dialect, target dialect)``; :func:`convert` dispatches on the pair.
The rewrite engine and the per-direction rule modules live beside this file.
"""

from __future__ import annotations

from typing import Callable

from ..errors import NotImplementedFeature
from ..ir import Model

Converter = Callable[..., Model]
_CONVERTERS: dict[tuple[str, str], Converter] = {}


def register(source: str, target: str):
    """Decorator: register ``fn`` as the converter from ``source`` to ``target``."""
    def wrap(fn: Converter) -> Converter:
        _CONVERTERS[(source, target)] = fn
        return fn
    return wrap


def convert(model: Model, to: str, **options) -> Model:
    if to == model.dialect and not options:
        return model
    fn = _CONVERTERS.get((model.dialect, to))
    if fn is None:
        raise NotImplementedFeature(f"conversion from {model.dialect} to {to}")
    return fn(model, **options)


def available() -> list[tuple[str, str]]:
    return sorted(_CONVERTERS)


# Each direction registers itself on import.
from . import onnx_to_openvino  # noqa: E402,F401
