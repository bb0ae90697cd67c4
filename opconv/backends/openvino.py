"""The ``openvino``backend (being written)."""

from __future__ import annotations

from ..errors import NotImplementedFeature
from .base import Backend


class _Pending(Backend):
    name = "openvino"

    def run(self, model, feeds, extra_outputs=()):
        raise NotImplementedFeature("the openvino backend")


BACKEND = _Pending
