"""`kiln check`: every dispatch of a call in the C runtime against the eager reference interpreter.

The function runs in the C runtime with a dispatch observer (kiln.vm.runtime.Context.
set_dispatch_observer), which hands over each dispatch's bound buffers as the kernel read and wrote
them. Each dispatch is matched to the dispatch region it was compiled from (by its function and word
offset in the bytecode), the region's equations are evaluated eagerly with numpy on the runtime's
own inputs of that dispatch (so an error does not carry into later dispatches) in float64 where the
operation allows, and the kernel's outputs are compared with the result: max abs and relative error,
ulp distance in the output's dtype, and whether it lies within the dtype's tolerance
(TOLERANCES; docs/accuracy.md, "Checking a module's numerics").
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..compiler.fusion import DispatchStep, partition
from ..core.ir import Literal, subgraphs_of

# Relative tolerance per float dtype (docs/accuracy.md, "Checking a module's numerics"): an output element
# passes when |kernel - reference| <= rtol * |reference| + CHECK_FACTOR * its rounding bound (evaluate_region:
# the error computing the region in the program's dtypes accumulates, propagated per element), for the
# float64 reference or the one in the program's dtypes; rtol is that of the least precise float dtype
# computed on the way to the output. float32: about 840 ulp of the element, far above the few ulp of kiln's
# functions; float64: sums of 10^6 terms; float16/bfloat16: about 10 and 6 ulp.
TOLERANCES = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}

# The rounding bound's factor (compare): the first-order bound of evaluate_region is a worst case for each
# operation; the factor covers the second-order terms and math functions a few ulp beyond the 4 they are
# measured at. The 29 programs of tests/programs use at most 5.4% of their tolerance (make check-sweep).
CHECK_FACTOR = 8

_NARROW_FLOATS = ("float16", "bfloat16", "float32")
# Primitives whose meaning depends on the exact float format: always evaluated in the program's dtypes.
_NATIVE_ONLY = ("bitcast", "reduce_precision", "nextafter")


class CheckError(Exception):
    """A check that cannot run: an unknown function, inputs that do not fit the signature."""


@dataclass
class DispatchResult:
    """One dispatch compared with the reference."""

    index: int
    function: str
    offset: int
    kernel: str
    step: str
    source: str  # file:line in function: code, of the region's first operation that has one
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: int | None = 0  # None: no float output
    passed: bool = True
    note: str = ""  # why it failed, or why it was not compared

    def line(self) -> str:
        ulp = "-" if self.max_ulp is None else str(self.max_ulp) if self.max_ulp < 10**6 else f"{self.max_ulp:.1e}"
        status = "ok" if self.passed else "FAIL"
        if self.note and self.passed:
            status = f"skipped ({self.note})"
        return (f"{self.index:4d}  {self.kernel:<28s} abs {self.max_abs:9.3g}  rel {self.max_rel:9.3g}  "
                f"ulp {ulp:>6s}  {status}")


@dataclass
class CheckReport:
    function: str
    results: list = field(default_factory=list)
    outputs: list = field(default_factory=list)  # the call's results (the runtime's)

    @property
    def first_failure(self) -> DispatchResult | None:
        return next((r for r in self.results if not r.passed), None)

    @property
    def passed(self) -> bool:
        return self.first_failure is None

    def text(self) -> str:
        lines = [f"{len(self.results)} dispatches of {self.function}, each against the eager reference "
                 f"(float64 where the op allows) on the runtime's own inputs:"]
        lines += [r.line() for r in self.results]
        skipped = sum(bool(r.passed and r.note) for r in self.results)
        if skipped:
            lines.append(f"{skipped} dispatches not compared (no reference for them)")
        bad = self.first_failure
        if bad is None:
            compared = len(self.results) - skipped
            lines.append(f"all {compared} compared dispatches within tolerance" if skipped else
                         f"all {len(self.results)} dispatches within tolerance")
        else:
            failed = sum(not r.passed for r in self.results)
            lines.append(f"first dispatch beyond tolerance: #{bad.index} {bad.kernel} ({bad.function} word "
                         f"{bad.offset}, step {bad.step}): {bad.note}")
            lines.append(f"  its first op: {bad.source or '(no source line recorded)'}")
            lines.append(f"{failed} of {len(self.results)} dispatches beyond tolerance")
        return "\n".join(lines)


# ---- inputs -----------------------------------------------------------------------------------

def _raw_bits(array: np.ndarray) -> np.ndarray:
    """A bfloat16 array saved by numpy reads back as 2-byte voids: its bits as uint16, which a bf16
    argument takes (kiln-run reads such files the same way)."""
    return array.view(np.uint16) if array.dtype.kind == "V" and array.dtype.itemsize == 2 else array


def parse_input(text: str) -> list[np.ndarray]:
    """kiln-run's --input syntax: SHAPExDTYPE=v1,v2,... (one value fills the shape; `f32=2.5` is
    0-d), @file.npy, @file.npz (every array in order) or @file.npz:NAME."""
    from kiln.vm.runtime import numpy_dtype

    if text.startswith("@"):
        path, name = text[1:], ""
        if ".npz:" in path:
            path, name = path.split(".npz:", 1)
            path += ".npz"
        if not os.path.isfile(path):
            raise CheckError(f"input {text!r}: no such file {path!r}")
        if path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as archive:
                if name:
                    if name not in archive.files:
                        raise CheckError(f"input {text!r}: {path} has no array {name!r} "
                                         f"(it has {', '.join(archive.files)})")
                    return [_raw_bits(archive[name])]
                return [_raw_bits(archive[k]) for k in archive.files]
        return [_raw_bits(np.load(path, allow_pickle=False))]
    kind, eq, values = text.partition("=")
    if not eq:
        raise CheckError(f"input {text!r}: expected SHAPExDTYPE=v1,v2,... (4x3xf32=1,2,...), @file.npy, "
                         f"@file.npz or @file.npz:NAME")
    *dims, dtype_name = kind.split("x")
    try:
        dtype = numpy_dtype(dtype_name)
        shape = tuple(int(d) for d in dims)
    except (KeyError, ValueError):
        raise CheckError(f"input {text!r}: {kind!r} is not SHAPExDTYPE (such as 4x3xf32, or f32 for a "
                         f"scalar)") from None
    tokens = [t.strip() for t in values.split(",")]
    try:
        if dtype == np.bool_:
            flat = np.array([t in ("1", "true", "True") for t in tokens], np.bool_)
        elif np.dtype(dtype).kind == "c":
            flat = np.array([complex(t) for t in tokens], dtype)
        elif np.dtype(dtype).kind in "iu":
            flat = np.array([int(t) for t in tokens], dtype)
        else:
            flat = np.array([float(t) for t in tokens], np.float64).astype(dtype)
    except ValueError as e:
        raise CheckError(f"input {text!r}: {e}") from None
    size = math.prod(shape)
    if flat.size == 1:
        return [np.full(shape, flat[0], dtype)]
    if flat.size != size:
        raise CheckError(f"input {text!r}: {flat.size} values for shape {shape} ({size} elements)")
    return [flat.reshape(shape)]


# ---- from the bytecode to the regions -----------------------------------------------------------

def _dispatch_instructions(function_spec) -> list[tuple[int, int]]:
    """(word offset, kernel index) of each dispatch instruction of a function, in code order."""
    from kiln.vm.isa import Label, instr_words

    out, offset = [], 0
    for instr in function_spec.code:
        if isinstance(instr, Label):
            continue
        if instr.op == "dispatch":
            out.append((offset, instr.operands[0]))
        offset += instr_words(instr)
    return out


def _steps_in_lowering_order(graph, plan_for):
    """The graph's dispatch steps in the order kiln.compiler.procedure emits their dispatch
    instructions: its own steps in order, a cond's branches in order, a while's condition then body,
    a scan's body, each where it stands."""
    for step in plan_for(graph).steps:
        if isinstance(step, DispatchStep):
            yield step
            continue
        params = step.eqn.params
        if "branches" in params:  # cond
            subs = list(params["branches"])
        elif "cond_graph" in params:  # while
            subs = [params["cond_graph"], params["body_graph"]]
        else:  # scan's body, or any other holder of graphs
            subs = list(subgraphs_of(step.eqn))
        for sub in subs:
            yield from _steps_in_lowering_order(sub, plan_for)


