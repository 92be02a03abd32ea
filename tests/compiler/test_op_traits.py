"""Op traits (issue 10 §1): every primitive declares one complete OpTraits record, and the compiler reads
it instead of tables of its own keyed by primitive name."""
from __future__ import annotations

import pathlib
import re

import pytest

import kiln
import kiln.lax  # noqa: F401 - registers every primitive
import kiln.nn  # noqa: F401
import kiln.numpy  # noqa: F401
import kiln.random  # noqa: F401
import kiln.scipy  # noqa: F401
from kiln.compiler import mathlib, split_reduction
from kiln.core.primitive import FUSION_CLASSES, KERNEL_STRATEGIES, OpTraits, Primitive, all_primitives

COMPILER = pathlib.Path(kiln.compiler.__file__).parent


def _primitives():
    prims = dict(all_primitives())
    for table in (split_reduction.CHUNKS, split_reduction.PARTIALS):  # the compiler's own, not registered
        prims.update({p.name: p for p in table.values()})
    return prims


@pytest.mark.parametrize("name", sorted(_primitives()))
def test_every_primitive_declares_complete_traits(name):
    prim = _primitives()[name]
    t = prim.traits
    assert isinstance(t, OpTraits)
    assert t.fusion in FUSION_CLASSES, f"{name} declares no fusion class"
    assert (t.reduction is not None) == (t.fusion == "reduction"), name
    assert (t.kernel is not None) == (t.fusion == "kernel"), name
    assert t.kernel is None or t.kernel in KERNEL_STRATEGIES
    assert (t.fusion == "inlined") == (prim.call_graph_param is not None), name
    assert (t.fusion == "host") == (not prim.in_kernel)
    assert isinstance(t.cost, int) and t.cost >= 1
    if t.math is not None:
        assert t.fusion == "elementwise", name
        assert t.math in mathlib._IMPLS, f"{name}: mathlib has no function {t.math!r}"
    if t.exact_in_narrow:
        assert t.fusion == "elementwise", name


def test_the_transcendentals_cost_more_than_arithmetic():
    p = all_primitives()
    assert p["add"].traits.cost == p["mul"].traits.cost == 1
    for name in ("exp", "log", "tanh", "sin", "pow", "erf", "rem"):
        assert p[name].traits.cost >= 20, name
        assert p[name].traits.math is not None, name
    assert p["rem"].traits.math == "fmod"
    assert p["convert"].traits.exact_in_narrow and not p["exp"].traits.exact_in_narrow


def test_traits_are_declared_not_assigned():
    prim = Primitive("traits_probe")
    assert prim.traits.fusion is None and prim.in_kernel
    prim.def_traits(fusion="reduction", reduction="sum")
    assert prim.reduction == "sum" and not prim.elementwise
    prim.def_traits(cost=3)  # fields not named keep their value
    assert prim.traits == OpTraits(fusion="reduction", reduction="sum", cost=3)
    with pytest.raises(AttributeError):
        prim.elementwise = True  # a read-only view of the traits
    with pytest.raises(ValueError, match="fusion class 'fused' is not one of"):
        prim.def_traits(fusion="fused")
    with pytest.raises(ValueError, match="kernel strategy 'fft' is not one of"):
        prim.def_traits(fusion="kernel", kernel="fft")


def test_undeclared_primitive_is_refused_by_fusion():
    from kiln.compiler.fusion import FusionError, partition
    from kiln.core.aval import ShapedArray
    from kiln.core.ir import Equation, Graph, Var

    prim = Primitive("undeclared_probe")
    x = Var(ShapedArray((2,), kiln.numpy.float32))
    y = Var(ShapedArray((2,), kiln.numpy.float32))
    graph = Graph([x], [], [], [Equation(prim, [x], [y], {}, None)], [y])
    with pytest.raises(FusionError, match="primitive undeclared_probe has no kernel code generation"):
        partition(graph)


# The op tables the compiler kept before the traits, and reads of ad-hoc primitive attributes: none is
# back (a new op's cost, math function, rounding or fusion class goes into its def_traits).
_GONE = ["_EXPENSIVE", "_COSTS", "_MATH_UNARY", "_EXACT_IN_NARROW", "LAYOUT_PRIMITIVES", "kernel_codegen"]
_ADHOC = re.compile(r"getattr\([\w.]*prim\w*,\s*\"\w+\"")  # a primitive attribute read with a default


def test_compiler_keeps_no_op_tables_of_its_own():
    found = []
    for path in sorted(COMPILER.rglob("*.py")):
        text = path.read_text()
        found += [f"{path.relative_to(COMPILER)}: {name}" for name in _GONE if re.search(rf"\b{name}\b", text)]
        found += [f"{path.relative_to(COMPILER)}: {m.group(0)}" for m in _ADHOC.finditer(text)]
    assert not found, found
