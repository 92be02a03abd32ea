"""kiln.debug.print at run time inside compiled code: the VM's debug.print instruction (format 2.8).

The C runtime formats the values (runtime-c/src/debug_print.c); these tests hold its text to numpy's str()
and Python's format(), in kiln.jit (through kiln.vm, whose print sink is sys.stdout), inside loop and
branch bodies, under vmap and grad, and in an exported module run by kiln-run. The C API's callback is
tested by runtime-c/tests/test_debug_print.c.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import lax
from kiln.core.errors import TracingError
from kiln_tools import run_kiln_run


class _Pair:
    """A pytree that is not a container kiln.debug.print knows how to print."""

    def __init__(self, a, b):
        self.a, self.b = a, b


from kiln.core.pytree import register_pytree_node  # noqa: E402

register_pytree_node(_Pair, lambda p: ((p.a, p.b), None), lambda _, children: _Pair(*children))


def _arrays():
    rng = np.random.default_rng(0)
    out = []
    for dt in (np.float16, np.float32, np.float64):
        out += [np.array([1, 2, 3], dt), np.array([1.5, -2.25, 0], dt), np.array([1e-5, 1.0], dt),
                np.array([np.nan, 1.5, -np.inf], dt), np.array([0.1, 0.2, 0.3], dt), np.array([-0.0, 0.0], dt),
                (rng.standard_normal((3, 4)) * 1e4).astype(dt), rng.standard_normal((2, 3, 4)).astype(dt),
                np.array(0.1, dt), np.array(-3.0, dt), np.array(1e-7, dt), np.array(512.0, dt),
                np.array(2e4, dt), np.arange(2000, dtype=dt), rng.standard_normal((40, 50)).astype(dt),
                rng.standard_normal(30).astype(dt), np.zeros((0, 3), dt)]
    for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        info = np.iinfo(dt)
        out += [np.array([info.min, 0, info.max], dt), rng.integers(0, 100, (4, 5)).astype(dt), np.array(7, dt),
                np.arange(1500).astype(dt).reshape(30, 50)]
    out += [np.array([True, False]), np.array(True), rng.random((3, 3)) > 0.5, np.ones((10, 11, 12), bool),
            np.array([1, 2.5, 0.1, -3], ml_dtypes.bfloat16), np.array(0.1, ml_dtypes.bfloat16)]
    # format 2.9 (vmprintall checks more complex values against numpy)
    out += [np.array([1 + 2j, -0.5j, complex(np.nan, -np.inf)], np.complex64), np.array(0.1 + 0.2j, np.complex64),
            np.array(3j, np.complex128), (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4)) * 1e5)]
    return out


def test_arrays_print_as_numpy_str(capsys):
    """Every dtype kiln prints, 0-d (as Python formats the float or int, as in JAX) to 3-d, summarized past 1000 elements, wrapped at 75 columns, with
    nan/inf, negative zero, complex and empty arrays: the runtime's text is numpy's str(), and with !r, !s
    and !a numpy's repr(), str() and ascii() (format 2.9), line for line, on every call; eagerly,
    kiln.debug.print is Python's own formatting."""
    arrays = _arrays()

    def f(*xs):
        for i, x in enumerate(xs):
            if i % 15 == 0 or x.dtype.kind == "c":  # a sample: vmprintall checks every dtype's conversions
                kiln.debug.print("{} {!r}|{!s}|{!a}", x, x, x, x)
            else:
                kiln.debug.print("{}", x)
        return xs[0] + 1

    want = "".join(("{} {!r}|{!s}|{!a}\n" if i % 15 == 0 or a.dtype.kind == "c" else "{}\n").format(a, a, a, a)
                   for i, a in enumerate(arrays))  # str(a), repr(float(a)) of 0-d
    jf = kiln.jit(f)
    for _ in range(2):
        jf(*arrays)
        assert capsys.readouterr().out == want
    f(*arrays)
    assert capsys.readouterr().out == want


