"""IREE as an independent oracle: compile StableHLO MLIR text for the CPU and call its functions.

Compiling costs seconds per module and runs on one core, so tests gather many
functions into a few named modules (``module @part0 {...}``), compile them in
parallel once, and call each function by name.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

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


def compile_stablehlo(text: str, flags: list[str] = ()) -> bytes:
    """A VM flatbuffer of the StableHLO module ``text`` for the host CPU (``flags`` after COMPILE_FLAGS)."""
    import iree.compiler as compiler

    return compiler.compile_str(text, target_backends=["llvm-cpu"], input_type="stablehlo",
                                extra_args=COMPILE_FLAGS + list(flags))


class IreeModule:
    """Compiled modules loaded into synchronous CPU runtime contexts; functions are called by name."""

    def __init__(self, texts: str | list[str], binaries: list[bytes] = (), flags: list[str] = ()):
        """Compile ``texts`` (in parallel, with extra compile ``flags``) and load them, with any already compiled
        ``binaries``."""
        import iree.runtime as runtime

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
