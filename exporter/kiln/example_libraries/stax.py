"""jax.example_libraries.stax over kiln: neural network layers as ``(init_fun, apply_fun)`` pairs.

    init_fun, apply_fun = stax.serial(stax.Dense(512), stax.Relu, stax.Dense(10), stax.LogSoftmax)
    out_shape, params = init_fun(kiln.random.key(0), (-1, 784))
    logits = apply_fun(params, inputs)

``init_fun(rng, input_shape) -> (output_shape, params)``; ``apply_fun(params, inputs, **kwargs)`` (``rng=`` for
Dropout and for combinators passing keys down). Layers, initializers and the order keys are split in are JAX's,
so for the same key the parameters are JAX's (kiln.random draws JAX's numbers, docs/jax_compat.md).
"""
from __future__ import annotations

import functools
import math

import kiln.lax as lax
import kiln.numpy as knp
import kiln.random as random
from kiln.nn import elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax, softplus, standardize
from kiln.nn.initializers import glorot_normal, normal, ones, zeros

__all__ = [
    "Dense", "GeneralConv", "Conv", "GeneralConvTranspose", "Conv1DTranspose", "ConvTranspose", "BatchNorm",
    "elementwise", "Tanh", "Relu", "Exp", "LogSoftmax", "Softmax", "Softplus", "Sigmoid", "Elu", "LeakyRelu", "Selu",
    "Gelu", "MaxPool", "SumPool", "AvgPool", "Flatten", "Identity", "FanOut", "FanInSum", "FanInConcat", "Dropout",
    "serial", "parallel", "shape_dependent", "glorot", "randn", "logsoftmax", "glorot_normal", "normal", "ones",
    "zeros", "relu", "log_softmax", "softmax", "softplus", "sigmoid", "elu", "leaky_relu", "selu", "gelu",
    "standardize",
]

glorot = glorot_normal
randn = normal
logsoftmax = log_softmax


def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A fully connected layer: ``inputs @ W + b``."""

    def init_fun(rng, input_shape):
        k1, k2 = random.split(rng)
        return tuple(input_shape[:-1]) + (out_dim,), (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return knp.dot(inputs, W) + b

    return init_fun, apply_fun


def _kernel_shape(rhs_spec, lhs_spec, out_chan, filter_shape, input_shape):
    spatial = iter(filter_shape)
    return [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I" else next(spatial)
            for c in rhs_spec]


def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID", W_init=None,
                b_init=normal(1e-6)):
    """A convolution with the layouts ``dimension_numbers = (lhs_spec, rhs_spec, out_spec)``, e.g.
    ``('NHWC', 'HWIO', 'NHWC')``; the bias is broadcast over all but the output channel."""
    one = (1,) * len(filter_shape)
    strides = strides or one
    init_fun = _conv_init(dimension_numbers, out_chan, filter_shape, strides, padding, W_init, b_init,
                          lax.conv_general_shape_tuple)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return lax.conv_general_dilated(inputs, W, strides, padding, one, one,
                                        dimension_numbers=dimension_numbers) + b

    return init_fun, apply_fun


def _conv_init(dimension_numbers, out_chan, filter_shape, strides, padding, W_init, b_init, output_shape_of):
    """init_fun of a (transposed) convolution layer: its output shape by output_shape_of, and (W, b)."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

    def init_fun(rng, input_shape):
        kernel_shape = _kernel_shape(rhs_spec, lhs_spec, out_chan, filter_shape, input_shape)
        output_shape = output_shape_of(input_shape, kernel_shape, strides, padding, dimension_numbers)
        k1, k2 = random.split(rng)
        return output_shape, (W_init(k1, kernel_shape), b_init(k2, [out_chan if c == "C" else 1 for c in out_spec]))

    return init_fun


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))


