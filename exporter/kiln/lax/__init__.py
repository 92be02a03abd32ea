"""kiln.lax: the primitive-level array API (strict shapes and dtypes)."""
from . import prims
from .prims import ShapeError

__all__ = ["prims", "ShapeError"]
