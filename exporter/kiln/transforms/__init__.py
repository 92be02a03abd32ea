"""Function transformations: jvp, vjp/grad, vmap."""