def dispatch_map(result) -> dict[tuple[str, int], tuple[DispatchStep, int]]:
    """(function name, word offset of a dispatch) -> (the step it was compiled from, kernel index)."""
    top = {id(result.optimized[name]): plan for name, plan in result.plans.items()}
    nested: dict[int, object] = {}

    def plan_for(graph):
        plan = top.get(id(graph))
        if plan is None:
            plan = nested.get(id(graph))
            if plan is None:
                plan = nested[id(graph)] = partition(graph)
        return plan

    from ..compiler.compile import structural_key

    mapping, key_of_kernel = {}, {}
    for fn in result.spec.functions:
        if fn.name not in result.optimized:
            continue
        instructions = _dispatch_instructions(fn)
        steps = list(_steps_in_lowering_order(result.optimized[fn.name], plan_for))
        if len(steps) != len(instructions):
            raise CheckError(f"internal: {fn.name} has {len(instructions)} dispatch instructions but "
                             f"{len(steps)} dispatch steps")
        for (offset, kernel), step in zip(instructions, steps):
            key = structural_key(step.region)
            if key_of_kernel.setdefault(kernel, key) != key:
                raise CheckError(f"internal: the dispatch at word {offset} of {fn.name} runs kernel {kernel}, "
                                 f"which was compiled from another region than step {step.name}")
            mapping[(fn.name, offset)] = (step, kernel)
    return mapping


