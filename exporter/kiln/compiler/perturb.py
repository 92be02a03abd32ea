"""A deliberately wrong kernel, for testing the tools that must find one (`kiln check`).

With KILN_TEST_PERTURB_KERNEL=NAME in the environment, the compiler generates kernel NAME (such as
kiln_elementwise_2) from its region with its first float output changed, y * (1 + 2^-7) + 2^-7 (with no
float output, the first: y + 1 for integers, not y for bool). The plan, the bytecode and every other
kernel stay as they are, so the module computes wrong values in that one kernel only. The changed region
has a structural key of its own, so the kernel cache never gives the wrong kernel to a build without the
variable. Elementwise (and horizontal) kernels only: other strategies refuse the extra equation. Never
set it outside tests.
"""
from __future__ import annotations

import os

import numpy as np

from ..core.aval import ShapedArray
from ..core.errors import CompileError
from ..core.ir import Equation, Graph, Literal, Var

ENV = "KILN_TEST_PERTURB_KERNEL"
PERTURBABLE = ("elementwise", "horizontal")


def perturbed(region: Graph, name: str, strategy: str) -> Graph | None:
    """The region kernel `name` is generated from when the environment asks to perturb it, else None."""
    if os.environ.get(ENV) != name:
        return None
    if strategy not in PERTURBABLE:
        raise CompileError(f"{ENV}={name}: kernel {name} is a {strategy} kernel; the hook perturbs "
                           f"{' and '.join(PERTURBABLE)} kernels only")
    from ..lax import prims

    outputs = [v for v in region.outvars if isinstance(v, Var)]
    floats = [v for v in outputs if np.dtype(v.aval.dtype).kind == "f"]
    if not outputs:
        raise CompileError(f"{ENV}={name}: the kernel's outputs are constants")
    out = (floats or outputs)[0]
    position = list(region.outvars).index(out)
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
    outvars = list(region.outvars)
    outvars[position] = value
    return Graph(region.invars, region.constvars, region.consts, new_eqns, outvars)
