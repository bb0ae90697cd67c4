"""Build the real-model corpus in ``fixtures/corpus/``: models exported by torch and rewritten by onnxruntime's tools.

Every model is built from a config or from hand-written torch code with small seeded random weights (nothing is
downloaded; ``HF_HUB_OFFLINE=1``), exported with torch's legacy exporter (dynamic batch/sequence axes, opsets
11-17) and, where it works, with the dynamo exporter (its default opset; it needs the ``onnxscript`` package).
Some exports are then rewritten by onnxruntime's transformer optimizer and quantizers (com.microsoft contrib ops).
Each model is written as ``<name>.onnx`` (weights embedded) beside ``<name>.npz`` with its seeded inputs
(``input:<name>``) and onnxruntime's outputs on them (``output:<name>``, CPU execution provider, default graph
optimizations), and ``manifest.json`` describes them all.

    pip install torch==2.13.0 transformers onnxscript
    python scripts/build_corpus.py              # everything (a few minutes)
    python scripts/build_corpus.py --only NAME  # one model (a derived model rebuilds its source when missing)
    python scripts/build_corpus.py --out DIR    # elsewhere (e.g. to check the build reproduces the committed files)
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import re
import sys
import tempfile
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "corpus")
BATCH, SEQ = 2, 8
VOCAB = 96


# ---------------------------------------------------------------------------
# What a corpus entry is
# ---------------------------------------------------------------------------


@dataclass
class Source:
    """A torch model to export: ``build()`` -> (module, {input name: example tensor}) and its dynamic axes."""

    name: str
    family: str
    build: Callable
    dynamic: dict[str, dict[int, str]]
    outputs: list[str]
    legacy_opset: int
    dynamo: bool = True  # also export with the dynamo exporter
    script: bool = False  # torch.jit.script first (keeps data-dependent control flow as If/Loop)
    notes: str = ""


@dataclass
class Derived:
    """A model made by one of onnxruntime's tools from another corpus model."""

    name: str
    family: str
    source: str  # corpus name of the model it rewrites
    tool: str
    make: Callable  # (source path, output path) -> None
    notes: str = ""
    ort_optimization: str = "default"


# onnxruntime's extended graph optimizations fuse QDQ groups into integer QLinear kernels whose rounding can differ
# from the model's own quantize/dequantize arithmetic by one quantum; the basic level runs the model as written.
QDQ_OUTPUTS = (
    "basic",
    "QDQ format, 4 seeded calibration batches; outputs from onnxruntime at ORT_ENABLE_BASIC "
    "(its extended level fuses QDQ into QLinear kernels that round differently)",
)


@dataclass
class Entry:
    name: str
    family: str
    exporter: str
    opset: int | None
    producer: str
    symbolic: dict = field(default_factory=dict)  # input -> [dim or symbol name]
    shapes: dict = field(default_factory=dict)  # input -> concrete shape used
    source: str | None = None
    notes: str = ""
    ort_optimization: str = "default"  # onnxruntime's graph optimization level for the stored outputs
    status: str = "ok"  # "ok" or "failed: ..." (not written)


def seed_all(name: str) -> np.random.RandomState:
    import torch

    seed = zlib.crc32(name.encode()) & 0x7FFFFFFF
    torch.manual_seed(seed)
    return np.random.RandomState(seed)


def token_inputs(rng, with_mask=True, vocab=VOCAB):
    import torch

    ids = torch.from_numpy(rng.randint(1, vocab, size=(BATCH, SEQ)).astype(np.int64))
    inputs = {"input_ids": ids}
    if with_mask:
        mask = np.ones((BATCH, SEQ), np.int64)
        mask[1, SEQ - 3 :] = 0  # the second sequence is padded
        inputs["attention_mask"] = torch.from_numpy(mask)
    return inputs


# Bounds of the symbols that index position embeddings (64 positions in every text config); others are unbounded.
POSITIONS = {"seq": 64, "past": 63, "total": 64}
TEXT_AXES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


# ---------------------------------------------------------------------------
# transformers models (tiny configs, random weights)
# ---------------------------------------------------------------------------


def _tiny(**extra):
    base = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )
    base.update(extra)
    return base


