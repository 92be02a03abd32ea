"""Complex values as pairs of float arrays: the graph pass that runs before fusion.

Kernels compute on real numbers only. This pass rewrites every complex64/complex128 value of a graph
into its real and imaginary parts (float32/float64 arrays of the same shape) and every operation on
complex values into float operations on the parts, so nothing after it sees a complex dtype except at
the edges: a complex argument, result or global keeps its complex type in the module and is read as
its parts through `complex_parts` (a buffer.view of c[S] as f[S+(2,)], numpy's interleaved layout:
no copy) and rebuilt with `complex_from_parts`. Inside control flow the parts travel as two values.

Formulas follow numpy's: Smith's division, |z| scaled to avoid overflow, sqrt from (|x| + |z|) / 2.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.aval import ShapedArray
from ..core.errors import CompileError
from ..core.ir import Graph, Literal, Var, subgraphs_of
from ..core.primitive import Primitive, register
from ..core.trace import GraphTrace, GraphTracer, new_trace
from ..lax import prims
from ..lax import structural_prims as sp
from ..lax.control_flow import cond_p, scan_p, while_p
from ..lax.math_prims import P

# ---- the two views at the edges (host steps: procedure lowering emits buffer.view) -------------------

complex_parts_p = register(Primitive("complex_parts"))
complex_parts_p.def_traits(fusion="host")
complex_from_parts_p = register(Primitive("complex_from_parts"))
complex_from_parts_p.def_traits(fusion="host")


@complex_parts_p.def_abstract_eval
def _parts_abstract(z):
    return ShapedArray(z.shape + (2,), dtypes.real_dtype(z.dtype))


@complex_parts_p.def_impl
def _parts_impl(z):
    z = np.ascontiguousarray(z)
    return z.view(dtypes.real_dtype(z.dtype)).reshape(z.shape + (2,))


@complex_from_parts_p.def_abstract_eval
def _from_parts_abstract(x):
    return ShapedArray(x.shape[:-1], dtypes.complex_dtype(x.dtype))


@complex_from_parts_p.def_impl
def _from_parts_impl(x):
    x = np.ascontiguousarray(x)
    return x.view(dtypes.complex_dtype(x.dtype)).reshape(x.shape[:-1])


# ---- the pass -----------------------------------------------------------------------------------------

def _is_c(aval) -> bool:
    return dtypes.is_complex(aval.dtype)


def has_complex(graph: Graph) -> bool:
    """Whether any value of graph, or of a graph inside it, is complex."""
    if any(_is_c(v.aval) for v in graph.invars + graph.constvars) or any(_is_c(a.aval) for a in graph.outvars):
        return True
    for eqn in graph.eqns:
        if any(_is_c(a.aval) for a in eqn.invars) or any(_is_c(v.aval) for v in eqn.outvars):
            return True
        if any(has_complex(sub) for sub in subgraphs_of(eqn)):
            return True
    return False


def lower_complex(graph: Graph) -> Graph:
    """graph with every complex value computed as float parts; complex inputs and outputs stay complex."""
    return _lower(graph, split=False) if has_complex(graph) else graph


def _lower(graph: Graph, split: bool) -> Graph:
    """split: complex inputs and outputs become two float ones each (graphs inside control flow)."""
    in_avals = []
    for v in graph.invars:
        in_avals += [_part_aval(v.aval)] * 2 if split and _is_c(v.aval) else [v.aval]
    with new_trace(GraphTrace) as trace:
        inputs = [trace.new_input(a) for a in in_avals]
        env: dict[int, object] = {}
        it = iter(inputs)
        for v in graph.invars:
            if not _is_c(v.aval):
                env[v.id] = next(it)
            else:
                env[v.id] = (next(it), next(it)) if split else _to_parts(next(it))
        for v, c in zip(graph.constvars, graph.consts):
            c = np.asarray(c)
            env[v.id] = (trace.pure(np.ascontiguousarray(c.real)), trace.pure(np.ascontiguousarray(c.imag))) \
                if _is_c(v.aval) else trace.pure(c)

        def read(atom):
            if isinstance(atom, Var):
                return env[atom.id]
            if _is_c(atom.aval):
                part = _part_aval(atom.aval)
                return (GraphTracer(trace, Literal(atom.value.real, part)),
                        GraphTracer(trace, Literal(atom.value.imag, part)))
            return GraphTracer(trace, atom)

        for eqn in graph.eqns:
            start = len(trace.eqns)
            outs = _lower_eqn(eqn, [read(a) for a in eqn.invars])
            for new in trace.eqns[start:]:
                new.source_info = eqn.source_info
            for v, o in zip(eqn.outvars, outs):
                env[v.id] = o
        results = []
        for a in graph.outvars:
            x = read(a)
            if _is_c(a.aval):
                results += list(x) if split else [_from_parts(x)]
            else:
                results.append(x)
        lowered = trace.finish(inputs, results)
    lowered.effects = set(graph.effects)
    return lowered


def _part_aval(aval: ShapedArray) -> ShapedArray:
    return ShapedArray(aval.shape, dtypes.real_dtype(aval.dtype))


def _to_parts(z):
    parts = complex_parts_p.bind(z)
    shape = z.aval.shape
    n = len(shape)
    return tuple(prims.reshape.bind(sp.slice_p.bind(parts, start_indices=(0,) * n + (k,),
                                                    limit_indices=shape + (k + 1,), strides=(1,) * (n + 1)),
                                    new_shape=shape) for k in (0, 1))


def _from_parts(pair):
    re, im = pair
    shape = re.aval.shape
    column = [prims.reshape.bind(p, new_shape=shape + (1,)) for p in (re, im)]
    return complex_from_parts_p.bind(sp.concatenate_p.bind(*column, dimension=len(shape)))


def _is_pair(x) -> bool:
    return isinstance(x, tuple)


def _flat(values) -> list:
    out = []
    for x in values:
        out += list(x) if _is_pair(x) else [x]
    return out


def _group(avals, flat) -> list:
    """Inverse of _flat for values of these avals."""
    it = iter(flat)
    return [(next(it), next(it)) if _is_c(a) else next(it) for a in avals]


def _lower_eqn(eqn, ins) -> list:
    prim = eqn.primitive
    involved = any(_is_c(a.aval) for a in eqn.invars) or any(_is_c(v.aval) for v in eqn.outvars)
    nested = any(has_complex(g) for g in subgraphs_of(eqn))
    if not involved and not nested:
        out = prim.bind(*ins, **eqn.params)
        return list(out) if prim.multiple_results else [out]
    rule = _RULES.get(prim.name)
    if rule is None and not prim.in_kernel:
        rule = _through_views
    if rule is None:
        where = f" (at {eqn.source_info})" if eqn.source_info else ""
        raise CompileError(f"{prim.name} of complex values cannot be compiled yet{where}; it runs eagerly "
                           "(docs/numpy.md, 'Complex numbers', lists what compiles)")
    return rule(eqn, ins)


# ---- arithmetic on parts ------------------------------------------------------------------------------

def _full(like, value):
    return prims.broadcast_in_dim.bind(np.asarray(value, like.aval.dtype), shape=like.aval.shape, broadcast_dimensions=())


add, sub, mul, div, neg = (p.bind for p in (prims.add, prims.sub, prims.mul, prims.div, prims.neg))


def _cmul(x, y):
    (a, b), (c, d) = x, y
    return sub(mul(a, c), mul(b, d)), add(mul(a, d), mul(b, c))


def _cdiv(x, y):
    """Smith's algorithm (numpy's): scale by the larger of |Re y|, |Im y| so nothing overflows early."""
    (a, b), (c, d) = x, y
    big_re = prims.ge.bind(prims.abs.bind(c), prims.abs.bind(d))
    r1, r2 = div(d, c), div(c, d)
    den1, den2 = add(c, mul(d, r1)), add(d, mul(c, r2))
    re = prims.select.bind(big_re, div(add(a, mul(b, r1)), den1), div(add(mul(a, r2), b), den2))
    im = prims.select.bind(big_re, div(sub(b, mul(a, r1)), den1), div(sub(mul(b, r2), a), den2))
    return re, im


def _cabs(x):
    """|x + iy| = m sqrt(1 + (n/m)^2) with m, n the larger and smaller of |x|, |y| (0 at 0, inf at inf)."""
    a, b = prims.abs.bind(x[0]), prims.abs.bind(x[1])
    m, n = prims.max.bind(a, b), prims.min.bind(a, b)
    zero, one, inf = _full(m, 0), _full(m, 1), _full(m, np.inf)
    safe_m = prims.select.bind(prims.eq.bind(m, zero), one, m)
    r = div(n, safe_m)
    out = mul(m, prims.sqrt.bind(add(one, mul(r, r))))
    return prims.select.bind(prims.eq.bind(m, inf), inf, out)


def _cexp(x):
    e = prims.exp.bind(x[0])
    return mul(e, P["cos"].bind(x[1])), mul(e, P["sin"].bind(x[1]))


def _clog(x):
    return prims.log.bind(_cabs(x)), P["atan2"].bind(x[1], x[0])


def _cexpm1(x):
    """exp(z) - 1 without cancellation near 0: expm1(a) cos b - 2 sin(b/2)^2 + i e^a sin b."""
    a, b = x
    s = P["sin"].bind(mul(b, _full(b, 0.5)))
    re = sub(mul(P["expm1"].bind(a), P["cos"].bind(b)), mul(_full(s, 2), mul(s, s)))
    return re, mul(prims.exp.bind(a), P["sin"].bind(b))


def _clog1p(x):
    """log(1 + z): 0.5 log1p(2a + a^2 + b^2) + i atan2(b, 1 + a); |1 + z| from the scaled abs far from 0."""
    a, b = x
    one = _full(a, 1)
    small = prims.lt.bind(_cabs(x), _full(a, 0.5))
    t = add(mul(a, add(a, _full(a, 2))), mul(b, b))
    near = mul(P["log1p"].bind(t), _full(a, 0.5))
    far = prims.log.bind(_cabs((add(a, one), b)))
    return prims.select.bind(small, near, far), P["atan2"].bind(b, add(a, one))


def _csqrt(x):
    """numpy's: t = sqrt((|a| + |z|) / 2); a >= 0: (t, b / 2t), a < 0: (|b| / 2t, copysign(t, b))."""
    a, b = x
    zero = _full(a, 0)
    t = prims.sqrt.bind(mul(add(prims.abs.bind(a), _cabs(x)), _full(a, 0.5)))
    safe_t = prims.select.bind(prims.eq.bind(t, zero), _full(t, 1), t)
    half = div(b, add(safe_t, safe_t))
    positive = prims.ge.bind(a, zero)
    neg_b = P["or"].bind(prims.lt.bind(b, zero), prims.lt.bind(div(_full(b, 1), b), zero))  # b < 0 or b = -0.0
    re = prims.select.bind(positive, t, prims.abs.bind(half))
    im = prims.select.bind(positive, half, prims.select.bind(neg_b, neg(t), t))
    return (prims.select.bind(prims.eq.bind(t, zero), zero, re),
            prims.select.bind(prims.eq.bind(t, zero), b, im))