def test_format_specs_and_static_arguments(capsys):
    """{x:SPEC} formats a 0-d value as Python formats the float or int it converts to; arguments that are
    not traced are formatted at trace time; braces, names, positions and repeated fields."""
    def f(x, i, b, h):
        kiln.debug.print("{x:.3f}|{x:>10.2e}|{x:+g}|{x:08.2f}|{x:^9}|{x:<7}|{i:+05d}|{i:>4}|{i:.1f}|{b:d}|"
                         "{h:.4E}|{{braces}} {0} {n} {s!r} {i}", knp.sum(x), x=x[0], i=i, b=b, h=h, n=2.5, s="a")
        return x

    x = np.array([-1.23456, 2.0], np.float32)
    i, b, h = np.int32(-42), np.bool_(True), np.float16(0.1)
    args = (x, i, b, h)
    kiln.jit(f)(*args)
    xs = float(x[0])
    want = (f"{xs:.3f}|{xs:>10.2e}|{xs:+g}|{xs:08.2f}|{xs:^9}|{xs:<7}|{-42:+05d}|{-42:>4}|{-42:.1f}|{1:d}|"
            f"{float(h):.4E}|{{braces}} {np.sum(x)} 2.5 'a' -42\n")
    assert capsys.readouterr().out == want
    f(*args)  # eager: Python's formatting of the numpy values
    assert capsys.readouterr().out == want


def test_control_flow_vmap_and_grad(capsys):
    """Bodies of scan, while, fori_loop and cond print each time they run, in program order with the
    prints around them; vmap prints once per example (JAX unrolls it), grad prints the primal."""
    def loss(w):
        kiln.debug.print("w={}", w)
        return knp.sum(w * w)

    def f(x, n):
        kiln.debug.print("start {}", n)

        def step(c, row):
            kiln.debug.print("scan c={} row={}", c, row)
            return c + row, c

        c, ys = lax.scan(step, np.float32(0), x)

        def cond(s):
            return s[0] < n

        def body(s):
            kiln.debug.print("while {}", s[0])
            return s[0] + 1, s[1] * 2

        k, p = lax.while_loop(cond, body, (np.int32(0), np.float32(1)))
        q = lax.cond(c > 5, lambda v: (kiln.debug.print("big {}", v), v * 2)[1],
                     lambda v: (kiln.debug.print("small {}", v), v)[1], c)
        v = kiln.vmap(lambda r: (kiln.debug.print("row {}", r), r * 2)[1])(x.reshape(2, 2))
        g = kiln.grad(loss)(x)
        kiln.debug.print("end {} {}", p, k)
        return ys, q, v, g

    x, n = np.array([1, 2, 3, 4], np.float32), np.int32(3)
    want = ("start 3\nscan c=0.0 row=1.0\nscan c=1.0 row=2.0\nscan c=3.0 row=3.0\nscan c=6.0 row=4.0\n"
            "while 0\nwhile 1\nwhile 2\nbig 10.0\nrow [1. 2.]\nrow [3. 4.]\nw=[1. 2. 3. 4.]\nend 8.0 3\n")
    ys, q, v, g = kiln.jit(f)(x, n)
    np.testing.assert_allclose(np.asarray(ys), [0, 1, 3, 6])
    np.testing.assert_allclose(np.asarray(g), 2 * x)
    assert float(q) == 20.0
    assert capsys.readouterr().out == want
    f(x, n)  # eager: the same lines
    assert capsys.readouterr().out == want


