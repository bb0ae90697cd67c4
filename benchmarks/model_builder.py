"""Build the transformer and small benchmark models with torch, random weights, cached on disk.

    python benchmarks/model_builder.py                 # build every model not cached yet
    python benchmarks/model_builder.py --only tiny_bert,lstm

No download: each model is a transformers / torch module made from a config with seeded random
weights and exported with torch's TorchScript exporter (opset 17), as a user's export would be.
They are too big to commit (BERT-base is ~440 MB), so they live in ``benchmarks/models/``
(git-ignored), with their feeds beside them (``<name>.npz``: token ids must lie in the vocabulary,
which random inputs would not).

Transformer models (sequence 128, batch 1): ``bert_base`` (12 layers, hidden 768), ``gpt2_small``
(12 layers, hidden 768) and ``llama_kv`` (LLaMA-shaped: 12 layers, hidden 768, 12 heads over 4
key/value heads, SwiGLU 2048; 128 new tokens on a key/value cache of 128).  Small models:
``tiny_bert``, ``tiny_gpt2``, ``tiny_llama_kv`` (one decode step on a cache of 32), ``mobilenet``
(MobileNetV2 layout, 224x224) and ``lstm`` (2 layers, hidden 128, 32 steps).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MODEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")


@dataclass
class ModelCase:
    """A built model: its name, file and feeds (what bench_onnx_executor.py needs)."""

    name: str
    path: str
    feeds: dict


def _torch():
    import torch

    torch.manual_seed(0)
    return torch


def _export(module, args: tuple, input_names: list[str], output_names: list[str], path: str) -> dict:
    torch = _torch()
    module.eval()
    with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module, args, path, input_names=input_names, output_names=output_names, opset_version=17, dynamo=False
        )
    return {name: a.numpy() for name, a in zip(input_names, args)}


def _token_feeds(torch, vocab: int, length: int):
    ids = torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(1))
    return ids, torch.ones(1, length, dtype=torch.int64)


def _last_hidden(model, **options):
    """A module running a transformers model on (input_ids, attention_mask) and returning its last hidden state."""
    torch = _torch()

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask, **options).last_hidden_state

    return LastHidden()


def _encoder(path: str, layers: int, hidden: int, heads: int, length: int) -> dict:
    torch = _torch()
    from transformers import BertConfig, BertModel

    config = BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        vocab_size=30522 if hidden >= 768 else 1000,
    )
    ids, mask = _token_feeds(torch, config.vocab_size, length)
    return _export(
        _last_hidden(BertModel(config)), (ids, mask), ["input_ids", "attention_mask"], ["last_hidden_state"], path
    )


def _gpt2(path: str, layers: int, hidden: int, heads: int, length: int) -> dict:
    torch = _torch()
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(
        n_embd=hidden,
        n_layer=layers,
        n_head=heads,
        n_positions=max(1024, length),
        vocab_size=50257 if hidden >= 768 else 1000,
        bos_token_id=0,
        eos_token_id=0,
    )
    ids, mask = _token_feeds(torch, config.vocab_size, length)
    return _export(
        _last_hidden(GPT2Model(config), use_cache=False),
        (ids, mask),
        ["input_ids", "attention_mask"],
        ["last_hidden_state"],
        path,
    )


def _llama(
    path: str, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int, new_tokens: int, past: int
) -> dict:
    torch = _torch()
    from transformers import DynamicCache, LlamaConfig, LlamaModel

    config = LlamaConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=intermediate,
        vocab_size=32000 if hidden >= 768 else 1000,
        max_position_embeddings=2048,
    )
    llama = LlamaModel(config)
    head_dim = hidden // heads

    class DecoderWithCache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.llama = llama

        def forward(self, input_ids, attention_mask, *past_key_values):
            cache = DynamicCache()
            for layer in range(layers):
                cache.update(past_key_values[2 * layer], past_key_values[2 * layer + 1], layer)
            out = self.llama(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
            present = []
            for layer in range(layers):
                present += [out.past_key_values.layers[layer].keys, out.past_key_values.layers[layer].values]
            return (out.last_hidden_state, *present)

    ids = torch.randint(0, config.vocab_size, (1, new_tokens), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(1, past + new_tokens, dtype=torch.int64)
    generator = torch.Generator().manual_seed(2)
    cache = [torch.randn(1, kv_heads, past, head_dim, generator=generator) for _ in range(2 * layers)]
    names = [f"past_{kind}_{layer}" for layer in range(layers) for kind in ("key", "value")]
    outputs = ["last_hidden_state"] + [
        f"present_{kind}_{layer}" for layer in range(layers) for kind in ("key", "value")
    ]
    return _export(DecoderWithCache(), (ids, mask, *cache), ["input_ids", "attention_mask"] + names, outputs, path)


def _mobilenet(path: str) -> dict:
    torch = _torch()
    nn = torch.nn

    def conv(cin, cout, kernel, stride=1, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return layers + [nn.ReLU6()] if act else layers

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = cin * expand
            layers = (conv(cin, hidden, 1) if expand != 1 else []) + conv(hidden, hidden, 3, stride, hidden)
            self.body = nn.Sequential(*layers, *conv(hidden, cout, 1, act=False))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    blocks, cin = conv(3, 32, 3, 2), 32
    for expand, cout, repeat, stride in [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]:
        for i in range(repeat):
            blocks.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
            cin = cout
    blocks += conv(cin, 1280, 1) + [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
    model = nn.Sequential(*blocks)
    with torch.no_grad():  # non-trivial batch-norm statistics, so folding them is exercised
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    return _export(model, (x,), ["image"], ["logits"], path)


def _lstm(path: str) -> dict:
    torch = _torch()

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(64, 128, num_layers=2)
            self.head = torch.nn.Linear(128, 10)

        def forward(self, x):
            return self.head(self.lstm(x)[0])

    x = torch.randn(32, 1, 64, generator=torch.Generator().manual_seed(1))
    return _export(Tagger(), (x,), ["sequence"], ["scores"], path)


BUILDERS: dict[str, tuple[str, Callable[[str], dict]]] = {
    "bert_base": ("transformer", lambda p: _encoder(p, 12, 768, 12, 128)),
    "gpt2_small": ("transformer", lambda p: _gpt2(p, 12, 768, 12, 128)),
    "llama_kv": ("transformer", lambda p: _llama(p, 12, 768, 12, 4, 2048, 128, 128)),
    "tiny_bert": ("small", lambda p: _encoder(p, 2, 128, 2, 32)),
    "tiny_gpt2": ("small", lambda p: _gpt2(p, 2, 128, 2, 32)),
    "tiny_llama_kv": ("small", lambda p: _llama(p, 2, 128, 4, 2, 256, 1, 32)),
    "mobilenet": ("small", _mobilenet),
    "lstm": ("small", _lstm),
}


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def model_cases(suite: str | None = None, only: list[str] | None = None, verbose: bool = True) -> list[ModelCase]:
    """The models of ``suite`` ("transformer", "small" or None for both), built on first use."""
    os.makedirs(MODEL_DIR, exist_ok=True)
    cases = []
    for name, (kind, build) in BUILDERS.items():
        if (suite and kind != suite) or (only and name not in only):
            continue
        path = os.path.join(MODEL_DIR, f"{name}.onnx")
        feeds_path = os.path.join(MODEL_DIR, f"{name}.npz")
        if not (os.path.exists(path) and os.path.exists(feeds_path)):
            if verbose:
                print(f"building {name} with torch into {path} ...", flush=True)
            partial = path + ".partial"
            feeds = build(partial)
            np.savez(feeds_path, **feeds)
            os.replace(partial, path)
        with np.load(feeds_path) as data:
            cases.append(ModelCase(name, path, {k: data[k] for k in data.files}))
    return cases


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated model names (default: all)")
    args = p.parse_args(argv)
    if not torch_available():
        print("torch and transformers are needed to build the models", file=sys.stderr)
        return 2
    only = [n.strip() for n in args.only.split(",")] if args.only else None
    for case in model_cases(only=only):
        print(f"{case.name}: {case.path} ({os.path.getsize(case.path) / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
