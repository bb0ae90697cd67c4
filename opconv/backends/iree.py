"""The ``iree``backend (being written)."""

from __future__ import annotations

from ..errors import NotImplementedFeature
from .base import Backend


class _Pending(Backend):
    name = "iree"

    def run(self, model, feeds, extra_outputs=()):
        raise NotImplementedFeature("the iree backend")


BACKEND = _Pending
