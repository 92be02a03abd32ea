"""kiln.nn.dot_product_attention against a numpy reference of JAX's 'xla' implementation (one batch and head at a
time): grouped-query heads, bias, masks, causal and window masks, sequence lengths, the residual; eagerly, under
jit and through kiln-run; gradients against central differences."""
import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.numpy as knp
from kiln_tools import eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(0)
B, T, S, N, K, H = 2, 4, 5, 4, 2, 3


def reference(q, k, v, bias=None, mask=None, scale=None, causal=False, window=None, q_len=None, kv_len=None):
    """Loops over batch and query head; logits in float64, masked ones at -0.7 x float32's max."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    out = np.zeros(q.shape)
    lse = np.zeros(q.shape[:-1])
    groups = q.shape[2] // k.shape[2]
    for b in range(q.shape[0]):
        for n in range(q.shape[2]):
            logits = q[b, :, n] @ k[b, :, n // groups].T * scale
            if bias is not None:
                logits = logits + np.broadcast_to(bias, (q.shape[0], q.shape[2]) + logits.shape)[b, n]
            keep = np.ones(logits.shape, bool)
            if mask is not None:
                keep &= np.broadcast_to(mask, (q.shape[0], q.shape[2]) + logits.shape)[b, n]
            i, j = np.indices(logits.shape)
            if causal:
                keep &= j <= i
            if window is not None:
                keep &= (i - j <= window[0]) & (j - i <= window[1])
            if q_len is not None:
                keep &= i < q_len[b]
            if kv_len is not None:
                keep &= j < kv_len[b]
            logits = np.where(keep, logits, -0.7 * np.finfo(np.float32).max)
            top = logits.max(-1, keepdims=True)
            e = np.exp(logits - top)
            out[b, :, n] = (e / e.sum(-1, keepdims=True)) @ v[b, :, n // groups]
            lse[b, :, n] = np.log(e.sum(-1)) + top[:, 0]
            if q_len is not None:
                out[b, q_len[b]:, n] = 0
    return out, lse


Q = RNG.standard_normal((B, T, N, H))
KEY = RNG.standard_normal((B, S, K, H))
V = RNG.standard_normal((B, S, K, H))


def f32(*arrays):
    return [a.astype(np.float32) for a in arrays]


@pytest.mark.parametrize("options", [
    {}, {"scale": 0.7}, {"is_causal": True}, {"local_window_size": (1, 2)}, {"local_window_size": 1},
    {"query_seq_lengths": np.array([2, 4], np.int32), "key_value_seq_lengths": np.array([3, 5], np.int32)},
])
def test_against_the_reference(options):
    window = options.get("local_window_size")
    window = (window, window) if isinstance(window, int) else window
    want = reference(Q, KEY, V, scale=options.get("scale"), causal=options.get("is_causal", False), window=window,
                     q_len=options.get("query_seq_lengths"), kv_len=options.get("key_value_seq_lengths"))[0]
    eager_and_jit(lambda q, k, v: nn.dot_product_attention(q, k, v, **options),
                  lambda q, k, v: want.astype(np.float32), *f32(Q, KEY, V), tol=2e-6)


def test_bias_mask_residual_and_kiln_run(tmp_path):
    bias = RNG.standard_normal((1, N, T, S)).astype(np.float32)
    mask = RNG.random((B, 1, T, S)) > 0.3
    want, lse = reference(Q, KEY, V, bias=bias, mask=mask)

    def attend(q, k, v, bias, mask):
        return nn.dot_product_attention(q, k, v, bias, mask, return_residual=True)

    eager_jit_and_kiln_run(attend, lambda *a: (want.astype(np.float32), lse.astype(np.float32)),
                           *f32(Q, KEY, V), bias, mask, tmp_path=tmp_path, tol=2e-6)


def test_unbatched_and_float64():
    want = reference(Q[:1], KEY[:1], V[:1])[0][0]
    eager_and_jit(nn.dot_product_attention, lambda q, k, v: want.astype(np.float32), *f32(Q[0], KEY[0], V[0]),
                  tol=2e-6)
    # the softmax is computed in float32 even for float64 inputs, as in JAX
    eager_and_jit(lambda q, k, v: nn.dot_product_attention(q, k, v, is_causal=True),
                  lambda q, k, v: reference(q, k, v, causal=True)[0], Q, KEY[:, :T], V[:, :T], tol=1e-6)


def test_gradients():
    q, k, v = Q[:1, :2], KEY[:1, :3], V[:1, :3]
    c = RNG.standard_normal((1, 2, N, H))

    def loss(q, k, v):
        return knp.sum(nn.dot_product_attention(q, k, v, is_causal=False) * c)

    grads = kiln.grad(loss, argnums=(0, 1, 2))(q, k, v)
    wants = (numerical_grad(lambda a: float(loss(a, k, v)), q, eps=1e-3),
             numerical_grad(lambda a: float(loss(q, a, v)), k, eps=1e-3),
             numerical_grad(lambda a: float(loss(q, k, a)), v, eps=1e-3))
    for g, w in zip(grads, wants):  # float32 softmax inside: differences are good to about 1e-4
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-4)


def test_errors():
    q, k, v = f32(Q, KEY, V)
    with pytest.raises(ValueError, match="dot_product_attention: the number of query heads must be a multiple"):
        nn.dot_product_attention(q[:, :, :3], k, v)
    with pytest.raises(ValueError, match="dot_product_attention: value must have key's shape"):
        nn.dot_product_attention(q, k, v[:, :2])
    with pytest.raises(ValueError, match="dot_product_attention: query must be"):
        nn.dot_product_attention(q[..., :2], k, v)
    with pytest.raises(ValueError, match="dot_product_attention: mask must be bool"):
        nn.dot_product_attention(q, k, v, mask=np.ones((B, 1, T, S), np.float32))
    with pytest.raises(ValueError, match="dot_product_attention: implementation 'cudnn' is not available"):
        nn.dot_product_attention(q, k, v, implementation="cudnn")
    with pytest.raises(ValueError, match="dot_product_attention: bias has 3 heads; it needs 1 or the query's 4"):
        nn.dot_product_attention(q, k, v, bias=np.ones((1, 3, T, S), np.float32))
