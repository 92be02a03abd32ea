"""Reflection of a loaded module: its functions' arguments and results, and its globals.

ValueInfo, GlobalInfo and FunctionInfo describe them; _Reflection reads them
from a C module pointer once and caches them (modules are immutable).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kiln.vm._clib import _check, _Function, _lib, _text, _ValueInfo
from kiln.vm._dtypes import _NUMPY_OF, KILN_DTYPES


def _format_type(dtype: str, shape: Sequence[int]) -> str:
    return "x".join([*(str(d) for d in shape), dtype])



@dataclass(frozen=True)
class ValueInfo:
    """An argument or result: name, kiln dtype ('f32'), numpy dtype, shape."""
    name: str
    kiln_dtype: str
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def type_str(self) -> str:
        return _format_type(self.kiln_dtype, self.shape)


@dataclass(frozen=True)
class GlobalInfo:
    name: str
    kiln_dtype: str
    dtype: np.dtype
    shape: tuple[int, ...]
    mutable: bool

    @property
    def type_str(self) -> str:
        return _format_type(self.kiln_dtype, self.shape)


@dataclass(frozen=True)
class FunctionInfo:
    """An exported function: its arguments and results and their tree structures (JSON), and the bytes
    of transient memory a call uses beyond its results (its planned arena; 0 for modules before 2.2)."""
    name: str
    args: tuple[ValueInfo, ...]
    results: tuple[ValueInfo, ...]
    arg_tree: str
    result_tree: str
    transient_size: int = 0

    @property
    def signature(self) -> str:
        args = ", ".join(f"{a.name or f'arg{i}'}: {a.type_str}" for i, a in enumerate(self.args))
        results = ", ".join(r.type_str for r in self.results)
        return f"{self.name}({args}) -> ({results})"


def _value_info(info: _ValueInfo) -> tuple[str, str, np.dtype, tuple[int, ...]]:
    dtype = KILN_DTYPES[info.dtype] if 0 <= info.dtype < len(KILN_DTYPES) else f"dtype{info.dtype}"
    shape = tuple(int(info.shape[i]) for i in range(info.rank))
    return _text(info.name), dtype, _NUMPY_OF.get(dtype), shape



class _Reflection:
    """A module's functions and globals, read from a C module pointer and cached.

    Shared by the Module and its Contexts: each keeps the C module alive while it
    uses this (a Context holds its own reference), so a Context outlives Module.close().
    """

    def __init__(self, ptr):
        self.ptr = ptr
        self.functions: list[FunctionInfo] | None = None
        self.globals: list[GlobalInfo] | None = None
        self.by_name: dict[str, tuple[_Function, FunctionInfo]] = {}
        self.global_by_name: dict[str, GlobalInfo] | None = None

    def function_info(self, fn: _Function) -> FunctionInfo:
        lib = _lib()

        def infos(count, getter):
            out = []
            for i in range(count):
                info = _ValueInfo()
                _check(getter(fn, i, ctypes.byref(info)))
                name, kdtype, dtype, shape = _value_info(info)
                out.append(ValueInfo(name, kdtype, dtype, shape))
            return tuple(out)

        return FunctionInfo(
            name=_text(lib.kiln_function_name(fn)),
            args=infos(lib.kiln_function_arg_count(fn), lib.kiln_function_arg_info),
            results=infos(lib.kiln_function_result_count(fn), lib.kiln_function_result_info),
            arg_tree=_text(lib.kiln_function_arg_tree(fn)),
            result_tree=_text(lib.kiln_function_result_tree(fn)),
            transient_size=int(lib.kiln_function_transient_size(fn)),
        )

    def all_functions(self) -> list[FunctionInfo]:
        if self.functions is None:
            lib = _lib()
            found = []
            for i in range(lib.kiln_module_function_count(self.ptr)):
                fn = _Function()
                _check(lib.kiln_module_function_at(self.ptr, i, ctypes.byref(fn)))
                found.append(self.function_info(fn))
            self.functions = found
        return self.functions

    def resolve(self, name: str) -> tuple[_Function, FunctionInfo]:
        """The C function handle and its description (cached: modules are immutable)."""
        found = self.by_name.get(name)
        if found is None:
            fn = _Function()
            _check(_lib().kiln_module_lookup_function(self.ptr, name.encode(), ctypes.byref(fn)))
            found = (fn, self.function_info(fn))
            self.by_name[name] = found
        return found

    def all_globals(self) -> list[GlobalInfo]:
        if self.globals is None:
            lib = _lib()
            found = []
            for i in range(lib.kiln_module_global_count(self.ptr)):
                info = _ValueInfo()
                _check(lib.kiln_module_global_info(self.ptr, i, ctypes.byref(info)))
                name, kdtype, dtype, shape = _value_info(info)
                found.append(GlobalInfo(name, kdtype, dtype, shape, bool(info.is_mutable)))
            self.globals = found
            self.global_by_name = {g.name: g for g in found}
        return self.globals

    def global_info(self, name: str) -> GlobalInfo | None:
        self.all_globals()
        return self.global_by_name.get(name)

