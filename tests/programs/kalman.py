"""A Kalman filter and Rauch-Tung-Striebel smoother for a constant-velocity model: the filter is a lax.scan
over the observations with the gain from a Cholesky factor and solve_triangular, the log marginal likelihood
accumulated on the way, the smoother a reverse scan, and the gradient of the likelihood with respect to the
noise scales."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random
from kiln.scipy.linalg import cho_solve, solve_triangular

T, DT = 25, 0.1
F = jnp.array([[1.0, 0.0, DT, 0.0], [0.0, 1.0, 0.0, DT], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
H = jnp.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])


def kalman_filter(log_q, log_r, ys):
    Q = jnp.exp(log_q) * jnp.eye(4, dtype=ys.dtype)
    R = jnp.exp(log_r) * jnp.eye(2, dtype=ys.dtype)

    def step(carry, y):
        m, P, log_lik = carry
        m_pred = F @ m
        P_pred = F @ P @ F.T + Q
        S = H @ P_pred @ H.T + R
        L = jnp.linalg.cholesky(S)
        resid = y - H @ m_pred
        white = solve_triangular(L, resid, lower=True)
        log_lik = log_lik - 0.5 * jnp.sum(white ** 2) - jnp.sum(jnp.log(jnp.diag(L))) - jnp.log(2 * jnp.pi)
        K = cho_solve((L, True), H @ P_pred).T
        m_new = m_pred + K @ resid
        P_new = P_pred - K @ S @ K.T
        return (m_new, P_new, log_lik), (m_new, P_new, m_pred, P_pred)

    init = (jnp.zeros(4, ys.dtype), jnp.eye(4, dtype=ys.dtype), jnp.zeros((), ys.dtype))
    (_, _, log_lik), filtered = lax.scan(step, init, ys)
    return log_lik, filtered


def rts_smoother(filtered):
    ms, Ps, m_preds, P_preds = filtered

    def step(carry, inputs):
        m_next, P_next = carry
        m, P, m_pred, P_pred = inputs
        G = jnp.linalg.solve(P_pred, F @ P).T
        m_s = m + G @ (m_next - m_pred)
        P_s = P + G @ (P_next - P_pred) @ G.T
        return (m_s, P_s), m_s

    rest = (ms[:-1], Ps[:-1], m_preds[1:], P_preds[1:])
    _, smoothed = lax.scan(step, (ms[-1], Ps[-1]), rest, reverse=True)
    return jnp.concatenate([smoothed, ms[-1:]], axis=0)


@jax.jit
def fit(log_q, log_r, ys):
    (log_lik, filtered), grads = jax.value_and_grad(kalman_filter, argnums=(0, 1), has_aux=True)(log_q, log_r, ys)
    return log_lik, grads, filtered[0], rts_smoother(filtered)


def simulate(key):
    k_state, k_obs = random.split(key)
    t = jnp.arange(T, dtype=jnp.float32) * DT
    path = jnp.stack([jnp.cos(t), jnp.sin(2 * t)], axis=1) + 0.05 * jnp.cumsum(random.normal(k_state, (T, 2)), axis=0)
    return path + 0.1 * random.normal(k_obs, (T, 2))


def main(key):
    ys = simulate(key)
    log_lik, (g_q, g_r), filtered, smoothed = fit(jnp.float32(-3.0), jnp.float32(-2.0), ys)
    return {"log_lik": log_lik, "grad_log_q": g_q, "grad_log_r": g_r, "filtered": filtered, "smoothed": smoothed}


def export(key):
    return fit, (jnp.float32(-3.0), jnp.float32(-2.0), simulate(key))
