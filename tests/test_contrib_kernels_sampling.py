"""onnxruntime's Sampling (top-p text generation) against opconv's kernel.  The draw itself uses each runtime's
own random generator, so what is compared is what does not depend on it: whole sequences when top_p is so small
that only the most likely token survives each step's filter, and, for a wider filter, the frequencies of the
tokens each runtime draws in one step for 512 copies of a prompt.  (onnxruntime's CPU kernel does not write the
optional filtered_logits output, so that output is not compared.)"""

from __future__ import annotations

import numpy as np
import pytest

import opconv

pytest.importorskip("onnxruntime")
from .runtimes import run_ort  # noqa: E402
from .test_contrib_kernels_nn import single_node_model, tiny_gpt_decoder  # noqa: E402

RNG = np.random.default_rng(1416)
VOCAB = 11


def run_both(inputs: dict, **attrs):
    attrs = {"decoder": tiny_gpt_decoder(VOCAB), "eos_token_id": 1, "pad_token_id": 0, "model_type": 0, **attrs}
    model = single_node_model("Sampling", inputs, ["sequences"], **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    return run_ort(model, feeds)[0], opconv.run(opconv.load(model), feeds)["sequences"]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"temperature": 0.7, "repetition_penalty": 1.5, "min_length": 7},
        {"presence_penalty": 0.8, "no_repeat_ngram_size": 2},
        {"min_tokens_to_keep": 1, "temperature": 2.0},
        {"custom": 1, "temperature": 1.5},
        {"custom": 1, "presence_penalty": 0.5},
    ],
)
def test_sampling_with_a_filter_that_keeps_only_the_best_token(options):
    ids = RNG.integers(2, VOCAB, (2, 3)).astype(np.int32)
    inputs = {
        "input_ids": ids,
        "max_length": np.array([9], np.int32),
        "min_length": np.array([options["min_length"]], np.int32) if "min_length" in options else None,
        "repetition_penalty": np.array([options["repetition_penalty"]], np.float32)
        if "repetition_penalty" in options
        else None,
        "vocab_mask": None,
        "prefix_vocab_mask": None,
        "attention_mask": None,
        "presence_mask": RNG.integers(0, 2, (2, VOCAB)).astype(np.int32) if "presence_penalty" in options else None,
        "seed": np.array([7], np.int32),
    }
    attrs = {"top_p": 1e-4, **{k: v for k, v in options.items() if k not in ("min_length", "repetition_penalty")}}
    expected, actual = run_both(inputs, **attrs)
    # After every sequence has ended onnxruntime leaves the rest of its output unwritten (as in GreedySearch)
    written = np.nonzero((actual != 0).any(axis=0))[0]
    length = min(int(written[-1]) + 2, actual.shape[1])
    np.testing.assert_array_equal(actual[:, :length], expected[:, :length])
    assert (actual[:, length:] == 0).all()


@pytest.mark.parametrize("top_p,min_tokens_to_keep,temperature", [(0.6, 0, 10.0), (0.9, 2, 6.0), (0.5, 4, 20.0)])
@pytest.mark.parametrize("custom", [0, 1])
def test_one_sampling_step_draws_tokens_as_often_as_onnxruntime(top_p, min_tokens_to_keep, temperature, custom):
    copies = 512
    prompt = np.tile(np.array([[5, 2, 8]], np.int32), (copies, 1))
    inputs = {"input_ids": prompt, "max_length": np.array([4], np.int32), "seed": np.array([3], np.int32)}
    expected, actual = run_both(
        inputs, top_p=top_p, min_tokens_to_keep=min_tokens_to_keep, temperature=temperature, custom=custom
    )
    counts = [np.bincount(sequences[:, -1], minlength=VOCAB) / copies for sequences in (expected, actual)]
    assert (counts[0] > 0).sum() > 1, "the case should leave a choice"
    np.testing.assert_array_equal(counts[0] > 0, counts[1] > 0)  # the same tokens survive the filter
    assert np.abs(counts[0] - counts[1]).max() < 0.1, counts
