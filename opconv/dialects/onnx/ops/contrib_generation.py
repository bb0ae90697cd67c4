"""ONNX Runtime's text generation loops (com.microsoft): GreedySearch, Sampling and BeamSearch for decoder-only
(GPT-2 style) models, and WhisperBeamSearch for Whisper's encoder-decoder (described at its kernel below).

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
            raise ExecutionError(
                f"the decoder's past input {value.name!r} needs a static (2, B, N, P, H) shape with N and H known"
            )
        pasts.append(np.zeros((2, batch, shape[2], 0, shape[4]), np.float32))
    return pasts


def _scores(
    logits,
    sequences,
    step: int,
    *,
    min_length,
    eos_token_id,
    repetition_penalty,
    no_repeat_ngram_size,
    vocab_mask,
    prefix_vocab_mask,
):
    scores = np.array(logits, np.float32, copy=True)
    if repetition_penalty != 1.0:
        for b, row in enumerate(sequences):
            seen = np.unique(row)
            scores[b, seen] = np.where(
                scores[b, seen] > 0, scores[b, seen] / repetition_penalty, scores[b, seen] * repetition_penalty
            )
    if no_repeat_ngram_size:
        scores = ngram_repeat_block(None, sequences.astype(np.int64), scores, ngram_size=no_repeat_ngram_size)
    if vocab_mask is not None:
        scores[:, np.asarray(vocab_mask).reshape(-1) == 0] = -np.inf
    if prefix_vocab_mask is not None and step == 0:
        scores[np.asarray(prefix_vocab_mask) == 0] = -np.inf
    if sequences.shape[1] < min_length:
        scores[:, eos_token_id] = -np.inf
    return scores


def _decoder_only(op: str, model_type, encoder) -> None:
    if model_type or encoder is not None:
        raise ExecutionError(
            f"{op} of encoder-decoder models (model_type=1) is not supported by opconv's kernel; "
            "decoder-only (GPT-2 style) models are"
        )


def _limits(
    min_length, repetition_penalty, vocab_mask, prefix_vocab_mask, *, eos_token_id, no_repeat_ngram_size
) -> dict:
    return {
        "min_length": int(_scalar(min_length, 0)),
        "eos_token_id": eos_token_id,
        "repetition_penalty": float(_scalar(repetition_penalty, 1.0)),
        "no_repeat_ngram_size": no_repeat_ngram_size,
        "vocab_mask": vocab_mask,
        "prefix_vocab_mask": prefix_vocab_mask,
    }


def _generate(ctx, input_ids, max_length, attention_mask, decoder, init_decoder, *, eos_token_id, pad_token_id, choose):
    """The one-sequence-per-prompt loop of GreedySearch and Sampling: ``choose(last logits, sequences, step)``
    picks each step's tokens."""
    sequences = np.asarray(input_ids).astype(np.int32)
    batch, prompt = sequences.shape
    present = sequences != pad_token_id
    mask = present.astype(np.int32) if attention_mask is None else np.asarray(attention_mask).astype(np.int32)
    positions = np.where(present, np.cumsum(present, axis=1) - 1, 0).astype(np.int32)
    next_position = present.sum(axis=1).astype(np.int32)
    feeds, pasts = sequences, _empty_pasts(decoder, batch)
    finished = np.zeros(batch, bool)
    total = int(_scalar(max_length, prompt))
    for step in range(total - prompt):
        graph = init_decoder if step == 0 and init_decoder is not None else decoder
        logits, *pasts = ctx.run_graph(graph, [feeds, positions, mask, *pasts])
        chosen = np.asarray(choose(np.asarray(logits)[:, -1, :], sequences, step)).astype(np.int32)
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


@onnx_op("GreedySearch", since=1, domain=MS)
def greedy_search(
    ctx,
    input_ids,
    max_length,
    min_length=None,
    repetition_penalty=None,
    vocab_mask=None,
    prefix_vocab_mask=None,
    attention_mask=None,
    *,
    decoder,
    decoder_start_token_id,
    encoder,
    eos_token_id,
    init_decoder,
    model_type,
    no_repeat_ngram_size,
    pad_token_id,
    vocab_size,
):
    _decoder_only("GreedySearch", model_type, encoder)
    limits = _limits(
        min_length,
        repetition_penalty,
        vocab_mask,
        prefix_vocab_mask,
        eos_token_id=eos_token_id,
        no_repeat_ngram_size=no_repeat_ngram_size,
    )

    def best(last, sequences, step):
        return np.argmax(_scores(last, sequences, step, **limits), axis=-1)

    return _generate(
        ctx,
        input_ids,
        max_length,
        attention_mask,
        decoder,
        init_decoder,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        choose=best,
    )


