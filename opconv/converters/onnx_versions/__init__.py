"""The ONNX version converter: move a model to any ai.onnx opset, up or down.

``driver.py`` walks every node through its operator's schema versions;
``registry.py`` holds the adapters, which the family modules register beside
the operators they adapt.  See ``docs/version-converter.md``.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

from . import elementwise, nn, reduce, shape
from .driver import VersionConverter, convert_version
from .registry import DOWNGRADES, SEMANTIC_CHANGES, UPGRADES, downgrade, semantic_change, upgrade

#: the family modules, imported for the adapters they register
FAMILIES = (elementwise, nn, reduce, shape)

__all__ = ["convert", "convert_proto", "convert_version", "VersionConverter", "upgrade", "downgrade", "semantic_change",
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
    with _quiet_collector():
        loaded = io.load(proto, base_dir=base_dir)
        loaded.path = path
        converted = convert_version(loaded, int(opset), source_proto=proto)
        _to_old_generation()
        return converted


def convert_proto(proto, opset: int):
    """ModelProto in, ModelProto out (``proto`` is not modified), like ``onnx.version_converter``.

    The graph-core copy lives only inside the call: it is taken apart at the end, so that its
    memory returns at once instead of waiting for the cyclic collector's next full pass.
    """
    from ...dialects.onnx import io

    with _quiet_collector():
        model = io.load(proto)
        try:
            convert_version(model, int(opset), source_proto=proto)
            return io.to_proto(model)
        finally:
            _dispose(model)


@contextmanager
def _quiet_collector():
    # Loading and converting create many small objects and free none: the cyclic collector would
    # walk the whole graph again and again for nothing (a third of the time on 20,000 nodes).
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _to_old_generation() -> None:
    """File the objects just built (the converted model) with the long-lived ones.

    Left in the youngest generation, the model's hundreds of thousands of objects would all be
    traversed by the first collection after the collector is back on, although they are
    meant to live on.  Skipped when the program froze objects itself (``gc.freeze``), since
    ``gc.unfreeze`` would release those too.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


def _dispose(model) -> None:
    """Break the graph's reference cycles (nodes <-> values <-> graphs) so reference counting frees it."""
    stack = [model.graph] + [f.graph for f in model.functions]
    while stack:
        g = stack.pop()
        for n in g.nodes:
            stack.extend(n.subgraphs())
            for v in n.outputs:
                if v is not None:
                    v.uses = []
                    v.producer = None
            n.inputs = []
            n.outputs = []
            n.graph = None
        for v in g.inputs + g.outputs + list(g.initializers.values()):
            v.uses = []
            v.producer = None
        g.nodes, g.inputs, g.outputs, g.initializers = [], [], [], {}
        g.parent = None
        g._names = None
