"""The ONNX reference executor: binds ONNX nodes to kernels and runs models.

Kernels live in ``ops/<family>.py`` and register with :data:`onnx_op`::

    @onnx_op("Softmax", since=13)
    def softmax_13(ctx, x, *, axis):
        return norm.softmax(x, axis)

A node runs the kernel registered with the highest ``since`` <= the node's
version.  Its attributes are decoded once, when the graph is compiled: every
attribute the op's schema declares at that version is passed as a keyword
argument, set from the node or from the schema's default (``None`` when the
schema gives no default and the node sets none).

Ops without a kernel that ONNX defines as a function of other ops (the
schema's ``function_body``), and model-local functions, run as function calls.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from ...errors import ExecutionError, SchemaError
from ... import executor
from ...executor import BoundNode, ExecContext, Interpreter, OpRegistry, python_name
from ...ir import Attr, Function, Model, Node, SparseTensor, Tensor
from ...schemas import OpSchema, dialect_schemas
from ...types import from_onnx_code

REGISTRY = OpRegistry("onnx")
#: decorator registering an ONNX kernel: ``@onnx_op("Relu", since=14)``
onnx_op = REGISTRY.register

_DEFAULT_DOMAINS = ("", "ai.onnx")


class Session(executor.Session):
    """An ONNX model prepared to run many times (see :class:`opconv.executor.Session`)."""

    def __init__(self, model: Model, *, seed: int = 0, fuse: bool = True):
        """``fuse=False`` keeps every node a step of its own (constant folding wants the unfused values)."""
        _load_kernels()
        functions = {(f.domain, f.name): f for f in model.functions}
        super().__init__(model, _Binder(functions, refs=None), seed=seed)
        if fuse:
            from .fusion import fuse_conv_batch_norm, fuse_relu, fuse_transformer_patterns

            plan = self._interpreter.plan(model.graph)
            fuse_conv_batch_norm(model.graph, plan)
            fuse_relu(model.graph, plan)
            fuse_transformer_patterns(model.graph, plan)  # last: it renumbers the steps


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
        label = f"node {node.name!r} ({node.op}-{node.version})" if node.name else f"{node.op}-{node.version} node"
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
            raise ExecutionError(f"no kernel for {node.op} version {schema.version} (only from version "
                                 f"{reg.since})", where=label)
        # The schema's notes say why, when its source knows (e.g. onnxruntime runs the op on GPUs only).
        why = f"; {schema.notes}" if schema is not None and schema.notes else ""
        raise ExecutionError(f"opconv's ONNX executor has no kernel for {domain + '::' if domain else ''}"
                             f"{node.op} (version {node.version}){why}", where=label)

    def resolve_ref(self, a: Attr, label: str) -> Attr:
        if a.ref is None:
            return a
        if self.refs is None or a.ref not in self.refs:
            return Attr(a.name, a.type, None)  # the caller did not set it: the attribute is absent
        ref = self.refs[a.ref]
        return Attr(a.name, ref.type, ref.value)


def decode_attributes(schema: OpSchema | None, attrs: dict[str, Attr], label: str) -> dict[str, Any]:
    """Keyword arguments for a kernel: every schema attribute, from the node or the schema default."""
    out: dict[str, Any] = {}
    if schema is None:
        return {python_name(k): decode_value(a) for k, a in attrs.items()}
    for p in schema.attributes:
        a = attrs.get(p.name)
        if a is not None and a.value is not None:
            out[python_name(p.name)] = decode_value(a)
        elif p.required:
            raise ExecutionError(f"required attribute {p.name!r} is missing", where=label)
        else:
            out[python_name(p.name)] = _decode_default(p.default)
    unknown = set(attrs) - {p.name for p in schema.attributes}
    if unknown:
        raise ExecutionError(f"unknown attribute(s) {', '.join(sorted(unknown))} for {schema.name}-{schema.version}",
                             where=label)
    return out


def decode_value(a: Attr) -> Any:
    v = a.value
    if isinstance(v, Tensor):
        return v.numpy()
    if a.type == "tensors":
        return [t.numpy() for t in v]
    if isinstance(v, SparseTensor):
        return densify(v)
    if a.type == "sparse_tensors":
        return [densify(t) for t in v]
    return v


def _decode_default(default: Any) -> Any:
    if isinstance(default, dict) and "dtype" in default:  # a tensor default in the schema file
        from ...types import element_type

        return np.asarray(default["values"], dtype=element_type(default["dtype"]).numpy).reshape(default["shape"])
    return default


def densify(st: SparseTensor) -> np.ndarray:
    """The dense array of a COO sparse tensor (indices either [NNZ] linear or [NNZ, rank])."""
    values = st.values.numpy()
    indices = st.indices.numpy().astype(np.int64)
    dense = np.zeros(st.dims, dtype=values.dtype)
    if indices.ndim == 1:
        dense.reshape(-1)[indices] = values
    elif indices.size:
        dense[tuple(indices.T)] = values
    return dense


def _function_kernel(function: Function, call_attrs: dict[str, Attr], functions: dict, seed: int):
    """A kernel that runs ``function``'s body with the call's attributes bound."""
    refs = dict(function.attribute_defaults)
    refs.update({k: a for k, a in call_attrs.items() if a.value is not None})
    inner = Interpreter(_Binder(functions, refs), seed=seed)

    def call(ctx: ExecContext, *inputs):
        outs = inner.run_graph(function.graph, list(inputs))
        return tuple(outs) if len(outs) > 1 else outs[0]

    return call


@lru_cache(maxsize=None)
def _schema_function(op: str, version: int, domain: str) -> Function | None:
    """The function body ONNX defines for ``op`` at ``version``, loaded into the graph core."""
    import onnx.defs  # the full onnx package, only for ops that run as their schema's function

    try:
        schema = onnx.defs.get_schema(op, version, domain)
    except (onnx.defs.SchemaError, TypeError):  # TypeError: an opset version past onnx's 32-bit int
        return None
    if not schema.has_function:
        return None
    proto = schema.function_body
    from .io import function_from_proto

    return function_from_proto(proto)


_loaded = False


def _load_kernels() -> None:
    # The ops package registers its kernels on import.
    global _loaded
    if not _loaded:
        from . import ops  # noqa: F401

        _loaded = True


def onnx_dtype(code: int) -> np.dtype:
    """The numpy dtype of an ONNX TensorProto element-type code (for attributes such as Cast's ``to``)."""
    et = from_onnx_code(int(code))
    if et.numpy is None:
        raise SchemaError(f"element type {et.name} has no numpy dtype")
    return et.numpy
