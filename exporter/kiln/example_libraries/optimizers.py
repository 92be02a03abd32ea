"""jax.example_libraries.optimizers over kiln.numpy: optimizers as ``(init_fun, update_fun, get_params)``
triples over pytrees of parameters, and step-size schedules.

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    opt_state = opt_init(params)
    opt_state = opt_update(step, kiln.grad(loss)(get_params(opt_state)), opt_state)

The update rules are JAX's (the same formulas, so the same numbers up to rounding). ``OptimizerState`` is a
pytree, so an optimizer step can be a ``kiln.jit`` function of ``(step, grads, opt_state)``.
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Callable, NamedTuple

import numpy as np

import kiln.numpy as knp
from kiln.core.pytree import register_pytree_node, tree_flatten, tree_map, tree_unflatten

__all__ = [
    "Optimizer", "OptimizerState", "JoinPoint", "optimizer", "sgd", "momentum", "nesterov", "adagrad", "rmsprop",
    "rmsprop_momentum", "adam", "adamax", "sm3", "constant", "exponential_decay", "inverse_time_decay",
    "polynomial_decay", "piecewise_constant", "make_schedule", "l2_norm", "clip_grads", "unpack_optimizer_state",
    "pack_optimizer_state", "Array", "Params", "State", "Updates", "InitFn", "Step", "UpdateFn", "ParamsFn",
    "Schedule",
]

# The state of an optimizer over a tree: one flattened per-leaf state per parameter leaf, the parameters'
# treedef and each per-leaf state's treedef. A pytree whose leaves are the per-leaf states' arrays.
OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
register_pytree_node(
    OptimizerState,
    lambda state: ((state.packed_state,), (state.tree_def, tuple(state.subtree_defs))),
    lambda aux, children: OptimizerState(list(children[0]), aux[0], aux[1]))

Array = Any
Params = Any  # a tree of arrays
State = Any  # one leaf's optimizer state
Updates = Params  # gradients have the parameters' tree
InitFn = Callable[[Params], OptimizerState]
Step = int
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]
Schedule = Callable[[Step], float]


class Optimizer(NamedTuple):
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def optimizer(opt_maker):
    """Decorator: `opt_maker(*args)` returns ``(init, update, get_params)`` for one array; the decorated maker
    returns an ``Optimizer`` whose functions work leaf by leaf over a tree of parameters."""

    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            leaves, treedef = tree_flatten(x0_tree)
            flats, subtrees = [], []
            for x0 in leaves:
                flat, sub = tree_flatten(init(x0))
                flats.append(flat)
                subtrees.append(sub)
            return OptimizerState(flats, treedef, tuple(subtrees))

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            flats, treedef, subtrees = opt_state
            grads, grad_treedef = tree_flatten(grad_tree)
            if grad_treedef != treedef:
                raise TypeError("optimizer update function was passed a gradient tree that did not match the "
                                f"parameter tree structure with which it was initialized: parameter tree {treedef} "
                                f"and grad tree {grad_treedef}.")
            new_flats = []
            for g, flat, sub in zip(grads, flats, subtrees):
                new_flat, new_sub = tree_flatten(update(i, g, tree_unflatten(sub, flat)))
                if new_sub != sub:
                    raise TypeError("optimizer update function produced an output structure that did not match "
                                    f"its input structure: input {sub} and output {new_sub}.")
                new_flats.append(new_flat)
            return OptimizerState(new_flats, treedef, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            flats, treedef, subtrees = opt_state
            return tree_unflatten(treedef, [get_params(tree_unflatten(sub, flat))
                                            for flat, sub in zip(flats, subtrees)])

        return Optimizer(tree_init, tree_update, tree_get_params)

    return tree_opt_maker


def _first(state):
    return state[0]


@optimizer
def sgd(step_size):
    """Stochastic gradient descent: ``x - step_size(i) * g``."""
    step_size = make_schedule(step_size)
    return (lambda x0: x0), (lambda i, g, x: x - step_size(i) * g), (lambda x: x)


@optimizer
def momentum(step_size, mass):
    """Heavy-ball momentum: ``v = mass * v + g``, ``x - step_size(i) * v``."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity

    return (lambda x0: (x0, knp.zeros_like(x0))), update, _first


