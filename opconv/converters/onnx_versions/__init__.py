"""The ONNX version converter: move a model to any ai.onnx opset, up or down.

``driver.py`` walks every node through its operator's schema versions;
``registry.py`` registers the adapters in the lowering registry (routes
``("onnx", "onnx:up")`` / ``("onnx", "onnx:down")``) for the family modules,
beside the operators they adapt (every module of the package is imported by
:func:`~opconv.converters.lowering.discover`); ``proto_path.py`` runs the
driver on only the nodes that change and writes them back into a copy of the
protobuf (the whole model goes through the graph core when it cannot).  See ``docs/version-converter.md``.
"""

from __future__ import annotations

from ...ir import quiet_collector
from .. import lowering
from . import proto_path
from .driver import VersionConverter, convert_version
from .registry import SEMANTIC_CHANGES, downgrade, semantic_change, upgrade

lowering.discover(__name__)  # the family modules register their adapters

__all__ = [
    "convert",
    "convert_proto",
    "convert_version",
    "VersionConverter",
    "upgrade",
    "downgrade",
    "semantic_change",
    "SEMANTIC_CHANGES",
]


def convert(model, opset: int, *, decompose: bool = False, **options):
    """``opconv.convert_version``: load ``model`` (a path, ModelProto or Model, never modified) and convert it.

    Contrib nodes (whose domains have their own opsets) stay as they are unless ``decompose`` asks for them
    to be rewritten into standard operators first (:mod:`opconv.converters.decompose`).
    """
    import os

    from ...dialects.onnx import io
    from ...ir import Model
    from ...validation import require_valid

    if decompose:
        from ..decompose import decompose as decompose_model

        model = decompose_model(model)
    if options:
        raise TypeError(f"unexpected options: {', '.join(options)}")
    path = None
    if isinstance(model, Model):
        if model.dialect != "onnx":
            from ...errors import ConversionError

            raise ConversionError(f"version conversion needs an ONNX model, not {model.dialect}", where=model.path)
        require_valid(model)
        path = model.path
        base_dir = os.path.dirname(os.path.abspath(path)) if path else None
        # A copy, so that a refused conversion leaves the caller's model intact; external weights stay
        # references into their files (read back with base_dir), so the copy never holds their bytes.
        proto = io.to_proto(model, refer_from=base_dir)
    elif isinstance(model, io.pb.ModelProto):
        proto, base_dir = model, None
    else:
        path = os.fspath(model)
        proto = io.pb.ModelProto()
        try:
            proto.ParseFromString(io.read_model_file(path))
        except Exception as e:  # noqa: BLE001 - any parse failure is an unreadable model
            from ...errors import ModelReadError

            raise ModelReadError(f"not a valid ONNX protobuf ({e})", where=path) from None
        base_dir = os.path.dirname(os.path.abspath(path))
    if not isinstance(model, Model):  # checked as the graph core reads it (tensors stay unread)
        checked = io.load(proto, base_dir=base_dir)
        checked.path = path
        require_valid(checked)
    with quiet_collector():
        fast = proto_path.convert(proto, int(opset), base_dir)
        if fast is not None:
            loaded = io.load(fast, base_dir=base_dir)
            loaded.path = path
            return loaded
        loaded = io.load(proto, base_dir=base_dir)
        loaded.path = path
        converted = convert_version(loaded, int(opset), source_proto=proto)
        return converted


def convert_proto(proto, opset: int):
    """ModelProto in, ModelProto out (``proto`` is not modified), like ``onnx.version_converter``.

    The protobuf path first; else the whole model in the graph core.  The graph-core copy lives
    only inside the call: it is taken apart at the end, so that its memory returns at once
    instead of waiting for the cyclic collector's next full pass.
    """
    from ...dialects.onnx import io

    with quiet_collector():
        converted = proto_path.convert(proto, int(opset))
        if converted is not None:
            return converted
        model = io.load(proto)
        try:
            convert_version(model, int(opset), source_proto=proto)
            return io.to_proto(model)
        finally:
            _dispose(model)


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
