"""The persistent kernel cache: each kernel's compiled object on disk, so compiling it again costs a read.

An entry is keyed by the SHA-256 of the kernel's region IR (`compile.structural_key`), its bindings,
the target (triple, CPU, features) and the compiler's version: a digest of every source file of
`kiln.compiler`, `kiln.core` and `kiln.lax` with the llvmlite and LLVM versions, so any change to
the compiler or to the primitives misses.

Where: `$KILN_CACHE_DIR`, else `$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`; entries lie under
`kernels/`. `KILN_CACHE=0` (or `off`, `false`, `no`) turns it off. Safe under concurrent
processes: an entry is written to a temporary file in its folder and renamed over its name, so a
reader sees a whole entry or none. Each entry carries a checksum of its contents; an entry that is
short, damaged or of another format is ignored, and the kernel is compiled and the entry rewritten.
A cache that cannot be written (read-only, full) only costs the compile. Nothing is evicted: delete
the folder to reclaim space.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

ENTRY_MAGIC = b"KILNKOBJ"
ENTRY_FORMAT = 1
_HEADER = struct.Struct("<8sI32sI")  # magic, format, sha256 of the rest, length of the JSON metadata


_VERSIONED_PACKAGES = ("compiler", "core", "lax")
"""The parts of kiln whose sources decide a kernel's code: code generation, and the primitives'
definitions and traits it reads (reduction ops, kernel kinds, dtypes)."""


@functools.cache
def compiler_version() -> str:
    """Digest of the sources of kiln.compiler, kiln.core and kiln.lax and of the llvmlite/LLVM
    versions (part of every key)."""
    import llvmlite
    import llvmlite.binding as llvm

    digest = hashlib.sha256(f"{ENTRY_FORMAT};{llvmlite.__version__};{llvm.llvm_version_info}".encode())
    kiln_root = Path(__file__).resolve().parent.parent
    for package in _VERSIONED_PACKAGES:
        for path in sorted((kiln_root / package).rglob("*.py")):
            digest.update(str(path.relative_to(kiln_root)).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def kernel_key(region_key: str, bindings: list[tuple[int, bool]], target) -> str:
    """The entry name of a kernel: what it computes, on which buffers, for which machine, by which compiler."""
    text = json.dumps([compiler_version(), target.triple, target.cpu, target.features, bindings, region_key])
    return hashlib.sha256(text.encode()).hexdigest()


def cache_dir() -> Path | None:
    """The cache's folder, or None when KILN_CACHE turns it off."""
    if os.environ.get("KILN_CACHE", "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    if os.environ.get("KILN_CACHE_DIR"):
        return Path(os.environ["KILN_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kiln"


@dataclass
class CachedKernel:
    """A compiled kernel: its ELF object and the workgroup count its dispatches use."""

    obj: bytes
    workgroups: int


class KernelCache:
    """Compiled kernels in `directory`/kernels, one file per key."""

    def __init__(self, directory):
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        return self.directory / "kernels" / key[:2] / key

    def get(self, key: str) -> CachedKernel | None:
        """The entry for `key`, or None if there is none or it is not a whole, valid entry."""
        try:
            data = self.path(key).read_bytes()
        except OSError:
            return None
        return _decode(data)

    def put(self, key: str, kernel: CachedKernel) -> None:
        """Writes the entry atomically (temporary file, then rename); gives up silently on OSError."""
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}.", suffix=".tmp")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(kernel))
            os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def default_cache() -> KernelCache | None:
    """The cache the environment asks for (see the module docstring), or None when it is off."""
    directory = cache_dir()
    return None if directory is None else KernelCache(directory)


def _encode(kernel: CachedKernel) -> bytes:
    meta = json.dumps({"workgroups": kernel.workgroups}).encode()
    body = meta + kernel.obj
    return _HEADER.pack(ENTRY_MAGIC, ENTRY_FORMAT, hashlib.sha256(body).digest(), len(meta)) + body


def _decode(data: bytes) -> CachedKernel | None:
    if len(data) < _HEADER.size:
        return None
    magic, version, checksum, meta_size = _HEADER.unpack_from(data)
    body = data[_HEADER.size:]
    if magic != ENTRY_MAGIC or version != ENTRY_FORMAT or hashlib.sha256(body).digest() != checksum:
        return None
    try:
        meta = json.loads(body[:meta_size])
        workgroups = int(meta["workgroups"])
    except (ValueError, KeyError, TypeError):
        return None
    return CachedKernel(bytes(body[meta_size:]), workgroups)