# ---------------------------------------------------------------- Sampling
#
# GreedySearch's loop and processors, then ``temperature`` divides the scores and the presence penalty is
# subtracted (as onnxruntime does it: the whole of ``sum(presence_mask) * presence_penalty`` from the first score
# of the first row); top-p keeps the tokens whose softmax mass above them (in descending order) is
# below ``top_p`` -- onnxruntime accumulates from the least likely token and drops each whose running mass is
# <= 1 - top_p, sparing the ``min_tokens_to_keep`` most likely -- writing ``filter_value`` over the others; the
# token is drawn from the softmax of what remains.  The draw uses numpy's generator (seeded by ``seed``, else by
# the run), not onnxruntime's std::default_random_engine: sequences are the same as onnxruntime's only where one
# token survives the filter; ``filtered_logits`` (the last step's filtered scores) are the same whenever the
# sequences are.


def top_p_filter(
    scores: np.ndarray, top_p: float, min_tokens_to_keep: int, filter_value: float, custom: bool = False
) -> np.ndarray:
    """``scores`` (B, V) with every token outside the top-p set replaced by ``filter_value``.

    With ``custom`` (onnxruntime's other filter) the mass runs from the most likely token and a token is dropped
    when the mass of the tokens before it exceeds ``top_p``; ``min_tokens_to_keep`` plays no part.
    """
    order = np.argsort(-scores if custom else scores, axis=-1, kind="stable")
    ranked = np.take_along_axis(scores, order, axis=-1)
    probs = np.exp(ranked - ranked.max(axis=-1, keepdims=True))
    running = np.cumsum(probs / probs.sum(axis=-1, keepdims=True), axis=-1, dtype=np.float32)
    if custom:
        drop = np.zeros_like(running, dtype=bool)
        drop[:, 1:] = running[:, :-1] > np.float32(top_p)
    else:
        drop = running <= np.float32(1 - top_p)
        drop[:, scores.shape[1] - min_tokens_to_keep :] = False
    out = scores.copy()
    np.put_along_axis(out, order, np.where(drop, np.float32(filter_value), ranked), axis=-1)
    return out