def _trig(x, kind):
    a, b = x
    sa, ca, shb, chb = P["sin"].bind(a), P["cos"].bind(a), P["sinh"].bind(b), P["cosh"].bind(b)
    if kind == "sin":
        return mul(sa, chb), mul(ca, shb)
    return mul(ca, chb), neg(mul(sa, shb))


def _hyp(x, kind):
    a, b = x
    sha, cha, sb, cb = P["sinh"].bind(a), P["cosh"].bind(a), P["sin"].bind(b), P["cos"].bind(b)
    if kind == "sinh":
        return mul(sha, cb), mul(cha, sb)
    return mul(cha, cb), mul(sha, sb)


def _ctanh(x):
    """tanh(a + ib) = (sinh 2a + i sin 2b) / (cosh 2a + cos 2b), with tanh(a) +- i0 for large |a|."""
    a, b = x
    a2, b2 = add(a, a), add(b, b)
    den = add(P["cosh"].bind(a2), P["cos"].bind(b2))
    re, im = div(P["sinh"].bind(a2), den), div(P["sin"].bind(b2), den)
    large = prims.gt.bind(prims.abs.bind(a), _full(a, 20))
    return prims.select.bind(large, prims.tanh.bind(a), re), prims.select.bind(large, mul(im, _full(im, 0)), im)