def test_exported_module_prints_in_kiln_run(tmp_path, capsys):
    """An exported Program function prints from the C runtime alone: kiln-run writes the lines to its
    stdout, with a fori_loop body's values each iteration; kiln.vm writes them to sys.stdout."""
    from kiln import Program

    class Printer(Program, export_name="printer"):
        def run(self, x=Program.like(np.zeros((2, 3), np.float32)), n=Program.like(np.int32(0))):
            kiln.debug.print("x={} n={n:d}", x, n=n)
            kiln.debug.print('"quoted"\t\\ é')

            def body(i, c):
                kiln.debug.print("i={} c={:.2f}", i, c)
                return c * 2

            return lax.fori_loop(0, n, body, knp.sum(x))

    path = tmp_path / "printer.vmfb"
    Program.get_compiled_artifact(Printer).save(path)

    class Options(Program, export_name="options"):  # format 2.9: the options when exported, !r, a tuple
        def run(self, x=Program.like(np.zeros(3, np.complex64)), y=Program.like(np.zeros(2, np.float32))):
            kiln.debug.print("{} {!r} {t}", x, y, t=(y, x[0]))
            return y

    with np.printoptions(precision=2, sign="+", floatmode="fixed"):
        Program.get_compiled_artifact(Options).save(tmp_path / "options.vmfb")
        xo, yo = np.array([1 + 2j, complex(0, -0.5), 3], np.complex64), np.array([0.125, -3], np.float32)
        want = "{} {!r} {t}\n".format(xo, yo, t=(yo, np.asarray(xo[0])))  # a 0-d array, as JAX passes it
    proc = run_kiln_run(f"--module={tmp_path / 'options.vmfb'}", "--function=run", "--input=3xc64=1+2j,-0.5j,3",
                        "--input=2xf32=0.125,-3")
    assert proc.stdout.startswith(want), (proc.stdout, want)
    assert want == "[+1.00+2.00j +0.00-0.50j +3.00+0.00j] array([+0.12, -3.00], dtype=float32) " \
                   "(array([+0.12, -3.00], dtype=float32), array(+1.00+2.00j, dtype=complex64))\n"
    proc = run_kiln_run(f"--module={path}", "--function=run", "--input=2x3xf32=1,2,3,4,5,6", "--input=i32=3",
                        f"--output=@{tmp_path / 'y.npy'}")
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    assert proc.stdout.startswith(f"x={x} n=3\n\"quoted\"\t\\ é\ni=0 c=21.00\ni=1 c=42.00\ni=2 c=84.00\n"), proc.stdout
    assert float(np.load(tmp_path / "y.npy")) == 168.0
    # both disassemblers show the templates, the same way (escapes included)
    from kiln.vm.reader import dump_text

    native = [line.strip() for line in run_kiln_run(f"--module={path}", "--disassemble").stdout.splitlines()
              if "debug.print" in line]
    python = [line.strip() for line in dump_text(path.read_bytes()).splitlines() if "debug.print" in line]
    assert native == python and len(native) == 3
    assert any(line.endswith('; "\\"quoted\\"\\x09\\\\ \\xc3\\xa9"') for line in native), native
    assert any(line.endswith('; "x={0} n={1:d}"') for line in native), native
    # the same file through kiln.vm: the lines go to Python's sys.stdout
    from kiln.runtime_session import load_module

    context = load_module(path.read_bytes()).new_context()
    capsys.readouterr()
    assert float(context.invoke("run", [x, np.int32(2)])[0]) == 84.0
    assert capsys.readouterr().out == f"x={x} n=2\n\"quoted\"\t\\ é\ni=0 c=21.00\ni=1 c=42.00\n"


@pytest.mark.parametrize("fmt, kwargs, match", [
    ("{:.2f}", {"x": 0}, r"field \{0:.2f\} formats an array of shape \(3,\): a format spec applies to 0-d"),
    ("{i:x}", {"i": 1}, r"spec 'x' of \{i\} is not one kiln's runtime formats"),
    ("{s:,.2f}", {"s": 1}, r"spec ',.2f' of \{s\} is not one kiln's runtime formats"),
    ("{s:d}", {"s": 2}, r"spec 'd' of \{s\} \(float32\): Unknown format code 'd'"),
    ("{s!r:>9}", {"s": 1}, r"field \{s!r:>9\}: a spec after a conversion of a traced array is not supported"),
    ("{missing}", {"s": 1}, r"field \{missing\} names no argument"),
    ("{t:>5}", {"t": 3}, r"field \{t:>5\} formats a tuple: unsupported format string passed to tuple.__format__"),
    ("{g}", {"g": 5}, r"field \{g\} is a _Pair holding traced arrays: kiln prints tuples, lists, dicts and "
                      r"namedtuples of arrays"),
    ("{c:.2f}", {"c": 6}, r"field \{c:.2f\} is complex64: a format spec does not format complex values"),
    ("{", {"s": 1}, r"format '\{': Single '\{' encountered"),
])
def test_format_errors_name_the_line(fmt, kwargs, match):
    """Formats the runtime cannot print are refused when the function is traced, naming the print's line."""
    def f(x):
        values = {"x": x, "s": knp.sum(x), "t": (x, x), "c": knp.sum(x).astype(np.complex64),
                  "i": knp.sum(x).astype(np.int32), "g": _Pair(x, x)}
        args = [values[k] for k, v in kwargs.items() if v == 0]
        kiln.debug.print(fmt, *args, **{k: values[k] for k, v in kwargs.items() if v})  # the line named
        return x

    with pytest.raises(TracingError, match=match) as info:
        kiln.jit(f)(np.ones(3, np.float32))
    assert "test_debug_print.py:" in str(info.value)


