"""A small optimizer library in the style of JAX's example_libraries.optimizers: each optimizer is a triple
of pure functions (init, update, get_params) over a pytree of parameters, with its state a registered
pytree, so the state passes through jit, loops and Program globals like any other tree."""
from collections import namedtuple

import kiln as jax
import kiln.numpy as jnp

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
jax.tree_util.register_pytree_node(
    OptimizerState,
    lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
    lambda data, xs: OptimizerState(xs[0], data[0], data[1]),
)
Optimizer = namedtuple("Optimizer", ["init_fn", "update_fn", "params_fn"])


def optimizer(opt_maker):
    """Turns (init, update, get_params) acting on one array into the same triple acting on a pytree."""

    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        def tree_init(x0_tree):
            x0_flat, tree = jax.tree_util.tree_flatten(x0_tree)
            initial_states = [init(x0) for x0 in x0_flat]
            states_flat, subtrees = zip(*map(jax.tree_util.tree_flatten, initial_states))
            return OptimizerState(list(states_flat), tree, list(subtrees))

        def tree_update(i, grad_tree, opt_state):
            states_flat, tree, subtrees = opt_state
            grad_flat, tree2 = jax.tree_util.tree_flatten(grad_tree)
            assert tree == tree2, (tree, tree2)
            states = map(jax.tree_util.tree_unflatten, subtrees, states_flat)
            new_states = map(update, [i] * len(grad_flat), grad_flat, states)
            new_states_flat, subtrees2 = zip(*map(jax.tree_util.tree_flatten, new_states))
            return OptimizerState(list(new_states_flat), tree, list(subtrees))

        def tree_get_params(opt_state):
            states_flat, tree, subtrees = opt_state
            states = map(jax.tree_util.tree_unflatten, subtrees, states_flat)
            return jax.tree_util.tree_unflatten(tree, [get_params(s) for s in states])

        return Optimizer(tree_init, tree_update, tree_get_params)

    return tree_opt_maker


@optimizer
def sgd(step_size):
    def init(x0):
        return x0

    def update(i, g, x):
        return x - step_size * g

    return init, update, lambda x: x


@optimizer
def momentum(step_size, mass):
    def init(x0):
        return x0, jnp.zeros_like(x0)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size * velocity, velocity

    return init, update, lambda state: state[0]


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    def init(x0):
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        mhat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        vhat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - step_size * mhat / (jnp.sqrt(vhat) + eps), m, v

    return init, update, lambda state: state[0]