def _ctan(x):
    """tan(z) = -i tanh(iz)."""
    re, im = _ctanh((neg(x[1]), x[0]))
    return im, neg(re)


def _cpow_int(x, y):
    if y == 0:
        return _full(x[0], 1), _full(x[0], 0)
    acc, base, n = None, x, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else _cmul(acc, base)
        n >>= 1
        if n:
            base = _cmul(base, base)
    return _cdiv((_full(x[0], 1), _full(x[0], 0)), acc) if y < 0 else acc


def _reduce_prod(x, axes):
    """Products of complex values along axes, as a tree of pairwise complex multiplications."""
    return _tree_reduce(x, axes, _cmul, (1, 0))


def _tree_reduce(x, axes, combine, identity):
    """combine-reduction of complex values along axes by halving; identity (re, im) for no values (None:
    numpy's error, a reduction of nothing)."""
    a, b = x
    shape = a.aval.shape
    kept = [d for d in range(len(shape)) if d not in axes]
    perm = tuple(kept) + tuple(axes)
    n = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    lead = tuple(shape[d] for d in kept)
    parts = [prims.reshape.bind(prims.transpose.bind(p, permutation=perm), new_shape=lead + (n,)) for p in (a, b)]
    if n == 0:
        if identity is None:
            raise CompileError("a max or min of no complex values has no identity")
        return tuple(prims.broadcast_in_dim.bind(np.asarray(v, a.aval.dtype), shape=lead, broadcast_dimensions=())
                     for v in identity)
    k = len(lead)
    while n > 1:
        half = n // 2

        def cut(p, lo, hi):
            return sp.slice_p.bind(p, start_indices=(0,) * k + (lo,), limit_indices=lead + (hi,), strides=(1,) * (k + 1))

        left = tuple(cut(p, 0, half) for p in parts)
        right = tuple(cut(p, half, 2 * half) for p in parts)
        prod = combine(left, right)
        if n % 2:
            prod = tuple(sp.concatenate_p.bind(q, cut(p, 2 * half, n), dimension=k) for q, p in zip(prod, parts))
        parts, n = list(prod), half + n % 2
    return tuple(prims.reshape.bind(p, new_shape=lead) for p in parts)


