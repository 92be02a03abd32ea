"""`kiln check`: every dispatch of a call in the C runtime against the eager reference interpreter
(kiln.program.check, on the runtime's dispatch observer). A healthy program with control flow and a
softmax passes; a kernel compiled wrong on purpose (KILN_TEST_PERTURB_KERNEL) is pinpointed with its
source line; every error is one line and a non-zero exit."""
import re
import textwrap

import ml_dtypes
import numpy as np
import pytest

from kiln.cli.main import main
from kiln.compiler.perturb import ENV
from kiln.program.check import TOLERANCES, CheckError, compare, parse_input

PROGRAM = textwrap.dedent('''
    import numpy as np
    import kiln
    import kiln.numpy as knp
    from kiln import Program, lax

    rng = np.random.default_rng(0)


    class Net(Program, export_name="net"):
        _w1 = rng.standard_normal((6, 16)).astype(np.float32)
        _w2 = rng.standard_normal((16, 5)).astype(np.float32)

        def predict(self, x=Program.like(np.zeros((8, 6), np.float32)), n=Program.like(np.int32(0))):
            h = knp.tanh(x @ self._w1)
            h = lax.cond(n > 2, lambda h: h * 2.0, lambda h: knp.exp(-h), h)
            h = lax.fori_loop(0, 3, lambda i, h: knp.sin(h) + 0.5 * h, h)  # LOOP
            return kiln.nn.softmax(h @ self._w2, axis=-1)

        def total(self, x=Program.like(np.zeros((512, 1024), np.float32)), y=Program.like(np.zeros(64))):
            return (knp.sum(x * 2.0), knp.max(x, axis=0), knp.cumsum(y), (y > 0).astype(np.int32) * 3,
                    knp.sqrt(knp.abs(y)).astype(np.float16))
''')
LOOP_LINE = next(i for i, line in enumerate(PROGRAM.splitlines(), 1) if "# LOOP" in line)
LINE = re.compile(r"^\s*(\d+)  (\S+)\s+abs\s+(\S+)\s+rel\s+(\S+)\s+ulp\s+(\S+)\s+(ok|FAIL)$")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("check")
    (folder / "net.py").write_text(PROGRAM)
    rng = np.random.default_rng(1)
    np.save(folder / "x.npy", rng.standard_normal((8, 6)).astype(np.float32))
    np.savez(folder / "big.npz", x=rng.standard_normal((512, 1024)).astype(np.float32), y=rng.standard_normal(64))
    return folder


def kiln(capsys, *args):
    """Runs the kiln command in this process; (exit code, stdout lines, stderr)."""
    code = main.main(list(args), standalone_mode=False)
    out = capsys.readouterr()
    return code or 0, out.out.splitlines(), out.err


def dispatch_lines(lines):
    return [LINE.match(line).groups() for line in lines if LINE.match(line)]


def test_healthy_program_with_control_flow_and_softmax_passes(files, capsys):
    code, lines, err = kiln(capsys, "check", f"{files}/net.py:Net", "-f", "predict", f"--input=@{files}/x.npy",
                            "--input=i32=3")
    assert (code, err) == (0, ""), lines
    rows = dispatch_lines(lines)
    # matmul, tanh, the cond's branch, the loop three times, the second matmul, the softmax (however
    # fusion groups them)
    n = len(rows)
    assert n >= 7 and lines[0].startswith(f"{n} dispatches of predict")
    assert [int(i) for i, *_ in rows] == list(range(n))
    assert all(status == "ok" for *_, status in rows)
    assert any("dot_general" in k for _, k, *_ in rows) and any("row_fused" in k for _, k, *_ in rows)
    for _, kernel, abs_err, rel_err, ulp, _ in rows:
        assert float(rel_err) < 1e-5 and (ulp == "-" or int(ulp) <= 64), (kernel, rel_err, ulp)
    assert lines[-1] == f"all {n} dispatches within tolerance"


def loop_kernel(files):
    """The healthy check of predict, and the dispatches of the kernel that runs the fori_loop's body: three
    times, with a float output (the source of its first op is the loop's line)."""
    from kiln.cli.loading import load_program_class
    from kiln.program.check import check_program

    healthy = check_program(load_program_class(f"{files}/net.py:Net"), "predict",
                            [np.load(files / "x.npy"), np.int32(3)])
    runs: dict[str, list] = {}
    for r in healthy.results:
        runs.setdefault(r.kernel, []).append(r)
    (loop,) = [rs for rs in runs.values() if len(rs) == 3 and rs[0].max_ulp is not None]  # not the counter's test
    return healthy, loop


