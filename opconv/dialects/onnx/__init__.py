"""The ONNX dialect: protobuf I/O (``io``), the reference executor (``executor``) and its kernels (``ops``)."""

from .io import load, save, to_proto

__all__ = ["load", "save", "to_proto"]

from .. import Dialect, register


def _sniff(head: bytes) -> bool:
    # A ModelProto usually starts with field 1 (ir_version, varint) = 0x08.
    return head[:1] == b"\x08"


def _prepare(model, **options):
    from .executor import Session

    return Session(model, **options)


register(Dialect("onnx", (".onnx",), load, save, _sniff, prepare=_prepare))