def GeneralConvTranspose(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID", W_init=None,
                         b_init=normal(1e-6)):
    """A transposed convolution (lax.conv_transpose) with the layouts ``dimension_numbers``."""
    strides = strides or (1,) * len(filter_shape)
    init_fun = _conv_init(dimension_numbers, out_chan, filter_shape, strides, padding, W_init, b_init,
                          lax.conv_transpose_shape_tuple)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return lax.conv_transpose(inputs, W, strides, padding, dimension_numbers=dimension_numbers) + b

    return init_fun, apply_fun


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros, gamma_init=ones):
    """Normalizes over `axis` with the batch's own statistics (no running averages, as JAX's stax), then
    ``gamma * z + beta`` with gamma and beta shaped like the axes not normalized."""
    axis = (axis,) if knp.isscalar(axis) else tuple(axis)

    def init_fun(rng, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        return input_shape, (beta_init(k1, shape) if center else (), gamma_init(k2, shape) if scale else ())

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        ed = tuple(None if i in axis else slice(None) for i in range(knp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if center and scale:
            return gamma[ed] * z + beta[ed]
        if center:
            return z + beta[ed]
        if scale:
            return gamma[ed] * z
        return z

    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A layer without parameters applying ``fun(inputs, **fun_kwargs)``."""
    return (lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: fun(inputs, **fun_kwargs))


Tanh = elementwise(knp.tanh)
Relu = elementwise(relu)
Exp = elementwise(knp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _non_spatial_axes(spec, ndim):
    return (0, ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))


def _pooling_layer(reducer, init_val, average=False):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        """Pools over the spatial axes (``spec`` names the layout, default NHWC-like: batch first, channels
        last)."""
        spatial_window, spatial_strides = tuple(window_shape), tuple(strides or (1,) * len(window_shape))
        window, steps = spatial_window, spatial_strides
        for i in sorted(_non_spatial_axes(spec, len(spatial_window) + 2)):
            window = window[:i] + (1,) + window[i:]
            steps = steps[:i] + (1,) + steps[i:]

        def init_fun(rng, input_shape):
            pads = lax.padtype_to_pads(input_shape, window, steps, padding)
            ones_ = (1,) * len(window)
            return lax.reduce_window_shape_tuple(input_shape, window, steps, pads, ones_, ones_), ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, window, steps, padding)
            if not average:
                return out
            # divide by the number of input elements each window covered (fewer at padded borders)
            non_spatial = _non_spatial_axes(spec, inputs.ndim)
            spatial_shape = tuple(inputs.shape[i] for i in range(inputs.ndim) if i not in non_spatial)
            sizes = lax.reduce_window(knp.ones(spatial_shape, inputs.dtype), 0.0, lax.add, spatial_window,
                                      spatial_strides, padding)
            for i in sorted(non_spatial):
                sizes = knp.expand_dims(sizes, i)
            return out / sizes

        return init_fun, apply_fun

    return PoolingLayer


MaxPool = _pooling_layer(lax.max, -knp.inf)
SumPool = _pooling_layer(lax.add, 0.0)
AvgPool = _pooling_layer(lax.add, 0.0, average=True)


def _flatten():
    def init_fun(rng, input_shape):
        return (input_shape[0], math.prod(input_shape[1:])), ()

    return init_fun, (lambda params, inputs, **kwargs: knp.reshape(inputs, (inputs.shape[0], -1)))


Flatten = _flatten()
Identity = ((lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: inputs))


def FanOut(num):
    """One input to `num` copies."""
    return (lambda rng, input_shape: ([input_shape] * num, ())), (lambda params, inputs, **kwargs: [inputs] * num)


FanInSum = ((lambda rng, input_shape: (input_shape[0], ())), (lambda params, inputs, **kwargs: sum(inputs)))


def FanInConcat(axis=-1):
    """Several inputs concatenated along `axis`."""

    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        return tuple(input_shape[0][:ax]) + (size,) + tuple(input_shape[0][ax + 1:]), ()

    return init_fun, (lambda params, inputs, **kwargs: knp.concatenate(inputs, axis))


def Dropout(rate, mode="train"):
    """As JAX's stax: in 'train' mode each element is KEPT with probability `rate` (and scaled by 1 / rate);
    apply_fun needs ``rng=``. Other modes pass the input through."""

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng", None)
        if rng is None:
            raise ValueError("Dropout layer requires apply_fun to be called with a PRNG key argument. That is, "
                             "instead of `apply_fun(params, inputs)`, call it like `apply_fun(params, inputs, rng)` "
                             "where `rng` is a PRNG key (e.g. from `kiln.random.key`).")
        if mode == "train":
            keep = random.bernoulli(rng, rate, inputs.shape)
            return knp.where(keep, inputs / rate, 0)
        return inputs

    return (lambda rng, input_shape: (input_shape, ())), apply_fun


def serial(*layers):
    """Layers applied one after another; init splits the key once per layer, apply splits `rng` (if given)
    into one key per layer."""
    nlayers = len(layers)
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, nlayers) if rng is not None else (None,) * nlayers
        for fun, param, r in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=r, **kwargs)
        return inputs

    return init_fun, apply_fun


def parallel(*layers):
    """Layers applied to the matching inputs of a sequence (with FanOut and FanInSum/FanInConcat)."""
    nlayers = len(layers)
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        rngs = random.split(rng, nlayers)
        return zip(*[init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)])

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, nlayers) if rng is not None else (None,) * nlayers
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]

    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built by `make_layer(input_shape)` once the input's shape is known."""

    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)

    return init_fun, apply_fun