def test_perturbed_kernel_is_pinpointed_with_its_source_line(files, capsys, monkeypatch):
    healthy, loop = loop_kernel(files)
    loop_line = PROGRAM.splitlines()[LOOP_LINE - 1].strip()
    assert all(f"net.py:{LOOP_LINE} in " in r.source and r.source.endswith(loop_line) for r in loop)
    monkeypatch.setenv(ENV, loop[0].kernel)
    code, lines, err = kiln(capsys, "check", f"{files}/net.py:Net", "-f", "predict", f"--input=@{files}/x.npy",
                            "--input=i32=3")
    assert code == 1 and err == ""
    rows = dispatch_lines(lines)
    failed = [int(i) for i, kernel, *_, status in rows if status == "FAIL"]
    assert failed == [r.index for r in loop]  # that kernel, every time it ran, and nothing else
    assert all(status == "ok" for i, *_, status in rows if int(i) not in failed)  # inputs came from the runtime
    bad = rows[failed[0]]
    assert float(bad[2]) > 1e-3 and float(bad[4]) > 1000
    first = next(line for line in lines if line.startswith("first dispatch beyond tolerance"))
    assert first.startswith(f"first dispatch beyond tolerance: #{loop[0].index} {loop[0].kernel} (predict word "
                            f"{loop[0].offset}, step ")
    assert re.search(r"output \d \(f32\[8,16\]\): \d+ of 128 elements beyond tolerance \(rtol 0.0001\)", first)
    assert lines[-2] == f"  its first op: {loop[0].source}"
    assert lines[-1] == f"3 of {len(healthy.results)} dispatches beyond tolerance"


def test_perturbing_a_kernel_of_another_strategy_is_refused(files, capsys, monkeypatch):
    healthy, _ = loop_kernel(files)
    matmul = next(r.kernel for r in healthy.results if "dot_general" in r.kernel)
    monkeypatch.setenv(ENV, matmul)
    code, lines, err = kiln(capsys, "check", f"{files}/net.py:Net", "-f", "predict", f"--input=@{files}/x.npy",
                            "--input=i32=3")
    assert code == 1 and lines == []
    assert err.splitlines() == [f"kiln: error: CompileError: {ENV}={matmul}: kernel {matmul} is a matmul kernel; "
                                f"the hook perturbs elementwise and horizontal kernels only"]


def test_split_reductions_integers_and_narrow_floats(files, capsys):
    code, lines, err = kiln(capsys, "check", f"{files}/net.py:Net", "-f", "total", f"--input=@{files}/big.npz")
    assert (code, err) == (0, ""), lines
    rows = dispatch_lines(lines)
    kernels = [k for _, k, *_ in rows]
    assert any("chunks" in k for k in kernels) and any("partials" in k for k in kernels)  # a split sum
    # the float32 sum of 2^19 values is correctly rounded (float64 accumulation); the integer kernel is exact
    assert all(status == "ok" for *_, status in rows)
    assert max(float(ulp) for *_, ulp, _ in rows if ulp != "-") <= 1


@pytest.mark.parametrize("args, message", [
    (["-f", "nope", "--input=i32=1"], "Net has no function 'nope' (it exports: predict, total)"),
    (["-f", "predict", "--input=8x6xf32=1"], "predict takes 2 inputs (x 8x6xf32, n i32), got 1"),
    (["-f", "predict", "--input=8x6xf32=1", "--input=i32=1,2"], "input 'i32=1,2': 2 values for shape () (1 elements)"),
    (["-f", "predict", "--input=8x6xq9=1", "--input=i32=1"],
     "input '8x6xq9=1': '8x6xq9' is not SHAPExDTYPE (such as 4x3xf32, or f32 for a scalar)"),
    (["-f", "predict", "--input=@missing.npy", "--input=i32=1"], "input '@missing.npy': no such file 'missing.npy'"),
    (["-f", "predict", "--input=4x6xf32=1", "--input=i32=1"], "predict: argument 0 'x' expects 8x6xf32, got 4x6xf32"),
])
def test_errors_are_one_line_and_exit_nonzero(files, capsys, args, message):
    code, lines, err = kiln(capsys, "check", f"{files}/net.py:Net", *args)
    assert code == 1 and lines == []
    assert err.splitlines() == [f"kiln: error: {message}"]


