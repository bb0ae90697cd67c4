"""Control flow: If, Loop, Scan, SequenceMap.

Bodies and branches are Graph attributes run through ``ctx.run_graph``, which
binds the subgraph's inputs positionally and resolves outer-scope names from
the enclosing graph, so a body may read any value computed before the node.

Values flowing through a body may be tensors, sequences (lists) or optionals
(``None`` when empty); loop-carried values are passed along untouched, so all
three kinds work as carried state.  Per-iteration (scan) outputs are stacked
along a new leading axis.  When a loop runs zero iterations there is nothing
to stack; the empty result then takes its element type and trailing shape
from the body's declared output type.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels._common import normalize_axis
from ....types import TensorType, element_type
from ..executor import onnx_op


def _results(outputs: list):
    # One output is returned bare: a single sequence output is itself a list.
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _single(x, what: str) -> np.ndarray:
    # Scalars by the spec, but exporters also emit [1]-shaped tensors: accept any one-element tensor.
    x = np.asarray(x)
    if x.size != 1:
        raise ExecutionError(f"{what} must hold a single element, got shape {list(x.shape)}")
    return x.reshape(())


def _scalar_bool(x, what: str) -> bool:
    return bool(_single(x, what))


def _stack(elements: list, declared, what: str) -> np.ndarray:
    """Per-iteration values stacked on a new axis 0; an empty stack shaped from the body's declared type."""
    if elements:
        shapes = {np.shape(e) for e in elements}
        if len(shapes) > 1:
            raise ExecutionError(f"{what} changes shape across iterations: {sorted(map(list, shapes))}")
        return np.stack(elements)
    t = declared.type
    if not isinstance(t, TensorType) or t.dtype is None:
        raise ExecutionError(f"{what}: zero iterations and the body declares no tensor type to shape the result")
    dims = [d if isinstance(d, int) else 0 for d in (t.shape or ())]
    return np.zeros([0, *dims], dtype=element_type(t.dtype).numpy)


# -- If -----------------------------------------------------------------------


@onnx_op("If", since=[1, 11, 13, 16, 19, 21, 23, 24, 25])
def if_1(ctx, cond, *, then_branch, else_branch):
    # The versions differ only in the value types a branch may return (sequences, optionals, new dtypes).
    branch = then_branch if _scalar_bool(cond, "If condition") else else_branch
    return _results(ctx.run_graph(branch, []))


# -- Loop ---------------------------------------------------------------------


@onnx_op("Loop", since=[1, 11, 13, 16, 19, 21, 23, 24, 25])
def loop_1(ctx, M=None, cond=None, *v_initial, body):
    """for (i = 0; i < M && cond; ++i) { cond, v..., scan... = body(i, cond, v...) }.

    Later versions only widened the types a carried value may have (sequences in 13, optionals in 16).
    Without ``cond`` the body's condition output is ignored (a plain for loop); without ``M`` the
    loop runs until the condition turns false.
    """
    n_carried = len(v_initial)
    n_scan = len(body.outputs) - 1 - n_carried
    if n_scan < 0:
        raise ExecutionError(
            f"the body returns {len(body.outputs)} values, fewer than 1 + {n_carried} loop-carried values"
        )
    if M is None and cond is None:
        raise ExecutionError("Loop without trip count M and without cond never terminates")
    trip_count = None if M is None else int(_single(M, "Loop trip count M"))
    keep_going = True if cond is None else _scalar_bool(cond, "Loop cond")
    carried = list(v_initial)
    scans: list[list] = [[] for _ in range(n_scan)]
    i = 0
    while keep_going and (trip_count is None or i < trip_count):
        outs = ctx.run_graph(body, [np.array(i, dtype=np.int64), np.array(keep_going), *carried])
        if cond is not None:
            keep_going = _scalar_bool(outs[0], "Loop body condition")
        carried = outs[1 : 1 + n_carried]
        for acc, value in zip(scans, outs[1 + n_carried :]):
            acc.append(value)
        i += 1
    stacked = [_stack(acc, body.outputs[1 + n_carried + k], f"Loop scan output {k}") for k, acc in enumerate(scans)]
    return _results(carried + stacked)


# -- Scan ---------------------------------------------------------------------