def tensor_outputs(model, keys):
    """``model`` (a transformers model) wrapped so the export sees tensors in and a tuple of tensors out."""
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            out = self.model(**dict(zip(keys, args)))
            return tuple(
                t
                for t in (
                    getattr(out, "last_hidden_state", None),
                    getattr(out, "logits", None),
                    getattr(out, "pooler_output", None),
                )
                if t is not None
            )

    return Wrapper().eval()


def hf_text(model_cls: str, config_cls: str, with_mask=True, **config):
    """A transformers text model by class name, from a tiny config."""

    def build(rng):
        import transformers

        cfg = getattr(transformers, config_cls)(**config)
        cfg._attn_implementation = "eager"
        model = getattr(transformers, model_cls)(cfg).eval()
        inputs = token_inputs(rng, with_mask)
        return tensor_outputs(model, list(inputs)), inputs

    return build


def build_vit(rng):
    import torch
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(**_tiny(), image_size=16, patch_size=4, num_channels=3)
    cfg._attn_implementation = "eager"
    model = ViTModel(cfg).eval()
    inputs = {"pixel_values": torch.from_numpy(rng.randn(BATCH, 3, 16, 16).astype(np.float32))}
    return tensor_outputs(model, ["pixel_values"]), inputs


def build_gpt2_past(rng):
    """GPT-2 decoding one step after a cached prefix: past keys/values in, logits and present keys/values out."""
    import torch
    from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        n_embd=32, n_layer=2, n_head=2, n_inner=64, vocab_size=VOCAB, n_positions=64, bos_token_id=0, eos_token_id=0
    )
    cfg._attn_implementation = "eager"
    model = GPT2LMHeadModel(cfg).eval()
    past = 6

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, past_key_0, past_value_0, past_key_1, past_value_1):
            cache = DynamicCache(config=cfg)
            cache.update(past_key_0, past_value_0, 0)
            cache.update(past_key_1, past_value_1, 1)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
            present = out.past_key_values
            return (
                out.logits,
                present.layers[0].keys,
                present.layers[0].values,
                present.layers[1].keys,
                present.layers[1].values,
            )

    ids = torch.from_numpy(rng.randint(1, VOCAB, size=(BATCH, 1)).astype(np.int64))
    inputs = {"input_ids": ids, "attention_mask": torch.ones(BATCH, past + 1, dtype=torch.int64)}
    for i in range(2):
        inputs[f"past_key_{i}"] = torch.from_numpy(rng.randn(BATCH, 2, past, 16).astype(np.float32))
        inputs[f"past_value_{i}"] = torch.from_numpy(rng.randn(BATCH, 2, past, 16).astype(np.float32))
    return Step().eval(), inputs


PAST_AXES = {
    "input_ids": {0: "batch"},
    "attention_mask": {0: "batch", 1: "total"},
    **{f"past_{kv}_{i}": {0: "batch", 2: "past"} for kv in ("key", "value") for i in range(2)},
}


# ---------------------------------------------------------------------------
# Hand-written torch models
# ---------------------------------------------------------------------------


def _nn():
    import torch

    return torch, torch.nn, torch.nn.functional


def image(rng, c=3, hw=16):
    import torch

    return {"image": torch.from_numpy(rng.randn(BATCH, c, hw, hw).astype(np.float32))}


IMAGE_AXES = {"image": {0: "batch"}}


def build_resnet(rng):
    torch, nn, F = _nn()

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.short = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x):
            return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.short(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
            self.blocks = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2))
            self.fc = nn.Linear(16, 10)

        def forward(self, image):
            x = self.blocks(self.stem(image))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    return _randomize_bn(Net()), image(rng)


def _randomize_bn(model):
    """Non-trivial running statistics so inference BatchNormalization is not the identity."""
    import torch

    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            with torch.no_grad():
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def build_mobilenet(rng):
    torch, nn, F = _nn()

    class SE(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.reduce, self.expand = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            return x * F.hardsigmoid(self.expand(F.relu(self.reduce(s))))

    class Inverted(nn.Module):
        def __init__(self, c, e):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(c, e, 1, bias=False),
                nn.BatchNorm2d(e),
                nn.Hardswish(),
                nn.Conv2d(e, e, 3, 1, 1, groups=e, bias=False),
                nn.BatchNorm2d(e),
                nn.Hardswish(),
                SE(e),
                nn.Conv2d(e, c, 1, bias=False),
                nn.BatchNorm2d(c),
            )

        def forward(self, x):
            return x + self.body(x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.Hardswish())
            self.blocks = nn.Sequential(Inverted(8, 16), Inverted(8, 24))
            self.head = nn.Sequential(nn.Conv2d(8, 16, 1), nn.ReLU6(), nn.Dropout(0.1))
            self.fc = nn.Linear(16, 5)

        def forward(self, image):
            x = self.head(self.blocks(self.stem(image)))
            return F.softmax(self.fc(x.mean((2, 3))), dim=-1)

    return _randomize_bn(Net()), image(rng)


