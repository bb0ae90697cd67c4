"""ONNX kernels, one module per op family; importing this package registers them all.

Each module keeps every version of an op together, registered with
``@onnx_op(name, since=...)`` beside its definition, and calls the shared
numpy kernels of :mod:`opconv.kernels` for the numerics.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
