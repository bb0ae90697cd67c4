"""The ONNX version converter: move a model to any ai.onnx opset, up or down.

``driver.py`` walks every node through its operator's schema versions;
``registry.py`` holds the adapters, which the family modules register beside
the operators they adapt.  See ``docs/version-converter.md``.
"""

from __future__ import annotations

from . import elementwise, nn, reduce, shape
from .driver import VersionConverter, convert_version
from .registry import DOWNGRADES, SEMANTIC_CHANGES, UPGRADES, downgrade, semantic_change, upgrade

#: the family modules, imported for the adapters they register
FAMILIES = (elementwise, nn, reduce, shape)

__all__ = ["convert", "convert_version", "VersionConverter", "upgrade", "downgrade", "semantic_change",
           "UPGRADES", "DOWNGRADES", "SEMANTIC_CHANGES"]


def convert(model, opset: int, **options):
    """``opconv.convert_version``: load ``model`` (a path, ModelProto or Model, never modified) and convert it."""
    import os

    import onnx

    from ...dialects.onnx import io
    from ...ir import Model

    if options:
        raise TypeError(f"unexpected options: {', '.join(options)}")
    path = None
    if isinstance(model, Model):
        if model.dialect != "onnx":
            from ...errors import ConversionError
            raise ConversionError(f"version conversion needs an ONNX model, not {model.dialect}", where=model.path)
        path = model.path
        proto = io.to_proto(model)  # work on a copy: a refused conversion leaves the caller's model intact
        base_dir = os.path.dirname(os.path.abspath(path)) if path else None
    elif isinstance(model, onnx.ModelProto):
        proto, base_dir = model, None
    else:
        path = os.fspath(model)
        proto = onnx.ModelProto()
        try:
            proto.ParseFromString(io.read_model_file(path))
        except Exception as e:  # noqa: BLE001 - any parse failure is an unreadable model
            from ...errors import ModelReadError
            raise ModelReadError(f"not a valid ONNX protobuf ({e})", where=path) from None
        base_dir = os.path.dirname(os.path.abspath(path))
    import gc

    # Loading and converting create many small objects and free none: the cyclic collector would
    # walk the whole graph again and again for nothing (a third of the time on 20,000 nodes).
    collecting = gc.isenabled()
    gc.disable()
    try:
        loaded = io.load(proto, base_dir=base_dir)
        loaded.path = path
        return convert_version(loaded, int(opset), source_proto=proto)
    finally:
        if collecting:
            gc.enable()
