"""CTCLoss: the CTC forward (alpha) recursion in log space as a ``stablehlo.while`` over the time steps.

The reference kernel (:func:`opconv.kernels.norm.ctc_loss`) is followed step by step: the targets are
padded to ``(N, S)`` (a concatenated 1-D target is cut with the exclusive cumulative sum of the target
lengths; ``S`` is the width the declared ``alpha`` type gives), interleaved with blanks into the extended
labels ``(N, 2S + 1)``, and each time step adds the log-sum of staying, stepping one label on and skipping a
blank (onto a label unlike the one two back) to that step's emission.  Positions past a sequence's lengths
are ``-inf``; the loss is ``-log(alpha[last frame][2L] + alpha[last frame][2L - 1])``.
"""

from __future__ import annotations

import numpy as np

from ._writer import FunctionWriter, Operand, emitter, int_list, ints


def log_add(w: FunctionWriter, a: Operand, b: Operand) -> Operand:
    """log(exp(a) + exp(b)) as numpy's logaddexp: max + log1p(exp(-|a - b|)), -inf for two -inf."""
    top = w.binary("stablehlo.maximum", a, b)
    gap = w.unary("stablehlo.negate", w.unary("stablehlo.abs", w.sub(a, b)))
    gap = w.select(w.compare(a, b, "EQ"), w.full(0, gap), gap)  # equal infinities would give NaN
    return w.add(top, w.unary("stablehlo.log_plus_one", w.unary("stablehlo.exponential", gap)))


def _shift_right(w: FunctionWriter, x: Operand, k: int, fill) -> Operand:
    """x[:, s - k] along the last dim, ``fill`` where s < k."""
    n, width = x.shape
    head = w.constant(fill, x.dtype, [n, min(k, width)])
    return head if k >= width else w.concatenate([head, w.slice_axis(x, 1, 0, width - k)], 1)


def _padded_targets(w: FunctionWriter, targets: Operand, lengths: Operand, width: int, blank: int) -> Operand:
    """(N, width) int64 targets; a concatenated 1-D target is cut at the running sum of the lengths."""
    n = lengths.shape[0]
    if targets.rank == 2:
        if targets.shape != (n, width):
            raise w.error(f"targets {list(targets.shape)} do not match the (N, S) = ({n}, {width}) of alpha's type")
        return w.convert(targets, "int64")
    fill = w.constant(blank, "int64", [n, width])
    if targets.shape[0] == 0 or width == 0:
        return fill
    # starts[n] = sum of the lengths before n: a strictly lower-triangular mask times the lengths.
    before = w.compare(w.iota("int64", [n, n], 1), w.iota("int64", [n, n], 0), "LT")
    starts = w.sum(w.select(before, w.broadcast_to(lengths, [n, n], [1]), w.constant(0, "int64", [n, n])), [1])
    offsets = w.iota("int64", [n, width], 1)
    positions = w.add(w.broadcast_to(starts, [n, width], [0]), offsets)
    numbers = (
        "#stablehlo.gather<offset_dims = [], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>"
    )
    picked = w.op1(
        "stablehlo.gather",
        [w.convert(targets, "int64"), w.reshape(positions, [n, width, 1])],
        "int64",
        [n, width],
        {"dimension_numbers": numbers, "slice_sizes": ints([1]), "indices_are_sorted": "false"},
    )
    inside = w.compare(offsets, w.broadcast_to(lengths, [n, width], [0]), "LT")
    return w.select(inside, picked, fill)


def _extended_labels(w: FunctionWriter, padded: Operand, blank: int) -> Operand:
    """(N, 2S + 1): blank, target 0, blank, target 1, ..., blank."""
    n, width = padded.shape
    tail = w.constant(blank, "int64", [n, 1])
    if not width:
        return tail
    pairs = w.concatenate([w.constant(blank, "int64", [n, width, 1]), w.reshape(padded, [n, width, 1])], 2)
    return w.concatenate([w.reshape(pairs, [n, 2 * width]), tail], 1)


