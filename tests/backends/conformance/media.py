"""Minimal binary payloads, generated at import time so the source stays free of opaque blobs."""

from __future__ import annotations

import base64
import io
import struct
import wave
import zlib


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _red_pixel_png() -> bytes:
    # 1x1 RGB, 8 bit; one scanline = filter byte 0 + (255, 0, 0).
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + _png_chunk(b"IEND", b"")
    )


def _silent_wav() -> bytes:
    # 8 samples of 8-bit mono silence (0x80 is the unsigned-PCM midpoint).
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(1)
        out.setframerate(8000)
        out.writeframes(b"\x80" * 8)
    return buffer.getvalue()


PNG_BYTES: bytes = _red_pixel_png()
PNG_BASE64: str = base64.b64encode(PNG_BYTES).decode("ascii")
WAV_BASE64: str = base64.b64encode(_silent_wav()).decode("ascii")
