"""Helpers shared by the HLO -> ONNX rule modules.

A rule module declares one translator per HLO operation with :class:`Rules`::

    RULES = Rules()

    @RULES.op("Elu", inputs=1)
    def elu(c: Ctx, x):
        return c.onnx("Elu", x, alpha=c.a["alpha"])

The translator gets a :class:`Ctx` (the OpenVINO -> ONNX direction's context:
the builder, the operation, its attributes decoded once from the *HLO*
schema with defaults, the target opset, and ``c.onnx`` which types ONNX
attributes from the ONNX schema) and the operation's inputs; it returns the
value(s) replacing the outputs or raises :class:`Refuse` with the reason.
HLO values carry static types, so translators read shapes freely.
"""

from __future__ import annotations

from ...attributes import decode_attributes
from ...ir import Node, Value
from ...schemas import dialect_schemas
from ...types import element_type
from ..openvino_to_onnx._common import Ctx as _OnnxCtx
from ..openvino_to_onnx._common import Rules as _OnnxRules
from ..openvino_to_onnx._common import INT64_MAX, INT64_MIN, const_ints, const_scalar
from ..rewrite import Builder, Refuse, Rule, constant_value, np_dtype

#: the lowest ai.onnx opset the rules target (axes inputs of Squeeze/Unsqueeze/ReduceSum, Split sizes input)
MIN_OPSET = 13


class Ctx(_OnnxCtx):
    """The OpenVINO -> ONNX translator context, with attributes decoded from the HLO schema."""

    def __init__(self, b: Builder, node: Node):  # noqa: super().__init__ decodes opset1 attributes
        self.b = b
        self.node = node
        self.opset: int = b.version
        schema = dialect_schemas("hlo").find(node.op, 1, "")
        self.a = decode_attributes(schema, node.attrs, node.label, strict=False)

    def out_type(self, index: int = 0):
        return self.node.outputs[index].type

    def out_shape(self, index: int = 0) -> tuple[int, ...]:
        return tuple(self.node.outputs[index].shape)

    def onnx_type(self, dtype: str) -> int:
        return element_type(dtype).onnx


def shape_of(v: Value) -> tuple[int, ...]:
    if v.shape is None or not all(isinstance(d, int) for d in v.shape):
        raise Refuse(f"the shape of {v.name!r} is not static ({v.type})")
    return tuple(v.shape)


class Rules(_OnnxRules):
    """An ordered list of rules, filled by the :meth:`op` decorator beside each translator of an HLO op."""

    def __init__(self):
        super().__init__(ctx=Ctx, domain="")

    def op_omitting(self, op: str, *layouts: str):
        """Register ``fn(c, *inputs)`` for ``op`` nodes that omit optional inputs before a given one (``None``).

        Each layout says, per input slot, given (``x``) or omitted (``-``): ``"x--x"`` matches Resize's
        input and sizes alone."""
        def wrap(fn):
            def replacement(b: Builder, m):
                return fn(self.ctx(b, m.root), *m.root.inputs)

            for layout in layouts:
                self.rules.append(Rule(f"{op}-to-onnx/{layout}", _omitting_pattern(op, layout, self.domain),
                                       replacement))
            return fn

        return wrap


def _omitting_pattern(op: str, layout: str, domain: str):
    """A one-node pattern for ``op`` with inputs given or omitted as ``layout`` says (see ``Rules.op_omitting``)."""
    def fn(p, *xs):
        given = iter(xs)
        return p.node(op, *[next(given) if slot == "x" else None for slot in layout], _domain=domain)

    fn.capture_names = [f"x{i}" for i, slot in enumerate(layout) if slot == "x"]
    fn.__name__ = op
    return fn


__all__ = ["MIN_OPSET", "INT64_MAX", "INT64_MIN", "Ctx", "Rules", "Refuse", "shape_of", "np_dtype", "const_ints",
           "const_scalar", "constant_value"]
