"""Export the small torch models of ``fixtures/exports/`` with torch's default (dynamo) exporter.

    python scripts/make_dynamo_fixtures.py         # needs torch 2.13 and onnxscript; CI needs neither

Each model is written as ``NAME.onnx`` (opset 20, seeded random weights) beside ``NAME.npz``: the inputs
(``in:NAME``) and onnxruntime's outputs on them (``out:NAME``), the oracle that
``tests/test_downgrade_exports.py`` checks downgraded models against.  Dynamic models are run at shapes
other than the traced ones.  Models:

  block      a pre-norm transformer block (LayerNorm, causal SDPA, GELU), static shapes
  block_dyn  the same with dynamic batch and sequence (Shape start/end, Trilu, Reshape allowzero=1)
  gpt        embeddings + block + head, dynamic ids (Range, Trilu on bool, masked_fill, ArgMax)
  cnn_dyn    Conv/BatchNorm/MaxPool/GroupNorm, bilinear and nearest interpolate, Hardswish, softmax on
             axis 1, dynamic batch
  det        Conv, reflect Pad, ConvTranspose, TopK, a bidirectional LSTM, bicubic Resize, CumSum
  audio      Conv1d with dilation, BatchNorm1d, SiLU, pooling, std/var, normalize
  gru        a GRU classifier
  misc       split sizes, tril/triu, softmax on axis 0, cumsum, chunk
"""

from __future__ import annotations

import os

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(HERE, "fixtures", "exports")


def models():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, d=16, heads=2):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ff1, self.ff2 = nn.Linear(d, 32), nn.Linear(32, d)
            self.heads = heads

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q, k, v = [z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v)]
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
            return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(50, 16), nn.Embedding(32, 16)
            self.block, self.head = Block(), nn.Linear(16, 50)

        def forward(self, ids):
            t = ids.shape[1]
            x = self.emb(ids) + self.pos(torch.arange(t))
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            logits = self.head(self.block(x))
            return logits.masked_fill(~mask[-1:, :1].expand_as(logits[..., :1]), 0.0), logits.argmax(-1)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.c2, self.gn = nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.GroupNorm(2, 8)
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            y = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
            y = self.gn(self.c2(y))
            y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            y = F.interpolate(y, size=(8, 8), mode="nearest")
            y = F.hardswish(y) * torch.sigmoid(y.mean(dim=(2, 3), keepdim=True))
            return torch.log_softmax(self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1)), dim=1), F.softmax(y, dim=1)

    class Det(nn.Module):
        def __init__(self):
            super().__init__()
            self.c, self.up = nn.Conv2d(3, 6, 3, padding=1), nn.ConvTranspose2d(6, 4, 2, stride=2)
            self.lstm = nn.LSTM(4, 6, batch_first=True, bidirectional=True)

        def forward(self, x):
            y = self.up(F.pad(F.leaky_relu(self.c(x)), (1, 1, 1, 1), mode="reflect"))
            values, indices = y.flatten(1).topk(5, dim=1)
            seq, _ = self.lstm(y.mean(2).transpose(1, 2))
            return (
                values,
                indices,
                seq,
                F.interpolate(y, scale_factor=0.5, mode="bicubic"),
                torch.clamp(y, -0.5, 0.5).cumsum(3),
            )

    class Audio(nn.Module):
        def __init__(self):
            super().__init__()
            self.c, self.bn = nn.Conv1d(1, 4, 5, stride=2, dilation=2), nn.BatchNorm1d(4)

        def forward(self, x):
            y = F.silu(self.bn(self.c(x)))
            y = F.avg_pool1d(y, 3) + F.max_pool1d(y, 3)
            return y.std(-1), F.normalize(y, dim=1), torch.where(y > 0, y, y.exp() - 1).var(1)

    class GRU(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru, self.fc = nn.GRU(8, 12, batch_first=True), nn.Linear(12, 3)

        def forward(self, x):
            y, h = self.gru(x)
            return self.fc(y[:, -1]), h

    class Misc(nn.Module):
        def forward(self, x):
            a, b, c = torch.split(x, [2, 3, 3], dim=1)
            gram = torch.tril(x @ x.transpose(-1, -2))
            return (
                a.sum(1) + b.amax(1) + c.mean(1),
                gram,
                torch.triu(x, diagonal=1),
                torch.softmax(x, dim=0) + torch.cumsum(x, dim=1),
                x.chunk(2, dim=1)[1].reshape(-1),
            )

    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=32)
    rng = np.random.default_rng(0)

    def floats(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    # name: (module, traced example, dynamic shapes, the inputs the fixture is run at)
    return {
        "block": (Block(), (torch.randn(2, 5, 16),), None, [floats(2, 5, 16)]),
        "block_dyn": (Block(), (torch.randn(2, 5, 16),), {"x": {0: batch, 1: seq}}, [floats(3, 7, 16)]),
        "gpt": (
            GPT(),
            (torch.randint(0, 50, (2, 6)),),
            {"ids": {0: batch, 1: seq}},
            [rng.integers(0, 50, (3, 9)).astype(np.int64)],
        ),
        "cnn_dyn": (CNN(), (torch.randn(2, 3, 16, 16),), {"x": {0: batch}}, [floats(3, 3, 16, 16)]),
        "det": (Det(), (torch.randn(1, 3, 8, 8),), None, [floats(1, 3, 8, 8)]),
        "audio": (Audio(), (torch.randn(2, 1, 64),), None, [floats(2, 1, 64)]),
        "gru": (GRU(), (torch.randn(2, 4, 8),), None, [floats(2, 4, 8)]),
        "misc": (Misc(), (torch.randn(4, 8),), None, [floats(4, 8)]),
    }


def main() -> None:
    import onnx
    import onnxruntime as ort
    import torch

    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    for name, (module, example, dynamic, inputs) in models().items():
        path = os.path.join(OUT, f"{name}.onnx")
        torch.onnx.export(module.eval(), example, path, dynamo=True, external_data=False, dynamic_shapes=dynamic)
        model = onnx.load(path)
        model.producer_name, model.doc_string = "opconv-export-fixtures", f"torch {torch.__version__} dynamo export"
        onnx.save(model, path)
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
        outputs = session.run(None, feeds)
        arrays = {f"in:{k}": v for k, v in feeds.items()}
        arrays.update({f"out:{o.name}": v for o, v in zip(session.get_outputs(), outputs)})
        np.savez_compressed(os.path.join(OUT, f"{name}.npz"), **arrays)
        print(f"{name}: {os.path.getsize(path)} bytes, {len(model.graph.node)} nodes")


if __name__ == "__main__":
    main()
