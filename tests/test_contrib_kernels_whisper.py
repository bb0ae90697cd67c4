"""ONNX Runtime's WhisperBeamSearch (com.microsoft): opconv's kernel against onnxruntime's CPU execution provider.

The model is a tiny encoder-decoder made here with onnx.helper, laid out as onnxruntime's Whisper export lays its
subgraphs out: the ``encoder`` subgraph takes the audio features and the decoder's prompt and returns the prompt's
logits, the encoder's hidden states and every layer's self-attention (prompt) and cross-attention (audio) keys and
values; the ``decoder`` subgraph takes one token, optionally the hidden states, and the past keys and values, and
returns the next logits and the grown self-attention keys and values.  Its "attention" is a mean over the cache
(so a beam's own history, its reordering and the audio all move the logits) with random weights.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import opconv

pytest.importorskip("onnxruntime")
from tests.runtimes import run_ort  # noqa: E402

MS = "com.microsoft"
VOCAB, HEADS, HEAD_SIZE, FEATURES, FRAMES = 64, 2, 4, 3, 6
HIDDEN = HEADS * HEAD_SIZE
# Whisper's special tokens, in its tokenizer's order, then the timestamps from BEGIN_TIMESTAMP to the last id (the
# last 4 are more than 50 steps in: onnxruntime's rules bar them as the first timestamp)
EOS, START, TRANSLATE, TRANSCRIBE, START_OF_LM, NO_SPEECH, NO_TIMESTAMPS, BEGIN_TIMESTAMP = 1, 2, 3, 4, 5, 6, 7, 9
FLOAT, INT32 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32


def _weights(rng, layers: int, stamp_bias: float, late_stamp_bias: float) -> dict:
    weights = {
        "embed": rng.uniform(-1, 1, (VOCAB, HIDDEN)),
        "audio": rng.uniform(-1, 1, (FEATURES, HIDDEN)),
        "out": rng.uniform(-2.5, 2.5, (HIDDEN, VOCAB)),
        "stamp_bias": np.where(np.arange(VOCAB) >= BEGIN_TIMESTAMP, stamp_bias, 0.0)
        + np.where(np.arange(VOCAB) >= BEGIN_TIMESTAMP + 51, late_stamp_bias, 0.0),
    }
    for layer in range(layers):
        for name in ("self_k", "self_v", "cross_k", "cross_v"):
            weights[f"{name}{layer}"] = rng.uniform(-1, 1, (HIDDEN, HIDDEN))
    consts = {
        "heads": np.array([0, 0, HEADS, HEAD_SIZE], np.int64),
        "flat": np.array([0, 1, HIDDEN], np.int64),
        "seq_axis": np.array([2], np.int64),
        "frame_axis": np.array([1], np.int64),
    }
    return {**{k: v.astype(np.float32) for k, v in weights.items()}, **consts}


def _split_heads(nodes: list, x: str, weight: str, out: str) -> None:
    """out (B, N, S, H) = heads of x (B, S, D) @ weight."""
    nodes += [
        helper.make_node("MatMul", [x, weight], [out + "_p"]),
        helper.make_node("Reshape", [out + "_p", "heads"], [out + "_r"]),
        helper.make_node("Transpose", [out + "_r"], [out], perm=[0, 2, 1, 3]),
    ]


def _merge_mean(nodes: list, kv: str, out: str) -> None:
    """out (B, 1, D) = the mean of kv (B, N, S, H) over S, heads side by side."""
    nodes += [
        helper.make_node("ReduceMean", [kv, "seq_axis"], [out + "_m"], keepdims=1),
        helper.make_node("Transpose", [out + "_m"], [out + "_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", [out + "_t", "flat"], [out]),
    ]


def _kv(prefix: str, attention: str, layer: int, length) -> list:
    return [
        helper.make_tensor_value_info(f"{prefix}_{kind}_{attention}_{layer}", FLOAT, ["B", HEADS, length, HEAD_SIZE])
        for kind in ("key", "value")
    ]


def _cache_order(pairs: list, interleaved: bool) -> list:
    """Per layer (self, cross) caches in subgraph order: layer by layer, or every self cache before the cross."""
    if interleaved:
        return [v for self_kv, cross_kv in pairs for v in self_kv + cross_kv]
    return [v for self_kv, _ in pairs for v in self_kv] + [v for _, cross_kv in pairs for v in cross_kv]


def _graph(name, nodes, inputs, outputs, weights):
    initializers = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    return helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)


def whisper_subgraphs(
    seed: int,
    layers: int = 2,
    decoder_takes_hidden_states: bool = True,
    interleaved: bool = False,
    stamp_bias: float = 0.0,
    late_stamp_bias: float = 0.0,
    decoder_reads_sequence: bool = False,
):
    """(encoder, decoder) subgraphs of a tiny Whisper-shaped model with ``layers`` layers and random weights.

    ``interleaved`` lays the caches out layer by layer (self key, self value, cross key, cross value), as
    onnxruntime's own export does, instead of every self cache first; ``stamp_bias`` is added to the timestamps'
    logits (to make them likely), ``late_stamp_bias`` to those of the last four; ``decoder_reads_sequence``
    declares the decoder's input_ids (B, L), so that it is fed the whole sequence each step.
    """
    weights = _weights(np.random.default_rng(seed), layers, stamp_bias, late_stamp_bias)
    # encoder: audio (B, F, T) -> hidden (B, T, D); prompt tokens -> self K/V; hidden -> cross K/V
    nodes = [
        helper.make_node("Transpose", ["encoder_input_ids"], ["frames"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["frames", "audio"], ["encoder_hidden_states"]),
        helper.make_node("ReduceMean", ["encoder_hidden_states", "frame_axis"], ["audio_mean"], keepdims=1),
        helper.make_node("Gather", ["embed", "decoder_input_ids"], ["prompt"]),
    ]
    outputs = [
        helper.make_tensor_value_info("logits", FLOAT, ["B", "S", VOCAB]),
        helper.make_tensor_value_info("encoder_hidden_states", FLOAT, ["B", FRAMES, HIDDEN]),
    ]
    total = "audio_mean"
    for layer in range(layers):
        _split_heads(nodes, "prompt", f"self_k{layer}", f"present_key_self_{layer}")
        _split_heads(nodes, "prompt", f"self_v{layer}", f"present_value_self_{layer}")
        _split_heads(nodes, "encoder_hidden_states", f"cross_k{layer}", f"present_key_cross_{layer}")
        _split_heads(nodes, "encoder_hidden_states", f"cross_v{layer}", f"present_value_cross_{layer}")
    outputs += _cache_order(
        [(_kv("present", "self", layer, "S"), _kv("present", "cross", layer, FRAMES)) for layer in range(layers)],
        interleaved,
    )
    for layer in range(layers):
        _merge_mean(nodes, f"present_value_cross_{layer}", f"enc_ctx{layer}")
        nodes.append(helper.make_node("Add", [total, f"enc_ctx{layer}"], [f"enc_total{layer}"]))
        total = f"enc_total{layer}"
    nodes += [
        helper.make_node("Add", ["prompt", total], ["enc_h"]),
        helper.make_node("MatMul", ["enc_h", "out"], ["enc_logits"]),
        helper.make_node("Add", ["enc_logits", "stamp_bias"], ["logits"]),
    ]
    inputs = [
        helper.make_tensor_value_info("encoder_input_ids", FLOAT, ["B", FEATURES, FRAMES]),
        helper.make_tensor_value_info("decoder_input_ids", INT32, ["B", "S"]),
    ]
    encoder = _graph("encoder", nodes, inputs, outputs, weights)

    # decoder: one token -> its self K/V appended to the past; logits from the token, the caches and the audio
    nodes = [helper.make_node("Gather", ["embed", "input_ids"], ["token"])]
    inputs = [helper.make_tensor_value_info("input_ids", INT32, ["B", "L" if decoder_reads_sequence else 1])]
    if decoder_takes_hidden_states:
        # onnxruntime feeds this input uninitialized (of the right shape): a decoder with past reads none of it
        inputs.append(helper.make_tensor_value_info("encoder_hidden_states", FLOAT, ["B", FRAMES, HIDDEN]))
    total = "token"
    outputs = [helper.make_tensor_value_info("logits", FLOAT, ["B", "L", VOCAB])]
    for layer in range(layers):
        for kind, weight in (("key", "self_k"), ("value", "self_v")):
            _split_heads(nodes, "token", f"{weight}{layer}", f"new_{kind}_{layer}")
            nodes.append(
                helper.make_node(
                    "Concat",
                    [f"past_{kind}_self_{layer}", f"new_{kind}_{layer}"],
                    [f"present_{kind}_self_{layer}"],
                    axis=2,
                )
            )
        outputs += _kv("present", "self", layer, "T")
    inputs += _cache_order(
        [(_kv("past", "self", layer, "P"), _kv("past", "cross", layer, FRAMES)) for layer in range(layers)], interleaved
    )
    for layer in range(layers):
        for source in (f"present_value_self_{layer}", f"present_key_self_{layer}", f"past_value_cross_{layer}"):
            _merge_mean(nodes, source, source + "_ctx")
            nodes.append(helper.make_node("Add", [total, source + "_ctx"], [source + "_sum"]))
            total = source + "_sum"
    nodes += [
        helper.make_node("MatMul", [total, "out"], ["dec_logits"]),
        helper.make_node("Add", ["dec_logits", "stamp_bias"], ["logits"]),
    ]
    decoder = _graph("decoder", nodes, inputs, outputs, weights)
    return encoder, decoder


TIMESTAMP_IDS = {
    "beginning_timestamp_token_id": BEGIN_TIMESTAMP,
    "no_timestamps_token_id": NO_TIMESTAMPS,
    "start_of_lm_token_id": START_OF_LM,
    "translate_token_id": TRANSLATE,
    "transcribe_token_id": TRANSCRIBE,
    "no_speech_token_id": NO_SPEECH,
}
INPUT_NAMES = (
    "input_features",
    "max_length",
    "min_length",
    "num_beams",
    "num_return_sequences",
    "length_penalty",
    "repetition_penalty",
    "vocab_mask",
    "prefix_vocab_mask",
    "attention_mask",
    "decoder_input_ids",
    "logits_processor",
    "cross_qk_layer_head",
    "extra_decoding_ids",
    "temperature",
)


def whisper_model(inputs: dict, outputs, subgraph_options: dict, **attrs) -> onnx.ModelProto:
    """A model of one WhisperBeamSearch node over the tiny subgraphs; ``inputs`` maps the node's input names to
    arrays (absent ones are left out)."""
    encoder, decoder = whisper_subgraphs(**subgraph_options)
    names = [name if inputs.get(name) is not None else "" for name in INPUT_NAMES]
    while not names[-1]:
        names.pop()
    attrs = {
        "eos_token_id": EOS,
        "pad_token_id": EOS,
        "decoder_start_token_id": START,
        "model_type": 2,
        **TIMESTAMP_IDS,
        **attrs,
    }
    node = helper.make_node(
        "WhisperBeamSearch", names, list(outputs), domain=MS, encoder=encoder, decoder=decoder, **attrs
    )
    graph_inputs = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
        for name, value in inputs.items()
    ]
    graph = helper.make_graph(
        [node], "whisper", graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outputs if o]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(MS, 1)])


def whisper_inputs(seed: int, *, beams: int, returned: int, max_length: int = 10, batch: int = 2, **extra) -> dict:
    """The node's inputs: random audio features, the search's scalars (ints as int32, floats as float32) and any
    array in ``extra`` as it is."""
    rng = np.random.default_rng(seed + 100)
    # min_length and length_penalty are always given: onnxruntime's kernel fails without the first and types
    # sequences_scores from the second
    scalars = {
        "max_length": max_length,
        "min_length": 0,
        "num_beams": beams,
        "num_return_sequences": returned,
        "length_penalty": 1.0,
    }
    inputs = {"input_features": rng.uniform(-1, 1, (batch, FEATURES, FRAMES)).astype(np.float32)}
    for name, value in {**scalars, **extra}.items():
        if not isinstance(value, np.ndarray):
            value = np.array([value], np.float32 if isinstance(value, float) else np.int32)
        inputs[name] = value
    return inputs


PROMPTS = np.array([[START, TRANSCRIBE], [START, TRANSLATE]], np.int32)
CASES = {
    "greedy": ({"beams": 1, "returned": 1}, {}, {}),
    "beams": ({"beams": 3, "returned": 2, "length_penalty": 0.7, "repetition_penalty": 1.3}, {}, {}),
    "early-stopping": ({"beams": 4, "returned": 4, "max_length": 12}, {}, {"early_stopping": 1}),
    "timestamps": (
        {"beams": 3, "returned": 2, "max_length": 14, "logits_processor": 1, "decoder_input_ids": PROMPTS},
        {"stamp_bias": 2.0},
        {},
    ),
    "timestamps-greedy": (
        {"beams": 1, "returned": 1, "max_length": 14, "logits_processor": 1},
        {"stamp_bias": 3.0},
        {},
    ),
    "timestamps-long-prompt": (
        {
            "beams": 4,
            "returned": 3,
            "max_length": 12,
            "logits_processor": 1,
            "decoder_input_ids": np.array([[START, TRANSCRIBE, 12], [START, 3, 10]], np.int32),
        },
        {"stamp_bias": 1.0},
        {},
    ),
    "timestamps-late-first": (
        {"beams": 2, "returned": 2, "max_length": 12, "logits_processor": 1},
        {"stamp_bias": 1.0, "late_stamp_bias": 4.0},
        {},
    ),
    "temperature": ({"beams": 3, "returned": 2, "temperature": 0.6}, {}, {}),
    "masks": (
        {
            "beams": 3,
            "returned": 3,
            "min_length": 7,
            "vocab_mask": (np.arange(VOCAB) % 5 != 0).astype(np.int32),
            "prefix_vocab_mask": np.tile(np.arange(VOCAB) < 9, (2, 1)).astype(np.int32),
        },
        {},
        {},
    ),
    "no-repeat-ngram": ({"beams": 3, "returned": 1}, {}, {"no_repeat_ngram_size": 2}),
    "decoder-without-hidden-states": (
        {"beams": 2, "returned": 2},
        {"decoder_takes_hidden_states": False, "layers": 1},
        {},
    ),
    "decoder-reads-sequence": ({"beams": 3, "returned": 2}, {"decoder_reads_sequence": True}, {}),
    "interleaved-caches": ({"beams": 3, "returned": 2}, {"interleaved": True, "layers": 3}, {}),
    "extra-inputs-ignored": (
        {
            "beams": 2,
            "returned": 1,
            "attention_mask": np.zeros((2, FEATURES, FRAMES), np.int32),
            "extra_decoding_ids": np.array([[5, 6], [7, -1]], np.int32),
        },
        {},
        {},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_whisper_beam_search(case):
    input_options, subgraph_options, attrs = CASES[case]
    seed = list(CASES).index(case)
    inputs = whisper_inputs(seed, **input_options)
    model = whisper_model(inputs, ["sequences", "sequences_scores"], {"seed": seed, **subgraph_options}, **attrs)
    expected = run_ort(model, inputs)
    actual = opconv.run(opconv.load(model), inputs)
    np.testing.assert_array_equal(actual["sequences"], expected[0])
    np.testing.assert_allclose(actual["sequences_scores"], expected[1], rtol=1e-5, atol=1e-6)


def test_whisper_beam_search_scores_output():
    # min_length keeps every beam open to the last step, so onnxruntime writes every step's scores; the banned end
    # token scores the lowest float
    inputs = whisper_inputs(40, beams=2, returned=2, max_length=7, min_length=6, logits_processor=1)
    model = whisper_model(inputs, ["sequences", "sequences_scores", "scores"], {"seed": 40, "stamp_bias": 1.0})
    expected = run_ort(model, inputs)
    actual = opconv.run(opconv.load(model), inputs)
    np.testing.assert_array_equal(actual["sequences"], expected[0])
    np.testing.assert_allclose(actual["sequences_scores"], expected[1], rtol=1e-5, atol=1e-6)
    assert expected[2].shape == (6, 2, 2, VOCAB) and (expected[2] == np.finfo(np.float32).min).any()
    np.testing.assert_allclose(actual["scores"], expected[2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "outputs,attrs,message",
    [
        (["sequences", "", "", "", "no_speech_probs"], {}, "leaves it unwritten"),
        (["sequences", "", "", "cross_qk"], {}, "only onnxruntime's CUDA kernel"),
        (["sequences"], {"vocab_size": VOCAB - 4}, "differs from the subgraphs' logits width"),
    ],
)
def test_whisper_beam_search_refusals(outputs, attrs, message):
    inputs = whisper_inputs(50, beams=2, returned=1)
    model = whisper_model(inputs, outputs, {"seed": 50}, **attrs)
    with pytest.raises(opconv.OpconvError, match=message):
        opconv.run(opconv.load(model), inputs)
