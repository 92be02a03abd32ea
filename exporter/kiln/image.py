"""jax.image: resizing by separable resampling kernels.

``resize(image, shape, method, antialias=True)`` and ``scale_and_translate(image, shape, spatial_dims, scale,
translation, method, antialias=True)`` with JAX's methods and conventions: pixel centres at half-integers, each
output sample a weighted sum of input samples with the kernel (stretched by 1/scale when downsampling with
``antialias``) normalized to sum to one, samples outside the input getting zero weight. Every resized axis is one
contraction with an (input size x output size) weight matrix; for ``resize`` the matrices are computed once in
float64 with numpy (the sizes are static) and enter the program as constants, for ``scale_and_translate`` they are
computed with kiln.numpy from the (possibly traced) scale and translation, so both differentiate in the image and
the latter in scale and translation too. Integer images are computed in float32, as JAX's.
"""
from __future__ import annotations

import enum
import math

import numpy as np

import kiln.numpy as knp

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> "ResizeMethod":
        names = {"nearest": "NEAREST", "linear": "LINEAR", "bilinear": "LINEAR", "trilinear": "LINEAR",
                 "triangle": "LINEAR", "lanczos3": "LANCZOS3", "lanczos5": "LANCZOS5", "cubic": "CUBIC",
                 "bicubic": "CUBIC", "tricubic": "CUBIC", "cubic-pytorch": "CUBIC_PYTORCH",
                 "bicubic-pytorch": "CUBIC_PYTORCH", "area": "AREA"}
        if s not in names:
            raise ValueError(f'Unknown resize method "{s}"')
        return ResizeMethod[names[s]]


# kernels of the distance |x| between a sample and an input pixel centre, over a namespace xp (numpy or kiln.numpy)

def _triangle(xp, x):
    return xp.maximum(0.0, 1.0 - x)


def _keys_cubic(xp, x, a=-0.5):
    """Keys' cubic convolution kernel (1981); a=-0.5 matches Pillow, TensorFlow and PyTorch with antialiasing,
    a=-0.75 OpenCV and PyTorch without."""
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return xp.where(x >= 2.0, 0.0, xp.where(x >= 1.0, far, near))


def _lanczos(radius):
    def kernel(xp, x):
        safe = xp.where(x > 1e-3, x, 1.0)
        value = radius * xp.sin(np.pi * safe) * xp.sin(np.pi * safe / radius) / (np.pi ** 2 * safe * safe)
        return xp.where(x > radius, 0.0, xp.where(x > 1e-3, value, 1.0))

    return kernel


_KERNELS = {  # method -> (radius, kernel)
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _keys_cubic),
    ResizeMethod.CUBIC_PYTORCH: (2, lambda xp, x: _keys_cubic(xp, x, a=-0.75)),
    ResizeMethod.AREA: (1, None),
}


def _weights(xp, in_size, out_size, scale, translation, method, antialias, static_scale=None):
    """The (in_size, out_size) matrix whose column j holds output sample j's weights over the input pixels."""
    radius, kernel = _KERNELS[method]
    inv_scale = 1.0 / scale
    kernel_scale = xp.maximum(inv_scale, 1.0) if antialias else 1.0
    sample = (xp.arange(out_size) + 0.5) * inv_scale - translation * inv_scale - 0.5
    edge_padding = method is ResizeMethod.CUBIC_PYTORCH and not antialias
    if method is ResizeMethod.AREA:  # the overlap of output pixel j's footprint with input pixel i
        left = xp.arange(out_size) * inv_scale - translation * inv_scale
        lo = xp.arange(in_size) * 1.0
        w = xp.maximum(0.0, xp.minimum((left + inv_scale)[None, :], (lo + 1.0)[:, None])
                       - xp.maximum(left[None, :], lo[:, None]))
    else:
        pad = radius if edge_padding else 0
        positions = np.arange(-pad, in_size + pad, dtype=np.float64)
        w = kernel(xp, xp.abs(sample[None, :] - positions[:, None]) / kernel_scale)
        if edge_padding:  # the pixels past each edge repeat the edge pixel: fold their rows onto it
            fold = np.zeros((in_size, positions.shape[0]))
            fold[np.clip(positions.astype(np.int64), 0, in_size - 1), np.arange(positions.shape[0])] = 1.0
            w = fold @ w if xp is np else knp.matmul(knp.asarray(fold, w.dtype), w)
    total = xp.sum(w, axis=0, keepdims=True)
    w = xp.where(xp.abs(total) > 1000.0 * float(np.finfo(np.float32).eps), w / xp.where(total != 0, total, 1.0), 0.0)
    if not edge_padding:
        w = xp.where(((sample >= -0.5) & (sample <= in_size - 0.5))[None, :], w, 0.0)
    return w


