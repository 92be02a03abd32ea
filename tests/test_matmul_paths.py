"""The matmul kernel's operand paths (codegen/matmul.py) and the transposed-product fold (passes.py), run
in the C runtime against numpy: B packed by each row chunk's first tile as it computes, B with strided
columns packed before the tiles, A's rows copied where they lie 4 KiB apart, B read transposed (panels packed by vector transposes), B read in place
for tiles of few rows (matrix-vector products), dot products along k for few rows of `x @ w.T`, and
transpose(dot_general) computed as the swapped product. Every case runs through kiln-run in each x86-64 kernel build (vector widths 4, 8 and 16 for
float32), so full strips, partial strips and k tails meet each width; the training path is checked by
finite differences."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import Program
from kiln.compiler.fusion import partition
from kiln.compiler.pipeline import prepare_graph
from kiln.core.aval import ShapedArray
from kiln.core.trace import trace_to_graph
from tests.kiln_tools import run_kiln_run
from tests.references import numerical_grad

RNG = np.random.default_rng(41)
VARIANTS = ("x86-64-v4", "x86-64-v3", "x86-64-v2")


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _strided_rows(a):
    return a[::2]


# name -> (kiln function, numpy reference, inputs). Sizes put k past a whole number of vector blocks
# (k tails), n past a whole number of NR-wide strips (partial strips), and m at or below a tile's rows.
CASES = {}
for dt in (np.float32, np.float64):
    tag = np.dtype(dt).name
    for m, k, n in [(5, 37, 70), (13, 300, 33), (30, 16, 96)]:
        CASES[f"nt-{tag}-{m}x{k}x{n}"] = (lambda a, b: a @ b.T, lambda a, b: a @ b.T, (_rand(m, k, dtype=dt), _rand(n, k, dtype=dt)))
    for m, k, n in [(1, 300, 300), (3, 50, 170), (6, 33, 40)]:
        CASES[f"direct-{tag}-{m}x{k}x{n}"] = (lambda a, b: a @ b, lambda a, b: a @ b, (_rand(m, k, dtype=dt), _rand(k, n, dtype=dt)))
    # B packed by the first tile of each row chunk as it computes (matmul._packs_while_computing): two k
    # blocks with a k tail, a partial strip, a row tail; and B whose columns are strided (packed apart).
    CASES[f"packed-{tag}-40x300x70"] = (lambda a, b: a @ b, lambda a, b: a @ b, (_rand(40, 300, dtype=dt), _rand(300, 70, dtype=dt)))
    CASES[f"strided-{tag}-20x260x30"] = (lambda a, b: a @ b[:, ::2], lambda a, b: a @ b[:, ::2],
                                         (_rand(20, 260, dtype=dt), _rand(260, 60, dtype=dt)))
    # Products at most one vector wide (matmul._Tiling: strips of one vector): packed with a k tail and a
    # row tail, transposed, B read in place, and an epilogue; 10 and 6 columns are one partial strip at
    # width 16 (f32 on AVX-512) or 8 (f32 on AVX2, f64 on AVX-512), and two at width 4.
    CASES[f"packed-{tag}-50x300x10"] = (lambda a, b: a @ b, lambda a, b: a @ b, (_rand(50, 300, dtype=dt), _rand(300, 10, dtype=dt)))
    CASES[f"nt-{tag}-30x40x7"] = (lambda a, b: a @ b.T, lambda a, b: a @ b.T, (_rand(30, 40, dtype=dt), _rand(7, 40, dtype=dt)))
    CASES[f"direct-{tag}-3x50x6"] = (lambda a, b: a @ b, lambda a, b: a @ b, (_rand(3, 50, dtype=dt), _rand(50, 6, dtype=dt)))
    # Two k blocks: each tile's epilogue runs after its last one (matmul: tile_epilogue), with a row tail.
    CASES[f"narrow-epilogue-{tag}"] = (lambda x, w, b: knp.tanh(x @ w + b), lambda x, w, b: np.tanh(x @ w + b),
                                       (_rand(64, 300, dtype=dt), _rand(300, 10, dtype=dt), _rand(10, dtype=dt)))
    CASES[f"tiny-{tag}"] = (lambda a, b: a @ b, lambda a, b: a @ b, (_rand(1, 7, dtype=dt), _rand(7, 1, dtype=dt)))
    for m, k, n in [(1, 45, 17), (4, 33, 9), (2, 200, 130), (3, 17, 6)]:
        CASES[f"dot-{tag}-{m}x{k}x{n}"] = (lambda a, b: a @ b.T, lambda a, b: a @ b.T, (_rand(m, k, dtype=dt), _rand(n, k, dtype=dt)))
    CASES[f"dot-epilogue-batched-{tag}"] = (lambda a, b, c: knp.tanh(knp.einsum("bmk,bnk->bmn", a, b) + c),
                                            lambda a, b, c: np.tanh(np.einsum("bmk,bnk->bmn", a, b) + c),
                                            (_rand(3, 1, 70, dtype=dt), _rand(3, 21, 70, dtype=dt), _rand(21, dtype=dt)))
    CASES[f"direct-epilogue-{tag}"] = (lambda x, w, b: knp.tanh(x @ w + b), lambda x, w, b: np.tanh(x @ w + b),
                                       (_rand(2, 90, dtype=dt), _rand(90, 75, dtype=dt), _rand(75, dtype=dt)))
    CASES[f"direct-strided-rows-{tag}"] = (lambda a, b: a @ b[::2], lambda a, b: a @ b[::2],
                                           (_rand(4, 41, dtype=dt), _rand(82, 50, dtype=dt)))
    CASES[f"direct-batched-{tag}"] = (lambda a, b: a @ b, lambda a, b: a @ b, (_rand(3, 1, 60, dtype=dt), _rand(3, 60, 45, dtype=dt)))
    CASES[f"nt-batched-{tag}"] = (lambda a, b: knp.einsum("bmk,bnk->bmn", a, b), lambda a, b: np.einsum("bmk,bnk->bmn", a, b),
                                  (_rand(2, 9, 40, dtype=dt), _rand(2, 35, 40, dtype=dt)))
    CASES[f"nt-epilogue-{tag}"] = (lambda g, w, z: (g @ w.T) * (z > 0), lambda g, w, z: (g @ w.T) * (z > 0),
                                   (_rand(20, 33, dtype=dt), _rand(50, 33, dtype=dt), _rand(20, 50, dtype=dt)))
    CASES[f"fold-{tag}"] = (lambda a, b: (a.T @ b).T, lambda a, b: (a.T @ b).T, (_rand(40, 19, dtype=dt), _rand(40, 23, dtype=dt)))
    CASES[f"fold-batched-{tag}"] = (lambda a, b: knp.swapaxes(a @ b, 1, 2), lambda a, b: np.swapaxes(a @ b, 1, 2),
                                    (_rand(3, 7, 20, dtype=dt), _rand(3, 20, 11, dtype=dt)))
    CASES[f"fold-shared-{tag}"] = (lambda a, b: ((a @ b).T, a @ b + 1), lambda a, b: ((a @ b).T, a @ b + 1),
                                   (_rand(8, 6, dtype=dt), _rand(6, 5, dtype=dt)))
    CASES[f"fold-not-swap-{tag}"] = (lambda a, b: knp.transpose(a @ b, (1, 0, 2)), lambda a, b: np.transpose(a @ b, (1, 0, 2)),
                                     (_rand(3, 7, 20, dtype=dt), _rand(3, 20, 11, dtype=dt)))

# A's rows 4 KiB apart (matmul._copies_a): each tile's rows copied for its strips to read, whole (f32: two
# k blocks of 1024) or a k tail of a longer row (f64 rows 512 apart, 300 used), with a row tail.
CASES["copied-float32"] = (lambda a, b: a @ b, lambda a, b: a @ b, (_rand(30, 1024), _rand(1024, 70)))
CASES["copied-float64"] = (lambda a, b: a[:, :300] @ b, lambda a, b: a[:, :300] @ b,
                           (_rand(20, 512, dtype=np.float64), _rand(300, 40, dtype=np.float64)))
CASES["copied-nt-float32"] = (lambda a, b: a @ b.T, lambda a, b: a @ b.T, (_rand(14, 1024), _rand(40, 1024)))
CASES["copied-direct-float32"] = (lambda a, b: a @ b, lambda a, b: a @ b, (_rand(5, 1024), _rand(1024, 300)))

# A of 1 MiB or more (matmul._prefetches_a): each tile prefetches the next tile's rows, here rows 4000 bytes
# apart (not line-aligned), a k tail past three k blocks and a row tail.
CASES["prefetched-float32"] = (lambda a, b: a @ b, lambda a, b: a @ b, (_rand(280, 1000), _rand(1000, 20)))

# Large products whose row chunks grow to fewer, taller items (matmul._Tiling, SHARED_ITEMS): a row tail
# (m % MR), a partial column chunk, an epilogue over a tall chunk; batched in f64.
CASES["grown-epilogue-float32"] = (lambda a, b, c: knp.tanh(a @ b + c), lambda a, b, c: np.tanh(a @ b + c),
                                   (_rand(1000, 70), _rand(70, 600), _rand(600)))
CASES["grown-batched-float64"] = (lambda a, b: a @ b, lambda a, b: a @ b,
                                  (_rand(8, 200, 30, dtype=np.float64), _rand(8, 30, 20, dtype=np.float64)))

# The product accumulated in its one output written over a dead epilogue operand (memory_plan._matmul_pairs:
# the sort's output h, copied per work item before the K loop, matmul.copied_operands): two k blocks, a row
# tail, partial strips, in each build.
CASES["inplace-residual-float32"] = (lambda x, z, w, b, v: (knp.sort(x, axis=-1) + knp.tanh(z @ w + b)) @ v,
                                     lambda x, z, w, b, v: (np.sort(x, axis=-1) + np.tanh(z @ w + b)) @ v,
                                     (_rand(37, 300), _rand(37, 290), _rand(290, 300), _rand(300), _rand(300, 5)))


def _want(name):
    _, ref, args = CASES[name]
    out = ref(*[a.astype(np.float64) for a in args])
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """All cases as the functions of one portable module (its x86-64 v2, v3 and v4 builds), inputs saved."""
    tmp = tmp_path_factory.mktemp("matmul_paths")
    namespace = {"Program": Program, "CASES": CASES}
    body = []
    for i, (name, (fn, _, args)) in enumerate(CASES.items()):
        params = ", ".join(f"a{j}=Program.like(CASES[{name!r}][2][{j}])" for j in range(len(args)))
        body.append(f"    def f{i}(self, {params}):\n        return CASES[{name!r}][0]({', '.join(f'a{j}' for j in range(len(args)))})\n")
        for j, a in enumerate(args):
            np.save(tmp / f"f{i}.{j}.npy", a)
    exec("class Paths(Program, export_name='paths'):\n" + "".join(body), namespace)
    path = tmp / "paths.vmfb"
    Program.get_compiled_artifact(namespace["Paths"], target="portable").save(path)
    return tmp, path


@pytest.mark.parametrize("variant", VARIANTS)
def test_cases_in_each_kernel_build(exported, variant, monkeypatch):
    tmp, path = exported
    monkeypatch.setenv("KILN_CPU_VARIANT", variant)
    for i, (name, (_, _, args)) in enumerate(CASES.items()):
        want = _want(name)
        outs = [tmp / f"out.{i}.{r}.npy" for r in range(len(want))]
        run_kiln_run(f"--module={path}", f"--function=f{i}", *[f"--input=@{tmp / f'f{i}.{j}.npy'}" for j in range(len(args))],
                     *[f"--output=@{o}" for o in outs])
        for o, w in zip(outs, want):
            got = np.load(o)
            dtype = args[0].dtype
            assert got.shape == w.shape and got.dtype == dtype, (name, got.shape, got.dtype)
            tol = 2e-5 if dtype == np.float32 else 1e-12
            scale = max(float(np.abs(w).max()), 1.0)
            np.testing.assert_allclose(got, w, rtol=tol, atol=tol * scale, err_msg=f"{name} ({variant})")


def _graph(fn, *args):
    graph = trace_to_graph(lambda *a: list(kiln.tree_util.tree_leaves(fn(*a))),
                           [ShapedArray(np.shape(a), np.asarray(a).dtype) for a in args])
    return prepare_graph(graph)


def _names(graph):
    return [e.primitive.name for e in graph.eqns]


@pytest.mark.parametrize("name", ["fold-float32", "fold-batched-float32"])
def test_transposed_product_is_the_swapped_product(name):
    fn, _, args = CASES[name]
    graph = _graph(fn, *args)
    product = graph.eqns[-1]
    assert product.primitive.name == "dot_general" and graph.outvars[0] is product.outvars[0], _names(graph)
    assert _names(graph).count("transpose") == (1 if name == "fold-float32" else 0)  # a.T stays: a view
    assert len(partition(graph).dispatches) == 1


def test_transpose_of_a_shared_product_is_not_folded():
    fn, _, args = CASES["fold-shared-float32"]
    assert _names(_graph(fn, *args)).count("dot_general") == 1  # one product, read twice: not computed twice


def test_a_permutation_other_than_the_swap_keeps_its_transpose():
    fn, _, args = CASES["fold-not-swap-float32"]
    assert "transpose" in _names(_graph(fn, *args))


def test_weight_gradients_need_no_transpose():
    """The reverse-mode step of a dense layer: every weight gradient is a product written in the weight's
    layout (no transpose left in the optimized graph), so the SGD update reads it contiguously."""
    def step(w1, w2, x, y):
        def loss(w1, w2):
            return knp.mean((knp.tanh(x @ w1) @ w2 - y) ** 2)
        g1, g2 = kiln.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    args = (_rand(12, 9), _rand(9, 5), _rand(16, 12), _rand(16, 5))
    assert "transpose" not in _names(_graph(step, *args))


def test_gradients_match_finite_differences():
    """value_and_grad through x @ w, h @ v.T and a transposed product, float64 under kiln.jit (C runtime),
    against central differences of numpy's loss."""
    x, w, v, y = _rand(3, 11, dtype=np.float64), _rand(11, 7, dtype=np.float64), _rand(5, 7, dtype=np.float64), _rand(5, 3, dtype=np.float64)

    def loss(w, v, lib):
        h = lib.tanh(x @ w)                       # 3 x 7, rows below a tile: B read in place
        z = h @ v.T                               # 3 x 5: B read transposed
        return lib.sum(((z.T @ h) @ w.T) ** 2) / 2 + lib.sum((z.T - y) ** 2)  # transposed products

    value, (gw, gv) = kiln.jit(kiln.value_and_grad(lambda w, v: loss(w, v, knp), argnums=(0, 1)))(w, v)
    np.testing.assert_allclose(value, loss(w, v, np), rtol=1e-12)
    np.testing.assert_allclose(gw, numerical_grad(lambda w_: loss(w_, v, np), w), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gv, numerical_grad(lambda v_: loss(w, v_, np), v), rtol=1e-6, atol=1e-6)