def _cumprod(x, axis, reverse):
    """Running products along axis by doubling (Hillis-Steele): log2(n) rounds of complex products with
    the values s places back (ones before the start)."""
    shape = x[0].aval.shape
    nd, n = len(shape), shape[axis]
    if reverse:
        x = tuple(sp.rev_p.bind(p, dimensions=(axis,)) for p in x)
    s = 1
    while s < n:
        def back(p, fill):
            cut = sp.slice_p.bind(p, start_indices=(0,) * nd, limit_indices=shape[:axis] + (n - s,) + shape[axis + 1:],
                                  strides=(1,) * nd)
            config = tuple((s, 0, 0) if d == axis else (0, 0, 0) for d in range(nd))
            return sp.pad_p.bind(cut, padding_config=config, padding_value=np.asarray(fill, p.aval.dtype))

        x = _cmul(x, (back(x[0], 1), back(x[1], 0)))
        s *= 2
    if reverse:
        x = tuple(sp.rev_p.bind(p, dimensions=(axis,)) for p in x)
    return x


# ---- rules: (eqn, ins) -> outs, a complex value as a (re, im) pair ---------------------------------------

def _unary(fn):
    return lambda eqn, ins: [fn(ins[0])]


def _binary(fn):
    return lambda eqn, ins: [fn(ins[0], ins[1])]