# ---- the reference interpreter ------------------------------------------------------------------

def _is_narrow_float(dtype) -> bool:
    return np.dtype(dtype).name in _NARROW_FLOATS


def _widen_param(value):
    if isinstance(value, (np.dtype, type)):
        try:
            if _is_narrow_float(value):
                return np.dtype(np.float64)
        except TypeError:
            return value
    return value


def _split_chunks(x, *, axes, chunks, dtype, op):
    """reduce_<op>_chunks: the reduction of `chunks` ranges of the first reduced axis (split_reduction)."""
    axes = tuple(sorted(axes))
    n = x.shape[axes[0]]
    reduce = {"sum": np.sum, "max": np.max, "min": np.min}[op]
    parts = []
    for c in range(chunks):
        piece = np.take(x, np.arange(c * n // chunks, (c + 1) * n // chunks), axis=axes[0])
        parts.append(reduce(piece, axis=axes))
    return np.stack(parts)


def _evaluate(eqn, args, wide: bool):
    name = eqn.primitive.name
    params = eqn.params
    if wide:
        params = {k: _widen_param(v) for k, v in params.items()}
    for op in ("sum", "max", "min"):
        if name == f"reduce_{op}_chunks":
            return [_split_chunks(args[0], op=op, **params)]
        if name == f"reduce_{op}_partials":
            return [{"sum": np.sum, "max": np.max, "min": np.min}[op](args[0], axis=0)]
    impl = eqn.primitive.impl
    if impl is None:
        raise NotImplementedError(f"primitive {name} has no eager implementation")
    with np.errstate(all="ignore"):
        out = impl(*args, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


# Operations whose rounding error is bounded by the same operation on the magnitudes of its operands
# (sums, products, their layouts): |a + b| <= |a| + |b|, |sum x| <= sum |x|, |A B| <= |A| |B|.
_MAGNITUDE_OPS = frozenset({
    "add", "mul", "convert", "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "slice",
    "rev", "pad", "concatenate", "gather", "dynamic_slice", "dynamic_update_slice", "select", "reduce_sum",
    "dot_general", "cumsum", "conv_general_dilated", "integer_pow", "reduce_sum_chunks",
    "reduce_sum_partials", "stop_gradient", "copy"})


def _is_float(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


# Unit roundoff of each float format (half an ulp of 1).
_UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
# Rounding bound (in unit roundoffs of the result) of an elementwise math function: kiln's are within 4 ulp.
_MATH_ROUNDING = 8.0
# Reductions accumulating linearly: sum-like (their error grows with the count of terms) and max-like or
# min-like (1-Lipschitz in the largest error of the reduced values).
_SUM_LIKE = frozenset({"reduce_sum", "reduce_sum_chunks", "reduce_sum_partials", "cumsum", "dot_general",
                       "conv_general_dilated"})
_MAX_LIKE = frozenset({"reduce_max", "reduce_max_chunks", "reduce_max_partials", "cummax"})
_MIN_LIKE = frozenset({"reduce_min", "reduce_min_chunks", "reduce_min_partials", "cummin"})
# Operations that move values without rounding them (their bound moves the same way).
_MOVES = frozenset({"broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "slice", "rev", "pad",
                    "concatenate", "gather", "dynamic_slice", "dynamic_update_slice", "select", "select_n",
                    "stop_gradient", "copy"})


def _unit_roundoff(dtype) -> float:
    return _UNIT_ROUNDOFF.get(np.dtype(dtype).name, 0.0)


def evaluate_region(region, inputs: list[np.ndarray], wide: bool, magnitudes: bool = False):
    """The region's outputs for `inputs`: each equation by its eager numpy implementation, in float64
    for float16/bfloat16/float32 values when `wide` and the operation allows (else, and for the
    operations whose meaning is the format's, in the program's dtypes).

    With `magnitudes` (and `wide`), also the scale of each output's terms: sums, products and layouts
    applied to their operands' magnitudes (so a sum that cancels to 0 has the scale of its terms), any
    other operation's own |result|; and each output's rounding bound: a first-order bound, per element,
    of the error a kernel computing the region in the program's dtypes accumulates from the region's
    (exact) inputs, propagated equation by equation (`_propagate_bound`). A rounding error is judged by
    it: x - mean(x) of a row of nearly equal values is accurate to eps·|x|, not to eps·|x - mean(x)|.
    Returns (outputs, scales, bounds); a bound is None for an output that is not a real float."""
    env: dict[int, np.ndarray] = {}
    mag: dict[int, np.ndarray] = {}
    bnd: dict[int, np.ndarray] = {}

    def read_mag(atom):
        if isinstance(atom, Literal):
            value = np.asarray(atom.value)
            return np.abs(value.astype(np.float64)) if _is_float(value.dtype) else value
        if not _is_float(atom.aval.dtype):
            return env[atom.id]
        found = mag.get(atom.id)
        return found if found is not None else np.abs(env[atom.id].astype(np.float64))

    def read_bound(atom):
        """The atom's rounding bound (0 for literals and region inputs); a non-float's value."""
        if isinstance(atom, Literal):
            value = np.asarray(atom.value)
            return np.zeros(value.shape) if _is_float(value.dtype) else value
        if not _is_float(atom.aval.dtype):
            return env[atom.id]
        found = bnd.get(atom.id)
        return found if found is not None else np.zeros(atom.aval.shape)

    def magnitude_of(eqn, outs):
        name = eqn.primitive.name
        if name in ("neg", "sub") or name in _MAGNITUDE_OPS:
            try:
                args = [read_mag(a) for a in eqn.invars]
                if name == "neg":
                    found = [args[0]]
                elif name == "sub":
                    found = [np.add(args[0], args[1])]
                else:
                    found = _evaluate(eqn, args, True)
                found = [np.asarray(f, np.float64).reshape(v.aval.shape) for f, v in zip(found, eqn.outvars)]
                return [np.where(np.isfinite(f), f, np.abs(np.asarray(o, np.float64))) for f, o in zip(found, outs)]
            except Exception:  # noqa: BLE001 - the operation's own |result| is a scale too
                pass
        return [np.abs(np.asarray(o, np.float64)) for o in outs]

    def read(atom, widen):
        if isinstance(atom, Literal):
            value = np.asarray(atom.value)
        else:
            value = env[atom.id]
        if widen and _is_narrow_float(value.dtype):
            return value.astype(np.float64)
        if not widen and value.dtype != np.dtype(atom.aval.dtype):
            return value.astype(atom.aval.dtype)
        return value

    for v, c in zip(region.constvars, region.consts):
        env[v.id] = np.asarray(c)
    for v, x in zip(region.invars, inputs):
        env[v.id] = x
    for eqn in region.eqns:
        outs = None
        if wide and not any(word in eqn.primitive.name for word in _NATIVE_ONLY):
            try:
                outs = _evaluate(eqn, [read(a, True) for a in eqn.invars], True)
                for v, o in zip(eqn.outvars, outs):
                    if np.shape(o) != tuple(v.aval.shape):
                        raise ValueError("shape")
            except NotImplementedError:
                raise
            except Exception:  # an operation that needs its own dtypes: run it as the program does
                outs = None
        if outs is None:
            outs = _evaluate(eqn, [read(a, False) for a in eqn.invars], False)
        for v, o in zip(eqn.outvars, outs):
            o = np.asarray(o)
            want = np.dtype(v.aval.dtype)
            if not (wide and _is_narrow_float(want) and o.dtype == np.float64):
                o = o.astype(want)
            env[v.id] = o.reshape(v.aval.shape)
        if magnitudes and wide:
            results = [env[v.id] for v in eqn.outvars]
            for v, m in zip(eqn.outvars, magnitude_of(eqn, results)):
                if _is_float(v.aval.dtype):
                    mag[v.id] = m
            if any(_is_float(v.aval.dtype) for v in eqn.outvars):
                args = [read(a, True) for a in eqn.invars]
                for v, b in zip(eqn.outvars, _propagate_bound(eqn, args, [read_bound(a) for a in eqn.invars],
                                                              [read_mag(a) for a in eqn.invars], results)):
                    if _is_float(v.aval.dtype):
                        bnd[v.id] = b
    outputs = [read(a, wide) if isinstance(a, Literal) else env[a.id] for a in region.outvars]
    if not magnitudes:
        return outputs
    scales = [np.abs(np.asarray(o, np.float64)) if isinstance(a, Literal) or not _is_float(a.aval.dtype)
              else read_mag(a) for a, o in zip(region.outvars, outputs)]
    bounds = [None if not isinstance(a, Literal) and not _is_float(a.aval.dtype) else
              np.zeros(np.shape(o)) if isinstance(a, Literal) else read_bound(a)
              for a, o in zip(region.outvars, outputs)]
    return outputs, scales, bounds


def _propagate_bound(eqn, args, bounds, magnitudes, results) -> list[np.ndarray]:
    """Each float result's rounding bound (float64, per element) from its operands' `args` (float64 values),
    their `bounds` (a non-float operand's value in its place) and `magnitudes`: the operands' errors
    carried through the operation to first order, plus the operation's own rounding in its dtype.

    - moves (broadcasts, slices, gathers, selects, ...): the same operation on the bounds;
    - add, sub, neg, mul: |b| e_a + |a| e_b + e_a e_b + u |r|;
    - sums, matmuls, convolutions, cumsum: the same operation on the bounds (and, for the products,
      on a bound and a magnitude), plus n u times it on the magnitudes (n: the count of terms; float32
      and narrower sums accumulate in float64, docs/accuracy.md), plus u |r|;
    - max and min reductions: the largest bound reduced;
    - other elementwise operations: the change of the result when each operand moves by its bound (and
      a math function's operand by 8 u of itself too: the argument's own rounding, which a function's
      argument reduction sees), plus 1 u |r| (8 for math functions);
    - anything else (linear algebra, sorts, ...): the largest operand bound plus rtol/CHECK_FACTOR times
      (|r| + max |r|), the judgement of an opaque operation's own error at the scale of its output."""
    prim = eqn.primitive
    name = prim.name
    outs = [np.asarray(r, np.float64) for r in results]
    us = [_unit_roundoff(v.aval.dtype) for v in eqn.outvars]
    floats = [i for i, a in enumerate(eqn.invars) if _is_float(a.aval.dtype)]
    try:
        with np.errstate(all="ignore"):
            if name in _MOVES:
                found = [np.asarray(f, np.float64) for f in _evaluate(eqn, bounds, True)]
            elif name in ("add", "sub", "neg", "mul"):
                a, ea = np.abs(args[0]), bounds[0]
                if name == "neg":
                    carried = ea
                elif name == "mul":
                    b, eb = np.abs(args[1]), bounds[1]
                    carried = b * ea + a * eb + ea * eb
                else:
                    carried = ea + bounds[1]
                found = [carried + us[0] * np.abs(outs[0])]
            elif name in _SUM_LIKE:
                ones = [np.ones(np.shape(x)) if i in floats else x for i, x in enumerate(args)]
                count = np.asarray(_evaluate(eqn, ones, True)[0], np.float64)
                if len(floats) == 2:  # a product of two operands: e_a |b| + |a| e_b + e_a e_b
                    i, j = floats
                    def with_(x, y):
                        operands = list(args)
                        operands[i], operands[j] = x, y
                        return np.asarray(_evaluate(eqn, operands, True)[0], np.float64)
                    carried = (with_(bounds[i], magnitudes[j]) + with_(magnitudes[i], bounds[j])
                               + with_(bounds[i], bounds[j]))
                    terms = with_(magnitudes[i], magnitudes[j])
                else:
                    carried = np.asarray(_evaluate(eqn, bounds, True)[0], np.float64)
                    terms = np.asarray(_evaluate(eqn, magnitudes, True)[0], np.float64)
                accumulate = us[0]
                if name.startswith("reduce_sum") and _is_narrow_float(eqn.invars[0].aval.dtype):
                    accumulate = _UNIT_ROUNDOFF["float64"]
                found = [carried + count * accumulate * terms + us[0] * np.abs(outs[0])]
            elif name in _MAX_LIKE or name in _MIN_LIKE:
                sign = 1.0 if name in _MAX_LIKE else -1.0
                found = [sign * np.asarray(f, np.float64) for f in
                         _evaluate(eqn, [sign * b if i in floats else b for i, b in enumerate(bounds)], True)]
            elif prim.traits.fusion == "elementwise" and not any(w in name for w in _NATIVE_ONLY):
                math = prim.traits.math is not None or prim.traits.cost >= 20
                carried = np.zeros(np.shape(outs[0]))
                for i in floats:
                    step = np.abs(bounds[i])
                    if math:
                        step = step + _MATH_ROUNDING * _unit_roundoff(eqn.invars[i].aval.dtype) * np.abs(args[i])
                    if not np.any(step):
                        continue
                    moved = []
                    for sign in (1.0, -1.0):
                        operands = list(args)
                        operands[i] = args[i] + sign * step
                        moved.append(np.abs(np.asarray(_evaluate(eqn, operands, True)[0], np.float64) - outs[0]))
                    change = np.fmax(moved[0], moved[1])
                    carried = carried + np.where(np.isnan(change), np.inf, change)
                local = (_MATH_ROUNDING if math else 1.0) * us[0] * np.abs(outs[0])
                found = [carried + local] + [np.abs(o) * u for o, u in zip(outs[1:], us[1:])]
            else:
                raise LookupError(name)
        found = [np.broadcast_to(np.asarray(f, np.float64), np.shape(o)) for f, o in zip(found, outs)]
        if len(found) != len(outs):
            raise LookupError(name)
        return [np.where(np.isnan(f), np.inf, f) for f in found]
    except Exception:  # noqa: BLE001 - an opaque operation: judged at the scale of its output
        carried = max((float(np.max(bounds[i])) for i in floats if np.size(bounds[i])), default=0.0)
        found = []
        for o, v in zip(outs, eqn.outvars):
            rtol = TOLERANCES.get(np.dtype(v.aval.dtype).name, 0.0) / CHECK_FACTOR
            finite = np.abs(o[np.isfinite(o)])
            top = float(finite.max()) if finite.size else 0.0
            found.append(carried + rtol * (np.abs(o) + top))
        return found


# ---- comparing --------------------------------------------------------------------------------

def _finfo(dtype):
    if np.dtype(dtype).name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


def _ordered(x: np.ndarray) -> np.ndarray:
    """Float bits as integers ordered like the values (so ulp distance is a difference)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    i = x.view(bits).astype(np.int64)
    return np.where(i < 0, np.int64(np.iinfo(bits).min) - i, i)


def output_tolerances(region, rtol: float | None) -> list[float]:
    """The rtol each output of the region is judged by: `rtol` when given, else TOLERANCES of the
    least precise float dtype the region computes on the way to that output (an f64 sum of f32 exp
    values carries float32's error: it is judged as float32). Region inputs and exact conversions of
    them round nothing, so they count only through what is computed from them."""
    if rtol is not None:
        return [rtol] * len(region.outvars)
    loosest: dict[int, float] = {}

    def of(atom) -> float:
        return 0.0 if isinstance(atom, Literal) else loosest.get(atom.id, 0.0)

    for eqn in region.eqns:
        carried = max((of(a) for a in eqn.invars), default=0.0)
        for v in eqn.outvars:
            loosest[v.id] = max(carried, TOLERANCES.get(np.dtype(v.aval.dtype).name, 0.0))
    return [max(of(v), TOLERANCES.get(np.dtype(v.aval.dtype).name, 0.0)) for v in region.outvars]


def compare(got: np.ndarray, reference: np.ndarray, native: np.ndarray, tol: float,
            scale: np.ndarray | None = None, bound: np.ndarray | None = None):
    """(max abs error, max relative error, max ulp or None, failing element count) of one output.

    With a rounding `bound` (evaluate_region's, per element), an element of a float output passes when

        |kernel - reference| <= tol * |reference| + CHECK_FACTOR * bound + (a few subnormals)

    against `reference` (float64) or `native` (the same operations in the program's dtypes, which
    shares the kernel's discrete decisions: a comparison or a rounding of a value next to its threshold,
    an error-free transformation that relies on float32 rounding); its errors are measured from
    `reference`, or from `native` when only that one holds it. Without one (a complex output, or a
    caller with none), within rtol `tol` of the larger of the element's |reference| and its `scale` (the
    magnitude of its terms) plus the output's largest |reference|. Elements of other dtypes must equal
    one of the two. The relative error reported is the error over |reference|, or over `scale` where
    the reference is 0."""
    dtype = got.dtype
    if dtype.kind not in "fc" and dtype.name != "bfloat16":
        ref = reference.astype(dtype)
        matches_native = got == native.astype(dtype)
        ref = np.where(matches_native & (got != ref), got, ref)
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        bad = got != ref
        rel = diff / np.maximum(np.abs(ref.astype(np.float64)), 1)
        return (float(diff.max()) if diff.size else 0.0, float(rel.max()) if rel.size else 0.0, None,
                int(bad.sum()))
    g = got.astype(np.float64)
    terms = np.zeros(got.shape) if scale is None else np.where(np.isfinite(scale), scale, 0.0)
    if bound is not None:
        bound = np.where(np.isnan(bound), np.inf, np.asarray(bound, np.float64))
        floor = 4 * float(_finfo(dtype).smallest_subnormal)

    def measure(ref):
        """Per element: within tolerance, abs error, relative error, ulp from ref rounded to dtype."""
        with np.errstate(all="ignore"):
            finite = np.isfinite(ref)
            same = (g == ref) | (np.isnan(g) & np.isnan(ref))  # infinities, NaN
            err = np.where(same, 0.0, np.abs(g - ref))
            err = np.where(np.isnan(err), np.inf, err)
            if bound is not None:
                ok = same | (err <= tol * np.abs(ref) + CHECK_FACTOR * bound + floor)
            else:
                top = float(np.max(np.abs(ref[finite]))) if finite.any() else 0.0
                ok = same | (err <= tol * (np.maximum(np.abs(ref), terms) + top))
            # relative to the element, or where it is 0 to its terms (an exact 0 from cancelling terms)
            rel = np.where(same, 0.0, np.where(ref != 0, err / np.abs(ref),
                                               np.where(terms > 0, err / np.where(terms > 0, terms, 1), np.inf)))
            rounded = ref.astype(dtype)
            ulp = np.abs(_ordered(got) - _ordered(rounded))
            ulp = np.where(same | (np.isnan(g) & np.isnan(rounded.astype(np.float64))), 0, ulp)
        return ok, err, rel, ulp

    ok_r, err, rel, ulp = measure(reference.astype(np.float64))
    ok_n, err_n, rel_n, ulp_n = measure(native.astype(np.float64))
    use_native = ~ok_r & ok_n
    err, rel, ulp = (np.where(use_native, b, a) for a, b in ((err, err_n), (rel, rel_n), (ulp, ulp_n)))
    bad = ~(ok_r | ok_n)
    return (float(err.max()) if err.size else 0.0, float(rel.max()) if rel.size else 0.0,
            int(ulp.max()) if ulp.size else 0, int(bad.sum()))


def _source_of(region) -> str:
    for eqn in region.eqns:
        if eqn.source_info is not None:
            return str(eqn.source_info)
    return ""


def _decode(data: bytes, aval) -> np.ndarray:
    dtype = np.dtype(aval.dtype)
    count = math.prod(aval.shape)
    return np.frombuffer(data, dtype, count=count).reshape(aval.shape).copy()


def check_dispatch(index: int, record, input_bytes: list, output_bytes: list, step: DispatchStep,
                   rtol: float | None) -> DispatchResult:
    """One dispatch: its inputs as the kernel read them (bytes read before it ran: a kernel may write an
    output over a dead input), its outputs as it wrote them, against the reference on those inputs."""
    region = step.region
    result = DispatchResult(index, record.function, record.offset, record.kernel_name, step.name, _source_of(region))
    inputs = [_decode(b, v.aval) for b, v in zip(input_bytes, region.invars)]
    outputs = [_decode(b, v.aval) for b, v in zip(output_bytes, region.outvars)]
    try:
        reference, scales, bounds = evaluate_region(region, inputs, wide=True, magnitudes=True)
        native = evaluate_region(region, inputs, wide=False)
    except Exception as e:  # noqa: BLE001 - no reference for this dispatch: said, not a failure of the kernel
        result.note = f"no reference: {e}" if isinstance(e, NotImplementedError) else \
            f"no reference: {type(e).__name__}: {e}"
        result.max_ulp = None
        return result
    notes, any_float = [], False
    tolerances = output_tolerances(region, rtol)
    for k, (got, ref, nat, var, tol, scale, bound) in enumerate(zip(outputs, reference, native, region.outvars,
                                                                    tolerances, scales, bounds)):
        abs_err, rel_err, ulp, bad = compare(got, np.asarray(ref), np.asarray(nat), tol, scale, bound)
        result.max_abs = max(result.max_abs, abs_err)
        result.max_rel = max(result.max_rel, rel_err)
        if ulp is not None:
            any_float = True
            result.max_ulp = max(result.max_ulp or 0, ulp)
        if bad:
            what = f"rtol {tol:g}" if ulp is not None else "exact"
            notes.append(f"output {k} ({var.aval.str_short()}): {bad} of {got.size} elements beyond "
                         f"tolerance ({what}), max abs error {abs_err:.3g}")
    if not any_float:
        result.max_ulp = None
    if notes:
        result.passed = False
        result.note = "; ".join(notes)
    return result


def check_program(cls, function: str, inputs: list[np.ndarray], rtol: float | None = None,
                  workers: int = 0, globals_in=None, globals_partial: bool = False) -> CheckReport:
    """Runs `function` of Program class `cls` in the C runtime on `inputs` (its arguments' leaves, in
    order) and compares every dispatch with the reference. `globals_in`: a .npz of globals (as
    `kiln-run --globals-in` and Program.save_globals write it) to set first, every global unless
    `globals_partial`."""
    from kiln.vm.runtime import Context, Instance, Module

    from .checkpoint import load_globals

    _, result = cls._kiln_compile()
    exported = [f.name for f in result.spec.functions if f.exported]
    if function not in exported:
        raise CheckError(f"{cls.__name__} has no function {function!r} (it exports: {', '.join(exported)})")
    spec = next(f for f in result.spec.functions if f.name == function)
    if len(inputs) != len(spec.args):
        wants = ", ".join(f"{a.name} {'x'.join(map(str, a.type.shape + (a.type.dtype,)))}" for a in spec.args)
        raise CheckError(f"{function} takes {len(spec.args)} inputs ({wants}), got {len(inputs)}")
    mapping = dispatch_map(result)
    report = CheckReport(function)

    pending = {}  # the inputs of the dispatch in progress, read before its kernel ran

    def observe(record):
        if record.phase == "before":
            pending["inputs"] = record.bindings
            return
        found = mapping.get((record.function, record.offset))
        if found is None:
            raise CheckError(f"internal: no dispatch region for the dispatch at word {record.offset} of "
                             f"{record.function} (kernel {record.kernel_name})")
        step, _ = found
        inputs = pending.pop("inputs")
        n_in = len(step.region.invars)
        report.results.append(check_dispatch(len(report.results), record, inputs[:n_in], record.bindings[n_in:],
                                             step, rtol))

    context = Context(Module.from_bytes(Instance(worker_count=workers), result.module_bytes))
    if globals_in is not None:
        try:
            load_globals(context, globals_in, globals_partial, "--globals-in")
        except (OSError, ValueError) as e:
            raise CheckError(str(e)) from None
    context.set_dispatch_observer(observe)
    report.outputs = context.invoke(function, list(inputs))
    return report