def test_npz_member_and_filled_inputs(files):
    x = parse_input(f"@{files}/big.npz:y")
    np.testing.assert_array_equal(x[0], np.load(files / "big.npz")["y"])
    assert [a.shape for a in parse_input(f"@{files}/big.npz")] == [(512, 1024), (64,)]
    np.testing.assert_array_equal(parse_input("2x2xi16=7")[0], np.full((2, 2), 7, np.int16))
    assert parse_input("f64=2.5")[0].shape == () and parse_input("3xbool=1,0,true")[0].tolist() == [True, False, True]
    with pytest.raises(CheckError, match="has no array 'z' \\(it has x, y\\)"):
        parse_input(f"@{files}/big.npz:z")
    bits = np.array([1.5, -2], ml_dtypes.bfloat16)
    np.save(files / "b.npy", bits)  # reads back as 2-byte voids: taken as the bits
    np.testing.assert_array_equal(parse_input(f"@{files}/b.npy")[0], bits.view(np.uint16))


def test_compare_measures_ulp_and_judges_by_dtype():
    f32 = TOLERANCES["float32"]
    ref = np.array([1.0, -2.0, 0.0, np.nan, np.inf])
    got = np.array([np.nextafter(np.float32(1), np.float32(2)), -2, 0, np.nan, np.inf], np.float32)
    abs_err, rel, ulp, bad = compare(got, ref, got, f32)
    assert (ulp, bad) == (1, 0) and abs_err == pytest.approx(2.0 ** -23)
    got[2] = np.float32(1e-3)  # far from 0 at the scale of the output (2): beyond rtol 1e-4 of 2
    got[3] = np.float32(1)  # a number where NaN is expected
    assert compare(got, ref, ref.astype(np.float32), f32)[3] == 2
    # an element the float64 reference puts elsewhere but the program-dtype one holds (a threshold): measured
    # from the latter
    assert compare(np.array([1, 5], np.float32), np.array([1, 0]), np.array([1, 5], np.float32), f32)[:4] == \
        (0.0, 0.0, 0, 0)
    ints = np.array([1, 2, 3], np.int32)
    assert compare(ints, np.array([1, 2, 4]), np.array([1, 2, 3], np.int32), 0)[3] == 0  # the native result
    assert compare(ints, np.array([1, 2, 4]), np.array([1, 2, 4], np.int32), 0)[3] == 1
    halves = np.array([1, 2], np.float16)
    assert compare(halves, np.array([1.0, 2.001]), halves, TOLERANCES["float16"])[2:] == (1, 0)  # 2.001 -> 2.002


def test_an_output_is_judged_by_the_least_precise_float_computed_for_it():
    """A float64 sum of float32 exp values carries float32's error; a float64 product of a float32 input
    converted exactly does not."""
    import kiln.numpy as knp
    from kiln.compiler.fusion import partition
    from kiln.compiler.pipeline import prepare_graph
    from kiln.core.aval import ShapedArray
    from kiln.core.trace import trace_to_graph
    from kiln.program.check import output_tolerances

    def f(x, y):
        return knp.sum(knp.exp(x).astype(np.float64)), x.astype(np.float64) * y

    graph = prepare_graph(trace_to_graph(f, [ShapedArray((4,), np.dtype(np.float32)),
                                             ShapedArray((4,), np.dtype(np.float64))]))
    regions = [s.region for s in partition(graph).dispatches]
    tolerances = sorted(t for r in regions for t in output_tolerances(r, None))
    assert tolerances == [TOLERANCES["float64"], TOLERANCES["float32"]]
    assert output_tolerances(regions[0], 0.5) == [0.5] * len(regions[0].outvars)


def _one_region(f, *avals):
    from kiln.compiler.fusion import partition
    from kiln.compiler.pipeline import prepare_graph
    from kiln.core.trace import trace_to_graph

    (step,) = partition(prepare_graph(trace_to_graph(f, list(avals)))).dispatches
    return step.region


def test_cancellation_is_judged_at_the_scale_of_its_terms():
    """A sum that cancels to about 0 is accurate to eps times its terms, not to eps times itself: the
    rounding bound carries the terms' rounding through sums and products (and the scale their
    magnitude, for the relative error reported)."""
    import kiln.numpy as knp
    from kiln.core.aval import ShapedArray
    from kiln.program.check import evaluate_region

    region = _one_region(lambda x, y: [knp.sum(x * y - x * y[::-1])], *[ShapedArray((4,), np.dtype(np.float32))] * 2)
    x, y = np.float32([1e3, 2e3, 3e3, 4e3]), np.float32([1, 2, 2, 1])
    (out,), (scale,), (bound,) = evaluate_region(region, [x, y], wide=True, magnitudes=True)
    terms = 2 * float(np.sum(x * y))  # sum |x y| + |x y[::-1]|
    assert out == 0 and scale == pytest.approx(terms)
    assert 2.0 ** -24 * terms <= bound <= 4 * 2.0 ** -24 * terms  # the products', the differences' roundings
    f32 = TOLERANCES["float32"]
    off = np.array(0.01, np.float32)  # rounding-sized next to the terms (3e4), not next to 0
    zero = np.zeros((), np.float32)  # the program-dtype reference
    assert compare(off, out, zero, f32)[3] == 1
    assert compare(off, out, zero, f32, scale, bound)[3] == 0
    assert compare(np.array(0.5, np.float32), out, zero, f32, scale, bound)[3] == 1  # a wrong value still is