def build_unet(rng):
    torch, nn, F = _nn()

    def conv(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1), nn.GroupNorm(2, cout), nn.SiLU())

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.mid = conv(3, 8), conv(8, 16), conv(16, 16)
            self.up1 = nn.ConvTranspose2d(16, 16, 2, 2)
            self.u1 = conv(32, 8)
            self.u2 = conv(16, 8)
            self.out = nn.Conv2d(8, 2, 1)

        def forward(self, image):
            a = self.d1(image)  # 16x16
            b = self.d2(F.max_pool2d(a, 2))  # 8x8
            m = self.mid(F.max_pool2d(b, 2))  # 4x4
            up = self.up1(m) + F.interpolate(m, size=b.shape[-2:], mode="nearest")
            x = self.u1(torch.cat([up, b], 1))
            x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
            x = self.u2(torch.cat([x, a], 1))
            x = F.interpolate(x, scale_factor=2.0, mode="nearest")
            return torch.sigmoid(self.out(x))

    return Net().eval(), image(rng)


def build_detection(rng):
    torch, nn, F = _nn()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU())
            self.cls = nn.Conv2d(16, 4, 1)  # 4 classes per cell
            self.box = nn.Conv2d(16, 4, 1)

        def forward(self, image):
            f = self.backbone(image)
            scores = torch.sigmoid(self.cls(f)).flatten(2).transpose(1, 2)  # [B, cells, classes]
            boxes = self.box(f).flatten(2).transpose(1, 2)
            best, label = scores.max(-1)
            top, index = torch.topk(best, 5, dim=1)
            picked = torch.gather(boxes, 1, index.unsqueeze(-1).expand(-1, -1, 4))
            return top, torch.gather(label, 1, index), picked

    return Net().eval(), image(rng)


def build_rnn(kind):
    def build(rng):
        torch, nn, F = _nn()

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(VOCAB, 16)
                cell = nn.LSTM if kind == "lstm" else nn.GRU
                self.rnn = cell(16, 24, num_layers=1, batch_first=True, bidirectional=kind == "lstm")
                self.fc = nn.Linear(48 if kind == "lstm" else 24, 3)

            def forward(self, input_ids):
                out, _ = self.rnn(self.embed(input_ids))
                return F.log_softmax(self.fc(out[:, -1]), dim=-1)

        return Net().eval(), token_inputs(rng, with_mask=False)

    return build


def build_audio(rng):
    torch, nn, F = _nn()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv1d(1, 8, 9, 4, 4),
                nn.BatchNorm1d(8),
                nn.GELU(),
                nn.Conv1d(8, 16, 5, 2, 2, dilation=1),
                nn.BatchNorm1d(16),
                nn.GELU(),
                nn.Conv1d(16, 16, 3, 1, 2, dilation=2),
                nn.ReLU(),
                nn.AvgPool1d(2),
            )
            self.fc = nn.Linear(16, 6)

        def forward(self, audio):
            return self.fc(self.body(audio).amax(-1))

    audio = torch.from_numpy(rng.randn(BATCH, 1, 256).astype(np.float32))
    return _randomize_bn(Net()), {"audio": audio}


def build_encoder_block(rng):
    """LayerNorm, GELU (tanh form), softmax on the last axis, a padding mask applied with torch.where."""
    torch, nn, F = _nn()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, 32)
            self.ln1, self.ln2 = nn.LayerNorm(32), nn.LayerNorm(32)
            self.qkv, self.proj = nn.Linear(32, 96), nn.Linear(32, 32)
            self.ff1, self.ff2 = nn.Linear(32, 64), nn.Linear(64, 32)

        def forward(self, input_ids, attention_mask):
            x = self.embed(input_ids)
            q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)
            scores = q @ k.transpose(1, 2) / 32**0.5
            keep = attention_mask[:, None, :].bool()
            scores = torch.where(keep, scores, torch.full_like(scores, -1e4))
            x = x + self.proj(F.softmax(scores, dim=-1) @ v)
            x = x + self.ff2(F.gelu(self.ff1(self.ln2(x)), approximate="tanh"))
            return x.masked_fill(~attention_mask[..., None].bool(), 0.0)

    return Net().eval(), token_inputs(rng)


