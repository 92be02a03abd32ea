"""Records JAX's kiln.random reference draws: run with the peers' venv, which has JAX 0.10 (default config:
jax_threefry_partitionable is True, x64 off), from the repository root:

    benchmarks/.venv-peers/bin/python tests/data/record_random_reference.py

It writes tests/data/random_reference.npz. CASES is shared with tests/test_random_reference.py, which
imports this file without importing JAX: each case is `fn(random, key)` where `random` is jax.random or
kiln.random, so both libraries run the same call. Cases named `x64_*` run with jax_enable_x64 on (JAX's
64-bit dtypes; kiln has them without a flag).
"""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "random_reference.npz")

SEEDS = [0, 1, 42, 2**31 - 1, -1, -7, 123456789]

ALPHAS = np.array([0.3, 0.9, 1.0, 2.5, 7.0, 40.0], np.float32)
LOGITS = np.log(np.array([[0.1, 0.2, 0.3, 0.25, 0.1, 0.05], [0.5, 0.1, 0.1, 0.1, 0.1, 0.1],
                          [0.01, 0.01, 0.01, 0.01, 0.01, 0.95], [1 / 6] * 6], np.float32))
P5 = np.array([0.1, 0.4, 0.2, 0.05, 0.25], np.float32)
COV = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]], np.float32)


def _k(random, seed=42):
    return random.PRNGKey(seed)


