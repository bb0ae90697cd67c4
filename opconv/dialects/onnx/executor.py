"""The ONNX reference executor: binds ONNX nodes to kernels and runs models.

Kernels live in ``ops/<family>.py`` and register with :data:`onnx_op`::

    @onnx_op("Softmax", since=13)
    def softmax_13(ctx, x, *, axis):
        return norm.softmax(x, axis)

A node runs the kernel registered with the highest ``since`` <= the node's
version.  Its attributes are decoded once, when the graph is compiled
(:func:`opconv.attributes.decode_attributes`): every attribute the op's schema
declares at that version is passed as a keyword argument, set from the node or
from the schema's default (``None`` when the schema gives no default and the
node sets none).

Ops without a kernel that ONNX defines as a function of other ops (the
schema's ``function_body``), and model-local functions, run as function calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from ...attributes import decode_attributes
from ...errors import ExecutionError, SchemaError
from ...executor import BoundNode, DialectExecutor, DialectSession, ExecContext, Interpreter
from ...ir import Attr, Function, Graph, Model, Node
from ...schemas import dialect_schemas
from ...types import from_onnx_code

_DEFAULT_DOMAINS = ("", "ai.onnx")


class _OnnxExecutor(DialectExecutor):
    """ONNX binds per model: its local functions, and the attributes a function call passes to its body."""

    def binder(self, model: Model) -> _Binder:
        return _Binder({(f.domain, f.name): f for f in model.functions}, refs=None)

    def label(self, node: Node) -> str:
        return f"node {node.name!r} ({node.op}-{node.version})" if node.name else f"{node.op}-{node.version} node"


def _fuse(graph: Graph, plan) -> None:
    from .fusion import (
        fuse_channel_shuffle,
        fuse_conv_batch_norm,
        fuse_relu,
        fuse_transformer_patterns,
        fuse_view_steps,
        keep_recurrent_weights,
    )

    keep_recurrent_weights(graph, plan)
    fuse_conv_batch_norm(graph, plan)
    fuse_relu(graph, plan)
    fuse_channel_shuffle(graph, plan)  # before the view steps: it needs the shuffle's Reshape-Transpose-Reshape
    fuse_transformer_patterns(graph, plan)  # renumbers the steps
    fuse_view_steps(graph, plan)  # last: the steps it extends match no other fusion; renumbers the steps


EXECUTOR = _OnnxExecutor("onnx", "ONNX", domains=_DEFAULT_DOMAINS, kernels=f"{__package__}.ops", fuse=_fuse)
REGISTRY = EXECUTOR.registry
#: decorator registering an ONNX kernel: ``@onnx_op("Relu", since=14)``
onnx_op = REGISTRY.register


class Session(DialectSession):
    """An ONNX model prepared to run many times (see :class:`opconv.executor.Session`)."""

    executor = EXECUTOR


def run_model(model: Model, feeds: Mapping[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """Run an ONNX model once on ``feeds``."""
    return Session(model, seed=seed).run(feeds)


class _Binder:
    """Turns nodes into BoundNodes; ``refs`` holds a function call's attributes for ``ref_attr_name``."""

    def __init__(self, functions: dict, refs: dict[str, Attr] | None):
        self.functions = functions
        self.refs = refs

    def __call__(self, node: Node, interp: Interpreter) -> BoundNode:
        domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
        label = EXECUTOR.label(node)
        attrs = {name: self.resolve_ref(a, label) for name, a in node.attrs.items()}
        function = self.functions.get((node.domain, node.op))
        if function is not None:
            return BoundNode(node, _function_kernel(function, attrs, self.functions, interp.seed), {}, label)
        if node.version is None:
            raise ExecutionError(f"the model imports no version of domain {domain or 'ai.onnx'!r}", where=label)
        reg = REGISTRY.resolve(node.op, node.version, domain)
        schema = dialect_schemas("onnx").find(node.op, node.version, domain)
        if reg is not None and schema is not None and reg.since >= schema.version or (reg and schema is None):
            return BoundNode(node, reg.fn, decode_attributes(schema, attrs, label), label, reg.deterministic)
        body = _schema_function(node.op, node.version, domain)
        if body is not None:
            return BoundNode(node, _function_kernel(body, attrs, self.functions, interp.seed), {}, label)
        if reg is not None:
            # A kernel registered for an older version only: the schema changed since, and no kernel says
            # the new version means the same; refusing is safer than running old semantics.
            version = schema.version if schema else "?"
            raise ExecutionError(
                f"no kernel for {node.op} version {version} (only from version {reg.since})", where=label
            )
        # The schema's notes say why, when its source knows (e.g. onnxruntime runs the op on GPUs only).
        why = f"; {schema.notes}" if schema is not None and schema.notes else ""
        raise ExecutionError(
            f"opconv's ONNX executor has no kernel for {domain + '::' if domain else ''}"
            f"{node.op} (version {node.version}){why}",
            where=label,
        )

    def resolve_ref(self, a: Attr, label: str) -> Attr:
        if a.ref is None:
            return a
        if self.refs is None or a.ref not in self.refs:
            return Attr(a.name, a.type, None)  # the caller did not set it: the attribute is absent
        ref = self.refs[a.ref]
        return Attr(a.name, ref.type, ref.value)


def _function_kernel(function: Function, call_attrs: dict[str, Attr], functions: dict, seed: int):
    """A kernel that runs ``function``'s body with the call's attributes bound."""
    refs = dict(function.attribute_defaults)
    refs.update({k: a for k, a in call_attrs.items() if a.value is not None})
    inner = Interpreter(_Binder(functions, refs), seed=seed)

    def call(ctx: ExecContext, *inputs):
        outs = inner.run_graph(function.graph, list(inputs))
        return tuple(outs) if len(outs) > 1 else outs[0]

    return call


@cache
def _schema_function(op: str, version: int, domain: str) -> Function | None:
    """The function body ONNX defines for ``op`` at ``version``, loaded into the graph core."""
    import onnx.defs  # the full onnx package, only for ops that run as their schema's function

    try:
        schema = onnx.defs.get_schema(op, version, domain)
    except (onnx.defs.SchemaError, TypeError):  # TypeError: an opset version past onnx's 32-bit int
        return None
    if not getattr(schema, "has_function", False):  # not in onnx's stubs
        return None
    proto = schema.function_body
    from .io import function_from_proto

    return function_from_proto(proto)


def onnx_dtype(code: int) -> np.dtype:
    """The numpy dtype of an ONNX TensorProto element-type code (for attributes such as Cast's ``to``)."""
    et = from_onnx_code(int(code))
    if et.numpy is None:
        raise SchemaError(f"element type {et.name} has no numpy dtype")
    return et.numpy