def _emissions(w: FunctionWriter, lp: Operand, ext: Operand) -> Operand:
    """(T, N, L) emit[t, n, s] = lp[t, n, ext[n, s]]: a gather of (n, ext[n, s]) pairs with time as offset."""
    steps, n, _ = lp.shape
    length = ext.shape[1]
    batch = w.iota("int64", [n, length, 1], 0)
    pairs = w.concatenate([batch, w.reshape(ext, [n, length, 1])], 2)
    numbers = (
        f"#stablehlo.gather<offset_dims = {int_list([2])}, collapsed_slice_dims = [1, 2], "
        f"start_index_map = [1, 2], index_vector_dim = 2>"
    )
    picked = w.op1(
        "stablehlo.gather",
        [lp, pairs],
        lp.dtype,
        [n, length, steps],
        {"dimension_numbers": numbers, "slice_sizes": ints([steps, 1, 1]), "indices_are_sorted": "false"},
    )
    return w.transpose(picked, [2, 0, 1])


def _row(w: FunctionWriter, table: Operand, index: Operand) -> Operand:
    """table[index] of a (T, N, L) table at a scalar int64 index: (N, L)."""
    zero = w.scalar(0, "int64")
    _, n, length = table.shape
    piece = w.op1(
        "stablehlo.dynamic_slice",
        [table, index, zero, zero],
        table.dtype,
        [1, n, length],
        {"slice_sizes": ints([1, n, length])},
    )
    return w.reshape(piece, [n, length])


def _pick_last(w: FunctionWriter, x: Operand, at: Operand) -> Operand:
    """x[..., at[...]] of x (..., K) by int64 ``at`` (...): the max of a one-hot mask, -inf where none matches."""
    mask = w.compare(w.iota("int64", x.shape, x.rank - 1), w.broadcast_to(at, x.shape, list(range(at.rank))), "EQ")
    return w.reduce_simple(w.select(mask, x, w.scalar(-np.inf, x.dtype)), [x.rank - 1], "stablehlo.maximum", -np.inf)