def test_print_options_and_containers_print_as_numpy_and_python(capsys):
    """numpy's print options set when a print is traced are recorded in its template (format 2.9) and the
    runtime applies them (precision, floatmode, suppress, sign, threshold, edgeitems, linewidth) to str and
    repr; containers of arrays print as Python prints them (each array's repr), namedtuples and dicts
    (by sorted key, as pytrees flatten them) included: the compiled text equals the eager one. kiln.jit
    traces again when the options change, so its prints follow the current ones, as JAX's. Options the
    runtime does not apply warn."""
    import collections

    Point = collections.namedtuple("Point", "x y")

    def f(x, c):
        kiln.debug.print("{} {!r} | {t} | {d} | {p} | {c} {c!s} {n}", x, x, t=(x[:2], 1.5, "s"), n=c[0],
                         d={"w": x[0], "b": [c, None]}, p=Point(x[:1], x[1] * 2), c=c)
        return x

    x = np.array([1e-5, 1.5, -2.25, 1000.0, 0.1, 7.0], np.float32)
    c = np.array([1 + 2j, -0.5j], np.complex64)
    for options in ({}, {"precision": 3, "suppress": True, "sign": "+"}, {"floatmode": "fixed", "precision": 2},
                    {"threshold": 4, "edgeitems": 1, "linewidth": 30, "floatmode": "unique", "sign": " "}):
        with np.printoptions(**options):
            kiln.jit(f)(x, c)
            compiled = capsys.readouterr().out
            f(x, c)
            assert compiled == capsys.readouterr().out, options
    assert compiled.startswith("[ 1.e-05 ...  7.e+00] array([ 1.e-05, ...,  7.e+00],\n      shape=(6,), "
                               "dtype=float32) | (array([ 1.0e-05,  1.5e+00],")  # summarized, wrapped at 30

    # kiln.jit follows numpy's options at each call (it traces again when they changed), in a nested jit too
    g = kiln.jit(lambda v: (kiln.debug.print("{}", v), v + 1)[1])
    outer = kiln.jit(lambda v: g(v) * 2)
    v = np.array([1.123456789, -2.0], np.float32)
    g(v)
    with np.printoptions(precision=2):
        g(v)
        g(v)
        outer(v)
    outer(v)
    g(v)
    assert capsys.readouterr().out == ("[ 1.1234568 -2.       ]\n" + "[ 1.12 -2.  ]\n" * 3 +
                                       "[ 1.1234568 -2.       ]\n" * 2)
    assert g.trace_count == 3 and outer.trace_count == 2

    with np.printoptions(nanstr="NaN", precision=3):
        with pytest.warns(UserWarning, match=r"applies numpy's print options precision, threshold, edgeitems, "
                                             r"linewidth, suppress, sign and floatmode; the ones set now "
                                             r"\(nanstr='NaN'\) are not applied"):
            text = kiln.jit(f).lower(x, c)
    assert "{!options precision=3}" in text


def test_callback_runs_in_program_order_and_is_never_exported(capsys):
    """kiln.debug.callback calls Python at run time (the VM's debug.callback) with numpy copies, in program
    order with the prints, once per loop iteration and per vmapped example; its exception stops the call
    and is raised; an exported module cannot hold one (refused naming the callback's line)."""
    from kiln import Program

    def seen(i, c, tag):
        print(f"callback {int(i)} {c.tolist()} {c.dtype} {tag}")

    def f(x):
        kiln.debug.print("start")

        def body(i, c):
            kiln.debug.callback(seen, i, c, tag="t")
            kiln.debug.print("print {}", i)
            return c * 2

        kiln.vmap(lambda r: kiln.debug.callback(seen, 9, r, "v"))(x.reshape(2, 1))
        return lax.fori_loop(0, 2, body, x)

    want = ("start\ncallback 9 [1.0] float32 v\ncallback 9 [1.0] float32 v\ncallback 0 [1.0, 1.0] float32 t\n"
            "print 0\ncallback 1 [2.0, 2.0] float32 t\nprint 1\n")
    np.testing.assert_allclose(np.asarray(kiln.jit(f)(np.ones(2, np.float32))), [4.0, 4.0])
    assert capsys.readouterr().out == want

    def boom(v):
        raise ValueError(f"boom {v}")

    with pytest.raises(ValueError, match="boom 2.0") as info:
        kiln.jit(lambda x: (kiln.debug.callback(boom, x), x + 1)[1])(np.float32(2))
    assert "the host callback stopped the call" in str(info.value.__cause__)

    class Calls(Program, export_name="calls"):
        def run(self, x=Program.like(np.zeros(2, np.float32))):
            kiln.debug.callback(seen, 0, x, "p")
            return x + 1

    calls = Calls()
    np.testing.assert_allclose(np.asarray(calls.run(np.ones(2, np.float32))), [2.0, 2.0])  # in process: fine
    assert capsys.readouterr().out == "callback 0 [1.0, 1.0] float32 p\n"
    with pytest.raises(TypeError, match=r"Calls calls back into Python \(kiln.debug.callback\(.*seen\) at "
                                        r".*test_debug_print.py:\d+.*\): an exported module runs without Python"):
        Program.get_compiled_artifact(calls)