def test_an_error_free_transformation_is_judged_by_its_roundings_not_its_terms():
    """The low part of a two-sum (what logsumexp and softmax's gradients compute, vae's value_and_grad) is
    exactly 0 in float64 and the float32 rounding error in float32: its terms are ~100, its roundings
    ~1e-5. A kernel off by 2^-7 there (the sweep's perturbation) was within 1e-4 of its terms; it is far
    beyond its rounding bound (make check-sweep missed it in vae before the bound)."""
    from kiln.core.aval import ShapedArray
    from kiln.program.check import evaluate_region

    def two_sum_low(a, b):
        s = a + b
        bb = s - a
        return [(a - (s - bb)) + (b - bb)]

    region = _one_region(two_sum_low, *[ShapedArray((64,), np.dtype(np.float32))] * 2)
    rng = np.random.default_rng(0)
    a = (rng.uniform(100, 200, 64) * rng.choice([-1, 1], 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    (out,), (scale,), (bound,) = evaluate_region(region, [a, b], wide=True, magnitudes=True)
    (native,) = evaluate_region(region, [a, b], wide=False)
    assert not out.any() and native.any()  # exact in float64; float32's rounding error of a + b
    f32 = TOLERANCES["float32"]
    assert compare(native, out, native, f32, scale, bound)[3] == 0  # the kernel's float32 value
    wrong = native * np.float32(1 + 2.0 ** -7) + np.float32(2.0 ** -7)
    assert compare(wrong, out, native, f32, scale, bound)[3] == 64
    assert compare(wrong, out, native, f32, scale)[3] == 0  # within 1e-4 of its terms (600 and more)


def test_a_dispatch_without_reference_is_said_and_not_failed(files, monkeypatch):
    """A region the reference cannot evaluate is reported as not compared; the others still are."""
    from kiln.cli.loading import load_program_class
    from kiln.lax import prims
    from kiln.program import check

    def no_tanh(*args, **params):
        raise NotImplementedError("tanh has no reference here")

    monkeypatch.setattr(prims.tanh, "impl", no_tanh)
    report = check.check_program(load_program_class(f"{files}/net.py:Net"), "predict",
                                 [np.load(files / "x.npy"), np.int32(3)])
    skipped = [r for r in report.results if r.note]
    assert len(skipped) == 1 and skipped[0].passed and report.passed
    assert skipped[0].line().endswith("skipped (no reference: tanh has no reference here)")
    assert report.text().splitlines()[-2:] == ["1 dispatches not compared (no reference for them)",
                                               f"all {len(report.results) - 1} compared dispatches within tolerance"]


def test_globals_from_a_checkpoint(files, capsys):
    """--globals-in sets the globals first (a trained state): the call computes with them, and every
    dispatch is still checked; a file that lacks a global is a one-line error."""
    from kiln.cli.loading import load_program_class
    from kiln.program.check import check_program

    cls = load_program_class(f"{files}/net.py:Net")
    rng = np.random.default_rng(5)
    w1, w2 = rng.standard_normal((6, 16)).astype(np.float32), rng.standard_normal((16, 5)).astype(np.float32)
    np.savez(files / "state.npz", _w1=w1, _w2=w2)
    np.savez(files / "half.npz", _w1=w1)
    x = np.load(files / "x.npy")
    report = check_program(cls, "predict", [x, np.int32(3)], globals_in=files / "state.npz")
    assert report.passed and report.results
    h = np.tanh(x.astype(np.float64) @ w1) * 2.0
    for _ in range(3):
        h = np.sin(h) + 0.5 * h
    logits = h @ w2
    want = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(report.outputs[0], want / want.sum(-1, keepdims=True), rtol=2e-5, atol=1e-7)
    half = check_program(cls, "predict", [x, np.int32(3)], globals_in=files / "half.npz", globals_partial=True)
    assert half.passed and not np.allclose(half.outputs[0], report.outputs[0])
    code, lines, err = kiln(capsys, "check", f"{files}/net.py:Net", "-f", "predict", f"--input=@{files}/x.npy",
                            "--input=i32=3", f"--globals-in={files}/half.npz")
    assert code == 1 and lines == []
    assert err.splitlines() == [f"kiln: error: --globals-in: '{files}/half.npz' lacks 1 of the 2 globals of module "
                                f"'net': '_w2' (give every global, or pass partial=True to keep the others' values)"]