@onnx_op("Sampling", since=1, domain=MS)
def sampling(
    ctx,
    input_ids,
    max_length,
    min_length=None,
    repetition_penalty=None,
    vocab_mask=None,
    prefix_vocab_mask=None,
    attention_mask=None,
    presence_mask=None,
    seed=None,
    *,
    custom,
    decoder,
    decoder_start_token_id,
    encoder,
    eos_token_id,
    filter_value,
    init_decoder,
    min_tokens_to_keep,
    model_type,
    no_repeat_ngram_size,
    pad_token_id,
    presence_penalty,
    temperature,
    top_p,
    vocab_size,
):
    _decoder_only("Sampling", model_type, encoder)
    limits = _limits(
        min_length,
        repetition_penalty,
        vocab_mask,
        prefix_vocab_mask,
        eos_token_id=eos_token_id,
        no_repeat_ngram_size=no_repeat_ngram_size,
    )
    rng = ctx.rng() if seed is None else np.random.default_rng(int(_scalar(seed, 0)))
    filtered = []

    def draw(last, sequences, step):
        scores = _scores(last, sequences, step, **limits)
        scores[np.isneginf(scores)] = np.finfo(np.float32).min  # onnxruntime masks with the lowest float
        if temperature > 0:
            with np.errstate(over="ignore"):  # a masked (lowest) score may overflow to -inf, as in onnxruntime
                scores = scores / np.float32(temperature)
        if presence_mask is not None and presence_penalty != 0:
            # onnxruntime's presence processor never advances its pointer: every entry's penalty lands on the
            # first score of the batch
            penalty = np.asarray(presence_mask).astype(np.float32).sum() * np.float32(presence_penalty)
            scores[0, 0] -= np.float32(penalty)
        scores = top_p_filter(scores.astype(np.float32), top_p, min_tokens_to_keep, filter_value, bool(custom))
        filtered[:] = [scores]
        probs = np.exp(scores.astype(np.float64) - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        return [rng.choice(len(row), p=row) for row in probs]

    sequences = _generate(
        ctx,
        input_ids,
        max_length,
        attention_mask,
        decoder,
        init_decoder,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        choose=draw,
    )
    return sequences, (filtered[0] if filtered else None)


# ---------------------------------------------------------------- BeamSearch
#
# num_beams copies of each prompt run through the decoder together.  A step takes the log-softmax of the last
# logits, applies the same processors as GreedySearch, adds each beam's running score (every beam but the first
# starts at -1e9 so the first step does not pick duplicates) and ranks the 2 * num_beams best (beam, token)
# continuations per prompt.  In rank order, an end token ranked within the first num_beams closes a hypothesis
# (the beam's sequence without it, scored sum / length ** length_penalty); other tokens continue a beam until
# num_beams are found.  A prompt is done with num_beams hypotheses once early_stopping is set, or when its best
# open beam cannot beat the worst kept hypothesis.  At the end the open beams join the hypotheses, and the
# num_return_sequences best are returned, padded to max_length.


class _Hypotheses:
    def __init__(self, beams: int, length_penalty: float, early_stopping: bool):
        self.beams, self.length_penalty, self.early_stopping = beams, length_penalty, early_stopping
        self.kept: list[tuple[float, np.ndarray]] = []

    def add(self, tokens: np.ndarray, total: float) -> None:
        score = total / (len(tokens) ** self.length_penalty)
        if len(self.kept) < self.beams or score > self.worst():
            self.kept.append((score, tokens))
            if len(self.kept) > self.beams:
                self.kept.remove(min(self.kept, key=lambda kept: kept[0]))

    def worst(self) -> float:
        return min(score for score, _ in self.kept) if self.kept else 1e9

    def done(self, best_total: float, length: int) -> bool:
        if len(self.kept) < self.beams:
            return False
        return self.early_stopping or self.worst() >= best_total / (length**self.length_penalty)


class _Beams:
    """The beam bookkeeping of BeamSearch and WhisperBeamSearch: ``sequences`` (batch * beams, length), each beam's
    running score, each prompt's hypotheses; ``advance`` picks the next tokens from a step's processed scores."""

    def __init__(self, prompts: np.ndarray, beams: int, *, length_penalty, early_stopping, eos_token_id, pad_token_id):
        self.batch, self.beams = prompts.shape[0], beams
        self.eos_token_id, self.pad_token_id = eos_token_id, pad_token_id
        self.sequences = np.repeat(prompts.astype(np.int32), beams, axis=0)
        self.scores = np.tile(np.array([0.0] + [-1e9] * (beams - 1), np.float32), self.batch)
        self.hypotheses = [
            _Hypotheses(beams, float(_scalar(length_penalty, 1.0)), bool(early_stopping)) for _ in range(self.batch)
        ]
        self.done = np.zeros(self.batch, bool)

    def advance(self, scores: np.ndarray) -> np.ndarray:
        """Append each beam's next token given ``scores`` (batch * beams, vocab) that already include the running
        scores; returns the global index of the beam each new beam continues (to reorder caches by)."""
        beams, vocab = self.beams, scores.shape[1]
        flat = scores.reshape(self.batch, beams * vocab)
        ranked = np.argsort(-flat, axis=1, kind="stable")[:, : 2 * beams]
        chosen_beam, chosen_token, chosen_score = [], [], []
        for b in range(self.batch):
            picks = []
            if self.done[b]:
                picks = [(b * beams, self.pad_token_id, 0.0)] * beams
            else:
                for rank, index in enumerate(ranked[b]):
                    beam, token, score = b * beams + index // vocab, index % vocab, float(flat[b, index])
                    if token == self.eos_token_id:
                        if rank < beams:
                            self.hypotheses[b].add(self.sequences[beam].copy(), score)
                    else:
                        picks.append((beam, token, score))
                    if len(picks) == beams:
                        break
                self.done[b] = self.hypotheses[b].done(float(flat[b, ranked[b, 0]]), self.sequences.shape[1])
            chosen_beam += [p[0] for p in picks]
            chosen_token += [p[1] for p in picks]
            chosen_score += [p[2] for p in picks]
        order = np.array(chosen_beam)
        self.scores = np.array(chosen_score, np.float32)
        self.sequences = np.concatenate([self.sequences[order], np.array(chosen_token, np.int32)[:, None]], axis=1)
        return order

    def best(self, returned: int, total: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``returned`` best hypotheses of each prompt padded to ``total`` tokens, and their scores; the open
        beams of an unfinished prompt join its hypotheses first."""
        out = np.full((self.batch, returned, total), self.pad_token_id, np.int32)
        out_scores = np.zeros((self.batch, returned), np.float32)
        for b in range(self.batch):
            if not self.done[b]:
                for beam in range(b * self.beams, (b + 1) * self.beams):
                    self.hypotheses[b].add(self.sequences[beam].copy(), float(self.scores[beam]))
            best = sorted(self.hypotheses[b].kept, key=lambda kept: -kept[0])[:returned]
            for r, (score, tokens) in enumerate(best):
                out[b, r, : len(tokens)] = tokens
                out_scores[b, r] = score
        return out, out_scores


def _log_softmax(last: np.ndarray) -> np.ndarray:
    shifted = np.asarray(last, np.float32) - np.max(last, axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@onnx_op("BeamSearch", since=1, domain=MS)
def beam_search(
    ctx,
    input_ids,
    max_length,
    min_length=None,
    num_beams=None,
    num_return_sequences=None,
    length_penalty=None,
    repetition_penalty=None,
    vocab_mask=None,
    prefix_vocab_mask=None,
    attention_mask=None,
    decoder_input_ids=None,
    logits_processor=None,
    *,
    decoder,
    decoder_start_token_id,
    early_stopping,
    encoder,
    eos_token_id,
    init_decoder,
    model_type,
    no_repeat_ngram_size,
    pad_token_id,
    vocab_size,
):
    _decoder_only("BeamSearch", model_type, encoder)
    if ctx.output_used(2):
        raise ExecutionError("BeamSearch's scores output is not supported by opconv's kernel")
    prompts = np.asarray(input_ids).astype(np.int32)
    batch, prompt_len = prompts.shape
    beams, returned = int(_scalar(num_beams, 1)), int(_scalar(num_return_sequences, 1))
    total = int(_scalar(max_length, prompt_len))
    state = _Beams(
        prompts,
        beams,
        length_penalty=length_penalty,
        early_stopping=early_stopping,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )
    present = state.sequences != pad_token_id
    mask = (
        present.astype(np.int32)
        if attention_mask is None
        else np.repeat(np.asarray(attention_mask).astype(np.int32), beams, axis=0)
    )
    positions = np.where(present, np.cumsum(present, axis=1) - 1, 0).astype(np.int32)
    next_position = present.sum(axis=1).astype(np.int32)
    limits = _limits(
        min_length,
        repetition_penalty,
        vocab_mask,
        None if prefix_vocab_mask is None else np.repeat(prefix_vocab_mask, beams, axis=0),
        eos_token_id=eos_token_id,
        no_repeat_ngram_size=no_repeat_ngram_size,
    )
    feeds, pasts = state.sequences, _empty_pasts(decoder, batch * beams)
    for step in range(total - prompt_len):
        graph = init_decoder if step == 0 and init_decoder is not None else decoder
        logits, *pasts = ctx.run_graph(graph, [feeds, positions, mask, *pasts])
        log_probs = _log_softmax(np.asarray(logits, np.float32)[:, -1, :])
        order = state.advance(_scores(log_probs, state.sequences, step, **limits) + state.scores[:, None])
        if state.done.all():
            break
        pasts = [np.asarray(p)[:, order] for p in pasts]
        feeds = state.sequences[:, -1:]
        next_position = next_position[order]
        positions = next_position[:, None].copy()
        next_position += 1
        mask = np.concatenate([mask[order], np.ones((len(order), 1), np.int32)], axis=1)
    return (*state.best(returned, total), None)


# ---------------------------------------------------------------- WhisperBeamSearch
#
# The encoder subgraph runs once on the audio features and the decoder's prompt (``decoder_input_ids``, else one
# ``decoder_start_token_id`` per row), one row per prompt, giving the prompt's logits, the hidden states, then the
# caches: every layer's self-attention key and value (of the prompt), then every layer's cross-attention key and
# value (of the audio).  The prompt's last logits pick the first token as a BeamSearch step does.  Then the
# decoder runs on (token, [hidden states,] caches in the same order) and returns (logits, the self caches grown by
# one); they replace the first caches by position, reordered by the chosen beams, while the cross caches stay.
# Like onnxruntime, the kernel matches the caches by position, not by name: an export that interleaves each
# layer's self and cross caches gets its later self caches written over its first cross caches, in both.
# A decoder whose input_ids' second axis is not 1 gets the whole sequence each step.  A step's processors are
# BeamSearch's, then ``temperature`` divides the scores, then (``logits_processor`` 1) Whisper's timestamp rules;
# a banned token scores the lowest float, as in onnxruntime, and ``scores`` holds each step's processed scores
# plus the beams' running scores.

_LOWEST = np.finfo(np.float32).min
_MAX_INITIAL_TIMESTAMP = 50  # onnxruntime's fixed bound on the first timestamp, in timestamp steps


def _timestamp_rules(
    scores: np.ndarray, sequences: np.ndarray, *, eos, begin, no_timestamps, start_of_lm, start, translate, transcribe
) -> None:
    """Whisper's timestamp rules on ``scores`` (rows of log-probabilities) in place: timestamps come in pairs and
    never go back, the first is at most ``_MAX_INITIAL_TIMESTAMP`` steps in, and text is banned wherever the
    timestamps' total probability beats the likeliest text token."""
    vocab = scores.shape[1]
    always_banned = [t for t in (no_timestamps, start_of_lm) if 0 <= t < vocab]
    task_tokens = [t for t in (start, translate, transcribe) if 0 <= t < vocab]
    for row, sequence in zip(scores, sequences):
        length = len(sequence)
        stamps = np.nonzero(sequence >= begin)[0]
        sample_begin = int(stamps[0]) + 1 if len(stamps) else length  # just past the first timestamp
        row[always_banned] = _LOWEST
        if length > sample_begin:
            row[task_tokens] = _LOWEST
        last_was_timestamp = length > 0 and sequence[-1] >= begin
        penultimate_was_timestamp = length <= sample_begin or sequence[length - 2] >= begin
        if last_was_timestamp:
            if penultimate_was_timestamp:
                row[begin:] = _LOWEST  # a pair closed (or the first one): text follows
            else:
                row[:eos] = _LOWEST  # an open timestamp: its pair or the end follows
        if len(stamps):
            floor = sequence[stamps[-1]] + (0 if last_was_timestamp and not penultimate_was_timestamp else 1)
            row[begin:floor] = _LOWEST
        if length == sample_begin:
            row[begin + _MAX_INITIAL_TIMESTAMP + 1 :] = _LOWEST
        open_stamps = row[begin:][row[begin:] > _LOWEST]
        if len(open_stamps):
            top = open_stamps.max()
            stamp_mass = np.log(np.exp(open_stamps - top).sum(dtype=np.float32)) + top
            if stamp_mass > row[:begin].max():
                row[:begin] = _LOWEST


def _id(token) -> int:
    return -1 if token is None else int(token)


@onnx_op("WhisperBeamSearch", since=1, domain=MS)
def whisper_beam_search(
    ctx,
    input_ids,
    max_length,
    min_length=None,
    num_beams=None,
    num_return_sequences=None,
    length_penalty=None,
    repetition_penalty=None,
    vocab_mask=None,
    prefix_vocab_mask=None,
    attention_mask=None,
    decoder_input_ids=None,
    logits_processor=None,
    cross_qk_layer_head=None,
    extra_decoding_ids=None,
    temperature=None,
    *,
    beginning_timestamp_token_id,
    decoder,
    decoder_output_cross_qk,
    decoder_start_token_id,
    early_stopping,
    encoder,
    eos_token_id,
    init_decoder,
    model_type,
    no_repeat_ngram_size,
    no_speech_token_id,
    no_timestamps_token_id,
    pad_token_id,
    start_of_lm_token_id,
    transcribe_token_id,
    translate_token_id,
    vocab_size,
):
    # attention_mask, extra_decoding_ids and cross_qk_layer_head change nothing in onnxruntime's CPU kernel either
    if model_type != 2 or encoder is None:
        raise ExecutionError("WhisperBeamSearch needs model_type 2 and an encoder subgraph (attribute 'encoder')")
    if decoder_output_cross_qk or ctx.output_used(3):
        raise ExecutionError(
            "WhisperBeamSearch's cross_qk output is not supported by opconv's kernel: it needs "
            "DecoderMaskedMultiHeadAttention with a shared past/present buffer, which only "
            "onnxruntime's CUDA kernel runs"
        )
    if ctx.output_used(4):
        raise ExecutionError(
            "WhisperBeamSearch's no_speech_probs output is not supported by opconv's kernel: "
            "onnxruntime's CPU kernel leaves it unwritten, so there is nothing to match"
        )
    features = np.asarray(input_ids)
    batch = features.shape[0]
    prompts = (
        np.full((batch, 1), decoder_start_token_id, np.int32)
        if decoder_input_ids is None
        else np.asarray(decoder_input_ids).astype(np.int32)
    )
    prompt_len = prompts.shape[1]
    total = int(_scalar(max_length, prompt_len))
    if total <= prompt_len + 1:
        raise ExecutionError(
            f"WhisperBeamSearch: max_length ({total}) must exceed the decoder prompt's length "
            f"({prompt_len}) by at least 2"
        )
    beams, returned = int(_scalar(num_beams, 1)), int(_scalar(num_return_sequences, 1))
    limits = _limits(
        min_length,
        repetition_penalty,
        vocab_mask,
        None if prefix_vocab_mask is None else np.repeat(prefix_vocab_mask, beams, axis=0),
        eos_token_id=eos_token_id,
        no_repeat_ngram_size=no_repeat_ngram_size,
    )
    divide_by = float(_scalar(temperature, 1.0))
    timestamps = int(_scalar(logits_processor, 0)) == 1
    stamp_ids = {
        "eos": eos_token_id,
        "begin": _id(beginning_timestamp_token_id),
        "no_timestamps": _id(no_timestamps_token_id),
        "start_of_lm": _id(start_of_lm_token_id),
        "start": decoder_start_token_id,
        "translate": _id(translate_token_id),
        "transcribe": _id(transcribe_token_id),
    }
    state = _Beams(
        prompts,
        beams,
        length_penalty=length_penalty,
        early_stopping=early_stopping,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )
    step_scores = []

    def choose(logits, step):
        last = np.asarray(logits, np.float32)[:, -1, :]
        if vocab_size > 0 and vocab_size != last.shape[1]:
            raise ExecutionError(
                f"WhisperBeamSearch: vocab_size ({vocab_size}) differs from the subgraphs' logits "
                f"width ({last.shape[1]}), which opconv's kernel does not support (onnxruntime's "
                "CPU kernel reads the logits as rows of vocab_size then)"
            )
        if timestamps and not 0 < stamp_ids["begin"] < last.shape[1]:
            raise ExecutionError(
                f"WhisperBeamSearch's timestamp processor needs beginning_timestamp_token_id in "
                f"(0, {last.shape[1]}), got {stamp_ids['begin']}"
            )
        if last.shape[0] == batch:
            last = np.repeat(last, beams, axis=0)  # the encoder's logits: the same for every beam of a prompt
        scores = _scores(_log_softmax(last), state.sequences, step, **limits)
        scores[np.isneginf(scores)] = _LOWEST
        if divide_by > 0 and divide_by != 1:
            scores /= np.float32(divide_by)
        if timestamps:
            _timestamp_rules(scores, state.sequences, **stamp_ids)
        scores += state.scores[:, None]
        step_scores.append(scores.reshape(batch, beams, -1))
        return state.advance(scores)

    logits, hidden, *caches = ctx.run_graph(encoder, [features, prompts])
    choose(logits, 0)
    caches = [np.repeat(np.asarray(cache), beams, axis=0) for cache in caches]  # one row per beam
    takes_hidden = len(decoder.inputs) > 1 and decoder.inputs[1].name == "encoder_hidden_states"
    hidden = [np.repeat(np.asarray(hidden), beams, axis=0)] if takes_hidden else []
    ids_shape = decoder.inputs[0].shape
    whole_sequence = not (ids_shape is not None and len(ids_shape) == 2 and ids_shape[1] == 1)
    for step in range(1, total - prompt_len):
        tokens = state.sequences if whole_sequence else state.sequences[:, -1:]
        logits, *self_caches = ctx.run_graph(decoder, [tokens, *hidden, *caches])
        order = choose(logits, step)
        if state.done.all():
            break
        caches[: len(self_caches)] = [np.asarray(cache)[order] for cache in self_caches]
    sequences, sequence_scores = state.best(returned, total)
    scores = None
    if ctx.output_used(2):
        # steps after every prompt finished stay 0 (onnxruntime leaves them unwritten)
        scores = np.zeros((total - prompt_len, batch, beams, step_scores[0].shape[-1]), np.float32)
        scores[: len(step_scores)] = step_scores
    return sequences, sequence_scores, scores, None, None
