"""Test utility: maps a kernel image into this process and calls its kernels through ctypes.

Does what the C runtime's loader does (copy, apply relocations, make text
read+execute and rodata read-only) so the compiler can be tested without it.
Workgroups run on a thread pool: ctypes releases the GIL during calls.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import struct
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value

KERNEL_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_uint32)


class DispatchArgs(ctypes.Structure):
    _fields_ = [
        ("bindings", ctypes.POINTER(ctypes.c_void_p)),
        ("push_constants", ctypes.POINTER(ctypes.c_int64)),
        ("workgroup_count", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


class LoadedImage:
    """A kernel image mapped W^X in this process."""

    def __init__(self, code: bytes, text_size: int, relocs, segment_align: int = 4096):
        page = mmap.PAGESIZE
        self.size = max(len(code) + page - 1, page) // page * page
        base = _libc.mmap(None, self.size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if base in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        self.base = base
        ctypes.memmove(base, code, len(code))
        for offset, addend in relocs:
            if offset + 8 > len(code) or not 0 <= addend <= len(code):
                raise ValueError(f"relocation ({offset}, {addend}) outside the image")
            ctypes.memmove(base + offset, struct.pack("<Q", base + addend), 8)
        self._protect(0, text_size, mmap.PROT_READ | mmap.PROT_EXEC)
        if self.size > text_size:
            self._protect(text_size, self.size - text_size, mmap.PROT_READ)

    @classmethod
    def from_spec(cls, spec) -> "LoadedImage":
        return cls(spec.code, spec.text_size, spec.relocs, spec.segment_align)

    def _protect(self, offset: int, size: int, prot: int) -> None:
        if size and _libc.mprotect(self.base + offset, size, prot) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

    def function(self, entry_offset: int):
        return KERNEL_FN(self.base + entry_offset)

    def close(self) -> None:
        if self.base:
            _libc.munmap(self.base, self.size)
            self.base = 0


def aligned_empty(shape, dtype, alignment: int = 64) -> np.ndarray:
    """An uninitialized array whose data is `alignment`-byte aligned."""
    dtype = np.dtype(dtype)
    nbytes = max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1)
    raw = np.empty(nbytes + alignment, np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start: start + nbytes].view(np.uint8)[: int(np.prod(shape, dtype=np.int64)) * dtype.itemsize].view(dtype).reshape(shape)


def aligned_copy(a) -> np.ndarray:
    a = np.asarray(a)
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


# Its threads are named for parallel_compile.FORK_SAFE_THREAD_PREFIXES: idle between dispatches, they keep a
# later compile of the same process (a test run) forking its workers.
_POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="kiln-inprocess-dispatch")


def dispatch(fn, buffers: list[np.ndarray], workgroups: int, *, parallel: bool = True) -> None:
    """Runs every workgroup of one dispatch over `buffers` (inputs then outputs)."""
    for b in buffers:
        if b.ctypes.data % 64 and b.nbytes:
            raise ValueError("bindings must be 64-byte aligned (use aligned_copy / aligned_empty)")
    pointers = (ctypes.c_void_p * max(len(buffers), 1))(*[b.ctypes.data for b in buffers])
    args = DispatchArgs(pointers, None, workgroups, 0)
    address = ctypes.addressof(args)

    def run(group: int) -> None:
        status = fn(address, group)
        if status != 0:
            raise RuntimeError(f"kernel returned {status} for workgroup {group}")

    if parallel and workgroups > 1:
        list(_POOL.map(run, range(workgroups)))
    else:
        for g in range(workgroups):
            run(g)


class KernelRunner:
    """Runs compiled kernels (a CompiledKernels) on numpy arrays."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.image = LoadedImage.from_spec(compiled.image)

    def run_step(self, step, inputs: list[np.ndarray], *, parallel: bool = True) -> list[np.ndarray]:
        index, workgroups = self.compiled.dispatch_info(step)
        return self.run_kernel(index, workgroups, inputs, [v.aval for v in step.outputs], parallel=parallel)

    def run_kernel(self, index: int, workgroups: int, inputs, out_avals, *, parallel: bool = True) -> list[np.ndarray]:
        kernel = self.compiled.kernels[index]
        ins = [aligned_copy(np.asarray(x)) for x in inputs]
        outs = [aligned_empty(a.shape, a.dtype) for a in out_avals]
        fn = self.image.function(kernel.entry_offset)
        dispatch(fn, ins + outs, workgroups, parallel=parallel)
        return outs

    def run_plan(self, plan, graph, args: list[np.ndarray]) -> list[np.ndarray]:
        """Evaluates a whole partitioned graph (host steps eagerly with numpy impls)."""
        env = {v.id: np.asarray(c) for v, c in zip(graph.constvars, graph.consts)}
        env.update({v.id: np.asarray(a) for v, a in zip(graph.invars, args)})

        def read(atom):
            return env[atom.id] if hasattr(atom, "id") else np.asarray(atom.value)

        for step in plan.steps:
            if hasattr(step, "region"):
                outs = self.run_step(step, [read(v) for v in step.inputs])
                env.update({v.id: o for v, o in zip(step.outputs, outs)})
            else:
                eqn = step.eqn
                outs = eqn.primitive.impl(*[read(a) for a in eqn.invars], **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
                env.update({v.id: np.asarray(o) for v, o in zip(eqn.outvars, outs)})
        return [read(a) for a in graph.outvars]

    def close(self) -> None:
        self.image.close()