@optimizer
def nesterov(step_size, mass):
    """Nesterov's accelerated gradient: ``v = mass * v + g``, ``x - step_size(i) * (mass * v + g)``."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity

    return (lambda x0: (x0, knp.zeros_like(x0))), update, _first


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad with momentum (Duchi et al. 2011): the gradient scaled by the root of its summed squares."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + knp.square(g)
        inv_sqrt = knp.where(g_sq > 0, 1.0 / knp.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m

    return (lambda x0: (x0, knp.zeros_like(x0), knp.zeros_like(x0))), update, _first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: the gradient over the root of a running mean of its squares."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq = state
        avg_sq = avg_sq * gamma + knp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / knp.sqrt(avg_sq + eps), avg_sq

    return (lambda x0: (x0, knp.zeros_like(x0))), update, _first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum (Graves 2013)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + knp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / knp.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom

    return (lambda x0: (x0, knp.zeros_like(x0), knp.zeros_like(x0))), update, _first


def _power(base, i, dtype):
    return knp.asarray(base, dtype) ** (i + 1)


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba 2014) with bias-corrected moments; the step `i` counts from 0."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * knp.square(g) + b2 * v
        mhat = m / (1 - _power(b1, i, m.dtype))
        vhat = v / (1 - _power(b2, i, m.dtype))
        return x - step_size(i) * mhat / (knp.sqrt(vhat) + eps), m, v

    return (lambda x0: (x0, knp.zeros_like(x0), knp.zeros_like(x0))), update, _first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax, Adam's infinity-norm variant (Kingma and Ba 2014, section 7)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = knp.maximum(b2 * u, knp.abs(g))
        x = x - (step_size(i) / (1 - _power(b1, i, m.dtype))) * m / (u + eps)
        return x, m, u

    return (lambda x0: (x0, knp.zeros_like(x0), knp.zeros_like(x0))), update, _first


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al. 2019): one accumulator per axis; the per-element accumulator is their minimum."""
    step_size = make_schedule(step_size)

    def along(ndim, v, axis):  # v (of length shape[axis]) broadcast along `axis` of an ndim array
        shape = [1] * ndim
        shape[axis] = v.shape[0]
        return knp.reshape(v, shape)

    def init(x0):
        shape = tuple(np.shape(x0))
        x0 = knp.atleast_1d(x0)
        return x0, knp.zeros_like(x0), [knp.zeros((n,), x0.dtype) for n in x0.shape], shape

    def update(i, g, state):
        x, m, vs, shape = state
        g = knp.reshape(g, x.shape)
        accum = functools.reduce(knp.minimum, [along(g.ndim, v, k) for k, v in enumerate(vs)]) + knp.square(g)
        inv_sqrt = knp.where(accum > 0, 1.0 / knp.sqrt(accum), 0.0)
        m = (1.0 - momentum) * (g * inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        vs = [knp.max(accum, axis=tuple(a for a in range(x.ndim) if a != k)) if x.ndim > 1 else accum
              for k in range(x.ndim)]
        return x, m, vs, shape

    def get_params(state):
        x, _, _, shape = state
        return knp.reshape(x, shape)

    return init, update, get_params


# schedules: step -> step size

def constant(step_size) -> Schedule:
    return lambda i: step_size


def exponential_decay(step_size, decay_steps, decay_rate) -> Schedule:
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False) -> Schedule:
    if staircase:
        return lambda i: step_size / (1 + decay_rate * knp.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0) -> Schedule:
    def schedule(step_num):
        step_num = knp.minimum(step_num, decay_steps)
        return (1 - step_num / decay_steps) ** power * (step_size - final_step_size) + final_step_size

    return schedule


def piecewise_constant(boundaries, values) -> Schedule:
    """values[k] for steps in (boundaries[k-1], boundaries[k]]: len(values) == len(boundaries) + 1."""
    boundaries = knp.asarray(boundaries)
    values = knp.asarray(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")
    return lambda i: values[knp.sum(i > boundaries)]


def make_schedule(scalar_or_schedule) -> Schedule:
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if np.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


# utilities

def l2_norm(tree):
    """The 2-norm of all of a tree's leaves taken as one vector."""
    leaves, _ = tree_flatten(tree)
    return knp.sqrt(sum(knp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
    """The tree scaled so that its l2_norm is at most max_norm."""
    norm = l2_norm(grad_tree)
    return tree_map(lambda g: knp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """A marker for where a parameter leaf's optimizer state starts in an unpacked state tree (a leaf of the
    parameters' tree)."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):  # pickling
        return iter((self.subtree,))


def unpack_optimizer_state(opt_state):
    """An OptimizerState as nested Python containers (lists, tuples, dicts, JoinPoints), e.g. to pickle it."""
    flats, treedef, subtrees = opt_state
    return tree_unflatten(treedef, [JoinPoint(tree_unflatten(sub, flat)) for flat, sub in zip(flats, subtrees)])


def pack_optimizer_state(marked_pytree):
    """The inverse of unpack_optimizer_state."""
    sentinels, treedef = tree_flatten(marked_pytree)
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise TypeError("pack_optimizer_state: every leaf must be a JoinPoint (unpack_optimizer_state's output)")
    flats, subs = [], []
    for s in sentinels:
        flat, sub = tree_flatten(s.subtree)
        flats.append(flat)
        subs.append(sub)
    return OptimizerState(flats, treedef, tuple(subs))
