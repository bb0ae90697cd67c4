"""ONNX Runtime's text generation loops (com.microsoft): GreedySearch for decoder-only models (GPT-2 style).

The ``decoder`` subgraph maps ``(input_ids, position_ids, attention_mask, past_0..past_{L-1})``
(int32 ids, positions and mask; pasts ``(2, B, N, P, H)``) to ``(logits, present_0..)``.  The first
call takes the prompt with empty pasts; each later call the last chosen token, its position, the
mask grown by one and the previous presents.  A prompt's pad tokens are masked out and take
position 0; the other tokens count positions from 0.

Each step scores the last position's logits: ``repetition_penalty`` divides the positive (and
multiplies the negative) scores of tokens already in the sequence, ``no_repeat_ngram_size`` bans
tokens that would repeat an n-gram, ``vocab_mask`` (and on the first step ``prefix_vocab_mask``)
bans the tokens it zeroes, and the end-of-sequence token is banned below ``min_length``.  The
best-scoring token (the first on ties) is appended; the end-of-sequence token itself and everything
after it are written as ``pad_token_id``.  Generation stops when every sequence has ended or at
``max_length``; the result is always ``(B, max_length)``, padded.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ..executor import onnx_op
from .contrib_misc import ngram_repeat_block

MS = "com.microsoft"


def _scalar(x, default):
    return default if x is None else np.asarray(x).reshape(-1)[0].item()


def _empty_pasts(decoder, batch: int) -> list[np.ndarray]:
    pasts = []
    for value in decoder.inputs[3:]:
        shape = value.shape
        if shape is None or len(shape) != 5 or not all(isinstance(d, int) for d in (shape[2], shape[4])):
            raise ExecutionError(f"the decoder's past input {value.name!r} needs a static (2, B, N, P, H) shape "
                                 f"with N and H known")
        pasts.append(np.zeros((2, batch, shape[2], 0, shape[4]), np.float32))
    return pasts


def _scores(logits, sequences, step: int, *, min_length, eos_token_id, repetition_penalty, no_repeat_ngram_size,
            vocab_mask, prefix_vocab_mask):
    scores = np.array(logits, np.float32, copy=True)
    if repetition_penalty != 1.0:
        for b, row in enumerate(sequences):
            seen = np.unique(row)
            scores[b, seen] = np.where(scores[b, seen] > 0, scores[b, seen] / repetition_penalty,
                                       scores[b, seen] * repetition_penalty)
    if no_repeat_ngram_size:
        scores = ngram_repeat_block(None, sequences.astype(np.int64), scores, ngram_size=no_repeat_ngram_size)
    if vocab_mask is not None:
        scores[:, np.asarray(vocab_mask).reshape(-1) == 0] = -np.inf
    if prefix_vocab_mask is not None and step == 0:
        scores[np.asarray(prefix_vocab_mask) == 0] = -np.inf
    if sequences.shape[1] < min_length:
        scores[:, eos_token_id] = -np.inf
    return scores


@onnx_op("GreedySearch", since=1, domain=MS)
def greedy_search(ctx, input_ids, max_length, min_length=None, repetition_penalty=None, vocab_mask=None,
                  prefix_vocab_mask=None, attention_mask=None, *, decoder, decoder_start_token_id, encoder,
                  eos_token_id, init_decoder, model_type, no_repeat_ngram_size, pad_token_id, vocab_size):
    if model_type or encoder is not None:
        raise ExecutionError("GreedySearch of encoder-decoder models (model_type=1) is not supported by opconv's "
                             "kernel; decoder-only (GPT-2 style) models are")
    sequences = np.asarray(input_ids).astype(np.int32)
    batch, prompt = sequences.shape
    present = sequences != pad_token_id
    mask = present.astype(np.int32) if attention_mask is None else np.asarray(attention_mask).astype(np.int32)
    positions = np.where(present, np.cumsum(present, axis=1) - 1, 0).astype(np.int32)
    next_position = present.sum(axis=1).astype(np.int32)
    limits = {"min_length": int(_scalar(min_length, 0)), "eos_token_id": eos_token_id,
              "repetition_penalty": float(_scalar(repetition_penalty, 1.0)),
              "no_repeat_ngram_size": no_repeat_ngram_size, "vocab_mask": vocab_mask,
              "prefix_vocab_mask": prefix_vocab_mask}
    feeds, pasts = sequences, _empty_pasts(decoder, batch)
    finished = np.zeros(batch, bool)
    total = int(_scalar(max_length, prompt))
    for step in range(total - prompt):
        graph = init_decoder if step == 0 and init_decoder is not None else decoder
        logits, *pasts = ctx.run_graph(graph, [feeds, positions, mask, *pasts])
        scores = _scores(np.asarray(logits)[:, -1, :], sequences, step, **limits)
        chosen = np.argmax(scores, axis=-1).astype(np.int32)
        finished |= chosen == eos_token_id
        chosen[finished] = pad_token_id  # the end token itself is not written
        sequences = np.concatenate([sequences, chosen[:, None]], axis=1)
        if finished.all():
            break
        feeds, positions = chosen[:, None], next_position[:, None].copy()
        next_position += 1
        mask = np.concatenate([mask, np.ones((batch, 1), np.int32)], axis=1)
    padding = np.full((batch, total - sequences.shape[1]), pad_token_id, np.int32)
    return np.concatenate([sequences, padding], axis=1)
