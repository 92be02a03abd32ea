"""The rest of numpy's math: logaddexp, hypot, cbrt, copysign, ldexp/frexp, gcd/lcm, sinc, cross, kron, diff, gradient, interp, trapezoid, ..."""
from __future__ import annotations

__all__: list[str] = []