def build_causal_lm(rng):
    """A decoder block with a causal mask from torch.triu, RMS norm, SiLU gating and tied embeddings."""
    torch, nn, F = _nn()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, 32)
            self.qkv, self.o = nn.Linear(32, 96, bias=False), nn.Linear(32, 32, bias=False)
            self.gate, self.up, self.down = nn.Linear(32, 64), nn.Linear(32, 64), nn.Linear(64, 32)
            self.w = nn.Parameter(torch.rand(32) + 0.5)

        def norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w

        def forward(self, input_ids):
            x = self.embed(input_ids)
            n = input_ids.shape[1]
            q, k, v = self.qkv(self.norm(x)).chunk(3, -1)
            causal = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1)
            att = (q @ k.transpose(1, 2)).masked_fill(causal, float("-inf")) * 32**-0.5
            x = x + self.o(att.softmax(-1) @ v)
            h = self.norm(x)
            x = x + self.down(F.silu(self.gate(h)) * self.up(h))
            return x @ self.embed.weight.t()

    return Net().eval(), token_inputs(rng, with_mask=False)


def build_scripted_if(rng):
    """A data-dependent branch (torch.jit.script keeps it as ONNX If)."""
    torch, nn, F = _nn()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

        def forward(self, x):
            if bool(x.sum() > 0):
                y = torch.relu(self.a(x))
            else:
                y = torch.tanh(self.b(x))
            return y * 2.0

    x = torch.from_numpy(rng.randn(BATCH, 16).astype(np.float32))
    return Net().eval(), {"x": x}


def build_scripted_loop(rng):
    """A loop over the input's first dimension (torch.jit.script keeps it as ONNX Loop)."""
    torch, nn, F = _nn()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.Linear(16, 16)

        def forward(self, x):
            h = torch.zeros_like(x[0])
            for i in range(x.size(0)):
                h = torch.tanh(self.cell(h) + x[i])
            return h

    x = torch.from_numpy(rng.randn(5, BATCH, 16).astype(np.float32))
    return Net().eval(), {"x": x}


def build_pooling_misc(rng):
    """Cheap ops exporters commonly write: PReLU, LeakyReLU, ELU, instance norm, avg/max pool, pad, clamp, cumsum."""
    torch, nn, F = _nn()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")
            self.prelu, self.inorm = nn.PReLU(8), nn.InstanceNorm2d(8, affine=True)

        def forward(self, image):
            x = self.prelu(self.c1(image))
            x = F.leaky_relu(self.inorm(self.c2(x)), 0.1)
            x = F.avg_pool2d(F.pad(x, (1, 1, 1, 1)), 3, 2) + F.max_pool2d(x, 2, ceil_mode=True)[..., :9, :9]
            x = F.elu(x).clamp(-1.0, 3.0)
            return torch.cumsum(x.flatten(2), -1).mean(1)

    return Net().eval(), image(rng)


