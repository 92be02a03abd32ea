"""Independent references the tests compare kiln against: central finite differences, distance in
ulp, and high-precision (Decimal) constants and functions where libm itself is not accurate enough."""
from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np


# ----------------------------------------------------------------------------- finite differences

def numerical_grad(f, x, eps=1e-6):
    """d f / d x of a scalar function by central differences (float64), shaped like x."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[i] += eps
        down.flat[i] -= eps
        g.flat[i] = (float(f(up)) - float(f(down))) / (2 * eps)
    return g


def numerical_jacobian(f, x, eps=1e-6):
    """d f(x) / d x by central differences: shape f(x).shape + x.shape."""
    x = np.asarray(x, np.float64)
    cols = []
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[i] += eps
        down.flat[i] -= eps
        cols.append((np.asarray(f(up), np.float64) - np.asarray(f(down), np.float64)) / (2 * eps))
    out_shape = np.shape(cols[0])
    return np.moveaxis(np.array(cols), 0, -1).reshape(out_shape + x.shape)


def numerical_hessian(f, x, eps=1e-4):
    """Second-order central differences of a scalar function of a float64 vector."""
    x = np.asarray(x, np.float64)
    n = x.size
    h = np.zeros((n, n))
    e = np.eye(n) * eps
    for i in range(n):
        for j in range(n):
            a, b = e[i], e[j]
            h[i, j] = (f(x + a + b) - f(x + a - b) - f(x - a + b) + f(x - a - b)) / (4 * eps ** 2)
    return h


# ----------------------------------------------------------------------------- ulp distance

def ulps(got, want):
    """Distance in representable values between finite arrays of one float dtype (each subnormal counts one)."""
    itype = {2: np.int16, 4: np.int32, 8: np.int64}[got.dtype.itemsize]

    def ordered(x):
        bits = x.view(itype).astype(np.int64)
        return np.where(bits < 0, np.iinfo(itype).min - bits, bits)

    return np.abs(ordered(got) - ordered(want))


# ----------------------------------------------------------------------------- high precision

PI_DECIMAL = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899863")


def decimal_erfc(t: Decimal) -> Decimal:
    """erfc(t) to the context's precision: erf's series below 4, the continued fraction
    erfc(a) = exp(-a*a) / sqrt(pi) / (a + (1/2) / (a + (2/2) / (a + ...))) up to 40, 0 beyond."""
    a = abs(t)
    if a == 0:
        return Decimal(1)
    with localcontext() as ctx:
        ctx.prec += 20
        if a < 4:
            tiny = Decimal(10) ** -(ctx.prec + 2)
            a2, term, total, k = a * a, a, a, 0
            while True:
                k += 1
                term = -term * a2 / k
                add = term / (2 * k + 1)
                total += add
                if abs(add) < tiny * abs(total):
                    break
            r = 1 - 2 / PI_DECIMAL.sqrt() * total
        elif a < 40:
            cf = a
            for j in range(int(40 + 3000 / float(a) ** 2), 0, -1):
                cf = a + Decimal(j) / 2 / cf
            r = (-a * a).exp() / PI_DECIMAL.sqrt() / cf
        else:
            r = Decimal(0)
    return +(2 - r if t < 0 else r)
