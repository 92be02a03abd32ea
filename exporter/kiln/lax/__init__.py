"""kiln.lax: the primitive-level array API (strict shapes and dtypes)."""
from . import prims
from .prims import ShapeError

__all__ = ["prims", "ShapeError"]

from .control_flow import ControlFlowError, cond, fori_loop, map, scan, switch, while_loop  # noqa: E402

__all__ += ["cond", "switch", "while_loop", "fori_loop", "scan", "map", "ControlFlowError"]