def _inexact(image):
    image = knp.asarray(image)
    if not knp.issubdtype(image.dtype, knp.inexact):
        image = image.astype(np.float32)
    return image


def _contract(image, axis, w):
    """image with `axis` (size in_size) replaced by the output samples (size out_size)."""
    out = knp.tensordot(image, knp.asarray(w, image.dtype) if isinstance(w, np.ndarray) else w.astype(image.dtype),
                        axes=([axis], [0]))
    return knp.moveaxis(out, -1, axis)


def _method(method):
    return ResizeMethod.from_string(method) if isinstance(method, str) else ResizeMethod(method)


def _check_shape(shape, image):
    shape = tuple(int(s) for s in shape)
    if len(shape) != image.ndim:
        raise ValueError("shape must have length equal to the number of dimensions of x; "
                         f" {shape} vs {tuple(image.shape)}")
    return shape


def resize(image, shape, method, antialias: bool = True, precision=None):
    """`image` resampled to `shape` (one entry per axis; axes whose size does not change are left alone) with
    `method` (a ResizeMethod or its name: 'nearest', 'linear'/'bilinear', 'cubic'/'bicubic', 'cubic-pytorch',
    'lanczos3', 'lanczos5', 'area'). `antialias` widens the kernel when downsampling (not for 'nearest');
    `precision` is accepted (kiln's contractions are float32/float64 exact products)."""
    image = knp.asarray(image)
    shape = _check_shape(shape, image)
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        for d, (m, n) in enumerate(zip(image.shape, shape)):
            if m != n:
                # JAX computes these offsets in float32
                offsets = np.floor(((np.arange(n, dtype=np.float32) + 0.5) * np.float32(m) / np.float32(n))
                                   .astype(np.float32)).astype(np.int32)
                image = knp.take(image, offsets, axis=d)
        return image
    image = _inexact(image)
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    for d, (m, n) in enumerate(zip(image.shape, shape)):
        if m != n:
            scale = 1.0 if n == 0 else n / m
            image = _contract(image, d, _weights(np, m, n, scale, 0.0, method, antialias))
    return image


def scale_and_translate(image, shape, spatial_dims, scale, translation, method, antialias: bool = True,
                        precision=None):
    """Resamples the axes `spatial_dims` of `image` to the sizes in `shape` under the map from input to output
    coordinates ``x * scale + translation`` (per spatial axis; pixel centres at half-integers). Not for 'nearest',
    as in JAX. `scale` and `translation` may be traced; the result differentiates in them and in `image`."""
    image = _inexact(image)
    shape = _check_shape(shape, image)
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for scale_and_translate.")
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    spatial_dims = tuple(spatial_dims)
    scale, translation = knp.asarray(scale), knp.asarray(translation)
    if scale.shape != (len(spatial_dims),) or translation.shape != (len(spatial_dims),):
        raise ValueError(f"scale_and_translate: scale and translation need one entry per spatial dimension "
                         f"({len(spatial_dims)}), got shapes {tuple(scale.shape)} and {tuple(translation.shape)}")
    dtype = np.result_type(np.float32, scale.dtype, translation.dtype) if knp.issubdtype(scale.dtype, knp.inexact) \
        else np.float32
    scale, translation = scale.astype(dtype), translation.astype(dtype)
    for i, d in enumerate(spatial_dims):
        d = d % image.ndim
        w = _weights(knp, image.shape[d], shape[d], scale[i], translation[i], method, antialias)
        image = _contract(image, d, w)
    return image