def _per_part(eqn, ins):
    """Linear structural ops (and sums): the same op on the real parts and on the imaginary parts;
    non-complex operands (indices, start positions) are shared."""
    outs = []
    for k in (0, 1):
        params = dict(eqn.params)
        if "padding_value" in params:
            v = np.asarray(params["padding_value"])
            params["padding_value"] = np.asarray(v.real if k == 0 else v.imag, dtypes.real_dtype(v.dtype))
        outs.append(eqn.primitive.bind(*[x[k] if _is_pair(x) else x for x in ins], **params))
    return [tuple(outs)]


def _scatter(eqn, ins):
    if eqn.params["update"] not in ("set", "add"):
        raise CompileError(f"scatter with update={eqn.params['update']!r} of complex values cannot be compiled yet")
    return _per_part(eqn, ins)


def _convert(eqn, ins):
    (x,) = ins
    dst = np.dtype(eqn.params["new_dtype"])
    weak = eqn.params.get("weak_type", False)
    if dtypes.is_complex(dst):
        part = dtypes.real_dtype(dst)
        if _is_pair(x):
            return [tuple(prims.convert.bind(p, new_dtype=part) for p in x)]
        re = prims.convert.bind(x, new_dtype=part)
        return [(re, _full(re, 0))]
    re, im = x
    if dtypes.is_bool(dst):
        zero = _full(re, 0)
        return [P["or"].bind(prims.ne.bind(re, zero), prims.ne.bind(im, zero))]
    return [prims.convert.bind(re, new_dtype=dst, weak_type=weak)]  # numpy's astype: the real part


def _compare(eqn, ins):
    x, y = ins
    eq_re, eq_im = prims.eq.bind(x[0], y[0]), prims.eq.bind(x[1], y[1])
    if eqn.primitive.name == "eq":
        return [P["and"].bind(eq_re, eq_im)]
    return [P["or"].bind(prims.ne.bind(x[0], y[0]), prims.ne.bind(x[1], y[1]))]


def _select(eqn, ins):
    pred, x, y = ins
    return [tuple(prims.select.bind(pred, a, b) for a, b in zip(x, y))]


def _dot(eqn, ins):
    (a, b), (c, d) = ins
    dn = eqn.params["dimension_numbers"]
    if a.aval.ndim == 0 or c.aval.ndim == 0:  # a scalar (maybe a literal) times an array
        shape = eqn.outvars[0].aval.shape
        spread = lambda p: prims.broadcast_in_dim.bind(p, shape=shape, broadcast_dimensions=())  # noqa: E731
        x, y = ((spread(a), spread(b)), (c, d)) if a.aval.ndim == 0 else ((a, b), (spread(c), spread(d)))
        return [_cmul(x, y)]
    dot = lambda u, v: prims.dot_general.bind(u, v, dimension_numbers=dn)  # noqa: E731
    return [(sub(dot(a, c), dot(b, d)), add(dot(a, d), dot(b, c)))]


# numpy orders complex numbers lexicographically: by the real parts, then the imaginary parts.

def _lex(x, y, strict: bool):
    """x < y (strict) or x <= y lexicographically; False when a part is NaN."""
    (a, b), (c, d) = x, y
    inner = (prims.lt if strict else prims.le).bind(b, d)
    return P["or"].bind(prims.lt.bind(a, c), P["and"].bind(prims.eq.bind(a, c), inner))


