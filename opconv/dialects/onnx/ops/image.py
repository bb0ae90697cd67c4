"""ImageDecoder: the lossless image formats, decoded with numpy and zlib only.

Supported: PNM (P1-P6), BMP (uncompressed 1/4/8/24/32-bit), PNG (8-bit or
palette, non-interlaced) and TIFF (uncompressed, 8-bit, chunky).  JPEG,
JPEG 2000 and WebP need a real codec (the reference results come from
libjpeg/openjpeg/libwebp through Pillow, which opconv does not depend on);
they raise an ExecutionError naming the format.  A stream that is not an
image at all, or is truncated, decodes to an empty image, as the spec asks.

Every decoder returns an RGB ``uint8`` array [H, W, 3]; the pixel format is
applied last: BGR reverses the channels, Grayscale takes ITU-R 601 luma
rounded to nearest in 16-bit fixed point, ``(19595 R + 38470 G + 7471 B +
2^15) >> 16``, the convention of common imaging libraries.
"""

from __future__ import annotations

import re
import struct
import zlib

import numpy as np

from ....errors import ExecutionError
from ..executor import onnx_op


class _Corrupt(Exception):
    """The stream is not a well-formed image of the format its signature announces."""


def _gray_to_rgb(gray: np.ndarray) -> np.ndarray:
    return np.repeat(gray[:, :, None], 3, axis=2)


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise _Corrupt(what)


# -- PNM ------------------------------------------------------------------------

_PNM_TOKEN = re.compile(rb"(?:\s|#[^\n]*(?:\n|$))*(\d+)")


