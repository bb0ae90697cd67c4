"""The ``opconv`` backend: opconv's own reference executors (every dialect; proves a rewrite, shares kernels)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .base import Backend, values_by_name, with_outputs


class ReferenceBackend(Backend):
    name = "opconv"
    dialects = ("onnx", "openvino", "hlo")

    def __init__(self, seed: int = 0):
        self.seed = seed

    def run(self, model: Any, feeds: Mapping[str, Any], extra_outputs: Iterable[str] = ()) -> dict[str, Any]:
        import opconv

        model = self.load(model)
        extra = values_by_name(model, extra_outputs)
        # Intermediates are graph outputs for this run: the plan then keeps them, and no fusion swallows them.
        with with_outputs(model, extra), np.errstate(all="ignore"):
            return opconv.prepare(model, seed=self.seed).run(feeds)


BACKEND = ReferenceBackend
