"""A message-passing graph network in the style of jraph's GraphNetwork: edges as sender/receiver index
arrays, edge messages from gathered node features (jnp.take and fancy indexing), aggregation by
jax.ops.segment_sum and segment_max with num_segments, degree normalization by .at[].add, a global
readout by segment_sum over graph ids of a batch of two graphs, and a regression step by value_and_grad."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random

FEATURES, HIDDEN, NODES, GRAPHS = 3, 8, 9, 2
# two graphs: a 5-cycle (nodes 0-4) and a 4-star (nodes 5-8), both directions of every edge
_EDGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (5, 6), (5, 7), (5, 8)]
SENDERS = jnp.array([s for s, r in _EDGES] + [r for s, r in _EDGES], jnp.int32)
RECEIVERS = jnp.array([r for s, r in _EDGES] + [s for s, r in _EDGES], jnp.int32)
NODE_GRAPH = jnp.array([0] * 5 + [1] * 4, jnp.int32)


def init_params(key):
    ks = random.split(key, 4)
    w = lambda k, m, n: random.normal(k, (m, n)) / jnp.sqrt(m)
    return {"edge": w(ks[0], 2 * FEATURES, HIDDEN), "node": w(ks[1], FEATURES + 2 * HIDDEN, HIDDEN),
            "readout": w(ks[2], HIDDEN, 1), "bias": jnp.zeros((1,), jnp.float32)}


def graph_net(params, nodes):
    sent = jnp.take(nodes, SENDERS, axis=0)
    received = nodes[RECEIVERS]
    messages = jax.nn.relu(jnp.concatenate([sent, received], axis=-1) @ params["edge"])
    degree = jnp.zeros(NODES, jnp.float32).at[RECEIVERS].add(1.0)
    summed = jax.ops.segment_sum(messages, RECEIVERS, num_segments=NODES)
    maxed = jax.ops.segment_max(messages, RECEIVERS, num_segments=NODES)
    mean = summed / jnp.maximum(degree, 1.0)[:, None]
    h = jnp.tanh(jnp.concatenate([nodes, mean, maxed], axis=-1) @ params["node"])
    pooled = jax.ops.segment_sum(h, NODE_GRAPH, num_segments=GRAPHS)
    return (pooled @ params["readout"] + params["bias"])[:, 0], degree


def loss(params, nodes, targets):
    preds, _ = graph_net(params, nodes)
    return jnp.mean((preds - targets) ** 2)


@jax.jit
def step(params, nodes, targets):
    value, grads = jax.value_and_grad(loss)(params, nodes, targets)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), value


def main(key):
    k_params, k_nodes = random.split(key)
    params = init_params(k_params)
    nodes = random.normal(k_nodes, (NODES, FEATURES))
    targets = jnp.array([1.0, -1.0])
    losses = []
    for _ in range(4):
        params, value = step(params, nodes, targets)
        losses.append(value)
    preds, degree = graph_net(params, nodes)
    segment_min = jax.ops.segment_min(nodes[:, 0], NODE_GRAPH, num_segments=GRAPHS)
    segment_prod = jax.ops.segment_prod(nodes[:, 1], NODE_GRAPH, num_segments=GRAPHS)
    return {"losses": jnp.stack(losses), "preds": preds, "degree": degree, "min": segment_min,
            "prod": segment_prod, "edge": params["edge"]}


def export(key):
    k_params, k_nodes = random.split(key)
    return jax.value_and_grad(loss), (init_params(k_params), random.normal(k_nodes, (NODES, FEATURES)),
                                      jnp.array([1.0, -1.0]))