def _has_nan(x):
    return P["or"].bind(prims.ne.bind(x[0], x[0]), prims.ne.bind(x[1], x[1]))


def _extremum(x, y, largest: bool):
    """numpy's maximum/minimum: the lexicographically larger (smaller) value, a NaN-holding one first."""
    nan_x, nan_y = _has_nan(x), _has_nan(y)
    wins = _lex(y, x, strict=False) if largest else _lex(x, y, strict=False)
    pick_x = P["or"].bind(nan_x, P["and"].bind(P["not"].bind(nan_y), wins))
    return tuple(prims.select.bind(pick_x, p, q) for p, q in zip(x, y))


def _compare_lex(eqn, ins):
    x, y = ins
    name = eqn.primitive.name
    if name in ("gt", "ge"):
        x, y = y, x
    ordered = P["not"].bind(P["or"].bind(_has_nan(x), _has_nan(y)))  # numpy: False with a NaN anywhere
    return [P["and"].bind(ordered, _lex(x, y, strict=name in ("lt", "gt")))]


def _reduce_extremum(x, axes, largest: bool):
    """max/min of complex values along axes, as a tree of pairwise numpy maximum/minimum."""
    return _tree_reduce(x, axes, lambda p, q: _extremum(p, q, largest), None)


def _arg_extremum(eqn, ins):
    """numpy's argmax/argmin of complex values: the first position of the max/min (of the first NaN-holding
    value when there is one)."""
    (x,), axis = ins, eqn.params["axis"]
    shape = x[0].aval.shape
    kept = tuple(d for d in range(len(shape)) if d != axis)
    best = _reduce_extremum(x, (axis,), eqn.primitive.name == "argmax")
    back = tuple(prims.broadcast_in_dim.bind(p, shape=shape, broadcast_dimensions=kept) for p in best)
    equal = P["and"].bind(prims.eq.bind(x[0], back[0]), prims.eq.bind(x[1], back[1]))
    marks = prims.select.bind(_has_nan(back), _has_nan(x), equal)
    first = sp.argmax_p.bind(prims.convert.bind(marks, new_dtype=np.dtype(np.int8)), axis=axis,
                             index_dtype=eqn.params["index_dtype"])
    return [first]


def _sort(eqn, ins):
    """A complex key sorts as two keys, its real then its imaginary parts (numpy's order, NaNs last)."""
    keys = sum((2 if _is_pair(x) else 1) for x in ins[:eqn.params["num_keys"]])
    flat = sp.sort_p.bind(*_flat(ins), dimension=eqn.params["dimension"], num_keys=keys)
    return _group([v.aval for v in eqn.outvars], flat)


def _sign(z):
    m = _cabs(z)
    zero = _full(m, 0)
    safe = prims.select.bind(prims.eq.bind(m, zero), _full(m, 1), m)
    return div(z[0], safe), div(z[1], safe)


def _through_views(eqn, ins):
    """Host primitives (global_load, global_store): complex operands as complex buffers, views of the parts."""
    outs = eqn.primitive.bind(*[_from_parts(x) if _is_pair(x) else x for x in ins], **eqn.params)
    outs = list(outs) if eqn.primitive.multiple_results else [outs]
    return [_to_parts(o) if _is_c(o.aval) else o for o in outs]


def _cond(eqn, ins):
    index, operands = ins[0], ins[1:]
    branches = tuple(_lower(b, split=True) for b in eqn.params["branches"])
    flat = cond_p.bind(index, *_flat(operands), branches=branches)
    return _group([v.aval for v in eqn.outvars], flat)


def _while(eqn, ins):
    n = eqn.params["n_carry"]
    carry = _flat(ins[:n])
    flat = while_p.bind(*carry, *_flat(ins[n:]), cond_graph=_lower(eqn.params["cond_graph"], split=True),
                        body_graph=_lower(eqn.params["body_graph"], split=True), n_carry=len(carry))
    return _group([v.aval for v in eqn.outvars], flat)