def test_prints_are_kept_where_nothing_uses_their_values(capsys):
    """A print is a side effect: kept in a loop whose result is unused, in a cond with no outputs, in a
    nested jit with no outputs, twice when written twice (never merged), in a jitted gradient, and at every
    call when it prints no traced value."""
    def f(x):
        def body(i, c):
            kiln.debug.print("c {}", c)
            return c + 1

        lax.fori_loop(0, 2, body, x)
        lax.cond(x > 0, lambda v: kiln.debug.print("pos {}", v), lambda v: kiln.debug.print("neg {}", v), x)
        kiln.jit(lambda y: kiln.debug.print("inner {}", y))(x * 3)
        kiln.debug.print("dup {}", x)
        kiln.debug.print("dup {}", x)
        return x * 2

    assert float(kiln.jit(f)(np.float32(1.5))) == 3.0
    assert float(kiln.jit(kiln.grad(lambda x: (kiln.debug.print("g {}", x), x * x)[1]))(np.float32(3))) == 6.0
    assert capsys.readouterr().out == "c 1.5\nc 2.5\npos 1.5\ninner 4.5\ndup 1.5\ndup 1.5\ng 3.0\n"
    step = kiln.jit(lambda x: (kiln.debug.print("step {}", 7), x + 1)[1])  # no traced value: staged too,
    step(1.0)                                                              # as JAX prints it at every call
    step(1.0)
    assert capsys.readouterr().out == "step 7\nstep 7\n"