def _decode_pnm(data: bytes) -> np.ndarray:
    kind = data[1:2]
    _check(kind in b"123456", f"unknown PNM kind P{kind!r}")
    ascii_form, bitmap = kind in b"123", kind in b"14"
    pos, header = 2, []
    for _ in range(2 if bitmap else 3):  # width, height[, maxval]
        m = _PNM_TOKEN.match(data, pos)
        _check(m is not None, "truncated PNM header")
        assert m is not None
        header.append(int(m.group(1)))
        pos = m.end()
    width, height = header[:2]
    maxval = 1 if bitmap else header[2]
    _check(0 < maxval < 65536, f"PNM maxval {maxval} out of range")
    channels = 3 if kind in b"36" else 1
    count = width * height * channels
    if ascii_form:
        samples = np.array(
            re.findall(rb"[01]" if bitmap else rb"\d+", re.sub(rb"#[^\n]*", b"", data[pos:])), dtype=np.int64
        )[:count]
    elif bitmap:
        rows = np.frombuffer(data, np.uint8, height * ((width + 7) // 8), pos + 1).reshape(height, -1)
        samples = np.unpackbits(rows, axis=1)[:, :width].astype(np.int64)
    else:
        dtype = np.dtype(">u2") if maxval > 255 else np.dtype(np.uint8)
        samples = np.frombuffer(data, dtype, count, pos + 1).astype(np.int64)
    _check(samples.size == count, "truncated PNM pixel data")
    if bitmap:
        samples = 1 - samples  # in PBM 1 is black
    # Rescale to 0..255 with rounding (exact for maxval 255).
    pixels = ((samples * 255 + maxval // 2) // maxval).astype(np.uint8).reshape(height, width, channels)
    return pixels if channels == 3 else _gray_to_rgb(pixels[:, :, 0])


# -- BMP ------------------------------------------------------------------------


def _decode_bmp(data: bytes) -> np.ndarray:
    _check(len(data) >= 54, "truncated BMP header")
    (offset,) = struct.unpack_from("<I", data, 10)
    header_size, width, height, _, bits, compression = struct.unpack_from("<IiiHHI", data, 14)
    _check(header_size >= 40, "OS/2 BMP headers are not supported")
    # BI_RGB, or BI_BITFIELDS with the standard masks that 32-bit files carry.
    if compression not in (0, 3) or (compression == 3 and bits != 32):
        raise ExecutionError(f"compressed BMP (compression {compression}) is not supported by opconv")
    top_down, height = height < 0, abs(height)
    stride = (width * bits + 31) // 32 * 4  # rows are padded to 4 bytes
    _check(offset + stride * height <= len(data), "truncated BMP pixel data")
    rows = np.frombuffer(data, np.uint8, stride * height, offset).reshape(height, stride)
    if not top_down:
        rows = rows[::-1]
    if bits in (24, 32):
        bgr = rows[:, : width * bits // 8].reshape(height, width, bits // 8)[:, :, :3]
        return bgr[:, :, ::-1].copy()
    _check(bits in (1, 4, 8), f"unsupported BMP bit count {bits}")
    (colors,) = struct.unpack_from("<I", data, 46)
    colors = colors or 1 << bits
    palette = np.frombuffer(data, np.uint8, 4 * colors, 14 + header_size).reshape(colors, 4)[:, 2::-1]
    indices = np.unpackbits(rows, axis=1).reshape(height, -1, bits) if bits < 8 else rows[:, :, None]
    # Each group of `bits` bits (most significant first) is one palette index.
    weights = 1 << np.arange(bits - 1, -1, -1) if bits < 8 else np.ones(1, np.int64)
    index = (indices[:, :width].astype(np.int64) * weights).sum(axis=2)
    _check(int(index.max(initial=0)) < colors, "BMP palette index out of range")
    return palette[index]


# -- PNG ------------------------------------------------------------------------


def _png_chunks(data: bytes):
    pos = 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        _check(pos + 12 + length <= len(data), "truncated PNG chunk")
        yield kind, data[pos + 8 : pos + 8 + length]
        pos += 12 + length


def _paeth(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    p = a + b - c
    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
    return np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))


def _unfilter(raw: np.ndarray, height: int, row_bytes: int, bpp: int) -> np.ndarray:
    """Undo PNG's per-row filters; ``bpp`` is the byte distance to the left neighbour."""
    rows = raw.reshape(height, row_bytes + 1)
    out = np.zeros((height, row_bytes), np.int64)
    prev = np.zeros(row_bytes, np.int64)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int64)
        if kind == 0:
            cur = line
        elif kind == 2:  # Up
            cur = (line + prev) % 256
        elif kind == 1:  # Sub: a running sum per byte position within the pixel
            pad = (-row_bytes) % bpp
            cur = (np.cumsum(np.pad(line, (0, pad)).reshape(-1, bpp), axis=0) % 256).reshape(-1)[:row_bytes]
        elif kind in (3, 4):
            # Average and Paeth depend on the already-decoded left pixel: one pixel at a time.
            cur = np.zeros(row_bytes, np.int64)
            left = np.zeros(bpp, np.int64)
            up_left = np.zeros(bpp, np.int64)
            for x in range(0, row_bytes, bpp):
                up = prev[x : x + bpp]
                pred = (left + up) // 2 if kind == 3 else _paeth(left, up, up_left)
                cur[x : x + bpp] = (line[x : x + bpp] + pred[: len(up)]) % 256
                left, up_left = cur[x : x + bpp], up
        else:
            raise _Corrupt(f"unknown PNG filter {kind}")
        out[y], prev = cur, cur
    return out.astype(np.uint8)


def _decode_png(data: bytes) -> np.ndarray:
    chunks = list(_png_chunks(data))
    _check(bool(chunks) and chunks[0][0] == b"IHDR" and len(chunks[0][1]) == 13, "PNG without IHDR")
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if interlace:
        raise ExecutionError("interlaced (Adam7) PNG is not supported by opconv")
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(color)
    _check(channels is not None, f"unknown PNG color type {color}")
    assert channels is not None
    if depth != 8 and not (color in (0, 3) and depth in (1, 2, 4)):
        raise ExecutionError(f"{depth}-bit PNG of color type {color} is not supported by opconv")
    try:
        raw = np.frombuffer(zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT")), np.uint8)
    except zlib.error as e:
        raise _Corrupt(str(e)) from None
    row_bytes = (width * channels * depth + 7) // 8
    _check(raw.size == height * (row_bytes + 1), "PNG image data has the wrong size")
    rows = _unfilter(raw, height, row_bytes, max(1, channels * depth // 8))
    if depth < 8:  # packed samples, most significant bits first
        bits = np.unpackbits(rows, axis=1).reshape(height, -1, depth)[:, :width]
        samples = (bits.astype(np.int64) * (1 << np.arange(depth - 1, -1, -1))).sum(axis=2)
    else:
        samples = rows.reshape(height, width, channels)
    if color == 3:
        plte = next((body for kind, body in chunks if kind == b"PLTE"), b"")
        palette = np.frombuffer(plte, np.uint8).reshape(-1, 3)
        _check(int(samples.max(initial=0)) < len(palette), "PNG palette index out of range")
        return palette[samples if depth < 8 else samples[:, :, 0]]
    if color == 0:
        gray = (samples if depth < 8 else samples[:, :, 0]).astype(np.int64)
        return _gray_to_rgb((gray * 255 // ((1 << depth) - 1)).astype(np.uint8))
    if color == 4:
        return _gray_to_rgb(samples[:, :, 0])
    return np.ascontiguousarray(samples[:, :, :3])  # alpha, if any, is dropped


# -- TIFF -----------------------------------------------------------------------

_TIFF_TYPES = {1: "B", 3: "H", 4: "I", 16: "Q"}  # BYTE, SHORT, LONG, LONG8 (BigTIFF not supported)


def _tiff_tags(data: bytes, endian: str) -> dict[int, tuple]:
    (ifd,) = struct.unpack_from(endian + "I", data, 4)
    (count,) = struct.unpack_from(endian + "H", data, ifd)
    tags = {}
    for i in range(count):
        tag, kind, n = struct.unpack_from(endian + "HHI", data, ifd + 2 + 12 * i)
        code = _TIFF_TYPES.get(kind)
        if code is None:
            continue  # rationals, strings...: not needed to decode the pixels
        size = struct.calcsize(code) * n
        at = ifd + 10 + 12 * i if size <= 4 else struct.unpack_from(endian + "I", data, ifd + 10 + 12 * i)[0]
        tags[tag] = struct.unpack_from(f"{endian}{n}{code}", data, at)
    return tags


def _decode_tiff(data: bytes) -> np.ndarray:
    endian = "<" if data[:2] == b"II" else ">"
    tags = _tiff_tags(data, endian)
    get = lambda tag, default=None: tags.get(tag, (default,))[0]  # noqa: E731 - a tiny local accessor
    width, height = get(256), get(257)
    _check(width is not None and height is not None, "TIFF without image size")
    if get(259, 1) != 1:
        raise ExecutionError(f"compressed TIFF (compression {get(259)}) is not supported by opconv")
    samples = get(277, 1)
    bits = tags.get(258, (1,))
    photometric = get(262)
    if any(b != 8 for b in bits) or get(284, 1) != 1 or photometric not in (0, 1, 2):
        raise ExecutionError("only 8-bit chunky gray or RGB TIFF is supported by opconv")
    strips = b"".join(data[o : o + n] for o, n in zip(tags.get(273, ()), tags.get(279, ())))
    _check(len(strips) >= width * height * samples, "truncated TIFF pixel data")
    pixels = np.frombuffer(strips, np.uint8, width * height * samples).reshape(height, width, samples)
    if photometric == 2:
        return np.ascontiguousarray(pixels[:, :, :3])  # extra samples (alpha) are dropped
    gray = pixels[:, :, 0] if photometric == 1 else 255 - pixels[:, :, 0]  # 0 = WhiteIsZero
    return _gray_to_rgb(gray)


# -- the op -----------------------------------------------------------------------

_DECODERS = [
    (b"\x89PNG\r\n\x1a\n", _decode_png),
    (b"BM", _decode_bmp),
    (b"II*\x00", _decode_tiff),
    (b"MM\x00*", _decode_tiff),
]
for _kind in b"123456":
    _DECODERS.append((b"P" + bytes([_kind]), _decode_pnm))

_UNSUPPORTED = [
    (b"\xff\xd8\xff", "JPEG"),
    (b"\x00\x00\x00\x0cjP  ", "JPEG 2000"),
    (b"\xff\x4f\xff\x51", "JPEG 2000"),
]


def _luma(rgb: np.ndarray) -> np.ndarray:
    r, g, b = (rgb[:, :, i].astype(np.uint32) for i in range(3))
    return ((19595 * r + 38470 * g + 7471 * b + (1 << 15)) >> 16).astype(np.uint8)[:, :, None]


_PIXEL_FORMATS = {
    "RGB": lambda rgb: rgb,
    "BGR": lambda rgb: np.ascontiguousarray(rgb[:, :, ::-1]),
    "Grayscale": _luma,
}


@onnx_op("ImageDecoder", since=20)
def image_decoder_20(ctx, encoded_stream, *, pixel_format):
    convert = _PIXEL_FORMATS.get(pixel_format)
    if convert is None:
        raise ExecutionError(f"pixel_format must be RGB, BGR or Grayscale, got {pixel_format!r}")
    data = np.asarray(encoded_stream, dtype=np.uint8).tobytes()
    for magic, name in _UNSUPPORTED:
        if data.startswith(magic):
            raise ExecutionError(f"decoding {name} images is not supported by opconv (no codec available)")
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        raise ExecutionError("decoding WebP images is not supported by opconv (no codec available)")
    decode = next((fn for magic, fn in _DECODERS if data.startswith(magic)), None)
    try:
        if decode is None:
            raise _Corrupt("unknown image format")
        rgb = decode(data)
    except (_Corrupt, struct.error, ValueError, IndexError):
        # The spec: a stream that cannot be decoded gives an empty image.
        return np.zeros((0, 0, 1 if pixel_format == "Grayscale" else 3), dtype=np.uint8)
    return convert(rgb)
