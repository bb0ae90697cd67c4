"""ai.onnx.preview.training: the optimizers Adagrad, Adam, Momentum, and Gradient.

The optimizers update several tensors at once; their variadic input is
``X_1..X_n, G_1..G_n, <state_1>_1..<state_1>_n, ...`` and their output
``X_new_1..X_new_n, <state_1>_new_1..``.  Each update is computed in float64
from the pseudo code of the spec and cast back to the type of the tensor.

Gradient differentiates part of its own graph: the nodes between the
tensors named by ``xs``/``zs`` and the one named by ``y`` are re-run on the
Gradient node's inputs (in that order), then a reverse-mode pass applies the
vector-Jacobian product of each node, seeded with ones (so the result is the
gradient of ``sum(y)``).  Only ops listed in :data:`_VJP` can be differentiated.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....executor import ExecContext
from ..executor import onnx_op

_DOMAIN = "ai.onnx.preview.training"


def _split(inputs: tuple, groups: int, op: str) -> list[tuple]:
    """The variadic input cut into ``groups`` equal runs (tensors, gradients, states...)."""
    if not inputs or len(inputs) % groups:
        raise ExecutionError(f"{op} needs {groups} inputs per optimized tensor, got {len(inputs)} inputs")
    n = len(inputs) // groups
    return [tuple(np.asarray(t) for t in inputs[i * n : (i + 1) * n]) for i in range(groups)]


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


@onnx_op("Adagrad", since=1, domain=_DOMAIN)
def adagrad_1(ctx, R, T, *inputs, decay_factor, epsilon, norm_coefficient):
    xs, gs, hs = _split(inputs, 3, "Adagrad")
    r = float(R) / (1 + int(T) * decay_factor)
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        g_reg = norm_coefficient * _f64(x) + g
        h_new = h + g_reg * g_reg
        new_x.append((x - r * g_reg / (np.sqrt(h_new) + epsilon)).astype(x.dtype))
        new_h.append(h_new.astype(h.dtype))
    return tuple(new_x + new_h)


@onnx_op("Adam", since=1, domain=_DOMAIN)
def adam_1(ctx, R, T, *inputs, alpha, beta, epsilon, norm_coefficient, norm_coefficient_post):
    xs, gs, vs, hs = _split(inputs, 4, "Adam")
    t = int(T)
    # Bias correction of both running averages, folded into the learning rate (none before the first update).
    r = float(R) * np.sqrt(1 - beta**t) / (1 - alpha**t) if t > 0 else float(R)
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        g_reg = norm_coefficient * _f64(x) + g
        v_new = alpha * _f64(v) + (1 - alpha) * g_reg
        h_new = beta * _f64(h) + (1 - beta) * g_reg * g_reg
        x_new = x - r * v_new / (np.sqrt(h_new) + epsilon)
        new_x.append(((1 - norm_coefficient_post) * x_new).astype(x.dtype))
        new_v.append(v_new.astype(v.dtype))
        new_h.append(h_new.astype(h.dtype))
    return tuple(new_x + new_v + new_h)


@onnx_op("Momentum", since=1, domain=_DOMAIN)
def momentum_1(ctx, R, T, *inputs, alpha, beta, mode, norm_coefficient):
    if mode not in ("standard", "nesterov"):
        raise ExecutionError(f"mode must be 'standard' or 'nesterov', got {mode!r}")
    xs, gs, vs = _split(inputs, 3, "Momentum")
    r = float(R)
    beta_adjusted = beta if int(T) > 0 else 1.0  # the first update takes the whole gradient
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs):
        g_reg = norm_coefficient * _f64(x) + g
        v_new = alpha * _f64(v) + beta_adjusted * g_reg
        step = g_reg + alpha * v_new if mode == "nesterov" else v_new
        new_x.append((x - r * step).astype(x.dtype))
        new_v.append(v_new.astype(v.dtype))
    return tuple(new_x + new_v)


# -- Gradient -----------------------------------------------------------------------


def _unbroadcast(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum ``grad`` down to ``shape``: the adjoint of numpy broadcasting."""
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape)))) if grad.ndim > len(shape) else grad
    axes = tuple(i for i, (g, s) in enumerate(zip(grad.shape, shape)) if s == 1 and g != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def _matmul_vjp(g, a, b, y):
    # Promote 1-D operands the way matmul does, then undo the promotion on the gradients.
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g.reshape(np.matmul(a2, b2).shape)
    ga = np.matmul(g2, np.swapaxes(b2, -1, -2))
    gb = np.matmul(np.swapaxes(a2, -1, -2), g2)
    ga = ga.reshape(ga.shape[:-2] + (ga.shape[-1],)) if a.ndim == 1 else ga
    gb = gb[..., 0] if b.ndim == 1 else gb
    return _unbroadcast(ga, a.shape), _unbroadcast(gb, b.shape)


#: op -> fn(output gradient, inputs..., output) -> one gradient per input
_VJP = {
    "Identity": lambda g, x, y: (g,),
    "Neg": lambda g, x, y: (-g,),
    "Add": lambda g, a, b, y: (_unbroadcast(g, a.shape), _unbroadcast(g, b.shape)),
    "Sub": lambda g, a, b, y: (_unbroadcast(g, a.shape), _unbroadcast(-g, b.shape)),
    "Mul": lambda g, a, b, y: (_unbroadcast(g * b, a.shape), _unbroadcast(g * a, b.shape)),
    "Div": lambda g, a, b, y: (_unbroadcast(g / b, a.shape), _unbroadcast(-g * a / (b * b), b.shape)),
    "MatMul": _matmul_vjp,
    "Relu": lambda g, x, y: (g * (x > 0),),
    "Tanh": lambda g, x, y: (g * (1 - y * y),),
    "Sigmoid": lambda g, x, y: (g * y * (1 - y),),
    "Exp": lambda g, x, y: (g * y,),
    "Log": lambda g, x, y: (g / x,),
    "Sqrt": lambda g, x, y: (g / (2 * y),),
}


def _forward_nodes(graph, y_value, leaves: set[int]) -> list:
    """The nodes ``y`` depends on, stopping at ``leaves`` (value ids), in graph order."""
    needed, stack = set(), [y_value]
    while stack:
        v = stack.pop()
        node = v.producer
        if id(v) in leaves or node is None or id(node) in needed:
            continue
        needed.add(id(node))
        stack.extend(i for i in node.inputs if i is not None)
    return [n for n in graph.nodes if id(n) in needed]


@onnx_op("Gradient", since=1, domain=_DOMAIN)
def gradient_1(ctx, *inputs, xs, y, zs):
    names = list(xs) + list(zs or [])
    if len(inputs) != len(names):
        raise ExecutionError(f"Gradient takes one input per name in xs and zs ({len(names)}), got {len(inputs)}")
    graph = ctx.node.graph
    by_name = {v.name: v for v in graph.values()}
    missing = [n for n in [*names, y] if n not in by_name]
    if missing:
        raise ExecutionError(f"Gradient names tensors not in its graph: {', '.join(missing)}")
    values: dict[int, np.ndarray] = {id(by_name[n]): np.asarray(x) for n, x in zip(names, inputs)}

    # Forward: re-run the nodes between xs/zs and y on the Gradient's inputs. Values outside
    # that cone (initializers, outer-scope values) come from the running graph's scope.
    nodes = _forward_nodes(graph, by_name[y], set(values))
    varying = {id(by_name[n]) for n in xs}  # values that depend on some x
    for node in nodes:
        args = [_value(v, values, ctx) for v in node.inputs]
        bound = ctx.interpreter.binder(node, ctx.interpreter)
        out = bound.fn(ExecContext(ctx.interpreter, node, ctx.env), *args, **bound.attrs)
        for v, data in zip(node.outputs, out if len(node.outputs) > 1 else (out,)):
            if v is not None:
                values[id(v)] = np.asarray(data)
        if any(id(v) in varying for v in node.inputs if v is not None):
            if node.op not in _VJP or node.domain not in ("", "ai.onnx"):
                raise ExecutionError(f"Gradient cannot differentiate {node.op} (supported: {', '.join(sorted(_VJP))})")
            varying.add(id(node.outputs[0]))

    # Backward: accumulate d(sum y)/dv from y back to the xs, through the nodes that depend on an x.
    y_value = _value(by_name[y], values, ctx)
    grads: dict[int, np.ndarray] = {id(by_name[y]): np.ones(np.shape(y_value), dtype=np.float64)}
    for node in reversed(nodes):
        g = grads.get(id(node.outputs[0]))
        if g is None or id(node.outputs[0]) not in varying:
            continue
        args = [_value(v, values, ctx) for v in node.inputs]
        for v, gi in zip(node.inputs, _VJP[node.op](g, *args, values[id(node.outputs[0])])):
            grads[id(v)] = grads[id(v)] + gi if id(v) in grads else gi
    results = []
    for n in xs:
        x = values[id(by_name[n])]
        g = grads.get(id(by_name[n]), np.zeros(x.shape))  # y does not depend on this x
        results.append(np.broadcast_to(g, x.shape).astype(x.dtype))
    return results[0] if len(results) == 1 else tuple(results)


def _value(v, values: dict, ctx) -> np.ndarray:
    if id(v) in values:
        return values[id(v)]
    if v.const is not None:
        return v.const.numpy()
    try:
        return ctx.env[id(v)]
    except KeyError:
        raise ExecutionError(f"Gradient needs {v.name!r}, which is neither in xs/zs nor a constant") from None
