"""Sequence decoding: CTCGreedyDecoder and GatherTree."""

from __future__ import annotations

import numpy as np

from ..executor import ov_op


@ov_op("CTCGreedyDecoder")
def ctc_greedy_decoder(ctx, data, sequence_mask, *, ctc_merge_repeated=True):
    """``data`` ``(T, N, C)`` -> ``(N, T, 1, 1)`` class ids, -1 padded; the last class is the blank."""
    steps, batch, classes = data.shape
    best = np.asarray(data).argmax(axis=2)  # (T, N)
    out = np.full((batch, steps, 1, 1), -1, dtype=data.dtype)
    for n in range(batch):
        decoded, previous = [], -1
        for t in range(steps):
            if not sequence_mask[t, n]:
                break  # the mask marks where each sequence ends
            label = int(best[t, n])
            if label != classes - 1 and not (ctc_merge_repeated and label == previous):
                decoded.append(label)
            previous = label
        out[n, : len(decoded), 0, 0] = decoded
    return out


@ov_op("GatherTree")
def gather_tree(ctx, step_ids, parent_idx, max_seq_len, end_token):
    """Beam-search back-tracking: the full beams from per-step ids and parent pointers ``(T, B, W)``."""
    steps, batch, beams = step_ids.shape
    end = np.asarray(end_token).reshape(()).astype(step_ids.dtype)
    out = np.full_like(step_ids, end)
    lengths = np.asarray(max_seq_len).reshape(-1)
    for b in range(batch):
        length = min(int(lengths[b]), steps)
        for beam in range(beams):
            parent = beam
            for t in range(length - 1, -1, -1):
                out[t, b, beam] = step_ids[t, b, parent]
                parent = int(parent_idx[t, b, parent])
            # Everything after the first end token is end tokens.
            hits = np.flatnonzero(out[:length, b, beam] == end)
            if hits.size:
                out[hits[0] : length, b, beam] = end
    return out