SOURCES = [
    Source(
        "bert",
        "transformers",
        hf_text("BertModel", "BertConfig", **_tiny()),
        TEXT_AXES,
        ["last_hidden_state", "pooler_output"],
        14,
    ),
    Source(
        "distilbert",
        "transformers",
        hf_text(
            "DistilBertModel",
            "DistilBertConfig",
            dim=32,
            n_layers=2,
            n_heads=2,
            hidden_dim=64,
            vocab_size=VOCAB,
            max_position_embeddings=64,
        ),
        TEXT_AXES,
        ["last_hidden_state"],
        15,
    ),
    Source(
        "roberta",
        "transformers",
        hf_text("RobertaModel", "RobertaConfig", **_tiny(pad_token_id=1, max_position_embeddings=72)),
        TEXT_AXES,
        ["last_hidden_state", "pooler_output"],
        16,
    ),
    Source(
        "gpt2",
        "transformers",
        hf_text(
            "GPT2LMHeadModel",
            "GPT2Config",
            n_embd=32,
            n_layer=2,
            n_head=2,
            n_inner=64,
            vocab_size=VOCAB,
            n_positions=64,
            bos_token_id=0,
            eos_token_id=0,
            use_cache=False,
        ),
        TEXT_AXES,
        ["logits"],
        14,
    ),
    Source(
        "gpt2_past",
        "transformers",
        build_gpt2_past,
        PAST_AXES,
        ["logits", "present_key_0", "present_value_0", "present_key_1", "present_value_1"],
        17,
        notes="one decoding step after a 6-token cache",
    ),
    Source(
        "llama",
        "transformers",
        hf_text("LlamaForCausalLM", "LlamaConfig", **_tiny(num_key_value_heads=1, use_cache=False)),
        TEXT_AXES,
        ["logits"],
        17,
        notes="grouped-query attention (2 heads, 1 key/value head), rotary embeddings",
    ),
    Source(
        "t5_encoder",
        "transformers",
        hf_text(
            "T5EncoderModel",
            "T5Config",
            d_model=32,
            d_kv=16,
            d_ff=64,
            num_layers=2,
            num_heads=2,
            vocab_size=VOCAB,
            relative_attention_num_buckets=8,
        ),
        TEXT_AXES,
        ["last_hidden_state"],
        13,
    ),
    Source(
        "vit", "transformers", build_vit, {"pixel_values": {0: "batch"}}, ["last_hidden_state", "pooler_output"], 12
    ),
    Source("resnet", "cnn", build_resnet, IMAGE_AXES, ["logits"], 11),
    Source(
        "mobilenet_se",
        "cnn",
        build_mobilenet,
        IMAGE_AXES,
        ["probabilities"],
        14,
        notes="depthwise convs, Hardswish, squeeze-excitation with Hardsigmoid",
    ),
    Source(
        "unet",
        "cnn",
        build_unet,
        IMAGE_AXES,
        ["mask"],
        13,
        notes="ConvTranspose, GroupNorm, SiLU, nearest and bilinear interpolation",
    ),
    Source("detection_topk", "cnn", build_detection, IMAGE_AXES, ["scores", "labels", "boxes"], 12),
    Source(
        "pooling_misc",
        "cnn",
        build_pooling_misc,
        IMAGE_AXES,
        ["features"],
        11,
        notes="PReLU, reflect padding, InstanceNorm, ceil-mode pooling, ELU, clamp, cumsum",
    ),
    Source(
        "lstm_classifier",
        "rnn",
        build_rnn("lstm"),
        {"input_ids": {0: "batch", 1: "seq"}},
        ["log_probs"],
        12,
        notes="bidirectional LSTM",
    ),
    Source("gru_classifier", "rnn", build_rnn("gru"), {"input_ids": {0: "batch", 1: "seq"}}, ["log_probs"], 16),
    Source("audio_conv1d", "audio", build_audio, {"audio": {0: "batch", 2: "samples"}}, ["logits"], 15),
    Source(
        "encoder_block",
        "blocks",
        build_encoder_block,
        TEXT_AXES,
        ["hidden"],
        17,
        notes="LayerNorm, tanh GELU, softmax on the last axis, torch.where / masked_fill masking",
    ),
    Source(
        "causal_lm",
        "blocks",
        build_causal_lm,
        {"input_ids": {0: "batch", 1: "seq"}},
        ["logits"],
        14,
        notes="torch.triu causal mask, RMS norm, SiLU gating, tied embeddings",
    ),
    Source(
        "scripted_if",
        "control_flow",
        build_scripted_if,
        {"x": {0: "batch"}},
        ["y"],
        13,
        dynamo=False,
        script=True,
        notes="torch.jit.script: a data-dependent if becomes ONNX If",
    ),
    Source(
        "scripted_loop",
        "control_flow",
        build_scripted_loop,
        {"x": {0: "steps", 1: "batch"}},
        ["h"],
        16,
        dynamo=False,
        script=True,
        notes="torch.jit.script: a loop over the first dimension becomes ONNX Loop",
    ),
]


# ---------------------------------------------------------------------------
# onnxruntime's tools
# ---------------------------------------------------------------------------


def _optimized(model_type, opt_level, fp16=False, **shape):
    def make(src, dst):
        from onnxruntime.transformers.optimizer import optimize_model

        with _quiet():
            opt = optimize_model(src, model_type=model_type, opt_level=opt_level, num_heads=2, hidden_size=32, **shape)
            if fp16:
                opt.convert_float_to_float16(keep_io_types=True)
        onnx.save(opt.model, dst)

    return make


