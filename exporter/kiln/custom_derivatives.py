"""jax.custom_derivatives: kiln's custom_jvp and custom_vjp (kiln.transforms.custom) and custom_gradient
(kiln.jax_api), under the module name JAX programs import them from."""
from kiln.jax_api import closure_convert, custom_gradient
from kiln.transforms.custom import custom_jvp, custom_vjp

__all__ = ["custom_jvp", "custom_vjp", "custom_gradient", "closure_convert"]
