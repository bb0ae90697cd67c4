"""ONNX's message classes and shape inference, without importing the whole onnx package.

``import onnx`` runs ``onnx/__init__.py``, which loads its helper, compose, hub,
parser, printer and reference modules with their own imports (importlib.metadata,
email, tarfile ...): about 0.1 s, a quarter of a command-line conversion of a small
model.  What opconv needs on its common path is much less: the generated protobuf
classes (``onnx/onnx_ml_pb2.py``), the C++ shape inference, and a decoder for
tensors stored as raw little-endian bytes.

:data:`messages` is the module of the protobuf classes (``messages.ModelProto`` ...).
When onnx is not imported yet, its two modules are loaded from their files under
their own dotted names, so that a later ``import onnx`` finds them in
``sys.modules`` and uses them (one set of message classes per process, whatever
the order); :class:`_BindWhenImported` then makes them attributes of the package,
as a normal import would.  Anything unusual (another onnx layout, a failing load) falls back to
``import onnx``.  Rarer needs (typed data fields, packed 4-bit data, helper
functions) import onnx proper where they are used.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ...types import from_onnx_code

_MESSAGES = "onnx.onnx_ml_pb2"
_CPP = "onnx.onnx_cpp2py_export"


def _load_submodule(name: str, filename_prefix: str) -> ModuleType:
    """Execute onnx's submodule ``name`` from its file without running the package's ``__init__``."""
    if name in sys.modules:
        return sys.modules[name]
    package = importlib.util.find_spec("onnx")
    if package is None or not package.submodule_search_locations:
        raise ImportError("onnx is not installed")
    folder = package.submodule_search_locations[0]
    candidates = sorted(
        f for f in os.listdir(folder) if f.startswith(filename_prefix + ".") and f.endswith((".py", ".so", ".pyd"))
    )
    if not candidates:
        raise ImportError(f"{name} not found in {folder}")
    spec = importlib.util.spec_from_file_location(name, os.path.join(folder, candidates[0]))
    if spec is None or spec.loader is None:
        raise ImportError(f"{name} cannot be loaded from {folder}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    if not any(isinstance(f, _BindWhenImported) for f in sys.meta_path):
        sys.meta_path.insert(0, _BindWhenImported())
    return module


class _BindWhenImported:
    """Make the submodules loaded above attributes of the onnx package once something imports it.

    A normal import sets ``onnx.onnx_ml_pb2`` on the package; a submodule that was in
    ``sys.modules`` before its package was imported is found there, but not bound as an
    attribute.  This finder takes part in the import of ``onnx`` only: it lets the other
    finders locate the package, binds the submodules after the package has run, and leaves.
    (A finder is any object with ``find_spec``; deriving from ``importlib.abc.MetaPathFinder``
    would import importlib.resources, pathlib and more, ~15 ms of a fresh process.)
    """

    def find_spec(self, name, path=None, target=None):
        if name != "onnx":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_package = spec.loader.exec_module

        def exec_module(module):
            run_package(module)
            for full in (_MESSAGES, _CPP):
                child = full.rpartition(".")[2]
                if full in sys.modules and not hasattr(module, child):
                    setattr(module, child, sys.modules[full])

        spec.loader.exec_module = exec_module
        return spec


def _messages() -> ModuleType:
    if "onnx" in sys.modules:
        import onnx

        return onnx.onnx_ml_pb2
    try:
        return _load_submodule(_MESSAGES, "onnx_ml_pb2")
    except Exception:  # noqa: BLE001 - an unexpected onnx layout: the full import always works
        import onnx

        return onnx.onnx_ml_pb2


#: onnx's generated protobuf module: ``messages.ModelProto``, ``messages.TensorProto`` ...
if TYPE_CHECKING:  # the type checker reads the classes from onnx's stubs
    from onnx import onnx_ml_pb2 as messages
else:
    messages = _messages()


def infer_shapes(model, *, strict_mode: bool = False, data_prop: bool = False):
    """``onnx.shape_inference.infer_shapes`` of a ModelProto, as a new ModelProto.

    Models with an op whose inference is known to hang or crash on some inputs (:data:`HANG_PRONE`) are
    inferred in a forked child under a time limit (``OPCONV_SHAPE_INFERENCE_SECONDS``, default 5 s plus 1 s per
    1,000 nodes) and a memory limit, so
    that a hang or a crash becomes a ModelReadError instead of taking the process with it.  The others are inferred
    here: a fork costs a few ms, which the common path does not pay.
    """
    serialized = model.SerializeToString()
    try:
        cpp = _load_submodule(_CPP, "onnx_cpp2py_export")
        infer = cpp.shape_inference.infer_shapes
    except Exception:  # noqa: BLE001 - fall back to onnx's own wrapper
        import onnx.shape_inference

        return onnx.shape_inference.infer_shapes(model, strict_mode=strict_mode, data_prop=data_prop)
    long_vectors = _long_vectors(model.graph) if data_prop else []
    if any(length > DATA_PROP_NO_VECTOR for _, length in long_vectors):
        data_prop, long_vectors = False, []  # propagation over it could only run out of memory; shapes need none
    # The op names are in the bytes of any model holding such a node: a byte search spares the common path
    # a walk over every node (~8 us each).
    unsafe = HANG_PRONE | (DATA_PROP_HANG_PRONE if data_prop else frozenset())
    hang_prone = _hang_prone_ops(model, unsafe) if any(op.encode() in serialized for op in unsafe) else []
    hang_prone += [f"{name!r} of {length} elements under data propagation" for name, length in long_vectors]
    if hang_prone:
        data = _in_child(
            serialized,
            strict_mode,
            data_prop,
            hang_prone,
            default_limit=5 + len(model.graph.node) / 1000,
            model_bytes=len(serialized),
        )
    else:
        data = infer(serialized, False, strict_mode, data_prop)
    result = messages.ModelProto()
    result.ParseFromString(data)
    return result


def inference_failures() -> tuple[type[BaseException], ...]:
    """What :func:`infer_shapes` raises on a model onnx cannot infer, for callers to whom inference is a help.

    onnx's own InferenceError and ValidationError; the exceptions pybind11 makes of C++ standard ones
    (``std::runtime_error`` -> RuntimeError, ``invalid_argument``/``domain_error`` -> ValueError,
    ``out_of_range`` -> IndexError, ``overflow_error`` -> OverflowError, ``bad_alloc`` -> MemoryError); and the
    ModelReadError of a guarded inference that hung, died or ran out of memory.  Anything else (a TypeError,
    AttributeError, KeyError ... of opconv's own) is a bug and must surface.
    """
    from ...errors import ModelReadError

    cpp = _load_submodule(_CPP, "onnx_cpp2py_export")
    return (
        cpp.shape_inference.InferenceError,
        cpp.checker.ValidationError,
        ModelReadError,
        RuntimeError,
        ValueError,
        IndexError,
        OverflowError,
        MemoryError,
    )


#: ops whose C++ shape inference in onnx has been seen never to return (Einsum with equation ".>" and
#: two inputs: onnx 1.23) or to crash the process (RegexFullMatch: a segmentation fault, onnx 1.23)
HANG_PRONE = frozenset({"Einsum", "RegexFullMatch"})
#: ops whose values data propagation computes whole, however long: a Range over a declared dim of 10**12
#: runs for ever (a fork costs such models ~20 ms; exported transformers have Range, CNNs do not)
DATA_PROP_HANG_PRONE = frozenset({"Range"})
_WITH_SUBGRAPHS = frozenset({"If", "Loop", "Scan", "SequenceMap"})  # whose bodies onnx infers


#: data propagation gives each element of a 1-D value a dim of its own: over a vector declared this long, onnx's
#: Cast, Add, Concat, Unsqueeze ... ran for ever (2**24 elements: minutes; 2**40: memory exhausted; onnx 1.23).
#: Longer vectors are propagated in the guarded child; past DATA_PROP_NO_VECTOR, not at all (no shape is that long)
DATA_PROP_LONGEST_VECTOR = 1 << 16
DATA_PROP_NO_VECTOR = 1 << 20


def _long_vectors(graph) -> list[tuple[str, int]]:
    """(name, length) of the 1-D values the graph declares (inputs, initializers, value_info) longer than
    data propagation takes in process."""
    found = []
    for infos in (graph.input, graph.value_info):
        for vi in infos[:]:  # a slice of a upb repeated field is read at C speed
            dims = vi.type.tensor_type.shape.dim
            if len(dims) == 1 and dims[0].dim_value > DATA_PROP_LONGEST_VECTOR:
                found.append((vi.name, dims[0].dim_value))
    for t in graph.initializer[:]:
        if len(t.dims) == 1 and t.dims[0] > DATA_PROP_LONGEST_VECTOR:
            found.append((t.name, t.dims[0]))
    return found[:3]


def _hang_prone_ops(model, unsafe: frozenset) -> list[str]:
    found = set()

    def walk(graph):
        for node in graph.node:
            op = node.op_type
            if op in unsafe and node.domain in ("", "ai.onnx"):
                found.add(op)
            if op not in _WITH_SUBGRAPHS:
                continue
            for attr in node.attribute:
                if attr.HasField("g"):
                    walk(attr.g)
                for g in attr.graphs:
                    walk(g)

    walk(model.graph)
    for function in model.functions:
        walk(function)
    return sorted(found)


#: the child that infers a hang-prone model: a fresh interpreter (not a fork: a child forked from a process whose
#: other threads hold locks, as a host with runtimes loaded has, can wait for ever), memory-limited
_CHILD = """
import os, sys
from opconv.dialects.onnx.proto import _CPP, _load_submodule
infer = _load_submodule(_CPP, "onnx_cpp2py_export").shape_inference.infer_shapes
data = sys.stdin.buffer.read()
try:
    import resource
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = used + (1 << 30) + 8 * len(data)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
except (ImportError, OSError, ValueError):
    pass
try:
    out = infer(data, False, sys.argv[1] == "1", sys.argv[2] == "1")
except BaseException as e:
    sys.stderr.write(type(e).__name__ + ": " + str(e))
    sys.exit(3)
sys.stdout.buffer.write(out)
"""


def _in_child(
    serialized: bytes, strict_mode: bool, data_prop: bool, ops: list[str], default_limit: float, model_bytes: int
) -> bytes:
    """onnx's shape inference of ``serialized`` in a child interpreter, given up after the time limit."""
    import subprocess

    from ...errors import ModelReadError

    limit = float(os.environ.get("OPCONV_SHAPE_INFERENCE_SECONDS") or default_limit) + 2  # + the child's start
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")])))
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(int(strict_mode)), str(int(data_prop))],
            input=serialized,
            capture_output=True,
            timeout=limit,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise ModelReadError(
            f"onnx's shape inference did not finish in {limit - 2:g} s ({', '.join(ops)} in the "
            "model); set OPCONV_SHAPE_INFERENCE_SECONDS to allow longer"
        ) from None
    if done.returncode < 0:
        raise ModelReadError(
            f"onnx's shape inference died of signal {-done.returncode} ({', '.join(ops)} in the model)"
        )
    if done.returncode != 0:
        text = done.stderr.decode("utf-8", "replace").strip()
        if text.startswith("MemoryError") or "std::bad_alloc" in text:
            raise ModelReadError(f"onnx's shape inference ran out of memory ({', '.join(ops)} in the model)")
        name, _, message = text.partition(": ")
        cpp = _load_submodule(_CPP, "onnx_cpp2py_export")
        error_type = getattr(cpp.shape_inference, name, None) or getattr(cpp.checker, name, None)
        if isinstance(error_type, type) and issubclass(error_type, Exception):
            raise error_type(message)  # onnx's own error, as inference in process raises it
        raise RuntimeError(text or "onnx's shape inference failed")
    return done.stdout


