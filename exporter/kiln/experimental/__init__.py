"""jax.experimental's modules that published programs import: kiln.experimental.ode (odeint)."""
