"""HLO kernels, one module per op family; importing this package registers them all.

Each module registers its kernels with ``@hlo_op(name)`` beside their
definitions and calls the shared numpy kernels of :mod:`opconv.kernels` for
the numerics; a module adds only the HLO dialect's conventions (dimension
numbers, explicit broadcast_dimensions, computation enums).

Kernel convention: ``kernel(ctx, *inputs, **attributes)``, inputs in operand
order, attributes keyword-only with Python-safe names and schema defaults.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