def test_runtime_text_of_every_dtype_and_spec_is_numpys(capsys):
    """The C formatter alone, no tracing: runtime-c/tests/gen_vm_test_modules.py's vmprintall module
    (also a fuzz seed) prints every dtype 0-d to 3-d, empty, summarized, wrapped and exponent-format
    arrays, every spec kind on every 0-d dtype (u64 with '+' and ' ' signs), escaped braces, NUL and
    non-UTF-8 bytes and empty templates; each line equals numpy's str() / Python's format()."""
    import importlib.util
    from pathlib import Path

    from kiln.vm import runtime
    from kiln.vm.writer import serialize
    path = Path(__file__).resolve().parent.parent / "runtime-c" / "tests" / "gen_vm_test_modules.py"
    spec = importlib.util.spec_from_file_location("gen_vm_test_modules", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    module_spec, expected = gen.printing_all()
    context = runtime.Context(runtime.Module.from_bytes(runtime.Instance(), serialize(module_spec)))
    for k, text in enumerate(expected):
        context.invoke(f"p{k}")
        assert capsys.readouterr().out == text.decode("utf-8", "replace"), f"p{k}"
    # a format 2.8 module (templates without 2.9's fields) loads and prints as it did
    old = runtime.Context(runtime.Module.from_bytes(runtime.Instance(), serialize(gen.printing(), version=(2, 8))))
    old.invoke("complex_array")
    assert capsys.readouterr().out == "[1.+2.j]\n"
    assert [int(v) for v in old.invoke("show", [np.arange(6, dtype=np.float32).reshape(2, 3), np.int64(-3)])] == [-3]
    assert capsys.readouterr().out == ("x = [[0. 1. 2.]\n [3. 4. 5.]], n = -0003 {literal}\n"
                                       "n= -3.00 flag=True [[0. 1. 2.]\n [3. 4. 5.]]|end\n")


def test_callback_numbers_are_freed_with_what_holds_them(capsys):
    """A debug.callback's number lives as long as what holds it (the traced graph of a kiln.jit cache entry, a
    Program's compiled module): many traces and compiles dropped leave no registered function behind, even
    when the callback closes over the traced values (a cycle through the graph); numbers are not reused."""
    import gc

    from kiln.vm import runtime

    def f(x):
        kiln.debug.callback(lambda v: print("seen", v, x.shape), x)  # refers to its own graph's tracer
        return x + 1

    kept = kiln.jit(f)
    kept(np.float32(1))
    gc.collect()
    before = len(runtime._HOST_CALLBACKS)
    numbers = []
    for i in range(16):  # traces (where a number is taken), and a few compiled and called
        jf = kiln.jit(f)
        jf.lower(np.float32(i))
        if i % 8 == 0:
            jf(np.float32(i))
        numbers.append(max(runtime._HOST_CALLBACKS))
    del jf
    gc.collect()
    assert len(runtime._HOST_CALLBACKS) == before
    assert all(runtime.host_callback(n) is None for n in numbers) and sorted(set(numbers)) == numbers
    kept(np.float32(2))  # the live cache entry's number still calls its function
    assert capsys.readouterr().out == "seen 1.0 ()\nseen 0.0 ()\nseen 8.0 ()\nseen 2.0 ()\n"
    def program():  # a Program's compiled module holds its numbers: freed with the class
        class Calls(kiln.Program, export_name="calls"):
            def run(self, x=kiln.Program.like(np.zeros(2, np.float32))):
                kiln.debug.callback(lambda v: print("program", v), x)
                return x + 1

        Calls().run(np.ones(2, np.float32))
        return len(runtime._HOST_CALLBACKS)

    assert program() == before + 1
    gc.collect()
    assert len(runtime._HOST_CALLBACKS) == before
    assert capsys.readouterr().out == "program [1. 1.]\n"
    number = runtime.register_host_callback(print)
    value = int(number)
    assert runtime.host_callback(value) is print
    del number
    assert runtime.host_callback(value) is None


def test_callbacks_call_compiled_code_again(capsys):
    """A Python host callback may call compiled code again (docs/vm.md): another jitted function (its own
    context), the same jitted function (the same context, re-entered on the calling thread) and another method
    of the Program instance whose call is running; the nested calls' prints come out inside the callback, in
    order; a nested call's exception stops the outer call and is raised by it; closing the context from its
    own callback is refused."""
    from kiln import Program

    other = kiln.jit(lambda y: (kiln.debug.print("other {}", y), y * 10)[1])

    def again(v):
        print(f"cb {v} -> {float(other(v))}")
        if v < 100:
            print(f"same -> {float(f(v + 100))}")

    f = kiln.jit(lambda x: (kiln.debug.callback(again, x), kiln.debug.print("after {}", x), x + 1)[2])
    assert float(f(np.float32(1))) == 2.0
    assert capsys.readouterr().out == ("other 1.0\ncb 1.0 -> 10.0\nother 101.0\ncb 101.0 -> 1010.0\nafter 101.0\n"
                                       "same -> 102.0\nafter 1.0\n")

    def boom(v):
        raise ValueError(f"inner {v}")

    inner = kiln.jit(lambda y: (kiln.debug.callback(boom, y), y)[1])
    outer = kiln.jit(lambda x: (kiln.debug.callback(lambda v: inner(v * 2), x), x + 1)[1])
    with pytest.raises(ValueError, match=r"inner 6.0"):
        outer(np.float32(3))
    assert float(f(np.float32(200))) == 201.0  # the contexts are usable after it
    capsys.readouterr()

    class Counter(Program, export_name="counter"):
        _count = Program.export_global(np.int32(0), mutable=True)

        def bump(self, x=Program.like(np.float32(0))):
            self._count = self._count + 1
            kiln.debug.callback(lambda v, c: instance_hook(v, c), x, self._count)
            return x + 1

        def count(self):
            return self._count

    def instance_hook(v, c):
        print(f"bump {v} count={int(c)} stored={int(counter.count())}")
        if v < 1:
            print(f"nested -> {float(counter.bump(np.float32(5)))}")
        if v == 7:
            counter._kiln_context.close()

    counter = Counter()
    assert float(counter.bump(np.float32(0))) == 1.0
    assert int(counter.count()) == 2
    assert capsys.readouterr().out == "bump 0.0 count=1 stored=1\nbump 5.0 count=2 stored=2\nnested -> 6.0\n"
    with pytest.raises(RuntimeError, match=r"Context.close: a call is running on this context"):
        counter.bump(np.float32(7))
    assert int(counter.count()) == 3  # the context still works
