"""The .vmfb container: the module flatbuffer followed by a checksum trailer.

    [ flatbuffer | "KILNCSUM" | u32 algorithm | u32 checksum ]     (little-endian)

The checksum covers every byte before it: the flatbuffer, the magic and the
algorithm. Algorithm 1 is CRC-32 as zlib computes it (ISO-HDLC: reflected
polynomial 0xEDB88320, initial value and final xor 0xFFFFFFFF; the check value
of b"123456789" is 0xCBF43926); the C runtime has its own implementation
(runtime-c/src/checksum.c). Loaders check the trailer before trusting anything
else in the file, so damage anywhere, kernel code included, is a load error.
"""

from __future__ import annotations

import struct
import zlib

MAGIC = b"KILNCSUM"
TRAILER_SIZE = 16
ALGORITHM_CRC32 = 1
_TRAILER = struct.Struct("<8sII")


def crc32(data, value: int = 0) -> int:
    """CRC-32 (zlib's) of `data`, continuing from `value`."""
    return zlib.crc32(data, value) & 0xFFFFFFFF


def seal(flatbuffer: bytes) -> bytes:
    """The module file: `flatbuffer` followed by its trailer."""
    tail = MAGIC + struct.pack("<I", ALGORITHM_CRC32)
    checksum = crc32(tail, crc32(flatbuffer))
    return b"".join([flatbuffer, tail, struct.pack("<I", checksum)])


class ChecksumError(ValueError):
    """A module whose trailer is missing or whose checksum does not match."""


def has_trailer(data) -> bool:
    return len(data) >= TRAILER_SIZE and bytes(data[-TRAILER_SIZE:-8]) == MAGIC


def trailer(data) -> tuple[int, int] | None:
    """(algorithm, stored checksum), or None when `data` does not end in a trailer."""
    if not has_trailer(data):
        return None
    _, algorithm, stored = _TRAILER.unpack(bytes(data[-TRAILER_SIZE:]))
    return algorithm, stored


def verify(data) -> memoryview:
    """The flatbuffer part of a module file whose checksum matches; ChecksumError otherwise."""
    view = memoryview(data)
    found = trailer(view)
    if found is None:
        raise ChecksumError(
            f"module checksum trailer is missing: the last {TRAILER_SIZE} bytes do not "
            f"start with {MAGIC.decode()!r} (the file is truncated or damaged)")
    algorithm, stored = found
    if algorithm != ALGORITHM_CRC32:
        raise ChecksumError(f"module checksum trailer names unknown algorithm {algorithm} "
                            f"(this format uses {ALGORITHM_CRC32}, CRC-32: the file is "
                            f"damaged)")
    computed = crc32(view[:-4])
    if computed != stored:
        raise ChecksumError(f"module checksum mismatch: stored 0x{stored:08x}, computed "
                            f"0x{computed:08x} (the file is damaged)")
    return view[:-TRAILER_SIZE]


def reseal(data) -> bytes:
    """`data` (a module file, possibly modified) with its checksum recomputed: for
    tests that damage a module on purpose and want the loader's deeper checks."""
    if not has_trailer(data):
        raise ChecksumError("not a sealed module (no checksum trailer)")
    return seal(bytes(data[:-TRAILER_SIZE]))