CASES = {
    # keys
    **{f"key_{i}": (lambda r, k, s=s: r.PRNGKey(s)) for i, s in enumerate(SEEDS)},
    "key_data_of_key": lambda r, k: r.key_data(r.key(3)),
    "split_2": lambda r, k: r.split(k),
    "split_5": lambda r, k: r.split(k, 5),
    "split_2x3": lambda r, k: r.split(k, (2, 3)),
    "split_split": lambda r, k: r.split(r.split(k)[1], 4),
    "fold_in_0": lambda r, k: r.fold_in(k, 0),
    "fold_in_7": lambda r, k: r.fold_in(k, 7),
    "fold_in_big": lambda r, k: r.fold_in(k, 2**31 - 5),
    "fold_in_chain": lambda r, k: r.fold_in(r.fold_in(k, 1), 2),
    # bits
    "bits_u32": lambda r, k: r.bits(k, (3, 5), np.uint32),
    "bits_u32_scalar": lambda r, k: r.bits(k, (), np.uint32),
    "bits_u8": lambda r, k: r.bits(k, (17,), np.uint8),
    "bits_u16": lambda r, k: r.bits(k, (4, 4), np.uint16),
    "bits_u32_odd": lambda r, k: r.bits(k, (7,), np.uint32),
    # uniform
    "uniform_f32": lambda r, k: r.uniform(k, (1000,)),
    "uniform_f32_range": lambda r, k: r.uniform(k, (4, 50), np.float32, -3.0, 5.5),
    "uniform_f32_scalar": lambda r, k: r.uniform(k),
    "uniform_f16": lambda r, k: r.uniform(k, (300,), np.float16),
    "uniform_bf16": lambda r, k: r.uniform(k, (300,), BF16),
    "uniform_f16_range": lambda r, k: r.uniform(k, (300,), np.float16, -2.0, 3.0),
    "uniform_f32_array_bounds": lambda r, k: r.uniform(k, (3, 4), np.float32, np.arange(4, dtype=np.float32),
                                                       np.arange(4, dtype=np.float32) * 2 + 1),
    # integers
    "randint_i32": lambda r, k: r.randint(k, (500,), -5, 17),
    "randint_i32_wide": lambda r, k: r.randint(k, (200,), -2**31, 2**31 - 1),
    "randint_i8": lambda r, k: r.randint(k, (200,), 0, 100, np.int8),
    "randint_u8": lambda r, k: r.randint(k, (200,), 3, 250, np.uint8),
    "randint_i16_clip": lambda r, k: r.randint(k, (100,), -40000, 40000, np.int16),
    "randint_empty_range": lambda r, k: r.randint(k, (10,), 5, 5),
    "randint_array_bounds": lambda r, k: r.randint(k, (2, 3), np.array([0, 10, 100], np.int32),
                                                   np.array([5, 20, 1000], np.int32)),
    "rademacher": lambda r, k: r.rademacher(k, (100,), np.int32),
    "bernoulli_low": lambda r, k: r.bernoulli(k, 0.3, (1000,)),
    "bernoulli_p_array": lambda r, k: r.bernoulli(k, np.array([0.0, 0.25, 0.5, 0.9, 1.0], np.float32)),
    "bernoulli_default": lambda r, k: r.bernoulli(k, shape=(64,)),
    "bernoulli_high": lambda r, k: r.bernoulli(k, np.float32(0.2), (300,), mode="high"),
    # permutations and choices
    "permutation_int": lambda r, k: r.permutation(k, 10),
    "permutation_array": lambda r, k: r.permutation(k, np.arange(21, dtype=np.float32).reshape(7, 3)),
    "permutation_axis1": lambda r, k: r.permutation(k, np.arange(12, dtype=np.int32).reshape(3, 4), axis=1),
    "permutation_independent": lambda r, k: r.permutation(k, np.arange(12, dtype=np.int32).reshape(3, 4),
                                                          axis=1, independent=True),
    "permutation_big": lambda r, k: r.permutation(k, 3000),
    "choice_replace": lambda r, k: r.choice(k, 10, (6,)),
    "choice_no_replace": lambda r, k: r.choice(k, 10, (6,), replace=False),
    "choice_array": lambda r, k: r.choice(k, np.arange(5, dtype=np.float32) * 1.5, (2, 3)),
    "choice_p": lambda r, k: r.choice(k, 5, (300,), p=P5),
    "choice_p_no_replace": lambda r, k: r.choice(k, 5, (3,), replace=False, p=P5),
    "categorical": lambda r, k: r.categorical(k, LOGITS),
    "categorical_shape": lambda r, k: r.categorical(k, LOGITS, shape=(200, 4)),
    "categorical_axis0": lambda r, k: r.categorical(k, LOGITS, axis=0),
    "categorical_no_replace": lambda r, k: r.categorical(k, LOGITS[0], shape=(4,), replace=False),
    # continuous distributions (transcendental functions: compared to a stated bound)
    "normal_f32": lambda r, k: r.normal(k, (1000,)),
    "normal_f16": lambda r, k: r.normal(k, (200,), np.float16),
    "normal_bf16": lambda r, k: r.normal(k, (200,), BF16),
    "truncated_normal": lambda r, k: r.truncated_normal(k, -1.0, 2.0, (500,)),
    "truncated_normal_tail": lambda r, k: r.truncated_normal(k, 1.5, 4.0, (200,)),
    "multivariate_normal": lambda r, k: r.multivariate_normal(k, np.array([1.0, -2.0, 0.5], np.float32), COV,
                                                              (50,)),
    "exponential": lambda r, k: r.exponential(k, (500,)),
    "laplace": lambda r, k: r.laplace(k, (500,)),
    "logistic": lambda r, k: r.logistic(k, (500,)),
    "gumbel": lambda r, k: r.gumbel(k, (500,)),
    "cauchy": lambda r, k: r.cauchy(k, (500,)),
    "gamma_alphas": lambda r, k: r.gamma(k, ALPHAS),
    "gamma_shape": lambda r, k: r.gamma(k, 2.5, (300,)),
    "gamma_small": lambda r, k: r.gamma(k, 0.2, (100,)),
    "beta": lambda r, k: r.beta(k, 2.0, 3.0, (300,)),
    "beta_small": lambda r, k: r.beta(k, 0.5, 0.5, (100,)),
    "dirichlet": lambda r, k: r.dirichlet(k, np.array([1.0, 2.0, 3.0], np.float32), (100,)),
    "chisquare": lambda r, k: r.chisquare(k, 3.0, (200,)),
    "t": lambda r, k: r.t(k, 5.0, (200,)),
    "f": lambda r, k: r.f(k, 4.0, 7.0, (200,)),
    "pareto": lambda r, k: r.pareto(k, 3.0, (200,)),
    "lognormal": lambda r, k: r.lognormal(k, 0.5, (200,)),
    "weibull_min": lambda r, k: r.weibull_min(k, 2.0, 1.5, (200,)),
    "rayleigh": lambda r, k: r.rayleigh(k, 2.0, (200,)),
    "maxwell": lambda r, k: r.maxwell(k, (200,)),
    "double_sided_maxwell": lambda r, k: r.double_sided_maxwell(k, 1.0, 2.0, (200,)),
    "wald": lambda r, k: r.wald(k, 1.5, (200,)),
    "triangular": lambda r, k: r.triangular(k, -1.0, 0.5, 2.0, (200,)),
    "geometric": lambda r, k: r.geometric(k, 0.3, (300,)),
    "gumbel_high": lambda r, k: r.gumbel(k, (300,), mode="high"),
    "gumbel_highest": lambda r, k: r.gumbel(k, (300,), mode="highest"),
    "gumbel_highest_f16": lambda r, k: r.gumbel(k, (100,), np.float16, mode="highest"),
    "generalized_normal": lambda r, k: r.generalized_normal(k, 1.5, (200,)),
    "ball": lambda r, k: r.ball(k, 3, 2, (50,)),
    "orthogonal": lambda r, k: r.orthogonal(k, 4, (3,)),
    "binomial_small": lambda r, k: r.binomial(k, 12.0, 0.3, (200,)),
    "binomial_large": lambda r, k: r.binomial(k, 200.0, 0.4, (200,)),
    "binomial_high_p": lambda r, k: r.binomial(k, np.array([5.0, 50.0, 500.0], np.float32), 0.9, (4, 3)),
    "multinomial": lambda r, k: r.multinomial(k, 30.0, np.array([0.2, 0.5, 0.3], np.float32), shape=(10, 3)),
    "orthogonal_wide": lambda r, k: r.orthogonal(k, 2, (), m=5),
    "poisson_small": lambda r, k: r.poisson(k, 3.0, (300,)),
    "poisson_large": lambda r, k: r.poisson(k, 25.0, (300,)),
    # 64-bit (JAX with jax_enable_x64)
    "x64_bits_u64": lambda r, k: r.bits(k, (9,), np.uint64),
    "x64_uniform_f64": lambda r, k: r.uniform(k, (500,), np.float64),
    "x64_uniform_f64_range": lambda r, k: r.uniform(k, (100,), np.float64, -2.0, 3.0),
    "x64_randint_i64": lambda r, k: r.randint(k, (200,), -2**40, 2**40, np.int64),
    "x64_randint_u32": lambda r, k: r.randint(k, (200,), 0, 2**32 - 1, np.uint32),
    "x64_normal_f64": lambda r, k: r.normal(k, (300,), np.float64),
    "x64_key_64bit_seed": lambda r, k: r.PRNGKey(np.int64(2**40 + 5)),
}

