"""Conversions between dialects and between ONNX opset versions.

Each direction registers a function ``(model, **options) -> Model`` here under
``(source dialect, target dialect)``; :func:`convert` dispatches on the pair.
The rewrite engine and the per-direction rule modules live beside this file.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from ..errors import NotImplementedFeature
from ..ir import Model, quiet_collector
from ..validation import require_valid

Converter = Callable[..., Model]
_CONVERTERS: dict[tuple[str, str], Converter] = {}


def register(source: str, target: str):
    """Decorator: register ``fn`` as the converter from ``source`` to ``target``.

    What it returns (and registers) first refuses a model that breaks its schemas
    (:func:`opconv.validation.require_valid`), so the direction's rules may rely on a checked model.
    """

    def wrap(fn: Converter) -> Converter:
        @functools.wraps(fn)
        def converter(model: Model, *args, **options) -> Model:
            require_valid(model)
            return fn(model, *args, **options)

        _CONVERTERS[(source, target)] = converter
        return converter

    return wrap


def convert(model: Model, to: str, **options) -> Model:
    if to == model.dialect and not options:
        return model
    fn = _CONVERTERS.get((model.dialect, to)) or _load_direction(model.dialect, to)
    if fn is None:
        raise NotImplementedFeature(f"conversion from {model.dialect} to {to}")
    with quiet_collector():
        return fn(model, **options)


def available() -> list[tuple[str, str]]:
    for module in DIRECTIONS:
        importlib.import_module(f".{module}", __name__)
    return sorted(_CONVERTERS)


# Each direction registers itself when its module is imported, on first use: converting one way does not
# pay for loading the others (a fresh `opconv onnx-to-ir` process starts faster).
DIRECTIONS = ("hlo_to_onnx", "onnx_to_hlo", "onnx_to_openvino", "onnx_versions", "openvino_to_onnx")


def _load_direction(source: str, target: str) -> Converter | None:
    module = f"{source}_to_{target}"
    if module in DIRECTIONS:
        importlib.import_module(f".{module}", __name__)
    return _CONVERTERS.get((source, target))
