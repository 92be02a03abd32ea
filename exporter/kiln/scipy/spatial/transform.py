"""kiln.scipy.spatial.transform: Rotation and Slerp (JAX's jax.scipy.spatial.transform), over unit quaternions
(x, y, z, w), scalar last, with any leading batch shape.

Both are NamedTuples of arrays (pytrees): they pass into kiln.jit functions, vmap and export. The
conversions follow scipy's algorithms: from_matrix picks the largest of the trace and the diagonal
(numerically safe for every rotation), as_euler is Bernardes & Viollet's method for all 12 sequences
(lowercase extrinsic, uppercase intrinsic), rotation vectors use series near zero angle, mean is the
principal eigenvector of Σ w q qᵀ.
"""
from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from ... import numpy as knp
from ... import random as krandom
from ...core import dtypes
from ...numpy._base import aval

__all__ = ["Rotation", "Slerp"]

_AXES = {"x": 0, "y": 1, "z": 2}


def _float(x):
    x = knp.asarray(x)
    return x if dtypes.is_float(aval(x).dtype) else x.astype(np.float64)


def _norm(v, keepdims=False):
    return knp.sqrt(knp.sum(v * v, axis=-1, keepdims=keepdims))


def _compose(p, q):
    """The Hamilton product p q of (x, y, z, w) quaternions: q's rotation first, then p's."""
    pv, pw = p[..., :3], p[..., 3:]
    qv, qw = q[..., :3], q[..., 3:]
    vector = pw * qv + qw * pv + knp.cross(pv, qv)
    scalar = pw * qw - knp.sum(pv * qv, axis=-1, keepdims=True)
    return knp.concatenate([vector, scalar], axis=-1)


def _canonical(quat):
    """quat or -quat, whichever has w > 0 (then x, y, z > 0 in turn where the earlier ones are 0)."""
    flip = knp.zeros(aval(quat).shape[:-1], bool)
    decided = knp.zeros(aval(quat).shape[:-1], bool)
    for component in (3, 0, 1, 2):
        value = quat[..., component]
        flip = knp.where(~decided & (value < 0), True, flip)
        decided = decided | (value != 0)
    return knp.where(flip[..., None], -quat, quat)


def _check_seq(seq: str) -> tuple[list[int], bool]:
    if not isinstance(seq, str) or not re.fullmatch(r"[xyz]{1,3}|[XYZ]{1,3}", seq):
        raise ValueError(f"Rotation: the axis sequence must be 1 to 3 of 'xyz' (extrinsic) or of 'XYZ' (intrinsic), "
                         f"not mixed; got {seq!r}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Rotation: consecutive axes of a sequence must differ; got {seq!r}")
    return [_AXES[c.lower()] for c in seq], seq.isupper()