def test_each_case_takes_the_path_it_is_named_for():
    """The cases reach the paths they test, for AVX2 (vw 8 / 4) and AVX-512 (vw 16 / 8) tilings."""
    from kiln.compiler.codegen import matmul
    from kiln.compiler.target import Target

    targets = [Target.named("x86_64-unknown-linux-gnu", "haswell", "+avx,+avx2,+fma"),
               Target.named("x86_64-unknown-linux-gnu", "skylake-avx512", "+avx,+avx2,+avx512f,+fma")]
    for name, (fn, _, args) in CASES.items():
        if not name.startswith(("nt-", "direct-", "dot-", "packed-", "strided-", "copied-", "prefetched-")):
            continue
        region = partition(_graph(fn, *args)).dispatches[0].region
        plan = matmul._plan(region)
        for target in targets:
            t = matmul._tiling(region, plan, target)
            path = ("dot" if matmul._dot_form(plan, t) else "direct" if matmul._reads_b_in_place(plan, t)
                    else "nt" if matmul._k_contiguous(plan, t) else "packed" if matmul._packs_while_computing(plan, t)
                    else "strided")
            # Only the case named for it has an A large enough to prefetch the next tile's rows.
            assert matmul._prefetches_a(plan, t) == name.startswith("prefetched-"), (name, target.cpu)
            if name.startswith("prefetched-"):
                assert path == "packed", (name, target.cpu, path)
            elif name.startswith("copied-"):
                strips = matmul._direct_strips(plan.sizes[1], t) if path == "direct" else t
                assert matmul._copies_a(plan, strips), (name, target.cpu)
            else:
                assert path == name.split("-")[0], (name, target.cpu, path)


