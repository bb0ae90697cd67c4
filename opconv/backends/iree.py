"""The ``iree`` backend: HLO models through opconv's StableHLO export, compiled by IREE for the host CPU and run
in its synchronous runtime.  An ONNX model is converted to HLO first, at the shapes of its feeds, and an
OpenVINO IR to ONNX before that (so these test opconv's conversions too); intermediates are results of the
exported function, named as the HLO model names them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..errors import ExecutionError
from .base import Backend, import_runtime, values_by_name, with_outputs

COMPILE_FLAGS = [
    "--iree-llvmcpu-target-cpu=host",
    "--iree-input-demote-f64-to-f32=false",  # keep float64 as float64
    "--iree-global-opt-enable-warn-on-uninitialized-values=false",  # select_and_scatter's lowering warns
    # A max pool fused with its element-wise producer (inception_v1: LRN then 3x3/2 pool) tiles into a 93 KB
    # stack buffer, over the 32 KB default; the synchronous runtime runs it on the caller's 8 MB stack.
    "--iree-llvmcpu-stack-allocation-limit=262144",
]

# Convolutions as im2col + matmul: IREE's direct convolution code runs vgg19 in 28 s, this in 3 s (measured with
# iree 3.13 on a 2-core AVX2 machine); compile times are alike.  Worth it for whole networks, not for node cases.
IM2COL_FLAGS = ["--iree-global-opt-use-im2col-for-convs"]


def compile_stablehlo(text: str, flags: Iterable[str] = ()) -> bytes:
    """A VM flatbuffer of the StableHLO module ``text`` for the host CPU (``flags`` after COMPILE_FLAGS)."""
    compiler = import_runtime("iree.compiler", "iree", "iree")
    return compiler.compile_str(
        text, target_backends=["llvm-cpu"], input_type="stablehlo", extra_args=COMPILE_FLAGS + list(flags)
    )


class IreeModule:
    """Compiled modules loaded into synchronous CPU runtime contexts; functions are called by name.

    Compiling costs seconds per module and runs on one core, so callers with many functions gather them into a
    few named modules (``module @part0 {...}``), compiled here in parallel once.
    """

    def __init__(self, texts: str | list[str], binaries: Iterable[bytes] = (), flags: Iterable[str] = ()):
        """Compile ``texts`` (in parallel, with extra compile ``flags``) and load them, with any already compiled
        ``binaries``."""
        runtime = import_runtime("iree.runtime", "iree", "iree")
        texts = [texts] if isinstance(texts, str) else list(texts)
        # iree-compile is a subprocess, so threads compile the parts in parallel.
        with ThreadPoolExecutor(max_workers=max(1, min(len(texts), os.cpu_count() or 1))) as pool:
            binaries = list(binaries) + list(pool.map(lambda text: compile_stablehlo(text, flags), texts))
        self._functions = {}
        self._contexts = []
        for binary in binaries:
            context = runtime.SystemContext(config=runtime.Config("local-sync"))
            vm_module = runtime.VmModule.copy_buffer(context.instance, binary)
            context.add_vm_module(vm_module)
            self._contexts.append(context)
            bound = context.modules[vm_module.name]
            for name in vm_module.function_names:
                if not name.startswith("__"):
                    self._functions[name] = bound

    def call(self, function: str, *arrays) -> list[np.ndarray]:
        """Run ``function`` on numpy arrays; returns its results as numpy arrays."""
        arrays = [np.asarray(a) for a in arrays]
        # (np.ascontiguousarray would turn a scalar into shape (1,).)
        result = self._functions[function][function](*[a if a.flags.c_contiguous else a.copy() for a in arrays])
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        return [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in results]


#: the backend's last compiled modules (StableHLO digest -> VM flatbuffer): running one model on two sides, or
#: again with the same intermediates, compiles it once.  Large modules (weights inline) are not kept.
_COMPILED: dict[str, bytes] = {}
_COMPILED_KEPT, _COMPILED_MAX_BYTES = 4, 32 << 20


def _compiled(text: str) -> bytes:
    import hashlib

    key = hashlib.sha256(text.encode()).hexdigest()
    binary = _COMPILED.pop(key, None)
    if binary is None:
        try:
            binary = compile_stablehlo(text, IM2COL_FLAGS)
        except Exception:  # noqa: BLE001 - im2col miscompiles some grouped convolutions (iree 3.x): plain then
            binary = compile_stablehlo(text)
    if len(binary) <= _COMPILED_MAX_BYTES:
        _COMPILED[key] = binary  # most recent last
        while len(_COMPILED) > _COMPILED_KEPT:
            del _COMPILED[next(iter(_COMPILED))]
    return binary


class IreeBackend(Backend):
    name = "iree"
    dialects = ("hlo", "onnx", "openvino")

    def describe(self) -> str:
        return "iree llvm-cpu"

    def run(self, model: Any, feeds: Mapping[str, Any], extra_outputs: Iterable[str] = ()) -> dict[str, Any]:
        import atexit
        import gc

        import opconv

        from ..dialects.hlo.stablehlo import export

        model = self.load(model)
        import_runtime("iree.runtime", "iree", self.name)
        # IREE's bindings need the collections at exit that the command line skips (gc.freeze at exit): without
        # them they print a page of "leaked instance" lines as the process ends.
        atexit.unregister(gc.freeze)
        if model.dialect == "openvino":
            model = opconv.convert(model, to="onnx")
        if model.dialect == "onnx":
            shapes = {name: np.shape(value) for name, value in feeds.items()}
            model = opconv.convert(model, to="hlo", input_shapes=shapes)
        extra = values_by_name(model, extra_outputs)
        with with_outputs(model, extra) as outputs:
            text = export(model)
            names = [v.name for v in outputs]
        args = [np.asarray(feeds[v.name]) for v in model.graph.inputs if v.const is None]
        try:
            results = IreeModule([], [_compiled(text)]).call("main", *args)
        except Exception as e:  # noqa: BLE001 - IREE's compiler and runtime raise their own errors
            raise ExecutionError(f"iree: {_told(e)}", where=model.path) from None
        return dict(zip(names, results))


def _told(e: Exception) -> str:
    """IREE's message in one line: the compiler's first ``error:`` line (its output starts with the tool's
    name and exit code), else the first line."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    return (errors or lines or [type(e).__name__])[0]


BACKEND = IreeBackend
