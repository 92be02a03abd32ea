"""A deliberately wrong kernel, for testing the tools that must find one (`kiln check`).

With KILN_TEST_PERTURB_KERNEL=NAME in the environment, the compiler generates kernel NAME (such as
kiln_elementwise_2) from its region with the first output changed: y * (1 + 2^-7) + 2^-7 for floats,
y + 1 for integers, not y for bool. The plan, the bytecode and every other kernel stay as they are, so
the module computes wrong values in that one kernel only. The changed region has a structural key of its
own, so the kernel cache never gives the wrong kernel to a build without the variable. Elementwise
kernels only: other strategies refuse the extra equation. Never set it outside tests.
"""
from __future__ import annotations

import os

import numpy as np

from ..core.aval import ShapedArray
from ..core.errors import CompileError
from ..core.ir import Equation, Graph, Literal, Var

ENV = "KILN_TEST_PERTURB_KERNEL"


def perturbed(region: Graph, name: str, strategy: str) -> Graph | None:
    """The region kernel `name` is generated from when the environment asks to perturb it, else None."""
    if os.environ.get(ENV) != name:
        return None
    if strategy != "elementwise":
        raise CompileError(f"{ENV}={name}: kernel {name} is a {strategy} kernel; the hook perturbs elementwise "
                           f"kernels only")
    from ..lax import prims

    out = region.outvars[0]
    if not isinstance(out, Var):
        raise CompileError(f"{ENV}={name}: the kernel's first output is a constant")
    aval = out.aval
    dtype = np.dtype(aval.dtype)
    scalar = ShapedArray((), dtype)
    if dtype == np.bool_:
        eqns = [(prims.ne, Literal(True, scalar))]
    elif dtype.kind in "iu":
        eqns = [(prims.add, Literal(1, scalar))]
    else:
        eqns = [(prims.mul, Literal(1 + 2.0 ** -7, scalar)), (prims.add, Literal(2.0 ** -7, scalar))]
    new_eqns, value = list(region.eqns), out
    for prim, literal in eqns:
        result = Var(aval)
        new_eqns.append(Equation(prim, [value, literal], [result], {}))
        value = result
    return Graph(region.invars, region.constvars, region.consts, new_eqns, [value] + list(region.outvars[1:]))
