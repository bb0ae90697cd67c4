"""The OpenVINO IR dialect: IR v10/v11 XML + .bin I/O (``io``), the opset1 reference executor
(``executor``, ``ops``)."""

from .io import load, save

__all__ = ["load", "save"]

from .. import Dialect, register


def _sniff(head: bytes) -> bool:
    # An IR starts with an XML declaration (optional) and the <net> root element.
    return b"<net" in head


def _prepare(model, **options):
    from .executor import Session

    return Session(model, **options)


register(Dialect("openvino", (".xml",), load, save, _sniff, prepare=_prepare))