#: element types whose typed field holds plain values (not bit patterns): the field, by element type name
_VALUE_FIELDS = {
    "float32": "float_data",
    "float64": "double_data",
    "int64": "int64_data",
    "int32": "int32_data",
    "int16": "int32_data",
    "int8": "int32_data",
    "uint16": "int32_data",
    "uint8": "int32_data",
    "bool": "int32_data",
    "uint32": "uint64_data",
    "uint64": "uint64_data",
}


def to_array(tensor) -> np.ndarray:
    """A TensorProto's data as numpy, as onnx's ``numpy_helper.to_array`` decodes it.

    Raw little-endian bytes and the typed fields of the common types are decoded
    here; strings, packed sub-byte types and types stored as bit patterns
    (float16, bfloat16, float8 in ``int32_data``) go to onnx's own decoder.
    """
    if not tensor.external_data and not tensor.HasField("segment"):
        et = from_onnx_code(tensor.data_type)
        dims = tuple(tensor.dims)
        if tensor.HasField("raw_data"):
            if et.numpy is not None and et.bits and et.bits % 8 == 0 and et.name != "string":
                return np.frombuffer(tensor.raw_data, dtype=et.numpy.newbyteorder("<")).reshape(dims)
        elif et.name in _VALUE_FIELDS:
            return np.array(getattr(tensor, _VALUE_FIELDS[et.name]), dtype=et.numpy).reshape(dims)
    from onnx import numpy_helper

    return numpy_helper.to_array(tensor)
