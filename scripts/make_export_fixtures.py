"""Build the torch-exported models in ``fixtures/exports/`` with onnxruntime's outputs beside them.

    python scripts/make_export_fixtures.py      # needs torch 2.13 and transformers (CI has neither)

The dynamo exports beside them come from scripts/make_dynamo_fixtures.py.

Each ``NAME.onnx`` is a legacy (TorchScript) export with dynamic axes, as users write them; ``NAME.npz`` holds
the inputs the tests feed (``in.<input>``) and onnxruntime's outputs on them (``out.<output>``), so the tests
compare against a runtime opconv did not write without needing torch.  Weights are seeded random, nothing is
downloaded.

Models:
  tiny_bert.onnx      transformers' BertModel, 2 layers, hidden 32, opset 11; inputs input_ids/attention_mask with
                      dynamic axes batch/seq (Shape->Gather->Concat->Reshape chains, masks built from attention_mask)
  tiny_gpt2.onnx      transformers' GPT2Model, the same size, opset 11 (Range over the sequence length, causal masks)
  tiny_bert_ortfold   the same file after onnxruntime's basic optimisations (constant folding), for comparison
  positions.onnx      a torch module with torch.arange over the sequence length (Range with a shape-derived limit)
  multi_output.onnx   TopK, Split and LSTM outputs as graph outputs with names of their own
"""

from __future__ import annotations

import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORTS = os.path.join(ROOT, "fixtures", "exports")


def tiny_bert():
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    model = BertModel(config).eval()

    class Wrapped(torch.nn.Module):  # plain tuple outputs with stable names
        def __init__(self):
            super().__init__()
            self.bert = model

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    ids = torch.randint(0, 100, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[1, 9:] = 0
    axes = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "seq"},
        "last_hidden_state": {0: "batch", 1: "seq"},
        "pooler_output": {0: "batch"},
    }
    return (
        Wrapped().eval(),
        (ids, mask),
        ["input_ids", "attention_mask"],
        ["last_hidden_state", "pooler_output"],
        axes,
        11,
    )


def tiny_gpt2():
    import torch
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64, attn_implementation="eager")
    model = GPT2Model(config).eval()

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt2 = model

        def forward(self, input_ids, attention_mask):
            return self.gpt2(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ids = torch.randint(0, 100, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[0, :3] = 0  # left padding
    axes = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "seq"},
        "last_hidden_state": {0: "batch", 1: "seq"},
    }
    return Wrapped().eval(), (ids, mask), ["input_ids", "attention_mask"], ["last_hidden_state"], axes, 11


def positions():
    import torch

    class Positions(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(64, 8)
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x, mask):
            pos = torch.arange(x.shape[1], device=x.device)
            y = self.proj(x + self.embed(pos))  # its shape is known only once Range is folded
            y = y.view(y.shape[0], y.shape[1], 2, 4).transpose(1, 2)  # heads from run-time dims of y
            bias = (1.0 - mask[:, None, None, :].float()) * -10000.0
            scores = y @ y.transpose(-1, -2) + bias
            n = torch.arange(scores.shape[-1])
            causal = (n.view(-1, 1) >= n.view(1, -1)).float()  # a mask built from a computed length
            return (scores * causal).reshape(scores.shape[0], -1)

    mask = torch.ones(2, 5, dtype=torch.int64)
    mask[0, 3:] = 0
    return (
        Positions().eval(),
        (torch.randn(2, 5, 8), mask),
        ["x", "mask"],
        ["scores"],
        {"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}, "scores": {0: "batch"}},
        13,
    )


def multi_output():
    import torch

    class MultiOutput(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(6, 5, batch_first=True)

        def forward(self, x):
            values, indices = torch.topk(x.sum(-1), 3, dim=-1)
            left, right = torch.split(x, [2, 4], dim=-1)
            seq, (h, c) = self.lstm(x)
            return values, indices, left, right, seq, h, c

    names = ["scores", "top_index", "left", "right", "sequence", "hidden", "cell"]
    return MultiOutput().eval(), (torch.randn(2, 7, 6),), ["x"], names, None, 14


MODELS = {"tiny_bert": tiny_bert, "tiny_gpt2": tiny_gpt2, "positions": positions, "multi_output": multi_output}


def export(name: str) -> None:
    import onnx
    import onnxruntime as ort
    import torch

    torch.manual_seed(0)
    module, args, inputs, outputs, axes, opset = MODELS[name]()
    path = os.path.join(EXPORTS, f"{name}.onnx")
    torch.onnx.export(
        module,
        args,
        path,
        input_names=inputs,
        output_names=outputs,
        dynamic_axes=axes,
        opset_version=opset,
        dynamo=False,
    )
    onnx.checker.check_model(onnx.load(path))
    feeds = {n: a.numpy() for n, a in zip(inputs, args)}
    _write_outputs(path, feeds, outputs)
    if name == "tiny_bert":
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = os.path.join(EXPORTS, f"{name}_ortfold.onnx")
        ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def _write_outputs(path: str, feeds: dict, outputs: list[str]) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    results = session.run(outputs, feeds)
    arrays = {f"in.{k}": v for k, v in feeds.items()} | {f"out.{k}": v for k, v in zip(outputs, results)}
    np.savez(path[: -len(".onnx")] + ".npz", **arrays)


def main() -> None:
    os.makedirs(EXPORTS, exist_ok=True)
    for name in MODELS:
        export(name)
        print("wrote", os.path.join(EXPORTS, f"{name}.onnx"))


if __name__ == "__main__":
    main()