# Gradients (jax.grad / kiln.grad in the parameter): JAX's implicit reparameterization of the gamma family.
GRAD_CASES = {
    "grad_gamma": (lambda r, k, a: r.gamma(k, a, (20,)).sum(), 2.0),
    "grad_gamma_small": (lambda r, k, a: r.gamma(k, a, (20,)).sum(), 0.3),
    "grad_gamma_large": (lambda r, k, a: r.gamma(k, a, (20,)).sum(), 60.0),
    "grad_beta": (lambda r, k, a: r.beta(k, a, 2.0, (20,)).sum(), 1.5),
    "grad_dirichlet": (lambda r, k, a: (r.dirichlet(k, a * np.array([1.0, 2.0, 3.0], np.float32), (5,))
                                        * np.arange(3, dtype=np.float32)).sum(), 1.2),
}


def main():
    import jax

    assert jax.__version__.startswith("0.10"), jax.__version__
    assert jax.config.jax_threefry_partitionable, "record with JAX's default config"
    import jax.random as jr

    out = {}
    for x64 in (False, True):
        jax.config.update("jax_enable_x64", x64)
        for name, fn in CASES.items():
            if name.startswith("x64_") != x64:
                continue
            value = np.asarray(fn(jr, jr.PRNGKey(42)))
            out[name] = value.view(np.uint16) if value.dtype == BF16 else value
            out[name + "__dtype"] = np.array(str(value.dtype))
    jax.config.update("jax_enable_x64", False)
    for name, (fn, a) in GRAD_CASES.items():
        value = np.asarray(jax.grad(lambda a: fn(jr, jr.PRNGKey(42), a))(np.float32(a)))
        out[name] = value
        out[name + "__dtype"] = np.array(str(value.dtype))
    np.savez(OUT, **out)
    print(f"wrote {len(CASES)} cases to {OUT} (jax {jax.__version__})")


if __name__ == "__main__":
    main()
