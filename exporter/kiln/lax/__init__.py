"""kiln.lax: the primitive-level array API (strict shapes and dtypes)."""
from . import prims
from .api import (  # noqa: F401
    abs, add, broadcast_in_dim, broadcasted_iota, convert_element_type, div, dot_general, eq, exp, ge, gt, iota, le,
    log, lt, max, min, mul, ne, neg, pow, reduce_max, reduce_min, reduce_sum, reshape, select, sqrt, sub, tanh, transpose,
)
from .prims import ShapeError
from . import structural_prims  # noqa: E402,F401  (the primitives behind the structural functions below)

__all__ = ["prims", "ShapeError", "abs", "add", "broadcast_in_dim", "broadcasted_iota", "convert_element_type", "div",
           "dot_general", "eq", "exp", "ge", "gt", "iota", "le", "log", "lt", "max", "min", "mul", "ne", "neg", "pow",
           "reduce_max", "reduce_min", "reduce_sum", "reshape", "select", "sqrt", "sub", "tanh", "transpose"]

from .api import (  # noqa: E402
    argmax, argmin, cummax, cummin, cumprod, cumsum, dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim,
    dynamic_update_slice, dynamic_update_slice_in_dim, gather, scatter, scatter_add, scatter_max, scatter_min,
    scatter_mul, sort, sort_key_val,
)
from .structural_prims import concatenate, pad, rev, slice  # noqa: E402,A004

__all__ += ["dynamic_slice", "dynamic_update_slice", "dynamic_slice_in_dim", "dynamic_update_slice_in_dim",
            "dynamic_index_in_dim", "gather", "scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max",
            "slice", "pad", "rev", "concatenate", "sort", "sort_key_val", "cumsum", "cumprod", "cummax", "cummin",
            "argmax", "argmin"]

from .control_flow import ControlFlowError, cond, fori_loop, map, scan, switch, while_loop  # noqa: E402

__all__ += ["cond", "switch", "while_loop", "fori_loop", "scan", "map", "ControlFlowError"]
from .conv import conv, conv_dimension_numbers, conv_general_dilated, conv_with_general_padding, padtype_to_pads  # noqa: E402
from .pooling import reduce_window  # noqa: E402

__all__ += ["conv", "conv_general_dilated", "conv_with_general_padding", "conv_dimension_numbers", "padtype_to_pads",
            "reduce_window"]

from . import math_prims  # noqa: E402
from .math_prims import atan2, clamp, erf, erfc, integer_pow, rem, rsqrt  # noqa: E402

__all__ += ["math_prims", "atan2", "clamp", "erf", "erfc", "integer_pow", "rem", "rsqrt"]
from .complex_prims import complex, conj, imag, real  # noqa: E402,A004

__all__ += ["complex", "conj", "imag", "real"]
from . import linalg  # noqa: E402,F401
from .api import (  # noqa: E402
    Precision, canonicalize_precision, dot, reduce_window_shape_tuple, stop_gradient,
)
from .conv import (  # noqa: E402
    ConvDimensionNumbers, conv_general_dilated_patches, conv_general_permutations, conv_general_shape_tuple,
    conv_shape_tuple, conv_transpose, conv_transpose_shape_tuple,
)
from .api import (  # noqa: E402
    ConvGeneralDilatedDimensionNumbers, DotAlgorithm, DotAlgorithmPreset, DotDimensionNumbers,
    GatherDimensionNumbers, GatherScatterMode, PrecisionLike, ScatterDimensionNumbers,
)

__all__ += ["Precision", "canonicalize_precision", "dot", "reduce_window_shape_tuple", "stop_gradient",
            "conv_transpose", "conv_shape_tuple", "conv_general_shape_tuple", "conv_transpose_shape_tuple",
            "ConvDimensionNumbers", "conv_general_permutations", "conv_general_dilated_patches", "PrecisionLike",
            "DotDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "GatherScatterMode", "DotAlgorithm",
            "DotAlgorithmPreset", "GatherDimensionNumbers", "ScatterDimensionNumbers"]
from . import elementwise, shape_api  # noqa: E402
from .elementwise import *  # noqa: E402,F401,F403
from .shape_api import *  # noqa: E402,F401,F403

__all__ += elementwise.__all__ + shape_api.__all__
from .associative_scan import associative_scan  # noqa: E402

__all__ += ["associative_scan"]
from .reduce_api import cumlogsumexp, reduce  # noqa: E402,A004

__all__ += ["cumlogsumexp", "reduce"]
from . import special_math  # noqa: E402
from .special_math import (  # noqa: E402
    bessel_i0e, bessel_i1e, betainc, digamma, erf_inv, igamma, igamma_grad_a, igammac, lgamma, polygamma,
    random_gamma_grad, zeta,
)

__all__ += special_math.__all__
from . import more_api  # noqa: E402
from .more_api import (  # noqa: E402
    cbrt, conv_general_dilated_local, dtype, index_take, mulhi, nextafter, ragged_dot, ragged_dot_general,
    RaggedDotDimensionNumbers, reduce_xor, scatter_apply, scatter_sub,
)

__all__ += more_api.__all__
from .bitcast import bitcast_convert_type, reduce_precision  # noqa: E402
from .linear_solve import custom_linear_solve, custom_root  # noqa: E402
from .scaled_dot import scaled_dot  # noqa: E402
from .prng import RandomAlgorithm, rng_bit_generator  # noqa: E402
from .fft import FftType, fft  # noqa: E402

__all__ += ["bitcast_convert_type", "reduce_precision", "custom_linear_solve", "custom_root", "scaled_dot",
            "RandomAlgorithm", "rng_bit_generator", "FftType", "fft"]
from .accuracy import AccuracyMode, Tolerance  # noqa: E402

__all__ += ["AccuracyMode", "Tolerance"]
from .collectives import (all_gather, all_to_all, axis_index, axis_size, pbroadcast, pmax, pmean, pmin,  # noqa: E402
                          ppermute, pshuffle, psum, psum_scatter, pswapaxes)

__all__ += ["psum", "pmean", "pmax", "pmin", "axis_index", "axis_size", "all_gather", "psum_scatter", "ppermute",
            "pshuffle", "pbroadcast", "all_to_all", "pswapaxes"]