def _quantized_dynamic(src, dst):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet():
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8)


def _quantized_static(input_name, shape):
    def make(src, dst):
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

        class Reader(CalibrationDataReader):
            def __init__(self):
                rng = np.random.RandomState(7)
                self.batches = iter([{input_name: rng.randn(*shape).astype(np.float32)} for _ in range(4)])

            def get_next(self):
                return next(self.batches, None)

        with _quiet():
            quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ)

    return make


def _matmul_4bit(src, dst):
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    with _quiet():
        quant = MatMulNBitsQuantizer(onnx.load(src), bits=4, block_size=32, is_symmetric=True)
        quant.process()
    onnx.save(quant.model.model, dst)


DERIVED = [
    Derived(
        "bert_ort_opt1",
        "ort-optimizer",
        "bert_legacy_op14",
        "onnxruntime.transformers.optimize_model",
        _optimized("bert", 1),
    ),
    Derived(
        "bert_ort_opt2",
        "ort-optimizer",
        "bert_legacy_op14",
        "onnxruntime.transformers.optimize_model",
        _optimized("bert", 2),
    ),
    Derived(
        "bert_ort_fp16",
        "ort-optimizer",
        "bert_legacy_op14",
        "onnxruntime.transformers.optimize_model",
        _optimized("bert", 1, fp16=True),
        notes="float16 weights, float32 inputs/outputs (keep_io_types)",
    ),
    Derived(
        "gpt2_ort_opt1",
        "ort-optimizer",
        "gpt2_legacy_op14",
        "onnxruntime.transformers.optimize_model",
        _optimized("gpt2", 1),
    ),
    Derived(
        "gpt2_ort_opt2",
        "ort-optimizer",
        "gpt2_legacy_op14",
        "onnxruntime.transformers.optimize_model",
        _optimized("gpt2", 2),
    ),
    Derived(
        "vit_ort_opt1",
        "ort-optimizer",
        "vit_legacy_op12",
        "onnxruntime.transformers.optimize_model",
        _optimized("vit", 1),
    ),
    Derived(
        "vit_ort_opt2",
        "ort-optimizer",
        "vit_legacy_op12",
        "onnxruntime.transformers.optimize_model",
        _optimized("vit", 2),
    ),
    Derived(
        "bert_qdynamic",
        "ort-quantized",
        "bert_legacy_op14",
        "onnxruntime.quantization.quantize_dynamic",
        _quantized_dynamic,
        notes="int8 weights, DynamicQuantizeLinear + MatMulInteger",
    ),
    Derived(
        "lstm_qdynamic",
        "ort-quantized",
        "lstm_classifier_legacy_op12",
        "onnxruntime.quantization.quantize_dynamic",
        _quantized_dynamic,
    ),
    Derived(
        "resnet_qdq",
        "ort-quantized",
        "resnet_legacy_op11",
        "onnxruntime.quantization.quantize_static",
        _quantized_static("image", (BATCH, 3, 16, 16)),
        notes=QDQ_OUTPUTS[1],
        ort_optimization=QDQ_OUTPUTS[0],
    ),
    Derived(
        "mobilenet_qdq",
        "ort-quantized",
        "mobilenet_se_legacy_op14",
        "onnxruntime.quantization.quantize_static",
        _quantized_static("image", (BATCH, 3, 16, 16)),
        notes=QDQ_OUTPUTS[1],
        ort_optimization=QDQ_OUTPUTS[0],
    ),
    Derived(
        "llama_q4",
        "ort-quantized",
        "llama_legacy_op17",
        "onnxruntime MatMulNBitsQuantizer",
        _matmul_4bit,
        notes="4-bit symmetric MatMulNBits, block 32",
    ),
    Derived(
        "gpt2_q4",
        "ort-quantized",
        "gpt2_legacy_op14",
        "onnxruntime MatMulNBitsQuantizer",
        _matmul_4bit,
        notes="4-bit symmetric MatMulNBits, block 32",
    ),
]


# ---------------------------------------------------------------------------
# Export, run in onnxruntime, record
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet():
    """Exporters and tools print progress and warnings; the build prints one line per model."""
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        import logging

        level = logging.root.manager.disable
        logging.disable(logging.CRITICAL)
        try:
            yield
        finally:
            logging.disable(level)