@emitter("CTCLoss")
def ctc_loss(w, log_probs, targets, input_lengths, target_lengths, *, blank):
    loss_dtype, _ = w.out(0)
    alpha_dtype, alpha_shape = w.out(1)
    unbatched = log_probs.rank == 2
    lp = w.convert(log_probs, "float32" if log_probs.dtype in ("float16", "bfloat16") else log_probs.dtype)
    if unbatched:
        lp = w.reshape(lp, [lp.shape[0], 1, lp.shape[1]])
    steps, n, _ = lp.shape
    length = alpha_shape[-1]
    if length % 2 == 0:
        raise w.error(f"alpha's last dim {length} is no 2 * target width + 1")
    width = (length - 1) // 2
    input_lengths = w.reshape(w.convert(input_lengths, "int64"), [n])
    target_lengths = w.reshape(w.convert(target_lengths, "int64"), [n])
    padded = _padded_targets(w, targets, target_lengths, width, blank)

    ext = _extended_labels(w, padded, blank)
    position = w.iota("int64", [n, length], 1)
    ends = w.add(w.mul(target_lengths, w.full(2, target_lengths)), w.full(1, target_lengths))
    valid = w.compare(position, w.broadcast_to(ends, [n, length], [0]), "LT")
    skip = w.binary(
        "stablehlo.and", w.compare(ext, w.full(blank, ext), "NE"), w.compare(ext, _shift_right(w, ext, 2, blank), "NE")
    )
    skip = w.binary("stablehlo.and", skip, w.compare(position, w.full(2, position), "GE"))
    dtype = lp.dtype
    minus_inf = w.scalar(-np.inf, dtype)

    if steps == 0:
        alpha = w.constant(-np.inf, dtype, [n, 0, length])
        loss = w.constant(np.inf, dtype, [n])
    else:
        emit = _emissions(w, lp, ext)  # (T, N, L)
        first = _row(w, emit, w.scalar(0, "int64"))
        opening = w.compare(position, w.full(0, position), "EQ")
        if width:
            second = w.binary(
                "stablehlo.and",
                w.compare(position, w.full(1, position), "EQ"),
                w.broadcast_to(w.compare(target_lengths, w.full(0, target_lengths), "GT"), [n, length], [0]),
            )
            opening = w.binary("stablehlo.or", opening, second)
        started = w.broadcast_to(w.compare(input_lengths, w.full(0, input_lengths), "GT"), [n, length], [0])
        start = w.select(
            w.binary("stablehlo.and", opening, w.binary("stablehlo.and", valid, started)), first, minus_inf
        )
        table = w.op1(
            "stablehlo.dynamic_update_slice",
            [
                w.constant(-np.inf, dtype, [steps, n, length]),
                w.reshape(start, [1, n, length]),
                w.scalar(0, "int64"),
                w.scalar(0, "int64"),
                w.scalar(0, "int64"),
            ],
            dtype,
            [steps, n, length],
        )
        table = _forward(w, emit, table, start, skip, valid, input_lengths)
        alpha = w.transpose(table, [1, 0, 2])  # (N, T, L)
        last = w.op1(
            "stablehlo.clamp",
            [w.scalar(0, "int64"), w.sub(input_lengths, w.full(1, input_lengths)), w.scalar(steps - 1, "int64")],
            "int64",
            [n],
        )
        final = _pick_last(w, w.transpose(alpha, [0, 2, 1]), last)  # alpha[n, last[n], :]  (N, L)
        end = w.mul(target_lengths, w.full(2, target_lengths))
        tail = _pick_last(w, final, end)
        before = _pick_last(w, final, w.sub(end, w.full(1, end)))  # -inf for an empty target (index -1)
        loss = w.unary("stablehlo.negate", log_add(w, tail, before))
    if unbatched:
        loss, alpha = w.reshape(loss, []), w.reshape(alpha, alpha.shape[1:])
    return w.convert(loss, loss_dtype), w.convert(alpha, alpha_dtype)


def _forward(
    w: FunctionWriter,
    emit: Operand,
    table: Operand,
    start: Operand,
    skip: Operand,
    valid: Operand,
    input_lengths: Operand,
) -> Operand:
    """The (T, N, L) alpha table: rows 1.. written by a stablehlo.while carrying (t, previous row, table);
    the loop-invariant operands are carried too, so the regions capture nothing."""
    steps, n, length = emit.shape
    dtype = emit.dtype
    carried = [w.scalar(1, "int64"), start, table, emit, skip, valid, input_lengths]
    params = [(c.dtype, c.shape) for c in carried]

    def cond(args):
        return [w.compare(args[0], w.scalar(steps, "int64"), "LT")]

    def body(args):
        t, prev, table, emit, skip, valid, input_lengths = args
        minus_inf = w.scalar(-np.inf, dtype)
        stepped = _shift_right(w, prev, 1, -np.inf)
        jumped = w.select(skip, _shift_right(w, prev, 2, -np.inf), minus_inf)
        total = w.add(log_add(w, log_add(w, prev, stepped), jumped), _row(w, emit, t))
        running = w.compare(w.broadcast_to(t, [n]), input_lengths, "LT")
        live = w.binary("stablehlo.and", valid, w.broadcast_to(running, [n, length], [0]))
        row = w.select(live, total, minus_inf)
        zero = w.scalar(0, "int64")
        table = w.op1(
            "stablehlo.dynamic_update_slice", [table, w.reshape(row, [1, n, length]), t, zero, zero], dtype, table.shape
        )
        return [w.add(t, w.scalar(1, "int64")), row, table, emit, skip, valid, input_lengths]

    regions = [w.region(params, cond), w.region(params, body)]
    return w.op("stablehlo.while", carried, params, None, regions)[2]
