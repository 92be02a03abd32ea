"""Convolution: a 3x3 'SAME' convolution over an NHWC image with a bias and relu, f32; and max pooling.

56x56x64 -> 64 channels is a ResNet stage's inner convolution: about 0.23 GFLOP
a call, compute-bound when done as a matrix product over the 3x3x64 patch of
each output pixel. numpy's reference sums the nine shifted matmuls.

Max pooling 3x3, stride 2, 'SAME' over a 128x28x28x32 NHWC batch (a small CNN's
first pooling) and its gradient (the cotangent shared among each window's
maxima; random inputs have no ties, so every system picks the same position).
numpy's references take the nine shifted strided slices.
"""
import numpy as np

from .base import Size, Workload


def make_inputs(p, rng):
    n, h, w, c = p["image"]
    k = p["out"]
    x = rng.standard_normal((n, h, w, c), dtype=np.float32)
    kernel = rng.standard_normal((3, 3, c, k), dtype=np.float32) / np.float32(np.sqrt(9 * c))
    bias = rng.standard_normal(k, dtype=np.float32) * np.float32(0.1)
    return x, kernel, bias


def conv_relu(ops, x, kernel, bias):
    y = ops.lax.conv_general_dilated(x, kernel, window_strides=(1, 1), padding="SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return (ops.np.maximum(y + bias, 0.0),)


def conv_relu_numpy(x, kernel, bias):
    n, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    y = np.zeros((n, h, w, kernel.shape[-1]), np.float32)
    for i in range(3):
        for j in range(3):
            y += padded[:, i:i + h, j:j + w, :] @ kernel[i, j]
    return (np.maximum(y + bias, np.float32(0.0)),)


WORKLOADS = [
    Workload("conv_nhwc", "3x3 SAME conv + bias + relu, NHWC/HWIO f32", make_inputs, conv_relu,
             (Size("1x56x56x64", {"image": (1, 56, 56, 64), "out": 64}),),
             (Size("1x6x5x3", {"image": (1, 6, 5, 3), "out": 4}),), tolerance=1e-4,
             numpy_fn=conv_relu_numpy, needs=("lax",)),
]


# More convolution shapes, each with its own numpy reference over shifted slices (_conv_nhwc_numpy):
# NCHW/OIHW (the layout PyTorch models export with), a stride-2 downsampling convolution (a ResNet stage's
# first), a grouped one (ResNeXt's 32 groups of 4 channels... here 8 groups of 16) and both gradients of the
# NHWC convolution (the training step's input and kernel cotangents).


def _conv_nhwc_numpy(x, kernel, stride=1, groups=1):
    """'SAME' convolution of NHWC x with an HWIO kernel (I = channels per group), in x's dtype."""
    n, h, w, c = x.shape
    kh, kw, ipg, k = kernel.shape
    oh, ow = -(-h // stride), -(-w // stride)
    ph, pw = max((oh - 1) * stride + kh - h, 0), max((ow - 1) * stride + kw - w, 0)
    padded = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    y = np.zeros((n, oh, ow, k), x.dtype)
    opg = k // groups
    for i in range(kh):
        for j in range(kw):
            patch = padded[:, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride, :]
            for g in range(groups):
                y[..., g * opg:(g + 1) * opg] += patch[..., g * ipg:(g + 1) * ipg] @ kernel[i, j, :, g * opg:(g + 1) * opg]
    return y


def make_nchw_inputs(p, rng):
    x, kernel, bias = make_inputs(p, rng)
    return np.transpose(x, (0, 3, 1, 2)), np.transpose(kernel, (3, 2, 0, 1)), bias


def conv_nchw_relu(ops, x, kernel, bias):
    y = ops.lax.conv_general_dilated(x, kernel, window_strides=(1, 1), padding="SAME",
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return (ops.np.maximum(y + ops.np.reshape(bias, (-1, 1, 1)), 0.0),)


def conv_nchw_relu_numpy(x, kernel, bias):
    y = _conv_nhwc_numpy(np.transpose(x, (0, 2, 3, 1)), np.transpose(kernel, (2, 3, 1, 0)))
    return (np.maximum(np.transpose(y, (0, 3, 1, 2)) + bias[:, None, None], np.float32(0.0)),)


def make_general_inputs(p, rng):
    n, h, w, c = p["image"]
    k, groups = p["out"], p.get("groups", 1)
    x = rng.standard_normal((n, h, w, c), dtype=np.float32)
    kernel = rng.standard_normal((3, 3, c // groups, k), dtype=np.float32) / np.float32(np.sqrt(9 * c // groups))
    return x, kernel


def _general(stride):
    """(fn, numpy_fn) of a 'SAME' NHWC/HWIO convolution with this stride; the groups are the ratio of the
    image's channels to the kernel's input channels."""
    def fn(ops, x, kernel):
        return (ops.lax.conv_general_dilated(x, kernel, window_strides=(stride, stride), padding="SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                             feature_group_count=x.shape[-1] // kernel.shape[2]),)

    def numpy_fn(x, kernel):
        return (_conv_nhwc_numpy(x, kernel, stride, x.shape[-1] // kernel.shape[2]),)
    return fn, numpy_fn


def make_grad_inputs(p, rng):
    x, kernel = make_general_inputs(p, rng)
    n, h, w, _ = x.shape
    stride = p.get("stride", 1)
    return x, kernel, rng.standard_normal((n, -(-h // stride), -(-w // stride), p["out"]), dtype=np.float32)


def conv_grad(ops, x, kernel, ct):
    stride = x.shape[1] // ct.shape[1]  # the sizes are multiples of the stride

    def loss(args):
        y = ops.lax.conv_general_dilated(args[0], args[1], window_strides=(stride, stride), padding="SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return ops.np.sum(y * ct)
    _, (gx, gk) = ops.value_and_grad(loss)((x, kernel))
    return gx, gk


def conv_grad_numpy(x, kernel, ct):
    n, h, w, c = x.shape
    _, oh, ow, _ = ct.shape
    stride = h // oh
    ph, pw = (oh - 1) * stride + 3 - h, (ow - 1) * stride + 3 - w  # 'SAME': the lower pad is the smaller half
    padded = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    gx = np.zeros(padded.shape, np.float32)
    gk = np.zeros(kernel.shape, np.float32)
    for i in range(3):
        for j in range(3):
            rows, cols = slice(i, i + (oh - 1) * stride + 1, stride), slice(j, j + (ow - 1) * stride + 1, stride)
            gx[:, rows, cols, :] += ct @ kernel[i, j].T
            gk[i, j] = padded[:, rows, cols, :].reshape(-1, c).T @ ct.reshape(-1, ct.shape[-1])
    return gx[:, ph // 2:ph // 2 + h, pw // 2:pw // 2 + w, :], gk


_strided, _strided_numpy = _general(2)
_grouped, _grouped_numpy = _general(1)
WORKLOADS += [
    Workload("conv_nchw", "3x3 SAME conv + bias + relu, NCHW/OIHW f32", make_nchw_inputs, conv_nchw_relu,
             (Size("1x64x56x56", {"image": (1, 56, 56, 64), "out": 64}),),
             (Size("1x3x6x5", {"image": (1, 6, 5, 3), "out": 4}),), tolerance=1e-4,
             numpy_fn=conv_nchw_relu_numpy, needs=("lax",)),
    Workload("conv_stride2", "3x3/2 SAME conv 64 -> 128 channels, NHWC/HWIO f32", make_general_inputs, _strided,
             (Size("1x56x56x64", {"image": (1, 56, 56, 64), "out": 128}),),
             (Size("1x7x6x3", {"image": (1, 7, 6, 3), "out": 4}),), tolerance=1e-4,
             numpy_fn=_strided_numpy, needs=("lax",)),
    Workload("conv_groups", "3x3 SAME conv, 8 groups of 16 channels, NHWC/HWIO f32", make_general_inputs, _grouped,
             (Size("1x56x56x128", {"image": (1, 56, 56, 128), "out": 128, "groups": 8}),),
             (Size("1x6x5x4", {"image": (1, 6, 5, 4), "out": 8, "groups": 2}),), tolerance=1e-4,
             numpy_fn=_grouped_numpy, needs=("lax",)),
    Workload("conv_depthwise", "3x3 SAME depthwise conv (64 groups of 1 channel), NHWC/HWIO f32", make_general_inputs,
             _grouped, (Size("1x56x56x64", {"image": (1, 56, 56, 64), "out": 64, "groups": 64}),),
             (Size("1x6x5x4", {"image": (1, 6, 5, 4), "out": 4, "groups": 4}),), tolerance=1e-4,
             numpy_fn=_grouped_numpy, needs=("lax",)),
    Workload("conv_grad_nhwc", "input and kernel gradients of a 3x3 SAME conv, NHWC/HWIO f32", make_grad_inputs,
             conv_grad, (Size("1x56x56x64", {"image": (1, 56, 56, 64), "out": 64}),),
             (Size("1x6x5x3", {"image": (1, 6, 5, 3), "out": 4}),), tolerance=1e-4,
             numpy_fn=conv_grad_numpy, needs=("lax", "grad")),
    Workload("conv_grad_stride2", "input and kernel gradients of a 3x3/2 SAME conv 64 -> 128, NHWC/HWIO f32",
             make_grad_inputs, conv_grad,
             (Size("1x56x56x64", {"image": (1, 56, 56, 64), "out": 128, "stride": 2}),),
             (Size("1x6x4x3", {"image": (1, 6, 4, 3), "out": 4, "stride": 2}),), tolerance=1e-4,
             numpy_fn=conv_grad_numpy, needs=("lax", "grad")),
]


POOL = dict(window=(1, 3, 3, 1), strides=(1, 2, 2, 1))


def make_pool_inputs(p, rng):
    n, h, w, c = p["image"]
    return (rng.standard_normal((n, h, w, c), dtype=np.float32),)


def make_pool_grad_inputs(p, rng):
    """The operand and the cotangent of the pooled result."""
    (x,) = make_pool_inputs(p, rng)
    n, h, w, c = x.shape
    return x, rng.standard_normal((n, -(-h // 2), -(-w // 2), c), dtype=np.float32)


def _pool(ops, x):
    return ops.lax.reduce_window(x, -np.inf, ops.lax.max, POOL["window"], POOL["strides"], "SAME")


def max_pool(ops, x):  # one argument: an unused one is dropped by jax.export, so IREE's function has none for it
    return (_pool(ops, x),)


def max_pool_grad(ops, x, ct):
    _, g = ops.value_and_grad(lambda v: ops.np.sum(_pool(ops, v) * ct))(x)
    return (g,)


def _pool_taps_numpy(x):
    """The padded operand (-inf: SAME pads one row/column after for even sizes) and the nine strided views."""
    n, h, w, c = x.shape
    oh, ow = -(-h // 2), -(-w // 2)
    ph, pw = max((oh - 1) * 2 + 3 - h, 0), max((ow - 1) * 2 + 3 - w, 0)
    padded = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)), constant_values=-np.inf)
    taps = [(i, j, padded[:, i:i + 2 * oh - 1:2, j:j + 2 * ow - 1:2, :]) for i in range(3) for j in range(3)]
    return padded, taps, (ph // 2, pw // 2)


def max_pool_numpy(x):
    _, taps, _ = _pool_taps_numpy(x)
    return (np.maximum.reduce([t for _, _, t in taps]),)


def max_pool_grad_numpy(x, ct):
    padded, taps, (top, left) = _pool_taps_numpy(x)
    m = np.maximum.reduce([t for _, _, t in taps])
    hits = [t == m for _, _, t in taps]
    share = ct / np.sum(hits, axis=0)
    g = np.zeros(padded.shape, np.float32)
    oh, ow = m.shape[1:3]
    for (i, j, _), hit in zip(taps, hits):
        g[:, i:i + 2 * oh - 1:2, j:j + 2 * ow - 1:2, :] += np.where(hit, share, np.float32(0.0))
    n, h, w, c = x.shape
    return (g[:, top:top + h, left:left + w, :],)


POOL_SIZES = (Size("128x28x28x32", {"image": (128, 28, 28, 32)}),)
POOL_QUICK = (Size("2x7x6x10", {"image": (2, 7, 6, 10)}),)

WORKLOADS += [
    Workload("maxpool_nhwc", "3x3/2 SAME max pooling, NHWC f32", make_pool_inputs, max_pool, POOL_SIZES, POOL_QUICK,
             tolerance=1e-6, numpy_fn=max_pool_numpy, needs=("lax",)),
    Workload("maxpool_grad_nhwc", "gradient of 3x3/2 SAME max pooling, NHWC f32", make_pool_grad_inputs, max_pool_grad,
             POOL_SIZES, POOL_QUICK, tolerance=1e-5, numpy_fn=max_pool_grad_numpy, needs=("lax", "grad")),
]