def _export(source: Source, exporter: str, path: str) -> tuple[dict, str]:
    """Export ``source`` to ``path``; returns (inputs as numpy, notes)."""
    import torch

    rng = seed_all(source.name)
    module, inputs = source.build(rng)
    args = tuple(inputs.values())
    names = list(inputs)
    notes = ""
    with _quiet(), torch.no_grad():
        if exporter == "legacy":
            if source.script:
                module = torch.jit.script(module)
            torch.onnx.export(
                module,
                args,
                path,
                dynamo=False,
                opset_version=source.legacy_opset,
                input_names=names,
                output_names=source.outputs,
                dynamic_axes=source.dynamic,
                do_constant_folding=True,
            )
        else:
            dims = {}  # one torch.export.Dim per symbol, shared by the inputs that name it
            shapes = tuple(
                {
                    axis: dims.setdefault(sym, torch.export.Dim(sym, min=1, max=POSITIONS.get(sym)))
                    for axis, sym in source.dynamic.get(n, {}).items()
                }
                for n in names
            )
            if any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(module.forward).parameters.values()):
                shapes = (shapes,)  # the specs of forward(*args) sit under its one parameter
            try:
                program = torch.onnx.export(
                    module, args, dynamo=True, input_names=names, output_names=source.outputs, dynamic_shapes=shapes
                )
            except Exception as error:  # noqa: BLE001 - retry with static shapes, say why
                notes = f"dynamic axes failed ({_first_line(error)}); exported with static shapes"
                program = torch.onnx.export(module, args, dynamo=True, input_names=names, output_names=source.outputs)
            program.save(path)
    # The dynamo exporter may keep weights beside the model; embed them.  It also records each node's Python stack
    # (absolute paths and line numbers of this script): dropped, so the files depend on nothing but the model.
    model = onnx.load(path)
    for node in _all_nodes(model.graph):
        kept = [p for p in node.metadata_props if "stack_trace" not in p.key]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    for f in os.listdir(os.path.dirname(path)):
        if f.startswith(os.path.basename(path)) and f != os.path.basename(path):
            os.remove(os.path.join(os.path.dirname(path), f))
    onnx.save(model, path)
    return {k: v.numpy() for k, v in inputs.items()}, notes


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _all_nodes(sub)


