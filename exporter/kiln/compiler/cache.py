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
A cache that cannot be written (read-only, full) only costs the compile.

Size: the folder is kept under `$KILN_CACHE_MAX_SIZE` (bytes, or with a K/M/G suffix; default 1G) by
evicting the least recently used entries (a hit refreshes an entry's modification time) down to 80%
of the limit; the check runs on a process's first write and after each further tenth of the limit
written, so a write costs one folder scan only now and then. Entries of other compiler versions are
never hit again, so they age out first.
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

from kiln.vm._env import parse_size as _parse_size

ENTRY_MAGIC = b"KILNKOBJ"
DEFAULT_MAX_BYTES = 1 << 30
TRIM_TO = 0.8
"""An over-full cache is trimmed to this share of its limit, so the next trim is not at the next write."""
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


def parse_size(text: str) -> int:
    """Bytes from '123', '64K', '512M' or '2G' (powers of 1024); ValueError names a bad value."""
    return _parse_size(text, "KILN_CACHE_MAX_SIZE")


def max_bytes_from_env() -> int:
    """The size limit `$KILN_CACHE_MAX_SIZE` asks for, else DEFAULT_MAX_BYTES."""
    text = os.environ.get("KILN_CACHE_MAX_SIZE", "").strip()
    return parse_size(text) if text else DEFAULT_MAX_BYTES


@dataclass
class CachedKernel:
    """A compiled kernel: its ELF object and the workgroup count its dispatches use."""

    obj: bytes
    workgroups: int


@dataclass(frozen=True)
class CacheUsage:
    """What a cache folder holds: entries and their bytes (temporaries not counted)."""

    entries: int
    bytes: int


class KernelCache:
    """Compiled kernels in `directory`/kernels, one file per key, kept under `max_bytes` (LRU)."""

    def __init__(self, directory, max_bytes: int = DEFAULT_MAX_BYTES):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self._written_since_trim: int | None = None  # None: no trim yet in this process

    def path(self, key: str) -> Path:
        return self.directory / "kernels" / key[:2] / key

    def get(self, key: str) -> CachedKernel | None:
        """The entry for `key`, or None if there is none or it is not a whole, valid entry."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        entry = _decode(data)
        if entry is not None:
            try:
                os.utime(path)  # recently used: the last to be evicted
            except OSError:
                pass
        return entry

    def put(self, key: str, kernel: CachedKernel) -> None:
        """Writes the entry atomically (temporary file, then rename); gives up silently on OSError."""
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}.", suffix=".tmp")
        except OSError:
            return
        try:
            data = _encode(kernel)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return
        written = (self._written_since_trim or 0) + len(data)
        if self._written_since_trim is None or written > self.max_bytes // 10:
            self.trim()
            written = 0
        self._written_since_trim = written

    def _files(self):
        """(modification time, size, path) of every entry and every temporary; missing files skipped."""
        found = []
        try:
            shards = list(os.scandir(self.directory / "kernels"))
        except OSError:
            return found
        for shard in shards:
            try:
                files = list(os.scandir(shard.path)) if shard.is_dir(follow_symlinks=False) else []
            except OSError:
                continue
            for f in files:
                try:
                    st = f.stat(follow_symlinks=False)
                except OSError:
                    continue
                found.append((st.st_mtime, st.st_size, Path(f.path)))
        return found

    def usage(self) -> CacheUsage:
        entries = [(size, path) for _, size, path in self._files() if not path.name.endswith(".tmp")]
        return CacheUsage(len(entries), sum(size for size, _ in entries))

    def trim(self, limit: int | None = None) -> int:
        """Evicts the least recently used entries until the folder holds at most TRIM_TO of `limit`
        (default: max_bytes) once it holds more than `limit`; temporaries an hour old (a writer that
        died) go too. Returns the bytes freed. Entries another process deletes first are skipped."""
        import time

        limit = self.max_bytes if limit is None else limit
        files = self._files()
        freed = 0
        stale = time.time() - 3600
        live = []
        for mtime, size, path in files:
            if path.name.endswith(".tmp"):
                if mtime < stale and _unlink(path):
                    freed += size
            else:
                live.append((mtime, size, path))
        total = sum(size for _, size, _ in live)
        if total > limit:
            goal = int(limit * TRIM_TO)
            for _, size, path in sorted(live, key=lambda f: f[0]):
                if total <= goal:
                    break
                if _unlink(path):
                    freed += size
                total -= size
        return freed

    def clear(self) -> int:
        """Deletes every entry; returns the bytes freed."""
        return self.trim(limit=-1)


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except OSError:
        return False


def read_record(kind: str, key: str):
    """The JSON value stored under `kind`/`key` in the cache folder (small facts worth keeping between
    processes, e.g. a target's effective features: target.py), or None: none stored, unreadable, or
    the cache turned off."""
    directory = cache_dir()
    if directory is None:
        return None
    try:
        return json.loads((directory / kind / f"{key}.json").read_bytes())
    except (OSError, ValueError):
        return None


def write_record(kind: str, key: str, value) -> None:
    """Stores a JSON value as `kind`/`key` (a temporary file renamed over the name, so a reader sees a
    whole record or none); gives up silently where the folder cannot be written."""
    directory = cache_dir()
    if directory is None:
        return
    folder = directory / kind
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key[:8]}.", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, folder / f"{key}.json")
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def default_cache() -> KernelCache | None:
    """The cache the environment asks for (see the module docstring), or None when it is off."""
    directory = cache_dir()
    return None if directory is None else KernelCache(directory, max_bytes_from_env())


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
