"""Sizes read from environment variables (KILN_CACHE_MAX_SIZE, KILN_RESULT_REUSE_MAX_SIZE)."""
from __future__ import annotations


def parse_size(text: str, variable: str, allow_zero: bool = False) -> int:
    """Bytes from '123', '64K', '512M' or '2G' (powers of 1024); a ValueError names `variable` and the
    bad value. 0 is refused unless allow_zero."""
    value = text.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(value[-1:], 1)
    number = value[:-1] if scale > 1 else value
    try:
        size = int(float(number) * scale)
    except ValueError:
        raise ValueError(f"{variable}={text!r} is not a size (bytes, or a number with K, M or G)") from None
    if size < 0 or (size == 0 and not allow_zero):
        raise ValueError(f"{variable}={text!r} must be {'0 or more' if allow_zero else 'positive'}")
    return size