def test_large_products_take_fewer_taller_row_chunks():
    """The grown cases' tilings: as few row chunks as give SHARED_ITEMS items with the batch and column
    chunks, of equal whole tiles, taller than ROW_CHUNK_TILES tiles, covering every row once."""
    from kiln.compiler.codegen import matmul
    from kiln.compiler.target import Target

    targets = [Target.named("x86_64-unknown-linux-gnu", "x86-64-v2", ""),
               Target.named("x86_64-unknown-linux-gnu", "haswell", "+avx,+avx2,+fma"),
               Target.named("x86_64-unknown-linux-gnu", "skylake-avx512", "+avx,+avx2,+avx512f,+fma")]
    for name in ("grown-epilogue-float32", "grown-batched-float64"):
        fn, _, args = CASES[name]
        region = partition(_graph(fn, *args)).dispatches[0].region
        plan = matmul._plan(region)
        batch, m, _, _ = plan.sizes
        for target in targets:
            t = matmul._tiling(region, plan, target)
            assert t.row_chunk % t.mr == 0 and t.row_chunk > t.mr * matmul.ROW_CHUNK_TILES, (name, target.cpu, t.row_chunk)
            assert (t.m_chunks - 1) * t.row_chunk < m <= t.m_chunks * t.row_chunk, (name, target.cpu)
            fewest = -(-matmul.SHARED_ITEMS // (batch * t.n_chunks))  # row chunks for SHARED_ITEMS items
            assert t.m_chunks == fewest and t.items == batch * t.m_chunks * t.n_chunks, (name, target.cpu, t.m_chunks)


def test_narrow_products_take_one_vector_strips_and_balanced_rows():
    """A product at most one vector wide computes strips of one vector (half the padding lanes of two), and
    one given fewer than MIN_ITEMS workgroups splits its rows into that many chunks of equal whole tiles
    (256 x 512 @ 512 x 10: two workgroups of 132 and 124 rows), for AVX2 and AVX-512 tilings."""
    from kiln.compiler.codegen import matmul
    from kiln.compiler.compile import choose_workgroups
    from kiln.compiler.target import Target

    targets = [Target.named("x86_64-unknown-linux-gnu", "haswell", "+avx,+avx2,+fma"),
               Target.named("x86_64-unknown-linux-gnu", "skylake-avx512", "+avx,+avx2,+avx512f,+fma")]
    for m, k, n in [(256, 512, 10), (512, 256, 8), (50, 300, 70)]:
        region = partition(_graph(lambda a, b: a @ b, _rand(m, k), _rand(k, n))).dispatches[0].region
        plan = matmul._plan(region)
        for target in targets:
            t = matmul._tiling(region, plan, target)
            assert t.nr == (t.vw if n <= t.vw else 2 * t.vw), (m, k, n, target.cpu, t.nr)
            groups = choose_workgroups(matmul.work(region), t.items)
            if n <= 10:
                assert groups == t.items == 2, (m, k, n, target.cpu, groups, t.items)
                tiles = -(-m // t.mr)
                assert t.row_chunk == t.mr * -(-tiles // 2) and t.m_chunks == 2, (m, k, n, target.cpu, t.row_chunk)