@onnx_op("Scan", since=8)
def scan_8(ctx, sequence_lens=None, *initial_state_and_scan_inputs, body, directions, num_scan_inputs):
    """Scan-8: axis 0 of every state and scan input is a batch axis, axis 1 of scan inputs is scanned.

    Each batch entry runs its own loop of ``sequence_lens[b]`` steps (default: the full length); scan
    outputs are padded with zeros up to the maximum length.
    """
    n_state = len(initial_state_and_scan_inputs) - num_scan_inputs
    if n_state < 0 or num_scan_inputs < 1:
        raise ExecutionError(
            f"num_scan_inputs={num_scan_inputs} does not fit {len(initial_state_and_scan_inputs)} state and scan inputs"
        )
    states = [np.asarray(s) for s in initial_state_and_scan_inputs[:n_state]]
    scan_inputs = [np.asarray(x) for x in initial_state_and_scan_inputs[n_state:]]
    batch, max_len = scan_inputs[0].shape[:2]
    if any(x.shape[:2] != (batch, max_len) for x in scan_inputs):
        raise ExecutionError(f"scan inputs disagree on [batch, sequence] dims: {[list(x.shape) for x in scan_inputs]}")
    reverse = [bool(d) for d in (directions or [0] * num_scan_inputs)]
    lengths = np.full(batch, max_len, np.int64) if sequence_lens is None else np.asarray(sequence_lens, np.int64)
    if lengths.shape != (batch,) or (lengths < 0).any() or (lengths > max_len).any():
        raise ExecutionError(f"sequence_lens {lengths.tolist()} does not fit batch {batch} and length {max_len}")

    final_states, scan_outputs = [], []
    for b in range(batch):
        carried = [s[b] for s in states]
        steps: list[list] = [[] for _ in range(len(body.outputs) - n_state)]
        n = int(lengths[b])
        for t in range(n):
            elements = [x[b, n - 1 - t] if rev else x[b, t] for x, rev in zip(scan_inputs, reverse)]
            outs = ctx.run_graph(body, carried + elements)
            carried = outs[:n_state]
            for acc, value in zip(steps, outs[n_state:]):
                acc.append(value)
        final_states.append(carried)
        per_batch = []
        for k, acc in enumerate(steps):
            out = _stack(acc, body.outputs[n_state + k], f"Scan output {k}")
            pad = [(0, max_len - n)] + [(0, 0)] * (out.ndim - 1)
            per_batch.append(np.pad(out, pad))
        scan_outputs.append(per_batch)
    states_out = [np.stack([fs[i] for fs in final_states]) for i in range(n_state)]
    outs = [np.stack([so[k] for so in scan_outputs]) for k in range(len(body.outputs) - n_state)]
    return _results(states_out + outs)


@onnx_op("Scan", since=[9, 11, 16, 19, 21, 23, 24, 25])
def scan_9(
    ctx,
    *initial_state_and_scan_inputs,
    body,
    num_scan_inputs,
    scan_input_axes,
    scan_input_directions,
    scan_output_axes,
    scan_output_directions,
):
    """Scan-9+: no batch axis; each scan input is scanned along its own axis and direction.

    Scan outputs are stacked per iteration, reversed when prepended, then moved to their output axis.
    """
    n_state = len(initial_state_and_scan_inputs) - num_scan_inputs
    if n_state < 0 or num_scan_inputs < 1:
        raise ExecutionError(
            f"num_scan_inputs={num_scan_inputs} does not fit {len(initial_state_and_scan_inputs)} state and scan inputs"
        )
    n_out = len(body.outputs) - n_state
    carried = list(initial_state_and_scan_inputs[:n_state])
    in_axes = scan_input_axes or [0] * num_scan_inputs
    in_reverse = scan_input_directions or [0] * num_scan_inputs
    # Each scan input with its scanned axis moved to the front and reversed if scanned backwards.
    sequences = []
    for x, axis, rev in zip(initial_state_and_scan_inputs[n_state:], in_axes, in_reverse):
        x = np.moveaxis(np.asarray(x), normalize_axis(axis, np.ndim(x)), 0)
        sequences.append(x[::-1] if rev else x)
    length = sequences[0].shape[0]
    if any(x.shape[0] != length for x in sequences):
        raise ExecutionError(f"scan inputs have different sequence lengths: {[x.shape[0] for x in sequences]}")

    steps: list[list] = [[] for _ in range(n_out)]
    for t in range(length):
        outs = ctx.run_graph(body, carried + [x[t] for x in sequences])
        carried = outs[:n_state]
        for acc, value in zip(steps, outs[n_state:]):
            acc.append(value)

    out_axes = scan_output_axes or [0] * n_out
    out_reverse = scan_output_directions or [0] * n_out
    scan_outputs = []
    for k, (acc, axis, rev) in enumerate(zip(steps, out_axes, out_reverse)):
        out = _stack(acc, body.outputs[n_state + k], f"Scan output {k}")
        out = out[::-1] if rev else out
        scan_outputs.append(np.moveaxis(out, 0, normalize_axis(axis, out.ndim)))
    return _results(carried + scan_outputs)


# -- SequenceMap ----------------------------------------------------------------


@onnx_op("SequenceMap", since=17)
def sequence_map_17(ctx, input_sequence, *additional_inputs, body):
    """Runs ``body`` once per element of ``input_sequence``; sequence inputs advance together, tensors repeat."""
    if not isinstance(input_sequence, list):
        raise ExecutionError("SequenceMap's first input must be a sequence")
    n = len(input_sequence)
    for extra in additional_inputs:
        if isinstance(extra, list) and len(extra) != n:
            raise ExecutionError(f"additional sequence input has {len(extra)} elements, the first has {n}")
    outputs: list[list] = [[] for _ in body.outputs]
    for i in range(n):
        args = [input_sequence[i]] + [x[i] if isinstance(x, list) else x for x in additional_inputs]
        for acc, value in zip(outputs, ctx.run_graph(body, args)):
            acc.append(value)
    return _results(outputs)
