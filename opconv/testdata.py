"""ONNX's own test cases as data, for opconv's tests, benchmarks and conformance runs.

Two sources, both shipped inside the pinned ``onnx`` package, neither written
by opconv:

* node cases: ``onnx.backend.test.case.node.collect_testcases`` builds one
  small model per case with its inputs and expected outputs in memory;
* model tests: ``onnx/backend/test/data/{simple,pytorch-converted,
  pytorch-operator}/<case>/model.onnx`` with ``test_data_set_N/*.pb``, and the
  ``light`` models (``light_<name>.onnx`` with ``light_<name>_output_0.pb``;
  their inputs are not shipped).

Collecting the node cases takes several seconds, so :func:`node_cases` caches.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

MODEL_KINDS = ("simple", "pytorch-converted", "pytorch-operator")


@dataclass
class Case:
    """One test case: a model and datasets of (inputs, expected outputs), matched by position."""

    name: str
    kind: str  # 'node', 'simple', 'pytorch-converted', 'pytorch-operator', 'light'
    model: onnx.ModelProto | None = None
    path: str | None = None  # model file, for cases loaded from disk
    datasets: list[tuple[list, list]] = field(default_factory=list)
    rtol: float = 1e-3
    atol: float = 1e-7

    def load_model(self) -> onnx.ModelProto:
        if self.model is None:
            assert self.path is not None  # a case has a model or a path
            self.model = onnx.load(self.path)
        return self.model

    def feeds(self, index: int = 0) -> dict[str, Any]:
        """Inputs of dataset ``index`` by graph input name."""
        model = self.load_model()
        names = [i.name for i in model.graph.input if i.name not in _initializer_names(model)]
        return dict(zip(names, self.datasets[index][0]))


def _initializer_names(model: onnx.ModelProto) -> set[str]:
    return {t.name for t in model.graph.initializer}


def data_dir() -> str:
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


@lru_cache(maxsize=1)
def node_cases() -> tuple[Case, ...]:
    """Every node case of the pinned onnx (1,884 for onnx 1.23.2)."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        raw = collect_testcases(None)
    return tuple(
        Case(
            c.name,
            "node",
            model=c.model,
            datasets=[([_as_data(x) for x in i], [_as_data(x) for x in o]) for i, o in c.data_sets or ()],
            rtol=c.rtol,
            atol=c.atol,
        )
        for c in raw
    )


def _as_data(x: Any) -> Any:
    # A few cases (4-bit and float8 types) hold TensorProtos instead of arrays.
    return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x


def model_cases(kinds=MODEL_KINDS) -> list[Case]:
    """The model tests shipped under onnx/backend/test/data, with their datasets read from .pb files."""
    cases = []
    for kind in kinds:
        for model_dir in sorted(glob.glob(os.path.join(data_dir(), kind, "*"))):
            path = os.path.join(model_dir, "model.onnx")
            if not os.path.isfile(path):
                continue
            cases.append(Case(os.path.basename(model_dir), kind, path=path, datasets=_LazyDatasets(model_dir, path)))
    return cases


def light_cases() -> list[Case]:
    """The light models: constant-folded classic CNNs with one expected output and no shipped input."""
    cases = []
    for path in sorted(glob.glob(os.path.join(data_dir(), "light", "light_*.onnx"))):
        out = path[: -len(".onnx")] + "_output_0.pb"
        name = os.path.basename(path)[: -len(".onnx")]
        expected = [read_pb(out, None)] if os.path.isfile(out) else []
        cases.append(Case(name, "light", path=path, datasets=[([], expected)]))
    return cases


class _LazyDatasets(list):
    """Reads test_data_set_N folders on first access (parsing every .pb up front is slow)."""

    def __init__(self, model_dir: str, model_path: str):
        super().__init__()
        self._dir = model_dir
        self._model_path = model_path
        self._loaded = False

    def _load(self):
        if self._loaded:
            return
        self._loaded = True
        model = onnx.load(self._model_path, load_external_data=False)
        inits = _initializer_names(model)
        in_types = [i.type for i in model.graph.input if i.name not in inits]
        out_types = [o.type for o in model.graph.output]
        for ds in sorted(glob.glob(os.path.join(self._dir, "test_data_set_*"))):
            ins = [read_pb(p, t) for p, t in zip(_numbered(ds, "input"), in_types)]
            outs = [read_pb(p, t) for p, t in zip(_numbered(ds, "output"), out_types)]
            super().append((ins, outs))

    def __getitem__(self, i):
        self._load()
        return super().__getitem__(i)

    def __len__(self):
        self._load()
        return super().__len__()

    def __iter__(self):
        self._load()
        return super().__iter__()


def _numbered(folder: str, prefix: str) -> list[str]:
    paths = glob.glob(os.path.join(folder, f"{prefix}_*.pb"))
    return sorted(paths, key=lambda p: int(os.path.basename(p)[len(prefix) + 1 : -3]))


def read_pb(path: str, type_proto: onnx.TypeProto | None) -> Any:
    """Read a serialized TensorProto / SequenceProto / OptionalProto / MapProto as numpy data."""
    with open(path, "rb") as f:
        data = f.read()
    which = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if which == "sequence_type":
        proto = onnx.SequenceProto()
        proto.ParseFromString(data)
        return numpy_helper.to_list(proto)
    if which == "optional_type":
        proto = onnx.OptionalProto()
        proto.ParseFromString(data)
        return numpy_helper.to_optional(proto)
    if which == "map_type":
        proto = onnx.MapProto()
        proto.ParseFromString(data)
        return numpy_helper.to_dict(proto)
    proto = onnx.TensorProto()
    proto.ParseFromString(data)
    return numpy_helper.to_array(proto)


def random_feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random tensors for every graph input with a static tensor type (for the light models)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    inits = _initializer_names(model)
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[vi.name] = rng.integers(0, 4, shape).astype(dtype)
    return feeds