class Rotation(NamedTuple):
    """scipy.spatial.transform.Rotation: one rotation (quat of shape (4,)) or a stack (shape (..., 4))."""

    quat: object

    # ---- construction ---------------------------------------------------------------------------------

    @classmethod
    def from_quat(cls, quat):
        """From (x, y, z, w) quaternions, normalized."""
        quat = _float(quat)
        if aval(quat).ndim == 0 or aval(quat).shape[-1] != 4:
            raise ValueError(f"Rotation.from_quat: expected quaternions of shape (..., 4); got {aval(quat).shape}")
        return cls(quat / _norm(quat, keepdims=True))

    @classmethod
    def from_matrix(cls, matrix):
        """From rotation matrices (..., 3, 3); a matrix that is not exactly orthogonal gives the nearest
        rotation's quaternion (scipy's method)."""
        m = _float(matrix)
        if aval(m).ndim < 2 or aval(m).shape[-2:] != (3, 3):
            raise ValueError(f"Rotation.from_matrix: expected matrices of shape (..., 3, 3); got {aval(m).shape}")
        diagonal = knp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], axis=-1)
        trace = knp.sum(diagonal, axis=-1)
        choice = knp.argmax(knp.concatenate([diagonal, trace[..., None]], axis=-1), axis=-1)
        candidates = []
        for i in range(3):
            j, k = (i + 1) % 3, (i + 2) % 3
            q = [None] * 4
            q[i] = 1 - trace + 2 * m[..., i, i]
            q[j] = m[..., j, i] + m[..., i, j]
            q[k] = m[..., k, i] + m[..., i, k]
            q[3] = m[..., k, j] - m[..., j, k]
            candidates.append(knp.stack(q, axis=-1))
        candidates.append(knp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                     m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
        quat = candidates[3]
        for i in range(3):
            quat = knp.where((choice == i)[..., None], candidates[i], quat)
        return cls(quat / _norm(quat, keepdims=True))

    @classmethod
    def from_rotvec(cls, rotvec, degrees: bool = False):
        """From rotation vectors (axis times angle, radians unless degrees)."""
        v = _float(rotvec)
        if aval(v).ndim == 0 or aval(v).shape[-1] != 3:
            raise ValueError(f"Rotation.from_rotvec: expected vectors of shape (..., 3); got {aval(v).shape}")
        if degrees:
            v = knp.deg2rad(v)
        angle = _norm(v, keepdims=True)
        small = angle <= 1e-3
        safe = knp.where(small, 1, angle)
        scale = knp.where(small, 0.5 - angle ** 2 / 48 + angle ** 4 / 3840, knp.sin(safe / 2) / safe)
        return cls(knp.concatenate([scale * v, knp.cos(angle / 2)], axis=-1))

    @classmethod
    def from_mrp(cls, mrp):
        """From modified Rodrigues parameters (axis times tan(angle / 4))."""
        p = _float(mrp)
        if aval(p).ndim == 0 or aval(p).shape[-1] != 3:
            raise ValueError(f"Rotation.from_mrp: expected vectors of shape (..., 3); got {aval(p).shape}")
        squared = knp.sum(p * p, axis=-1, keepdims=True)
        return cls(knp.concatenate([2 * p, 1 - squared], axis=-1) / (1 + squared))

    @classmethod
    def from_euler(cls, seq: str, angles, degrees: bool = False):
        """From Euler angles about the axes of seq (lowercase: extrinsic, fixed axes; uppercase: intrinsic,
        rotating axes); angles (..., len(seq)), or a scalar or (n,) for one axis."""
        axes, intrinsic = _check_seq(seq)
        angles = _float(angles)
        if len(axes) == 1 and (aval(angles).ndim == 0 or aval(angles).shape[-1] != 1):
            angles = angles[..., None]
        if aval(angles).shape[-1] != len(axes):
            raise ValueError(f"Rotation.from_euler: {len(axes)} axes in {seq!r} need angles of shape (..., "
                             f"{len(axes)}); got {aval(angles).shape}")
        if degrees:
            angles = knp.deg2rad(angles)
        quat = None
        for n, axis in enumerate(axes):
            half = angles[..., n] / 2
            parts = [knp.zeros_like(half)] * 3 + [knp.cos(half)]
            parts[axis] = knp.sin(half)
            elementary = knp.stack(parts, axis=-1)
            if quat is None:
                quat = elementary
            else:
                quat = _compose(quat, elementary) if intrinsic else _compose(elementary, quat)
        return cls(quat)

    @classmethod
    def identity(cls, num: int | None = None, dtype=float):
        """The identity rotation, or num of them."""
        quat = np.zeros(4 if num is None else (int(num), 4), dtype=dtype)
        quat[..., 3] = 1
        return cls(knp.asarray(quat))

    @classmethod
    def random(cls, random_key, num: int | None = None):
        """Rotations uniform over SO(3) (normalized Gaussian quaternions) from a kiln.random key."""
        quat = krandom.normal(random_key, (4,) if num is None else (int(num), 4))
        return cls.from_quat(quat)

    @classmethod
    def concatenate(cls, rotations):
        """One stack of the given rotations (single ones and stacks) in order."""
        quats = [r.quat if aval(r.quat).ndim > 1 else r.quat[None] for r in rotations]
        return cls(knp.concatenate(quats, axis=0))

    # ---- conversions --------------------------------------------------------------------------------------

    def as_quat(self, canonical: bool = False, scalar_first: bool = False):
        """(x, y, z, w), or (w, x, y, z) with scalar_first; canonical: the sign with w > 0."""
        quat = _canonical(self.quat) if canonical else self.quat
        return knp.concatenate([quat[..., 3:], quat[..., :3]], axis=-1) if scalar_first else quat

    def as_matrix(self):
        """The rotation matrices (..., 3, 3)."""
        x, y, z, w = (self.quat[..., i] for i in range(4))
        rows = [[w * w + x * x - y * y - z * z, 2 * (x * y - z * w), 2 * (x * z + y * w)],
                [2 * (x * y + z * w), w * w - x * x + y * y - z * z, 2 * (y * z - x * w)],
                [2 * (x * z - y * w), 2 * (y * z + x * w), w * w - x * x - y * y + z * z]]
        return knp.stack([knp.stack(r, axis=-1) for r in rows], axis=-2)

    def as_rotvec(self, degrees: bool = False):
        """Rotation vectors: the axis times the angle in [0, π] (radians unless degrees)."""
        quat = knp.where(self.quat[..., 3:] < 0, -self.quat, self.quat)
        angle = 2 * knp.arctan2(_norm(quat[..., :3], keepdims=True), quat[..., 3:])
        small = angle <= 1e-3
        safe = knp.where(small, 1, angle)
        scale = knp.where(small, 2 + angle ** 2 / 12 + 7 * angle ** 4 / 2880, safe / knp.sin(safe / 2))
        rotvec = scale * quat[..., :3]
        return knp.rad2deg(rotvec) if degrees else rotvec

    def as_mrp(self):
        """Modified Rodrigues parameters, of norm at most 1 (the rotation by angle at most π)."""
        quat = knp.where(self.quat[..., 3:] < 0, -self.quat, self.quat)
        return quat[..., :3] / (1 + quat[..., 3:])

    def as_euler(self, seq: str, degrees: bool = False):
        """Euler angles about the axes of a 3-axis seq: the first and last in [-π, π], the middle in [0, π]
        (symmetric sequences such as 'zxz') or [-π/2, π/2]. At a gimbal lock the third angle is 0, as scipy."""
        axes, intrinsic = _check_seq(seq)
        if len(axes) != 3:
            raise ValueError(f"Rotation.as_euler: the sequence must have 3 axes; got {seq!r}")
        if intrinsic:
            axes = axes[::-1]
        i, j, k = axes
        symmetric = i == k
        if symmetric:
            k = 3 - i - j
        sign = (i - j) * (j - k) * (k - i) // 2
        q = self.quat
        if symmetric:
            a, b, c, d = q[..., 3], q[..., i], q[..., j], q[..., k] * sign
        else:
            a, b = q[..., 3] - q[..., j], q[..., i] + q[..., k] * sign
            c, d = q[..., j] + q[..., 3], q[..., k] * sign - q[..., i]
        middle = 2 * knp.arctan2(knp.hypot(c, d), knp.hypot(a, b))
        eps = 1e-7
        lock_zero = knp.abs(middle) <= eps
        lock_pi = knp.abs(middle - np.pi) <= eps
        half_sum, half_diff = knp.arctan2(b, a), knp.arctan2(d, c)
        # at a gimbal lock one angle takes the whole rotation about the locked axis and the last angle
        # (of the sequence as given) is 0
        lock = lock_zero | lock_pi
        value = knp.where(lock_zero, 2 * half_sum, (2 if intrinsic else -2) * half_diff)
        first = knp.where(lock, 0 if intrinsic else value, half_sum - half_diff)
        third = knp.where(lock, value if intrinsic else 0, half_sum + half_diff)
        if not symmetric:
            third = third * sign
            middle = middle - np.pi / 2
        if intrinsic:
            first, third = third, first
        angles = knp.stack([first, middle, third], axis=-1)
        angles = knp.where(angles < -np.pi, angles + 2 * np.pi, knp.where(angles > np.pi, angles - 2 * np.pi, angles))
        return knp.rad2deg(angles) if degrees else angles

    # ---- operations ---------------------------------------------------------------------------------------

    def apply(self, vectors, inverse: bool = False):
        """The rotated vectors (..., 3) (by the inverse with inverse=True); a stack of rotations pairs with a
        stack of vectors; their batch shapes broadcast (a stack of one rotation applies to every vector)."""
        v = _float(vectors)
        matrix = self.as_matrix()
        if inverse:
            matrix = knp.swapaxes(matrix, -1, -2)
        return knp.matmul(matrix, v[..., None])[..., 0]  # batch axes broadcast, as JAX's vectorized apply

    def inv(self):
        return Rotation(knp.concatenate([-self.quat[..., :3], self.quat[..., 3:]], axis=-1))

    def magnitude(self):
        """The rotation angles in [0, π]."""
        return 2 * knp.arctan2(_norm(self.quat[..., :3]), knp.abs(self.quat[..., 3]))

    def mean(self, weights=None):
        """The rotation closest to the (weighted) rotations: the principal eigenvector of Σ w q qᵀ."""
        quat = self.quat if aval(self.quat).ndim > 1 else self.quat[None]
        w = knp.ones(aval(quat).shape[0], aval(quat).dtype) if weights is None else _float(weights)
        outer = knp.einsum("n,ni,nj->ij", w, quat, quat)
        _, vectors = knp.linalg.eigh(outer)
        return Rotation(vectors[:, -1])

    def __mul__(self, other):
        """self ∘ other: other's rotation first."""
        if not isinstance(other, Rotation):
            return NotImplemented
        return Rotation(_compose(self.quat, other.quat))

    def __getitem__(self, indexer):
        if self.single:
            raise TypeError("a single Rotation is not subscriptable")
        return Rotation(self.quat[indexer])

    def __len__(self):
        if self.single:
            raise TypeError("a single Rotation has no len()")
        return aval(self.quat).shape[0]

    @property
    def single(self) -> bool:
        return aval(self.quat).ndim == 1


class Slerp(NamedTuple):
    """scipy.spatial.transform.Slerp: spherical linear interpolation between rotations at ascending times
    (Slerp.init(times, rotations); then slerp(times)). Times outside the range extrapolate the first or
    last interval (scipy raises there; a traced query cannot)."""

    times: object
    timedelta: object
    rotations: Rotation
    rotvecs: object

    @classmethod
    def init(cls, times, rotations: Rotation):
        if rotations.single:
            raise ValueError("Slerp.init: rotations must be a stack of at least 2 rotations; got a single one")
        times = _float(times)
        if aval(times).ndim != 1 or aval(times).shape[0] != len(rotations):
            raise ValueError(f"Slerp.init: times must be 1-d with one time per rotation ({len(rotations)}); got "
                             f"shape {aval(times).shape}")
        if len(rotations) < 2:
            raise ValueError("Slerp.init: at least 2 rotations are needed")
        timedelta = knp.diff(times)
        if isinstance(times, np.ndarray) and np.any(np.diff(np.asarray(times)) <= 0):
            raise ValueError("Slerp.init: times must be strictly increasing")
        steps = (rotations[:-1].inv() * rotations[1:]).as_rotvec()
        return cls(times, timedelta, rotations, steps)

    def __call__(self, times):
        t = _float(times)
        index = knp.clip(knp.searchsorted(self.times, t, side="right") - 1, 0, aval(self.timedelta).shape[0] - 1)
        alpha = (t - self.times[index]) / self.timedelta[index]
        step = Rotation.from_rotvec(self.rotvecs[index] * alpha[..., None])
        return self.rotations[index] * step
