"""kiln.lax's collectives over vmap/pmap's named axes: their values (numpy formulas), and their derivatives inside
the mapped function (grad, jvp under vmap/pmap), which follow JAX's rules (psum's transpose is psum; all_gather's
is psum_scatter; ppermute's is the inverse permutation; all_to_all's swaps its axes). References: numbers recorded
from JAX 0.10.2 (x64) for the same programs, and, independently of JAX, the identity that a grad inside the vmap
equals the gradient of the summed vmapped function (computed by the outer grad through the collectives' vmap
rules, not their transposes), checked by central finite differences."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import lax
from references import numerical_grad

XS = np.array([0.5, -1.0, 2.0, 1.5])
X3 = (np.arange(4 * 4 * 6.0).reshape(4, 4, 6) * 0.37) % 1.3  # the array the JAX numbers were recorded with
PERM = [(0, 1), (1, 2), (2, 3), (3, 0)]


def _inner(f, x):
    return np.asarray(kiln.vmap(kiln.grad(f), axis_name="i")(x))


# recorded with jax 0.10.2: jax.vmap(jax.grad(f), axis_name='i')(XS) (pmap gives the same)
JAX_GRADS = [
    ("psum", lambda x: lax.psum(x ** 2, "i"), [4.0, -8.0, 16.0, 12.0]),
    ("pmean", lambda x: lax.pmean(x ** 2, "i"), [1.0, -2.0, 4.0, 3.0]),
    ("sin_psum", lambda x: knp.sin(lax.psum(x, "i")) * x, [-2.828857481741469] * 4),
    ("all_gather", lambda x: knp.dot(lax.all_gather(x, "i"), knp.arange(1.0, 5.0)) * x, [13.5, 16.5, 19.5, 22.5]),
    ("ppermute", lambda x: lax.ppermute(x, "i", PERM) * x * knp.arange(4.0)[lax.axis_index("i")],
     [-1.0, 4.5, 2.5, 6.0]),
]


@pytest.mark.parametrize("name,f,want", JAX_GRADS, ids=[c[0] for c in JAX_GRADS])
def test_grad_inside_vmap_matches_jax(name, f, want):
    np.testing.assert_allclose(_inner(f, XS), want, rtol=1e-12)


def test_grad_inside_vmap_of_unmapped_values_and_pmap():
    # the cotangent of an unmapped value (w, a closure or in_axes=None) is psum'd over the axis, as JAX's
    w = 0.7
    per_w = kiln.vmap(kiln.grad(lambda w, x: lax.psum((w * x - 1) ** 2, "i")), in_axes=(None, 0), axis_name="i")
    np.testing.assert_allclose(np.asarray(per_w(np.float64(w), XS)), [-2.6, 13.6, 6.4, 0.6], rtol=1e-12, atol=1e-14)
    closure = kiln.vmap(lambda x: kiln.grad(lambda w: lax.psum(w * x, "i"))(np.float64(w)), axis_name="i")
    np.testing.assert_allclose(np.asarray(closure(XS)), [2.0, -4.0, 8.0, 6.0], rtol=1e-12)
    # pmap (kiln.jit around the vmap: compiled and run in the C runtime)
    pmapped = kiln.pmap(kiln.grad(lambda x: lax.psum(x ** 2, "i")), axis_name="i")
    np.testing.assert_allclose(np.asarray(pmapped(XS)), [4.0, -8.0, 16.0, 12.0], rtol=1e-12)
    # jvp inside the vmap: the tangent of psum is psum of the tangents
    primal, tangent = kiln.vmap(lambda x, t: kiln.jvp(lambda x: lax.psum(knp.sin(x), "i"), (x,), (t,)),
                                axis_name="i")(XS, np.ones(4))
    np.testing.assert_allclose(np.asarray(primal), [np.sin(XS).sum()] * 4, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(tangent), [np.cos(XS).sum()] * 4, rtol=1e-12)


W4 = np.cos(np.arange(16.0)).reshape(4, 4)
W16 = np.arange(16.0).reshape(16, 1)
# (name, per-element loss, x): inner grad == outer grad == finite differences of the summed loss
SUMMED = [
    ("psum_tuple_nested", None, X3[:, :3, 0]),
    ("all_gather_tiled", lambda r: (lax.all_gather(r, "i", axis=1, tiled=True) ** 3).sum(), X3[:, :2, :3]),
    ("psum_scatter", lambda r: (lax.psum_scatter(r, "i", scatter_dimension=1) ** 2).sum(), X3[:, :3, :4]),
    ("psum_scatter_tiled", lambda r: (knp.sin(lax.psum_scatter(r, "i", tiled=True)) * r[:1]).sum(), X3[:, :, :3]),
    ("all_to_all", lambda r: (lax.all_to_all(r, "i", 0, 0) ** 2 * W4[:, :, None]).sum(), X3[:, :, :4]),
    ("all_to_all_tiled", lambda r: (knp.sin(lax.all_to_all(r, "i", 1, 0, tiled=True)) * W16).sum(), X3[:, :, :4]),
    ("pmax", lambda r: (lax.pmax(r, "i") * r).sum(), X3[:, 0, :3]),
    ("pmin", lambda r: knp.exp(lax.pmin(r * r, "i")).sum() * r[0], X3[:, 1, :3] - 0.5),
    ("pbroadcast", lambda r: (lax.pbroadcast(r, "i", 2) * r).sum(), X3[:, 0, :3]),
    ("pshuffle", lambda r: (lax.pshuffle(r, "i", [2, 0, 3, 1]) ** 2 * r).sum(), X3[:, 2, :3]),
    ("pswapaxes", lambda r: (lax.pswapaxes(r, "i", 1) ** 2 * knp.arange(12.0).reshape(3, 4)).sum(),
     (np.arange(48.0).reshape(4, 3, 4) * 0.37) % 1.3),
]


@pytest.mark.parametrize("name,f,x", SUMMED, ids=[c[0] for c in SUMMED])
def test_grad_inside_vmap_is_the_gradient_of_the_sum(name, f, x):
    if f is None:  # two named axes: the inner vmap's element function sees both
        def total(xs):
            inner = kiln.vmap(kiln.vmap(lambda v: lax.psum(v ** 2, ("i", "j")) * lax.pmean(v, "j"), axis_name="j"),
                              axis_name="i")
            return inner(xs).sum()

        got = kiln.vmap(kiln.vmap(kiln.grad(lambda v: lax.psum(v ** 2, ("i", "j")) * lax.pmean(v, "j")),
                                  axis_name="j"), axis_name="i")(x)
        # recorded with jax 0.10.2 (the first row)
        np.testing.assert_allclose(np.asarray(got)[0], [5.7464, 18.7736, 13.3928], rtol=1e-10)
    else:
        def total(xs):
            return kiln.vmap(f, axis_name="i")(xs).sum()

        got = _inner(f, x)
        if name == "pswapaxes":  # recorded with jax 0.10.2 (float32; the first 12 values)
            np.testing.assert_allclose(np.asarray(got).ravel()[:12], [0.0, 0.0, 0.0, 0.0, 1.44, 4.4, 7.36, 10.32, 5.76,
                                                                     11.68, 17.6, 2.72], rtol=1e-6, atol=1e-12)
    outer = np.asarray(kiln.grad(total)(x))
    np.testing.assert_allclose(np.asarray(got), outer, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(outer, numerical_grad(lambda v: total(v), x), rtol=1e-6, atol=1e-7)


def test_collective_values():
    x = X3
    g = kiln.vmap(lambda r: (lax.all_to_all(r, "i", 0, 1), lax.all_to_all(r, "i", 0, 1, tiled=True),
                             lax.psum_scatter(r, "i"), lax.psum_scatter(r[:, :4], "i", scatter_dimension=1, tiled=True),
                             lax.ppermute(r, "i", [(0, 2), (2, 1)]), lax.pbroadcast(r, "i", 3),
                             lax.pshuffle(r[0, 0], "i", [2, 0, 3, 1]), lax.all_gather(r, "i", axis=-1)),
                  axis_name="i")(x)
    a2a, a2a_tiled, scattered, scattered_tiled, permuted, broadcast, shuffled, gathered = map(np.asarray, g)
    # element i of all_to_all(split 0, concat 1): x[j][i] stacked over j at axis 1
    np.testing.assert_array_equal(a2a, np.stack([np.stack([x[j][i] for j in range(4)], 1) for i in range(4)]))
    np.testing.assert_array_equal(a2a_tiled, np.stack([np.concatenate([x[j][i:i + 1] for j in range(4)], 1)
                                                       for i in range(4)]))
    np.testing.assert_allclose(scattered, x.sum(0), rtol=1e-12)
    np.testing.assert_allclose(scattered_tiled, x[:, :, :4].sum(0).reshape(4, 4, 1).transpose(1, 0, 2), rtol=1e-12)
    np.testing.assert_array_equal(permuted, np.stack([np.zeros((4, 6)), x[2], x[0], np.zeros((4, 6))]))
    np.testing.assert_array_equal(broadcast, np.broadcast_to(x[3], x.shape))
    np.testing.assert_array_equal(shuffled, x[[2, 0, 3, 1], 0, 0])
    np.testing.assert_array_equal(gathered, np.broadcast_to(np.moveaxis(x, 0, -1), (4, 4, 6, 4)))
    # a jit inside the vmap: its graph holds the collective, run by the vmap when the jitted call is inlined
    inside = kiln.vmap(lambda r: kiln.jit(lambda r: lax.psum(r, "i"))(r), axis_name="i")(x[:, 0])
    np.testing.assert_allclose(np.asarray(inside), np.broadcast_to(x[:, 0].sum(0), (4, 6)), rtol=1e-12)
    # ... even when nothing mapped reaches the jitted function (psum of a constant: the axis size)
    counted = kiln.vmap(lambda r: kiln.jit(lambda: lax.psum(1.0, "i"))() + r, axis_name="i")(np.zeros(3))
    assert np.asarray(counted).tolist() == [3.0, 3.0, 3.0]


def test_collective_errors():
    vm = lambda f: kiln.vmap(f, axis_name="i")(X3)  # noqa: E731
    with pytest.raises(ValueError, match="repeated source"):
        vm(lambda r: lax.ppermute(r, "i", [(0, 1), (0, 2)]))
    with pytest.raises(ValueError, match="outside the axis of size 4"):
        vm(lambda r: lax.ppermute(r, "i", [(0, 4)]))
    with pytest.raises(ValueError, match="must equal the axis size 4"):
        vm(lambda r: lax.psum_scatter(r, "i", scatter_dimension=1))
    with pytest.raises(ValueError, match="not a multiple of the axis size 4"):
        vm(lambda r: lax.all_to_all(r, "i", 1, 0, tiled=True))
    with pytest.raises(ValueError, match="concat_axis=2 is out of range for rank 2"):
        vm(lambda r: lax.all_to_all(r, "i", 0, 2))
    with pytest.raises(ValueError, match="source 4 is outside"):
        vm(lambda r: lax.pbroadcast(r, "i", 4))
    with pytest.raises(ValueError, match="all_gather: axis_name must be a single axis name here"):
        vm(lambda r: lax.all_gather(r, ("i", "i")))
    with pytest.raises(ValueError, match=r"psum: axis_index_groups must cover all indices exactly once \(0..3 of axis "
                                         r"'i'\), got \[\[0, 1\], \[1, 2\]\]"):
        vm(lambda r: lax.psum(r, "i", axis_index_groups=[[0, 1], [1, 2]]))
    with pytest.raises(ValueError, match="pmax: axis_index_groups must cover all indices exactly once"):
        vm(lambda r: lax.pmax(r, "i", axis_index_groups=[[0, 1]]))
    with pytest.raises(ValueError, match=r"all_gather: axis_index_groups must all be the same size"):
        vm(lambda r: lax.all_gather(r, "i", axis_index_groups=[[0, 1, 2], [3]]))
    with pytest.raises(ValueError, match=r"pmean: axis_index_groups needs a single axis name, got axis_name=\('i', 'j'\)"):
        kiln.vmap(lambda r: vm(lambda q: lax.pmean(q, ("i", "j"), axis_index_groups=[[0, 1], [2, 3]])),
                  axis_name="j")(np.zeros(2))
    with pytest.raises(TypeError, match="psum: axis_index_groups must be a list of lists"):
        vm(lambda r: lax.psum(r, "i", axis_index_groups=[0, 1, 2, 3]))
    with pytest.raises(ValueError, match="all_to_all: axis_index_groups is not supported"):
        vm(lambda r: lax.all_to_all(r, "i", 0, 0, axis_index_groups=[[0, 1], [2, 3]]))
    with pytest.raises(NameError, match="unbound axis name: j"):
        vm(lambda r: lax.ppermute(r, "j", PERM))


# recorded with jax 0.10.2: jax.pmap(f, axis_name='i')(XG) on 4 (forced host) devices; JAX's vmap refuses
# axis_index_groups, kiln's vmap and pmap both take it. Groups [[0, 2], [3, 1]]: a member's position in its group
# orders all_gather's stack and picks psum_scatter's block.
XG = np.arange(4.0) + 1
GROUPS = [[0, 2], [3, 1]]
JAX_GROUPED = [
    ("psum", lambda v: lax.psum(v, "i", axis_index_groups=GROUPS), [4.0, 6.0, 4.0, 6.0]),
    ("psum uneven", lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1, 2], [3]]), [6.0, 6.0, 6.0, 4.0]),
    ("psum constant", lambda v: lax.psum(1.0, "i", axis_index_groups=GROUPS), [2.0] * 4),
    ("pmax", lambda v: lax.pmax(v, "i", axis_index_groups=GROUPS), [3.0, 4.0, 3.0, 4.0]),
    ("pmin", lambda v: lax.pmin(v, "i", axis_index_groups=GROUPS), [1.0, 2.0, 1.0, 2.0]),
    ("pmean", lambda v: lax.pmean(v, "i", axis_index_groups=GROUPS), [2.0, 3.0, 2.0, 3.0]),
    ("all_gather", lambda v: lax.all_gather(v, "i", axis_index_groups=GROUPS), [[1, 3], [4, 2], [1, 3], [4, 2]]),
    ("all_gather axis=1 tiled", lambda v: lax.all_gather(knp.stack([v, -v])[:, None], "i", axis=1, tiled=True,
                                                          axis_index_groups=GROUPS),
     [[[1, 3], [-1, -3]], [[4, 2], [-4, -2]], [[1, 3], [-1, -3]], [[4, 2], [-4, -2]]]),
    ("psum_scatter", lambda v: lax.psum_scatter(knp.asarray([1.0, 10.0]) * v, "i", axis_index_groups=GROUPS),
     [4.0, 60.0, 40.0, 6.0]),
    ("psum_scatter tiled", lambda v: lax.psum_scatter(knp.asarray([1.0, 10.0, 100.0, 1000.0]) * v, "i",
                                                      axis_index_groups=GROUPS, tiled=True),
     [[4, 40], [600, 6000], [400, 4000], [6, 60]]),
    ("grad all_gather", kiln.grad(lambda v: knp.sum(lax.all_gather(v, "i", axis_index_groups=GROUPS) *
                                                    knp.asarray([1.0, 10.0]))), [2.0, 20.0, 20.0, 2.0]),
    # not from JAX (which does not differentiate pmax): the gradient of the group's maximum reaches its argmax
    # from both members' losses
    ("grad pmax", kiln.grad(lambda v: lax.pmax(v, "i", axis_index_groups=GROUPS)), [0.0, 0.0, 2.0, 2.0]),
    # JAX divides by the first group's size (3) here, giving 4/3 for the group [3]; kiln by each group's own
    ("pmean uneven", lambda v: lax.pmean(v, "i", axis_index_groups=[[0, 1, 2], [3]]), [2.0, 2.0, 2.0, 4.0]),
]


@pytest.mark.parametrize("name,f,want", JAX_GROUPED, ids=[c[0] for c in JAX_GROUPED])
def test_axis_index_groups_match_jax_pmap(name, f, want):
    np.testing.assert_array_equal(np.asarray(kiln.vmap(f, axis_name="i")(XG)), np.asarray(want, np.float64))
    if name == "grad all_gather":  # compiled too (pmap is a jit of the vmap)
        np.testing.assert_array_equal(np.asarray(kiln.pmap(f, axis_name="i")(XG)), np.asarray(want, np.float64))


def test_tuple_axis_names_reduce_over_nested_vmaps_and_pmaps():
    """psum/pmean/pmax/pmin over ('i', 'j') reduce over both nested axes, in either order, under vmap and pmap
    (JAX 0.10.2 gives 28 / 7 for psum / pmax of arange(8) by vmap(vmap))."""
    x = np.arange(8.0).reshape(2, 4)
    for outer, inner in ((kiln.vmap, kiln.vmap), (kiln.pmap, kiln.pmap)):
        both = outer(inner(lambda v: (lax.psum(v, ("i", "j")), lax.pmax(v, ("j", "i")), lax.pmin(v, ("i", "j")),
                                      lax.pmean(v, ("i", "j")), lax.psum(v, ("j",))), axis_name="j"),
                     axis_name="i")(x)
        for got, want in zip(both, (28.0, 7.0, 0.0, 3.5, None)):
            np.testing.assert_array_equal(np.asarray(got), np.full((2, 4), want) if want is not None
                                          else np.broadcast_to(x.sum(1, keepdims=True), (2, 4)))


def test_collectives_in_loop_and_branch_bodies():
    """A body batched by its loop's (or cond's) vmap rule keeps the named axis; numbers recorded from JAX 0.10.2."""
    xs = np.arange(12.0).reshape(4, 3)
    scanned = kiln.vmap(lambda r: lax.scan(lambda c, x: (c + lax.psum(x, "i") * x, c), 0.0, r)[0], axis_name="i")
    np.testing.assert_allclose(np.asarray(scanned(xs)), [74.0, 272.0, 470.0, 668.0], rtol=1e-15)
    branched = kiln.vmap(lambda r: lax.cond(r[0] > 3, lambda v: lax.psum(v, "i"), lambda v: v * 2, r), axis_name="i")
    np.testing.assert_array_equal(np.asarray(branched(xs)), [[0, 2, 4], [6, 8, 10], [18, 22, 26], [18, 22, 26]])
    looped = kiln.vmap(lambda r: lax.fori_loop(0, 2, lambda k, v: lax.pmean(v, "i") + v, r), axis_name="i")
    np.testing.assert_allclose(np.asarray(looped(xs)), [[13.5, 17.5, 21.5], [16.5, 20.5, 24.5], [19.5, 23.5, 27.5],
                                                        [22.5, 26.5, 30.5]], rtol=1e-15)
    ys = np.array([1.0, 2.0, 0.5, 3.0])
    doubling = kiln.vmap(lambda r: lax.while_loop(lambda c: lax.pmax(c, "i") < 20, lambda c: c * 2, r), axis_name="i")
    assert np.asarray(doubling(ys)).tolist() == [8.0, 16.0, 4.0, 24.0]  # a predicate over the axis
    # nothing batched reaches the loop: it still runs at the vmap (psum of a constant is the axis size)
    counted = kiln.vmap(lambda r: lax.fori_loop(0, 3, lambda k, c: c + lax.psum(1.0, "i"), 0.0) + r, axis_name="i")
    assert np.asarray(counted(ys)).tolist() == [13.0, 14.0, 12.5, 15.0]
    grads = kiln.vmap(kiln.grad(lambda r: lax.fori_loop(0, 3, lambda k, c: knp.sin(c) * lax.pmean(c, "i"), r)),
                      axis_name="i")(ys)
    np.testing.assert_allclose(np.asarray(grads), [1.530335516801, 0.074323798659, 2.921507015834, -2.558209383303],
                               rtol=1e-10)
    # grad through a scan whose body sums over the axis, inside the vmap
    f = lambda r: lax.scan(lambda c, x: (knp.sin(c + lax.psum(x * c, "i")), c), 0.5, r)[0]  # noqa: E731
    got = np.asarray(kiln.vmap(kiln.grad(f), axis_name="i")(xs * 0.1))
    np.testing.assert_allclose(got, np.broadcast_to([-3.91220790438, -14.176579062742, -0.047341738051], (4, 3)),
                               rtol=1e-10)