def _scan(eqn, ins):
    p = eqn.params
    n_carry, n_xs = p["n_carry"], p["n_xs"]
    carry, xs = _flat(ins[:n_carry]), _flat(ins[n_carry:n_carry + n_xs])
    flat = scan_p.bind(*carry, *xs, *_flat(ins[n_carry + n_xs:]), body=_lower(p["body"], split=True),
                       length=p["length"], reverse=p["reverse"], n_carry=len(carry), n_xs=len(xs))
    return _group([v.aval for v in eqn.outvars], flat)


_RULES = {
    "add": _binary(lambda x, y: (add(x[0], y[0]), add(x[1], y[1]))),
    "sub": _binary(lambda x, y: (sub(x[0], y[0]), sub(x[1], y[1]))),
    "mul": _binary(_cmul),
    "div": _binary(_cdiv),
    "neg": _unary(lambda x: (neg(x[0]), neg(x[1]))),
    "conj": _unary(lambda x: (x[0], neg(x[1]))),
    "real": lambda eqn, ins: [ins[0][0]],
    "imag": lambda eqn, ins: [ins[0][1]],
    "complex": lambda eqn, ins: [(ins[0], ins[1])],
    "abs": _unary(_cabs),
    "sign": _unary(_sign),
    "exp": _unary(_cexp),
    "log": _unary(_clog),
    "expm1": _unary(_cexpm1),
    "log1p": _unary(_clog1p),
    "exp2": _unary(lambda x: _cexp(tuple(mul(p, _full(p, np.log(2))) for p in x))),
    "log2": _unary(lambda x: tuple(mul(p, _full(p, 1 / np.log(2))) for p in _clog(x))),
    "log10": _unary(lambda x: tuple(mul(p, _full(p, 1 / np.log(10))) for p in _clog(x))),
    "sqrt": _unary(_csqrt),
    "pow": _binary(lambda x, y: _cexp(_cmul(y, _clog(x)))),
    "integer_pow": lambda eqn, ins: [_cpow_int(ins[0], int(eqn.params["y"]))],
    "sin": _unary(lambda x: _trig(x, "sin")),
    "cos": _unary(lambda x: _trig(x, "cos")),
    "tan": _unary(_ctan),
    "sinh": _unary(lambda x: _hyp(x, "sinh")),
    "cosh": _unary(lambda x: _hyp(x, "cosh")),
    "tanh": _unary(_ctanh),
    "eq": _compare,
    "ne": _compare,
    "select": _select,
    "convert": _convert,
    "dot_general": _dot,
    "reduce_prod": lambda eqn, ins: [_reduce_prod(ins[0], tuple(eqn.params["axes"]))],
    "reduce_max": lambda eqn, ins: [_reduce_extremum(ins[0], tuple(eqn.params["axes"]), True)],
    "reduce_min": lambda eqn, ins: [_reduce_extremum(ins[0], tuple(eqn.params["axes"]), False)],
    "max": _binary(lambda x, y: _extremum(x, y, True)),
    "min": _binary(lambda x, y: _extremum(x, y, False)),
    "lt": _compare_lex,
    "le": _compare_lex,
    "gt": _compare_lex,
    "ge": _compare_lex,
    "sort": _sort,
    "argmax": _arg_extremum,
    "argmin": _arg_extremum,
    "cumprod": lambda eqn, ins: [_cumprod(ins[0], eqn.params["axis"], eqn.params["reverse"])],
    "scatter": _scatter,
    "cond": _cond,
    "while": _while,
    "scan": _scan,
}
for _name in ("broadcast_in_dim", "reshape", "transpose", "slice", "rev", "pad", "concatenate", "gather",
              "dynamic_slice", "dynamic_update_slice", "reduce_sum", "cumsum"):
    _RULES[_name] = _per_part
