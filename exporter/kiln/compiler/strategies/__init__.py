"""Kernel strategies: how a dispatch region becomes a kernel (issue 10 §1, DESIGN §9 `kernels/`).

Each strategy is one module here with one `Strategy` object: `matches(region)` says whether a region is
the strategy's, and `plan(region, target) -> KernelPlan` gives the kernel's work estimate, its workgroup
items and the body emitter, delegating to its code generation module (kiln.compiler.codegen). The regions
the strategies match are disjoint, so exactly one strategy is chosen for each dispatch region, once
(`choose`), and `plan_region` plans it; `kiln export --print strategy` lists the choice per dispatch.

Adding a strategy: a module with a Strategy, listed in STRATEGIES; a primitive that is a kernel of its own
names its strategy in its traits (`def_traits(fusion="kernel", kernel=...)`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...core.ir import Graph


@dataclass(frozen=True)
class KernelPlan:
    """What a strategy decided for one dispatch region and target.

    strategy: the strategy's name; work: estimated
    element operations (compile.choose_workgroups divides it into workgroups); parallel_items: units of
    work the workgroups split (0: nothing to do); emit: the body emitter (codegen.kernel.BodyEmitter:
    emit(builder, pointers, workgroup_id, workgroup_count)); detail: what else the strategy chose
    (conv: 'gemm' or 'direct'), for printing.
    """

    strategy: str
    work: int
    parallel_items: int
    emit: Callable
    detail: str = ""


class Strategy:
    """A kernel strategy: `name`, `matches(region)` and `plan(region, target)`."""

    name: str = ""

    def matches(self, region: Graph) -> bool:
        raise NotImplementedError

    def plan(self, region: Graph, target) -> KernelPlan:
        raise NotImplementedError

    def kind(self, region: Graph) -> str:
        """The stem of the kernel's name (kiln_<kind>_<index>): the region's kind (fusion.region_kind)."""
        from ..fusion import region_kind

        return region_kind(region)

    def __repr__(self):
        return f"<strategy {self.name}>"


def own_kernel(region: Graph) -> str | None:
    """The kernel strategy named by the traits of the region's primitive that is a kernel of its own
    (matmul, conv, pooling, structural), else None."""
    return next((e.primitive.traits.kernel for e in region.eqns if e.primitive.traits.fusion == "kernel"), None)


def reductions(region: Graph) -> list:
    return [e for e in region.eqns if e.primitive.traits.fusion == "reduction"]


def _registry() -> tuple[Strategy, ...]:
    from . import (conv, elementwise, horizontal, matmul, multi_reduction, pooling, reduction, row_fused,
                   split_reduction, structural)
    from . import linalg  # noqa: E402  (dense linear algebra: cholesky, triangular_solve, lu)
    from . import svd  # noqa: E402  (native qr and svd)
    from . import eigh  # noqa: E402  (native symmetric eigendecomposition)

    return (elementwise.STRATEGY, horizontal.STRATEGY, reduction.STRATEGY, row_fused.STRATEGY,
            split_reduction.STRATEGY, multi_reduction.STRATEGY, matmul.STRATEGY, conv.STRATEGY, pooling.STRATEGY,
            structural.STRATEGY,
            linalg.STRATEGY,
            svd.STRATEGY,
            eigh.STRATEGY)


STRATEGIES: tuple[Strategy, ...] = _registry()
BY_NAME: dict[str, Strategy] = {s.name: s for s in STRATEGIES}


class NoStrategy(ValueError):
    """A dispatch region that no strategy, or more than one, matches."""


def choose(region: Graph) -> Strategy:
    """The one strategy whose region this is (NoStrategy when none or several match)."""
    found = [s for s in STRATEGIES if s.matches(region)]
    if len(found) != 1:
        what = "no kernel strategy" if not found else f"several kernel strategies ({', '.join(s.name for s in found)})"
        ops = ", ".join(dict.fromkeys(e.primitive.name for e in region.eqns)) or "no equations"
        raise NoStrategy(f"{what} match(es) the dispatch region of {ops}")
    return found[0]


def plan_region(region: Graph, target) -> KernelPlan:
    """The chosen strategy's plan of `region` for `target` (a kiln.compiler.target.Target)."""
    return choose(region).plan(region, target)


__all__ = ["BY_NAME", "STRATEGIES", "KernelPlan", "NoStrategy", "Strategy", "choose", "own_kernel", "plan_region",
           "reductions"]
