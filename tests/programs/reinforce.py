"""REINFORCE with a baseline on a small chain-walk environment: a softmax policy MLP, episodes rolled out
in lax.scan with actions from random.categorical and the environment step written with jnp.where and
jnp.clip, discounted returns by a reverse lax.scan, log-probabilities by take_along_axis of log_softmax,
stop_gradient on the baseline, and a batch of episodes by vmap over split keys."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

STATES, ACTIONS, HIDDEN, HORIZON, EPISODES, GAMMA = 7, 2, 12, 10, 6, 0.9


def init_policy(key):
    k1, k2 = random.split(key)
    return {"w1": random.normal(k1, (STATES, HIDDEN)) * 0.3, "b1": jnp.zeros(HIDDEN, jnp.float32),
            "w2": random.normal(k2, (HIDDEN, ACTIONS)) * 0.3, "b2": jnp.zeros(ACTIONS, jnp.float32)}


def logits_fn(params, state):
    h = jnp.tanh(jax.nn.one_hot(state, STATES) @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def env_step(state, action):
    nxt = jnp.clip(state + 2 * action - 1, 0, STATES - 1)
    reward = jnp.where(nxt == STATES - 1, 1.0, -0.1)
    return nxt, reward


def rollout(params, key):
    def step(state, key):
        action = random.categorical(key, logits_fn(params, state))
        nxt, reward = env_step(state, action)
        return nxt, (state, action, reward)

    _, (states, actions, rewards) = lax.scan(step, jnp.int32(STATES // 2), random.split(key, HORIZON))
    return states, actions, rewards


def discounted_returns(rewards):
    def back(carry, r):
        g = r + GAMMA * carry
        return g, g

    _, returns = lax.scan(back, 0.0, rewards, reverse=True)
    return returns


def surrogate(params, states, actions, returns):
    log_probs = jax.nn.log_softmax(logits_fn(params, states))
    chosen = jnp.take_along_axis(log_probs, actions[..., None], axis=-1)[..., 0]
    advantage = lax.stop_gradient(returns - returns.mean(axis=0, keepdims=True))
    return -jnp.mean(jnp.sum(chosen * advantage, axis=-1))


@jax.jit
def update(params, key):
    states, actions, rewards = jax.vmap(rollout, in_axes=(None, 0))(params, random.split(key, EPISODES))
    returns = jax.vmap(discounted_returns)(rewards)
    loss, grads = jax.value_and_grad(surrogate)(params, states, actions, returns)
    params = jax.tree_util.tree_map(lambda p, g: p - 0.2 * g, params, grads)
    return params, loss, rewards.sum(axis=1).mean(), actions


def main(key):
    k_init, k_train = random.split(key)
    params = init_policy(k_init)
    losses, scores = [], []
    for k in random.split(k_train, 4):
        params, loss, score, actions = update(params, k)
        losses.append(loss)
        scores.append(score)
    probs = jax.nn.softmax(logits_fn(params, jnp.arange(STATES)))
    return {"losses": jnp.stack(losses), "scores": jnp.stack(scores), "probs": probs, "actions": actions}


def export(key):
    k_init, k_train = random.split(key)
    return update, (init_policy(k_init), k_train)
