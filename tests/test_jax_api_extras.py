"""The last of JAX's top-level and jax.ad_checkpoint / jax.custom_derivatives names: the config flags' context
managers (what each does in kiln), print_saved_residuals, custom_vjp's symbolic_zeros mode and linear_call.
References: numpy formulas, finite differences, and values recorded from JAX 0.10.2 where it decides."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import ad_checkpoint


def test_print_saved_residuals(capsys):
    def f(params, x):
        return knp.tanh(x @ params["w"]).sum()

    ad_checkpoint.print_saved_residuals(f, {"w": np.ones((3, 2))}, np.ones((4, 3)))
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["f64[3,2] from the argument params", "f64[4,3] from the argument x"]
    assert lines[2].startswith("f64[4,2] output of ") and "test_jax_api_extras.py" in lines[2] and "(f)" in lines[2]
    assert len(lines) == 3
    saved = ad_checkpoint.saved_residuals(lambda x, y: knp.sin(x) * y, np.float32(1.0), np.ones(3, np.float32))
    assert [(a.str_short(), w.split(" from ")[0]) for a, w in saved] == [
        ("f32[]", "output of cos"), ("f32[3]", "from the argument y"), ("f32[3]", "output of broadcast_in_dim")]
    # a function linear in its argument keeps nothing
    assert ad_checkpoint.saved_residuals(lambda x: (x + x).sum(), np.ones(2)) == []
