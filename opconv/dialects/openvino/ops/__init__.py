"""OpenVINO opset1 kernels, one module per op family; importing this package registers them all.

Each module registers its kernels with ``@ov_op(name)`` beside their
definitions and calls the shared numpy kernels of :mod:`opconv.kernels` for
the numerics; a module adds only OpenVINO's conventions (input-borne
parameters, ``auto_broadcast``, ``auto_pad`` spellings, gate orders).

Kernel convention: ``kernel(ctx, *inputs, **attributes)``, inputs in port
order (``None`` for an absent optional port), attributes keyword-only with
Python-safe names and schema defaults applied.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
