"""jax.example_libraries: the small optimizer (`optimizers`) and network (`stax`) libraries that JAX's
tutorials and many published programs use, over kiln.numpy, kiln.lax and kiln.random."""