def _first_line(error: BaseException) -> str:
    """The innermost cause's first line (the exporters wrap the real reason in a generic one), without colours."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def _ort_outputs(path: str, feeds: dict, optimization: str) -> dict:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    if optimization == "basic":
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def _dims(model: onnx.ModelProto) -> dict:
    out = {}
    init = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        out[vi.name] = [
            d.dim_param if d.HasField("dim_param") else (d.dim_value if d.HasField("dim_value") else "?")
            for d in vi.type.tensor_type.shape.dim
        ]
    return out


def _record(entry: Entry, path: str, feeds: dict) -> Entry:
    model = onnx.load(path)
    entry.symbolic = _dims(model)
    feeds = {k: v for k, v in feeds.items() if k in entry.symbolic}
    entry.shapes = {k: list(v.shape) for k, v in feeds.items()}
    entry.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    outputs = _ort_outputs(path, feeds, entry.ort_optimization)
    arrays = {f"input:{k}": v for k, v in feeds.items()}
    arrays.update({f"output:{k}": v for k, v in outputs.items()})
    np.savez_compressed(path[:-5] + ".npz", **arrays)
    return entry


def build_source(source: Source, exporter: str) -> Entry:
    name = f"{source.name}_legacy_op{source.legacy_opset}" if exporter == "legacy" else f"{source.name}_dynamo"
    producer = "torch.onnx.export(dynamo=False)" if exporter == "legacy" else "torch.onnx.export(dynamo=True)"
    if source.script:
        producer = "torch.jit.script + " + producer
    entry = Entry(name, source.family, exporter, None, producer, notes=source.notes)
    path = os.path.join(OUT, name + ".onnx")
    try:
        feeds, notes = _export(source, exporter, path)
        entry.notes = "; ".join(n for n in (source.notes, notes) if n)
        return _record(entry, path, feeds)
    except Exception as error:  # noqa: BLE001 - recorded in the manifest, the build goes on
        for suffix in (".onnx", ".npz"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path[:-5] + suffix)
        entry.status = f"failed: {_first_line(error)}"
        return entry


def build_derived(derived: Derived, entries: dict[str, Entry]) -> Entry:
    src = entries.get(derived.source)
    entry = Entry(
        derived.name,
        derived.family,
        "onnxruntime",
        None,
        derived.tool,
        source=derived.source,
        notes=derived.notes,
        ort_optimization=derived.ort_optimization,
    )
    path = os.path.join(OUT, derived.name + ".onnx")
    if src is None or src.status != "ok":
        entry.status = f"failed: its source {derived.source} was not built"
        return entry
    try:
        with tempfile.TemporaryDirectory() as tmp:
            staged = os.path.join(tmp, "model.onnx")
            derived.make(os.path.join(OUT, derived.source + ".onnx"), staged)
            onnx.save(onnx.load(staged), path)  # embeds any external weights the tool wrote
        data = np.load(os.path.join(OUT, derived.source + ".npz"))
        feeds = {k[6:]: data[k] for k in data.files if k.startswith("input:")}
        return _record(entry, path, feeds)
    except Exception as error:  # noqa: BLE001 - recorded in the manifest, the build goes on
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        entry.status = f"failed: {_first_line(error)}"
        return entry


def set_output(folder: str) -> None:
    global OUT
    OUT = os.path.abspath(folder)


def all_names() -> list[str]:
    names = []
    for s in SOURCES:
        names.append(f"{s.name}_legacy_op{s.legacy_opset}")
        if s.dynamo:
            names.append(f"{s.name}_dynamo")
    return names + [d.name for d in DERIVED]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="rebuild only this corpus model (repeatable)")
    parser.add_argument("--out", default=OUT, help="the folder to write (default: fixtures/corpus)")
    args = parser.parse_args(argv)
    set_output(args.out)
    os.makedirs(OUT, exist_ok=True)
    manifest_path = os.path.join(OUT, "manifest.json")
    old = {}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            previous = json.load(f)
        old = {e["name"]: e for e in previous["models"] + previous["failed"]}
    wanted = set(args.only or all_names())
    unknown = wanted - set(all_names())
    if unknown:
        parser.error(f"unknown corpus model(s): {', '.join(sorted(unknown))}")
    # A derived model needs its source's files.
    wanted |= {
        d.source for d in DERIVED if d.name in wanted and not os.path.exists(os.path.join(OUT, d.source + ".onnx"))
    }
    entries: dict[str, Entry] = {n: Entry(**{k: v for k, v in e.items()}) for n, e in old.items()}
    for source in SOURCES:
        for exporter in ("legacy", "dynamo") if source.dynamo else ("legacy",):
            name = f"{source.name}_legacy_op{source.legacy_opset}" if exporter == "legacy" else f"{source.name}_dynamo"
            if name in wanted:
                entries[name] = build_source(source, exporter)
                _say(entries[name])
    for derived in DERIVED:
        if derived.name in wanted:
            entries[derived.name] = build_derived(derived, entries)
            _say(entries[derived.name])
    order = all_names()
    built = [entries[n] for n in order if n in entries]
    manifest = {
        "about": "Real exported models with onnxruntime's outputs; rebuilt by scripts/build_corpus.py",
        "batch": BATCH,
        "sequence": SEQ,
        "models": [_entry_json(e) for e in built if e.status == "ok"],
        "failed": [_entry_json(e) for e in built if e.status != "ok"],
    }
    with open(manifest_path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"{len(manifest['models'])} models, {len(manifest['failed'])} failed exports -> {OUT}")
    return 0


def _entry_json(e: Entry) -> dict:
    return {
        "name": e.name,
        "family": e.family,
        "exporter": e.exporter,
        "opset": e.opset,
        "producer": e.producer,
        "symbolic": e.symbolic,
        "shapes": e.shapes,
        "source": e.source,
        "notes": e.notes,
        "ort_optimization": e.ort_optimization,
        "status": e.status,
    }


def _say(e: Entry) -> None:
    size = os.path.getsize(os.path.join(OUT, e.name + ".onnx")) if e.status == "ok" else 0
    print(f"{e.name:32s} {e.status if e.status != 'ok' else f'opset {e.opset}, {size / 1024:.0f} KB'}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
