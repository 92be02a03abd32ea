"""Program: globals, kernels and public functions, traced and compiled into one module.

A subclass's class body declares globals (arrays or trees of arrays, or
Program.export_global), kernels (@Program.kernel) and public functions
(methods without a leading underscore, whose argument signature comes from
Program.like defaults). Instantiating it traces and compiles the whole
program and loads it into the C runtime; calls on the instance run there.
"""
from __future__ import annotations

import dataclasses
import inspect
import re

import numpy as np

from ..core.array import Array
from ..core.aval import ShapedArray, aval_of
from ..core.calls import bind_call
from ..core.pytree import tree_map, tree_unflatten, treedef_flatten_up_to
from ..jit import Jitted
from .globals import ExportGlobal, GlobalTable, looks_like_global
from .tracing import PublicFunction, trace_public_function


def _snake_case(name: str) -> str:
    if name.endswith("Program") and name != "Program":
        name = name[: -len("Program")]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class CompiledArtifact:
    """The bytes of a compiled module (.vmfb)."""

    def __init__(self, module_bytes: bytes):
        self.bytes = module_bytes

    def save(self, path) -> None:
        with open(path, "wb") as f:
            f.write(self.bytes)


class Program:
    """Base class of exportable programs; see the module docstring."""

    _kiln_export_name: str
    _kiln_globals: GlobalTable
    _kiln_kernels: dict[str, Jitted]
    _kiln_public: dict[str, object]
    _kiln_compiled = None

    def __init_subclass__(cls, export_name: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._kiln_export_name = export_name or _snake_case(cls.__name__)
        table = GlobalTable()
        kernels: dict[str, Jitted] = {}
        public: dict[str, object] = {}
        for klass in reversed(cls.__mro__):
            if klass is Program or not issubclass(klass, Program):
                continue
            for attr, value in list(vars(klass).items()):
                if attr.startswith("__") or attr.startswith("_kiln_"):
                    continue
                if isinstance(value, _GlobalAttribute):
                    value = value.declared
                if isinstance(value, Jitted):
                    kernels[attr] = value
                elif looks_like_global(value):
                    table.export(attr, value)
                elif inspect.isfunction(value) and not attr.startswith("_"):
                    public[attr] = value
        cls._kiln_globals = table
        cls._kiln_kernels = kernels
        cls._kiln_public = public
        cls._kiln_compiled = None
        for attr in table.trees:
            if attr in vars(cls) and not isinstance(vars(cls)[attr], _GlobalAttribute):
                setattr(cls, attr, _GlobalAttribute(attr, vars(cls)[attr]))

    # ---- declarations -------------------------------------------------------------

    @staticmethod
    def like(tree):
        """A tree of abstract values (shape, dtype) mirroring a tree of arrays; a weakly typed kiln array
        gives a weakly typed parameter, so the function traces as kiln.jit traces it at that array."""
        return tree_map(lambda x: x if isinstance(x, ShapedArray) else
                        aval_of(x) if isinstance(x, Array) else aval_of(np.asarray(x)).strip_weak(), tree)

    @staticmethod
    def export_global(tree, initialize: bool = True, mutable: bool = True):
        """Declares a global tree; initialize=False gives zeros, mutable=False forbids stores."""
        return ExportGlobal(tree, initialize=initialize, mutable=mutable)

    @staticmethod
    def kernel(fn):
        """Marks a pure traced function (like kiln.jit) used from public functions."""
        return Jitted(fn, name=fn.__name__.lstrip("_") or fn.__name__)

    @staticmethod
    def store_global(target, value) -> None:
        """Stores value into the globals that `target` (a loaded global or tree of them) came from."""
        from .tracing import store_through

        store_through(target, value)

    # ---- compilation ----------------------------------------------------------------

    @classmethod
    def _kiln_compile(cls, target=None):
        """(functions, CompileResult) for the host (target None: what instances run, cached) or for
        `target` (a Target or a tuple of variants, best first; cached per class and target)."""
        if target is None and cls._kiln_compiled is not None:
            return cls._kiln_compiled
        if target is not None:
            cached = vars(cls).get("_kiln_compiled_for", {}).get(target)
            if cached is not None:
                return cached
        from ..compiler.pipeline import GlobalSource, compile_module

        functions = {name: trace_public_function(cls, name, fn) for name, fn in cls._kiln_public.items()}
        sources = [f.source for f in functions.values()]
        globals_ = [GlobalSource(s.name, s.aval, s.mutable, s.initial) for s in cls._kiln_globals.slots]
        export = f"Program {cls.__module__}.{cls.__qualname__}" + (f", {_describe_target(target)}" if target else "")
        result = compile_module(cls._kiln_export_name, sources, globals_, target, export)
        compiled = (functions, result)
        if target is None:
            cls._kiln_compiled = compiled
        else:
            if "_kiln_compiled_for" not in vars(cls):
                cls._kiln_compiled_for = {}
            cls._kiln_compiled_for[target] = compiled
        return compiled

    @classmethod
    def _kiln_result_for(cls, target=None):
        """The CompileResult of the module for `target` (as get_compiled_artifact takes it): every stage's
        output, which `kiln export --print STAGE` prints (kiln.compiler.stage_print)."""
        from ..compiler.target import Target, resolve_targets

        targets = resolve_targets(target)
        host = len(targets) == 1 and targets[0] == Target.host()
        return cls._kiln_compile(None if host else (targets[0] if len(targets) == 1 else targets))[1]

    def __init__(self):
        from ..runtime_session import load_module

        functions, result = type(self)._kiln_compile()
        self._kiln_functions: dict[str, PublicFunction] = functions
        self._kiln_result = result
        self._kiln_context = load_module(result.module_bytes).new_context()

    def __getattribute__(self, name):
        if not name.startswith("_") and name in type(self)._kiln_public:
            functions = object.__getattribute__(self, "_kiln_functions")
            return _BoundFunction(self, functions[name])
        return object.__getattribute__(self, name)

    # ---- inspection -----------------------------------------------------------------

    @staticmethod
    def get_ir(program: "Program") -> str:
        """Text of the whole traced program: globals, then every public function with its kernels."""
        cls = type(program) if isinstance(program, Program) else program
        functions, _ = cls._kiln_compile()
        lines = [f"program {cls._kiln_export_name} {{"]
        for slot in cls._kiln_globals.slots:
            kind = "mutable" if slot.mutable else "immutable"
            init = "zeros" if slot.initial is None else "initialized"
            lines.append(f"  global @{slot.name}: {slot.aval.strip_weak()} {kind} {init}")
        for name, fn in functions.items():
            lines.append("")
            lines.append(_indent(fn.source.graph.__str__().replace("graph(", f"func {name}(", 1), 2))
        lines.append("}")
        return "\n".join(lines)

    @staticmethod
    def get_context(program: "Program"):
        """The runtime Context (kiln.vm.runtime) that holds this instance's globals and runs its calls.

        Bound or cancel its calls there: ``Program.get_context(m).set_limits(timeout=2.0)`` (a call
        past it raises KilnRuntimeError DEADLINE_EXCEEDED), ``Program.get_context(m).cancel()`` from
        another thread (CANCELLED). Ctrl-C interrupts a call made on the main thread by itself.
        """
        return _context_of(program, "Program.get_context")

    @staticmethod
    def get_compiled_artifact(program: "Program", *, globals: str = "initial", target=None) -> CompiledArtifact:
        """The compiled module (.vmfb) of a Program class or instance.

        `target` chooses the machines it runs on: None (the default export target: $KILN_TARGET, else
        "portable"), "portable" (kernel variants for x86-64-v2, v3 and v4, or aarch64 NEON and SVE,
        of this machine's architecture; the runtime loads the best one the CPU supports), "host"
        (this machine exactly), an LLVM triple (that architecture's portable variants), a
        kiln.Target (Target.named(triple, cpu, features)) or a sequence of Targets (variants, best
        first). An unknown triple, CPU or feature raises kiln.TargetError.

        `globals` chooses the values the module's globals start from: "initial" (the default) writes
        the values declared in the class body, so the module starts as a fresh instance does, however
        far this instance has trained; "current" writes an instance's values now (its trained
        parameters and optimizer state), so the module starts where the instance is.
        """
        if globals not in ("initial", "current"):
            raise ValueError(f"Program.get_compiled_artifact: globals must be 'initial' or 'current', got {globals!r}")
        if isinstance(program, Program):
            cls = type(program)
        elif isinstance(program, type) and issubclass(program, Program) and program is not Program:
            cls = program
            if globals == "current":
                raise TypeError(f"Program.get_compiled_artifact: globals='current' needs a Program instance; "
                                f"got the class {cls.__name__}, which has only its initial values (export an "
                                f"instance, or the class with globals='initial')")
        else:
            raise TypeError(f"Program.get_compiled_artifact: expected a Program subclass or instance, "
                            f"got {type(program).__name__}")
        result = cls._kiln_result_for(target)
        from kiln.debug import exported_callbacks

        sites = exported_callbacks(result.spec.functions)
        if sites:
            raise TypeError(f"Program.get_compiled_artifact: {cls.__name__} calls back into Python "
                            f"({'; '.join(sites)}): an exported module runs without Python, so it cannot hold "
                            f"kiln.debug.callback (use kiln.debug.print, which the C runtime prints)")
        if globals == "initial":
            return CompiledArtifact(result.module_bytes)
        from kiln.vm.writer import serialize

        context = program._kiln_context
        current = [dataclasses.replace(g, initial=context.get_global(g.name)) for g in result.spec.globals]
        return CompiledArtifact(serialize(dataclasses.replace(result.spec, globals=current)))

    @staticmethod
    def save_globals(program: "Program", path) -> None:
        """Writes every global of an instance to a .npz in `kiln-run --globals-out`'s format (one
        entry per global, named as `kiln-run --list` names it; bf16 as its raw uint16 bits), which
        `kiln-run --globals-in` and Program.load_globals read."""
        from .checkpoint import save_globals

        save_globals(_context_of(program, "Program.save_globals"), path, "Program.save_globals")

    @staticmethod
    def load_globals(program: "Program", path, *, partial: bool = False) -> None:
        """Sets an instance's globals from a .npz in `kiln-run --globals-out`'s format.

        Every entry must name a global of the module with its dtype and shape, and, unless partial
        is true, every global must be present (so resuming never silently mixes saved and initial
        state); nothing is set when a check fails."""
        from .checkpoint import load_globals

        load_globals(_context_of(program, "Program.load_globals"), path, partial, "Program.load_globals")


def _describe_target(target) -> str:
    from ..compiler.target import Target

    targets = (target,) if isinstance(target, Target) else tuple(target)
    if len(targets) > 1:
        return "variants " + ", ".join(t.variant for t in targets)
    t = targets[0]
    return f"target {t.triple} cpu={t.cpu}" + (f" ({t.variant})" if t.variant and t.variant != t.cpu else "")


def _context_of(program, where: str):
    if not isinstance(program, Program):
        got = type(program).__name__ + (f" (the class {program.__name__})" if isinstance(program, type) else "")
        raise TypeError(f"{where}: expected a Program instance, got {got}")
    return program._kiln_context


class _GlobalAttribute:
    """Class attribute standing for an exported global tree; reads give its current value."""

    def __init__(self, attr: str, declared):
        self.attr = attr
        self.declared = declared

    def __get__(self, instance, owner):
        table = owner._kiln_globals
        tree = table.trees[self.attr]
        if instance is None:
            leaves = [_initial_value(table.slots[i]) for i in tree.slots]
            return tree_unflatten(tree.treedef, leaves)
        context = instance._kiln_context
        leaves = [context.get_global(table.slots[i].name) for i in tree.slots]
        return tree_unflatten(tree.treedef, leaves)

    def __set__(self, instance, value):
        table = type(instance)._kiln_globals
        tree = table.trees[self.attr]
        leaves = treedef_flatten_up_to(tree.treedef, value)
        for i, leaf in zip(tree.slots, leaves):
            slot = table.slots[i]
            instance._kiln_context.set_global(slot.name, leaf)


def _initial_value(slot):
    return slot.initial if slot.initial is not None else np.zeros(slot.aval.shape, slot.aval.dtype)


class _BoundFunction:
    """A public function of a compiled Program instance: flattens, checks, runs, rebuilds."""

    def __init__(self, program: Program, fn: PublicFunction):
        self.program = program
        self.fn = fn
        self.__name__ = fn.name

    def __call__(self, *args, **kwargs):
        bound = bind_call(self.fn.name, self.fn.signature, args, kwargs, self.fn.argument_types())
        values = [bound.arguments[p] for p in self.fn.arg_names]
        leaves = self.fn.flatten_arguments(values)
        outs = self.program._kiln_context.invoke(self.fn.name, leaves)
        return tree_unflatten(self.fn.out_treedef, outs)


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.splitlines())

