"""Planned memory (issue 10 §2): a function's kernel-only intermediates share one arena, planned at
export (compiler/memory_plan.py), which the context allocates once and every call reuses
(alloc.transient, Function.transient_size, format 2.2). Planned modules must compute exactly what
unplanned ones do; the runtime refuses to let arena memory escape a call."""
import re

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import Program
from kiln.compiler.fusion import partition
from kiln.compiler.memory_plan import ALIGNMENT, _intervals, plan_transients, planning_disabled
from kiln.compiler.pipeline import prepare_graph
from kiln.core.aval import ShapedArray
from kiln.core.trace import trace_to_graph
from kiln.vm.isa import Instr
from kiln.vm.module_spec import GlobalSpec, ModuleSpec, TensorType
from kiln.vm.runtime import Context, Instance, KilnRuntimeError, Module
from kiln.vm.writer import serialize
from vm_specs import fn

RNG = np.random.default_rng(0)
F32 = np.dtype(np.float32)


def softmax(x):
    e = knp.exp(x - knp.max(x, axis=1, keepdims=True))
    return e / knp.sum(e, axis=1, keepdims=True)


def layernorm(x):
    m = knp.mean(x, axis=1, keepdims=True)
    c = x - m
    return c / knp.sqrt(knp.mean(c * c, axis=1, keepdims=True) + 1e-5)


def mlp_grad(x, w1, w2):
    def loss(w1, w2):
        h = knp.tanh(x @ w1)
        return knp.sum(knp.maximum(h @ w2, 0.0) ** 2)
    return kiln.grad(loss, argnums=(0, 1))(w1, w2)


def chain(x):
    for k in range(6):
        x = knp.sin(x) @ knp.eye(x.shape[1], dtype=x.dtype) + knp.sum(x, axis=0) * (0.1 * k)
    return x


CASES = {
    "softmax": (softmax, (RNG.standard_normal((16, 32)).astype(F32),)),
    "layernorm": (layernorm, (RNG.standard_normal((16, 32)).astype(F32),)),
    "mlp_grad": (mlp_grad, (RNG.standard_normal((8, 16)).astype(F32), RNG.standard_normal((16, 12)).astype(F32),
                            RNG.standard_normal((12, 4)).astype(F32))),
    "chain": (chain, (RNG.standard_normal((8, 8)).astype(F32),)),
}


def _graph_of(f, args):
    return prepare_graph(trace_to_graph(lambda *a: list(kiln.tree_util.tree_leaves(f(*a))),
                                        [ShapedArray(a.shape, a.dtype) for a in args]))


def plan_of(f, args):
    graph = _graph_of(f, args)
    steps = partition(graph).steps
    return _intervals(graph, steps), plan_transients(graph, steps)


@pytest.mark.parametrize("name", CASES)
def test_live_buffers_never_share_memory(name):
    intervals, plan = plan_of(*CASES[name])
    assert set(plan.offsets) == set(intervals)
    if name in ("mlp_grad", "chain"):  # (softmax and layernorm may fuse into kernels without intermediates)
        assert intervals
    placed = []
    for vid, (first, last, nbytes) in intervals.items():
        offset = plan.offsets[vid]
        assert offset % ALIGNMENT == 0 and offset + nbytes <= plan.size
        placed.append((first, last, offset, offset + nbytes))
    for i, (f1, l1, o1, e1) in enumerate(placed):
        for f2, l2, o2, e2 in placed[i + 1:]:
            if f1 <= l2 and f2 <= l1:  # both alive at some step: disjoint memory
                assert e1 <= o2 or e2 <= o1
    assert plan.size % ALIGNMENT == 0


def test_dead_intermediates_are_reused():
    intervals, plan = plan_of(*CASES["chain"])
    total = sum(-(-n // ALIGNMENT) * ALIGNMENT for _, _, n in intervals.values())
    assert plan.size < total


def test_packing_reaches_the_live_bytes_where_largest_first_does_not():
    """_pack keeps the best of several greedy orders (largest first, largest area, longest lifetime):
    a case where largest first (the one order before) packs 512 bytes while at most 448 are alive at
    one step, which the packing now reaches; and on random lifetimes the packing is never larger than
    largest first, never smaller than the bytes alive at one step, and keeps live intervals apart."""
    from kiln.compiler.memory_plan import _live_bound, _pack, _pack_in_order

    def largest_first(iv):
        return _pack_in_order(iv, sorted(iv, key=lambda k: (-iv[k][2], iv[k][0], str(k))))[1]

    case = {"a": (3, 5, 128), "b": (3, 3, 192), "c": (0, 1, 256), "d": (1, 4, 128)}
    assert (largest_first(case), _live_bound(case), _pack(case)[1]) == (512, 448, 448)
    rng = np.random.default_rng(5)
    better = 0
    for _ in range(300):
        iv = {}
        for k in range(int(rng.integers(2, 12))):
            first = int(rng.integers(0, 10))
            iv[k] = (first, first + int(rng.integers(0, 5)), int(rng.integers(1, 300)))
        offsets, size = _pack(iv)
        assert _live_bound(iv) <= size <= largest_first(iv)
        better += size < largest_first(iv)
        for a, (f1, l1, n1) in iv.items():
            assert offsets[a] % ALIGNMENT == 0 and offsets[a] + n1 <= size
            for b, (f2, l2, n2) in iv.items():
                if a != b and f1 <= l2 and f2 <= l1:
                    assert offsets[a] + n1 <= offsets[b] or offsets[b] + n2 <= offsets[a]
    assert better > 0


def test_planning_disabled_plans_nothing():
    with planning_disabled():
        _, plan = plan_of(*CASES["softmax"])
    assert plan.offsets == {} and plan.size == 0


def _random_program(seed):
    """A random DAG of elementwise ops, row reductions and matmuls over two 12x12 inputs."""
    rng = np.random.default_rng(seed)

    def f(a, b):
        return _three_of(rng, _random_dag(rng, [a, b], int(rng.integers(4, 14)), kinds=6))

    return f


def _three_of(rng, values):
    """Three of the values (all, if fewer), as a program's results."""
    picks = rng.choice(len(values), size=min(3, len(values)), replace=False)
    return tuple(values[int(i)] for i in picks)


def _assert_planned_agrees(program_of_seed, seed, *args):
    """The planned module of program_of_seed(seed) computes what the unplanned one does, bit for bit, on
    each of three calls (every call reuses the arena the first one allocated)."""
    planned = kiln.jit(program_of_seed(seed))
    with planning_disabled():
        reference = [np.asarray(r) for r in kiln.jit(program_of_seed(seed))(*args)]
    for _ in range(3):
        for got, want in zip(planned(*args), reference):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(12))
def test_planned_and_unplanned_modules_agree_bit_for_bit(seed):
    a, b = (np.random.default_rng(100 + seed).standard_normal((12, 12)).astype(F32) for _ in range(2))
    _assert_planned_agrees(_random_program, seed, a, b)


def _random_dag(rng, values, steps, kinds=8):
    """Appends `steps` random ops (elementwise, row reductions, matmuls, transposes) over `values`
    (square float32 matrices of one size) and returns the new values; the ops are of the first `kinds`
    kinds (six: no sin, no sort)."""
    for _ in range(steps):
        x, y = (values[int(i)] for i in rng.integers(0, len(values), 2))
        op = int(rng.integers(0, kinds))
        if op == 0:
            z = knp.tanh(x) * y
        elif op == 1:
            s = knp.sort(values[int(rng.integers(0, len(values)))], axis=1)  # a kernel output dead after z
            z = x @ y * 0.1 + s  # the product accumulated in its one output, written over s
        elif op == 2:
            z = x - knp.max(y, axis=1, keepdims=True)
        elif op == 3:
            z = knp.exp(-knp.abs(x)) + knp.sum(y, axis=0)
        elif op == 4:
            z = knp.where(x > y, x, y * 0.5)
        elif op == 5:
            z = x.T + y
        elif op == 6:
            z = knp.sin(x) * 0.5  # one reader: a candidate for writing in place
        else:
            z = knp.tanh(knp.sort(x, axis=1)) * y  # the sort kernel's output, dead after the product
        values.append(z)
    return values


def _random_looped_program(seed):
    """A random DAG whose values also pass through fori_loop, scan and cond bodies that are random
    DAGs themselves (their intermediates are planned in the function's arena too)."""
    rng = np.random.default_rng(seed)
    plan = [int(k) for k in rng.integers(0, 4, 3)]
    sizes = [int(n) for n in rng.integers(2, 7, 8)]

    def f(a, b):
        values = _random_dag(rng_f := np.random.default_rng(seed + 1000), [a, b], sizes[0])
        for k, kind in enumerate(plan):
            x, y = values[-1], values[int(rng_f.integers(0, len(values)))]
            keep = values[-2] @ values[-1] * 0.1  # a kernel's output alive across the control flow
            body_seed = seed * 10 + k
            if kind == 0:
                def body(i, c, y=y, body_seed=body_seed):
                    vs = _random_dag(np.random.default_rng(body_seed), [c, y], sizes[k + 1])
                    return knp.tanh(vs[-1] + vs[-2] * 0.5)
                values.append(kiln.lax.fori_loop(0, 3, body, x))
            elif kind == 1:
                def step(c, row, body_seed=body_seed):
                    vs = _random_dag(np.random.default_rng(body_seed), [c, c * row], sizes[k + 1])
                    return knp.tanh(vs[-1]), knp.sum(vs[-2], axis=0)
                carry, ys = kiln.lax.scan(step, x, y)
                values += [carry, ys]
            elif kind == 2:
                def yes(u, v, body_seed=body_seed):
                    return _random_dag(np.random.default_rng(body_seed), [u, v], sizes[k + 1])[-1]

                def no(u, v, body_seed=body_seed):
                    return _random_dag(np.random.default_rng(body_seed + 1), [v, u], sizes[k + 2])[-1]
                values.append(kiln.lax.cond(knp.sum(x) > knp.sum(y), yes, no, x, y))
            else:
                values = _random_dag(rng_f, values, sizes[k + 1])
            values.append(values[-1] + keep)
        return _three_of(rng, values)

    return f


@pytest.mark.parametrize("seed", range(8))
def test_planned_and_unplanned_looped_modules_agree_bit_for_bit(seed):
    a, b = (np.random.default_rng(200 + seed).standard_normal((8, 8)).astype(F32) for _ in range(2))
    _assert_planned_agrees(_random_looped_program, seed, a, b)


@pytest.mark.parametrize("name", CASES)
def test_cases_agree_with_unplanned_and_eager(name):
    f, args = CASES[name]
    planned = kiln.tree_util.tree_leaves(kiln.jit(f)(*args))
    with planning_disabled():
        unplanned = kiln.tree_util.tree_leaves(kiln.jit(f)(*args))
    with kiln.disable_jit():
        eager = kiln.tree_util.tree_leaves(f(*args))
    for p, u, e in zip(planned, unplanned, eager):
        np.testing.assert_array_equal(p, u)
        np.testing.assert_allclose(p, e, rtol=2e-5, atol=1e-5)


def _chain_module(export_name):
    """CASES["chain"] exported as a Program's function `run`: its module's bytes."""
    x = CASES["chain"][1][0]

    class Chain(Program, export_name=export_name):
        def run(self, x=Program.like(x)):
            return chain(x)

    return Program.get_compiled_artifact(Chain).bytes


def test_exported_function_reports_its_transient_memory(tmp_path):
    x = CASES["chain"][1][0]
    data = _chain_module("chain_plan")
    (info,) = Module.from_bytes(Instance(), data).functions
    size = _schedule_of(chain, (x,)).arena_size
    assert info.transient_size == size > 0
    from kiln.vm.reader import dump_text
    assert f"transient memory: {size} bytes" in dump_text(data)
    from runtime_tools import run
    from kiln.vm._native import kiln_run_path
    path = tmp_path / "m.vmfb"
    path.write_bytes(data)
    listing = run(kiln_run_path(), f"--module={path}", "--list").stdout
    assert f") -> (8x8xf32)\n    transient memory: {size} bytes\n" in listing
    # --caller-transient: kiln-run gives the function an arena of its own memory
    # (kiln_context_set_transient_storage); the results are the same
    np.save(tmp_path / "x.npy", x)
    args = (f"--module={path}", "--function=run", f"--input=@{tmp_path / 'x.npy'}", "--benchmark=3",
            "--print_statistics", "--workers=1")
    for flags, y in (((), "y0.npy"), (("--caller-transient",), "y1.npy")):
        out = run(kiln_run_path(), *args, *flags, f"--output=@{tmp_path / y}").stdout
        assert (f"transient memory: {size} bytes, kiln-run's own (--caller-transient)" in out) == bool(flags)
    np.testing.assert_array_equal(np.load(tmp_path / "y1.npy"), np.load(tmp_path / "y0.npy"))
    np.testing.assert_allclose(np.load(tmp_path / "y1.npy"), np.asarray(kiln.jit(chain)(x)), rtol=1e-5, atol=1e-6)
    proc = run(kiln_run_path(), f"--module={path}", "--list", "--caller-transient", check=False)
    assert proc.returncode == 2 and "--caller-transient needs --function=NAME" in proc.stderr


F2 = TensorType("f32", (2,))
F0 = TensorType("f32", ())


def _module(code, results, transient_size, globals_=()):
    f = fn("f", [], results, code)
    f.transient_size = transient_size
    return ModuleSpec("arena", functions=[f], globals=list(globals_))


def test_a_function_may_not_return_arena_memory():
    spec = _module([Instr("alloc.transient", 0, F2, 0), Instr("ret", [0])], [("y", F2)], 64)
    ctx = Context(Module.from_bytes(Instance(), serialize(spec)))
    with pytest.raises(KilnRuntimeError, match="lies in the function's transient arena, which the next call "
                                               "reuses: a function may not return it"):
        ctx.invoke("f", [])


def test_a_global_stores_a_copy_of_arena_memory():
    spec = _module([Instr("alloc.transient", 0, F2, 0),
                    Instr("global.store", 0, 0),
                    Instr("i.const", 0, 0), Instr("i.const", 1, 7),
                    Instr("i.store", 1, 1, F0),
                    Instr("buffer.set_row", 0, 0, 1),  # writes into the arena after the store
                    Instr("ret", [])], [], 64,
                   [GlobalSpec("g", F2, True, np.full(2, 5, np.float32))])
    ctx = Context(Module.from_bytes(Instance(), serialize(spec)))
    ctx.invoke("f", [])
    ctx.invoke("f", [])
    np.testing.assert_array_equal(ctx.get_global("g"), [0.0, 0.0])  # the unwritten buffer read as zeros


def test_arena_bounds_are_checked_when_writing_and_loading():
    spec = _module([Instr("alloc.transient", 0, F2, 64), Instr("ret", [])], [], 64)
    with pytest.raises(Exception, match="lie outside the function's 64-byte transient arena"):
        serialize(spec)
    with pytest.raises(KilnRuntimeError, match="alloc.transient of 8 bytes at offset 64 does not lie in the "
                                               "function's 64-byte transient arena"):
        Module.from_bytes(Instance(), serialize(spec, check=False))
    misaligned = _module([Instr("alloc.transient", 0, F2, 8), Instr("ret", [])], [], 64)
    with pytest.raises(KilnRuntimeError, match="at offset 8 does not lie"):
        Module.from_bytes(Instance(), serialize(misaligned, check=False))
    odd_size = _module([Instr("ret", [])], [], 100)
    with pytest.raises(KilnRuntimeError, match="transient_size 100 is not a multiple of 64"):
        Module.from_bytes(Instance(), serialize(odd_size, check=False))


def _invoke_host(ctx, name, args, destinations):
    """kiln_context_invoke_host with the caller's own argument memory and result destinations."""
    import ctypes

    from kiln.vm._clib import _HostBuffer, _check, _lib
    from kiln.vm._convert import _views

    fn, _ = ctx._reflection.resolve(name)
    hargs = (_HostBuffer * len(args))(*[_HostBuffer(a.ctypes.data, a.nbytes, None) for a in args])
    hres = (_HostBuffer * len(destinations))(*[_HostBuffer(d.ctypes.data, d.nbytes, None) for d in destinations])
    views = _views(len(destinations))
    _check(_lib().kiln_context_invoke_host(ctypes.c_void_p(ctx._ptr), fn, hargs, len(args), hres, views,
                                            len(destinations)))
    assert all(not v for v in views)  # every result went to its destination


def _reverse_scaled_module():
    x = np.zeros(64, np.float32)

    class Reverse(Program, export_name="reverse_scaled"):
        def run(self, x=Program.like(x)):
            return knp.flip(x) * 2.0 + 1.0

    return Program.get_compiled_artifact(Reverse).bytes


def test_results_are_written_into_the_callers_destination():
    data = _reverse_scaled_module()
    from kiln.vm.reader import dump_text
    assert "alloc.result" in dump_text(data)
    ctx = Context(Module.from_bytes(Instance(), data))
    x = np.arange(64, dtype=np.float32)
    out = np.full(64, np.nan, np.float32)
    for _ in range(2):
        _invoke_host(ctx, "run", [x], [out])
        np.testing.assert_array_equal(out, x[::-1] * 2 + 1)
    np.testing.assert_array_equal(ctx.invoke("run", [x])[0], x[::-1] * 2 + 1)


def test_a_destination_overlapping_an_argument_is_written_after_the_kernel():
    """The kernel reads x backwards: had it written into x's own memory it would have read its own
    output; the runtime gives it a buffer of its own and copies the result into the destination."""
    ctx = Context(Module.from_bytes(Instance(), _reverse_scaled_module()))
    x = np.arange(64, dtype=np.float32)
    want = x[::-1] * 2 + 1
    _invoke_host(ctx, "run", [x], [x])
    np.testing.assert_array_equal(x, want)
    y = np.arange(65, dtype=np.float32)  # destination overlapping the argument at an offset
    arg, dest = y[:64], y[1:]
    want = arg[::-1] * 2 + 1
    _invoke_host(ctx, "run", [arg], [dest])
    np.testing.assert_array_equal(dest, want)


def test_alloc_result_must_name_a_result_of_its_type():
    spec = _module([Instr("alloc.result", 0, F2, 1), Instr("ret", [0])], [("y", F2)], 0)
    with pytest.raises(Exception, match="alloc.result 1 of type 2xf32 is not one of the function's 1 results"):
        serialize(spec)
    with pytest.raises(KilnRuntimeError, match="alloc.result 1 of type 0 is not one of the function's 1 results"):
        Module.from_bytes(Instance(), serialize(spec, check=False))
    wrong_type = _module([Instr("alloc.result", 0, F0, 0), Instr("ret", [0])], [("y", F2)], 0)
    with pytest.raises(KilnRuntimeError, match="alloc.result 0 of type 1 is not one of the function's 1 results"):
        Module.from_bytes(Instance(), serialize(wrong_type, check=False))


class _Looped(Program, export_name="looped_schedule"):
    _g = Program.export_global(np.zeros((8, 8), np.float32), mutable=True)

    def run(self, x=Program.like(np.zeros((8, 8), np.float32))):
        def body(i, c):
            return knp.tanh(knp.sin(c) @ c) * 0.25 + 1.0
        y = kiln.lax.fori_loop(0, 3, body, x)
        self._g = self._g * 0.5 + y
        return knp.exp(knp.sin(y) @ y * 0.1) * 2.0


def test_schedule_prints_buffers_and_ops_and_bytecode_follows_it():
    """The schedule (compiler/schedule.py) names every buffer's kind and lifetime and every op's reads
    and writes; the bytecode places exactly its transients and results."""
    _, result = _Looped._kiln_compile()
    schedule = result.schedules["run"]
    text = result.schedule_text()
    assert text.startswith(f"schedule run: {len(schedule.ops)} ops, arena {schedule.arena_size} bytes")
    for kind in ("argument", "global", "transient", "result", "dest"):
        assert f" {kind} " in text, kind
    assert " heap " not in text  # the loop's carries rotate through two planned buffers
    assert "host scan (carry 0: spare @ " in text and "schedule body:" in text and "host global_store[slot=0]" in text
    assert "dispatch dot_general" in text and "-> result 0" in text
    (fn,) = result.spec.functions
    assert fn.transient_size == schedule.arena_size > 0
    placed = sorted(i.operands[2] for i in fn.code if isinstance(i, Instr) and i.op == "alloc.transient")

    def offsets(s):
        yield from (b.offset for b in s.buffers.values() if b.kind == "transient")
        for op in s.ops:
            yield from getattr(op, "spares", {}).values()
            for _, body in getattr(op, "bodies", ()):
                yield from offsets(body)
    assert placed == sorted(offsets(schedule))
    assert sum(1 for i in fn.code if isinstance(i, Instr) and i.op == "alloc.result") == 1


def _schedule_of(f, args):
    from kiln.compiler.schedule import build_schedule
    graph = _graph_of(f, args)
    plans = {}

    def plan_for(g):
        if id(g) not in plans:
            plans[id(g)] = partition(g)
        return plans[id(g)]
    return build_schedule(graph, plan_for)


def _buffers(schedule, depth=0):
    """(buffer, depth) of every buffer of a schedule (depth 0) and of its ops' bodies, nested."""
    found = [(b, depth) for b in schedule.buffers.values()]
    for op in schedule.ops:
        for _, body in getattr(op, "bodies", ()):
            found += _buffers(body, depth + 1)
    return found


def _body_transients(schedule):
    """(buffer, depth) of every transient of a schedule and its bodies."""
    return [(b, depth) for b, depth in _buffers(schedule) if b.kind == "transient"]


def test_random_looped_programs_plan_their_bodies():
    a = np.zeros((8, 8), F32)
    nested = 0
    for seed in range(8):
        schedule = _schedule_of(_random_looped_program(seed), (a, a))
        found = _body_transients(schedule)
        nested += sum(1 for _, depth in found if depth > 0)
        assert all(b.offset % ALIGNMENT == 0 and b.offset + b.type.byte_size <= schedule.arena_size
                   for b, _ in found)
    assert nested >= 8


def _aligned_bytes(n, offset=0):
    raw = np.zeros(n + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start:start + n]


def test_caller_storage_is_the_arena():
    """Context.set_transient_storage (kiln_context_set_transient_storage): the calls use the
    caller's memory as the function's arena, compute what the context's own arena computes, and
    the errors name the function and what was wrong."""
    x = CASES["chain"][1][0]
    f = kiln.jit(chain)
    want = np.asarray(f(x))
    module = Module.from_bytes(Instance(), _chain_module("chain_storage"))
    ctx = Context(module)
    (info,) = module.functions
    size = info.transient_size
    storage = _aligned_bytes(size)
    storage[:] = 0xAB
    ctx.set_transient_storage("run", storage)
    for _ in range(2):
        np.testing.assert_array_equal(ctx.invoke("run", [x])[0], want)
    assert (storage != 0xAB).any()  # the kernels' intermediates went there
    with pytest.raises(KilnRuntimeError, match=f"'run' needs {size} bytes of transient storage, got {size - 64}"):
        ctx.set_transient_storage("run", storage[:size - 64])
    with pytest.raises(KilnRuntimeError, match="'run': storage at 0x[0-9a-f]+ is not aligned to 64 bytes"):
        ctx.set_transient_storage("run", _aligned_bytes(size, 8))
    with pytest.raises(ValueError, match="storage must be a writable C-contiguous numpy array"):
        ctx.set_transient_storage("run", storage[::2])
    ctx.set_transient_storage("run", None)
    storage[:] = 0xAB
    np.testing.assert_array_equal(ctx.invoke("run", [x])[0], want)
    assert (storage == 0xAB).all()  # its own arena again


def _inplace_chain(x, w):
    h = knp.sort(x, axis=-1)  # a kernel's output (transient; x @ w would take tanh(h) * 2 as its epilogue)
    g = knp.tanh(h) * 2.0     # elementwise, h's last reader: written over h
    return (g @ w) - 1.0


def _transposed_read(x, w):
    h = x @ w
    g = knp.tanh(h) + h.T   # reads h at another element than it writes: never in place
    return g @ w


def _overwrites(schedule):
    return [b for b, _ in _buffers(schedule) if b.overwrites is not None]


def test_elementwise_output_is_written_over_its_dead_input():
    x, w = (np.random.default_rng(7).standard_normal((16, 16)).astype(F32) for _ in range(2))
    schedule = _schedule_of(_inplace_chain, (x, w))
    (g,) = _overwrites(schedule)
    h = schedule.buffers[g.overwrites]
    assert g.offset == h.offset and h.kind == g.kind == "transient" and h.last == g.first
    (op,) = [op for op in schedule.ops if getattr(op, "inplace", None)]
    assert op.inplace == {0: 0}
    assert f"(in place over %{h.var.id})" in schedule.format() and "output 0 in place over input 0" in schedule.format()
    with planning_disabled():
        want = np.asarray(kiln.jit(_inplace_chain)(x, w))
    f = kiln.jit(_inplace_chain)
    for _ in range(3):
        np.testing.assert_array_equal(f(x, w), want)
    np.testing.assert_allclose(want, (np.tanh(np.sort(x, axis=-1)) * 2) @ w - 1, rtol=1e-4, atol=1e-4)


def test_no_output_is_written_over_an_input_read_elsewhere():
    x, w = (np.random.default_rng(8).standard_normal((16, 16)).astype(F32) for _ in range(2))
    assert _overwrites(_schedule_of(_transposed_read, (x, w))) == []
    with planning_disabled():
        assert _overwrites(_schedule_of(_inplace_chain, (x, w))) == []
    from kiln.compiler.memory_plan import inplace_pairs
    graph = prepare_graph(trace_to_graph(lambda a, b: [knp.exp(a) + b.T, a[::-1] * b, knp.sum(a, axis=0) + a],
                                         [ShapedArray((8, 8), F32)] * 2))
    a, b = graph.invars
    pairs = {(step.name, step.inputs[i] is a, step.inputs[i] is b): j
             for step in partition(graph).dispatches for i, j in inplace_pairs(step)}
    # exp(a) + b.T and a[::-1] * b (one kernel) read a and b at other elements than they write; the
    # column sum reads a whole; only sum(a, 0) + a reads a where it writes
    assert pairs == {("fused_2", True, False): 0}, pairs


def _softmax_of_product(x, w):
    h = x @ w
    e = knp.exp(h - knp.max(h, axis=1, keepdims=True))
    return (e / knp.sum(e, axis=1, keepdims=True)) @ w.T


def _layernorm_of_product(x, w):
    return layernorm(x @ w) @ w.T


@pytest.mark.parametrize("f", [_softmax_of_product, _layernorm_of_product])
def test_row_fused_output_is_written_over_its_dead_input(f):
    """A row-fused kernel's one full-row output, stored by its last loop (no reduction in it), is
    written over the matrix product's output it normalizes (memory_plan._row_fused_pairs): bit for
    bit the unplanned module's values (a NaN row and a zero row included), numpy's closely."""
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((17, 12)).astype(F32), rng.standard_normal((12, 23)).astype(F32)
    x[3, 5], x[6] = np.nan, 0.0
    schedule = _schedule_of(f, (x, w))
    (g,) = _overwrites(schedule)
    assert schedule.buffers[g.overwrites].offset == g.offset
    (op,) = [op for op in schedule.ops if getattr(op, "inplace", None)]
    assert op.step.name.startswith("row_fused") and op.inplace == {0: 0}
    with planning_disabled():
        want = np.asarray(kiln.jit(f)(x, w))
    planned = kiln.jit(f)
    for _ in range(2):
        np.testing.assert_array_equal(planned(x, w), want)
    h = x.astype(np.float64) @ w
    if f is _softmax_of_product:
        e = np.exp(h - h.max(axis=1, keepdims=True))
        y = e / e.sum(axis=1, keepdims=True)
    else:
        c = h - h.mean(axis=1, keepdims=True)
        y = c / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(want, y @ w.T, rtol=1e-4, atol=1e-4)


def test_row_fused_output_is_not_written_over_an_input_read_elsewhere():
    """Never in place: two full-row outputs of one kernel, an input also read reversed, an output
    stored by a loop that also reduces (a float max's exact rerun would read the row again); the
    softmax kernel alone is."""
    from kiln.compiler.memory_plan import inplace_pairs

    def centered(a):
        c = a - knp.mean(a, axis=1, keepdims=True)
        return [c, c / knp.sqrt(knp.mean(c * c, axis=1, keepdims=True))]

    def reduced_too(a):
        y = knp.exp(a * 2.0) / knp.max(a, axis=1, keepdims=True)
        return [y, knp.max(y, axis=1)]

    def pairs(f):
        graph = prepare_graph(trace_to_graph(f, [ShapedArray((8, 8), F32)]))
        (step,) = partition(graph).dispatches
        assert step.name.startswith("row_fused")
        return inplace_pairs(step)
    assert pairs(centered) == pairs(reduced_too) == []
    assert pairs(lambda a: [knp.exp(a - knp.max(a, axis=1, keepdims=True)) + a[:, ::-1]]) == []
    assert pairs(lambda a: [knp.exp(a - knp.max(a, axis=1, keepdims=True))]) == [(0, 0)]


def _epilogue_over_dead_operand(x, w, v):
    e = x @ v                   # a product's output: transient, dead after y
    p = x @ w                   # read by another kernel: the region's own output, the accumulator
    y = knp.tanh(p) * e + 1.0   # p's epilogue and e's last reader: written over e
    return y @ v.T, knp.max(p, axis=1)


def test_matmul_epilogue_output_is_written_over_its_dead_operand():
    """A matrix product's epilogue output other than the one the product accumulates in is written over
    an input the kernel reads only as an epilogue operand at the element written
    (memory_plan._matmul_pairs): the arena holds two 17 x 23 buffers instead of three. Never over A
    or B; the accumulating output only as each item copies the operand first (the next test). Odd sizes (17 x 12 x 23: partial tiles and strips): bit for bit the unplanned module's
    values, numpy's closely."""
    from kiln.compiler.memory_plan import inplace_pairs

    rng = np.random.default_rng(3)
    x, w, v = (rng.standard_normal(s).astype(F32) for s in ((17, 12), (12, 23), (12, 23)))
    schedule = _schedule_of(_epilogue_over_dead_operand, (x, w, v))
    (op,) = [op for op in schedule.ops if getattr(op, "inplace", None)]
    assert op.step.name.startswith("dot_general") and op.inplace == {2: 1}
    (y,) = _overwrites(schedule)
    e = schedule.buffers[y.overwrites]
    assert y.var is op.writes[1] and e.var is op.reads[2] and y.offset == e.offset and e.kind == "transient"
    assert schedule.arena_size == 2 * 1600

    def pairs(f, *shapes):
        graph = prepare_graph(trace_to_graph(f, [ShapedArray(s, F32) for s in shapes]))
        (step,) = [s for s in partition(graph).dispatches if s.name.startswith("dot_general")]
        return inplace_pairs(step)
    # the epilogue operand c read at the element written, beside the product's own output: input 2
    # (or the product's own output, as the item copies c before accumulating: the plan takes the first)
    assert pairs(lambda a, b, c: [a @ b, knp.tanh(a @ b) * c], (8, 8), (8, 8), (8, 8)) == [(2, 1), (2, 0)]
    # A, and c read transposed: never
    assert pairs(lambda a, b: [a @ b, (a @ b) * a], (8, 8), (8, 8)) == []
    assert pairs(lambda a, b, c: [a @ b, (a @ b) * c.T], (8, 8), (8, 8), (8, 8)) == []
    # the only output, the one the product accumulates in: over c too, as each item copies c first
    assert pairs(lambda a, b, c: [knp.tanh(a @ b) * c], (8, 8), (8, 8), (8, 8)) == [(2, 0)]
    with planning_disabled():
        want = [np.asarray(r) for r in kiln.jit(_epilogue_over_dead_operand)(x, w, v)]
    f = kiln.jit(_epilogue_over_dead_operand)
    for _ in range(3):
        for got, ref in zip(f(x, w, v), want):
            np.testing.assert_array_equal(got, ref)
    x64, w64, v64 = x.astype(np.float64), w.astype(np.float64), v.astype(np.float64)
    p = x64 @ w64
    np.testing.assert_allclose(want[0], (np.tanh(p) * (x64 @ v64) + 1) @ v64.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(want[1], p.max(axis=1), rtol=1e-5)


def _residual_over_dead_operand(x, z, w, b, v):
    h = knp.sort(x, axis=-1)          # a kernel's output, dead after the layer
    y = h + knp.tanh(z @ w + b)       # the product accumulated in y, the layer's only output: over h
    return (y @ v,)


def test_matmul_accumulating_output_is_written_over_its_dead_operand():
    """A residual layer `h + tanh(z @ w + b)`: the product is accumulated in the layer's one output, which
    is written over h (dead after it) as each work item copies its rows x columns of h to the stack
    before the K loop (matmul.copied_operands). Two k blocks, a row tail, partial strips; at 1100 rows an
    item's 144 rows x 256 columns of f32 would take 144 KiB of stack, so the kernel's row chunks shrink to
    OPERAND_COPY_BYTES (matmul._fit_copies). Bit for
    bit the unplanned module's values on each of three calls (the arena reused), numpy's closely."""
    from kiln.compiler.codegen import matmul
    from kiln.compiler.target import Target

    rng = np.random.default_rng(5)
    for m in (37, 1100):
        x, z, w, b, v = (rng.standard_normal(s).astype(F32) for s in ((m, 300), (m, 290), (290, 300), (300,), (300, 5)))
        schedule = _schedule_of(_residual_over_dead_operand, (x, z, w, b, v))
        (op,) = [op for op in schedule.ops if getattr(op, "inplace", None)]
        region = op.step.region
        ((i, j),) = op.inplace.items()
        assert op.step.name.startswith("dot_general") and j == 0 and matmul.copied_operands(region) == [i]
        (y,) = _overwrites(schedule)
        assert schedule.buffers[y.overwrites].offset == y.offset and y.var is op.writes[0] and schedule.buffers[y.overwrites].var is op.reads[i]
        plan = matmul._plan(region)
        t = matmul._tiling(region, plan, Target.named("x86_64-unknown-linux-gnu", "skylake-avx512", "+avx512f,+fma"))
        items = t.items
        assert (t.row_chunk * t.nc * 4 > matmul.OPERAND_COPY_BYTES) == (m == 1100), (m, t.row_chunk, t.nc)
        matmul._fit_copies(t, plan, 1)  # what the kernel written in place does
        assert t.row_chunk * t.nc * 4 <= matmul.OPERAND_COPY_BYTES and t.row_chunk % t.mr == 0 and t.items >= items
        with planning_disabled():
            want = [np.asarray(r) for r in kiln.jit(_residual_over_dead_operand)(x, z, w, b, v)]
        f = kiln.jit(_residual_over_dead_operand)
        for _ in range(3):
            for got, ref in zip(f(x, z, w, b, v), want):
                np.testing.assert_array_equal(got, ref)
        x64, z64, w64 = x.astype(np.float64), z.astype(np.float64), w.astype(np.float64)
        ref = (np.sort(x64, axis=-1) + np.tanh(z64 @ w64 + b)) @ v
        np.testing.assert_allclose(want[0], ref, rtol=1e-4, atol=1e-4)


def test_random_programs_write_in_place():
    a = np.zeros((8, 8), F32)
    count = sum(len(_overwrites(_schedule_of(_random_looped_program(seed), (a, a)))) for seed in range(8))
    assert count >= 3, count


N_BIG = 1 << 20  # 4 MiB of f32: a fresh buffer of it costs ~1024 page faults


def _decay_module(planned=True):
    class Decay(Program, export_name="decay"):
        _g = Program.export_global(np.zeros(N_BIG, np.float32), mutable=True)

        def step(self, x=Program.like(np.zeros((), np.float32))):
            self._g = self._g * 0.5 + x   # a mutable global updated elementwise

    if planned:
        return Decay
    with planning_disabled():
        Decay._kiln_compile()
    return Decay


def test_mutable_global_is_updated_in_place():
    """global.take: the global's own buffer (nothing else holds it) is written by the kernel, and the
    store follows the dispatch at once; values equal the unplanned module's and numpy's."""
    cls = _decay_module()
    _, result = cls._kiln_compile()
    text = result.schedule_text()
    assert "global_load[slot=0] (taken: updated in place)" in text and "(output 0 in place over input 0)" in text
    (fn,) = result.spec.functions
    ops = [i.op for i in fn.code]
    assert ops.count("global.take") == 1 and "global.load" not in ops and "alloc" not in ops
    assert ops.index("global.store") == ops.index("dispatch") + 1
    m, reference = cls(), _decay_module(planned=False)()
    want = np.zeros(N_BIG, np.float32)
    for k in range(4):
        x = np.float32(k + 1)
        m.step(x)
        reference.step(x)
        want = want * np.float32(0.5) + x
    np.testing.assert_array_equal(Program.get_context(m).get_global("_g"), want)
    np.testing.assert_array_equal(Program.get_context(reference).get_global("_g"), want)


def test_step_limit_never_stops_between_the_in_place_write_and_the_store():
    """max_steps at every count up to the call's length: a stopped call names the instruction it stopped at, never
    the global.store after the in-place kernel; the global holds its old value or the new one, nothing between."""
    m = _decay_module()()
    ctx = Program.get_context(m)
    stopped_at = []
    for limit in range(1, 8):
        old = np.array(ctx.get_global("_g"))
        x = np.float32(limit)
        ctx.set_limits(max_steps=limit)
        try:
            m.step(x)
        except KilnRuntimeError as e:
            stopped_at.append(re.search(r"at word \d+ \((\S+)\)", str(e)).group(1))
        finally:
            ctx.set_limits()
        got = ctx.get_global("_g")
        assert np.array_equal(got, old) or np.array_equal(got, old * np.float32(0.5) + x), limit
    assert "global.store" not in stopped_at and "dispatch" in stopped_at, stopped_at


def test_a_held_global_value_is_never_written():
    """A value of the global that something else holds (here the caller's array from get_global)
    makes global.take copy: the held value keeps its bits."""
    m = _decay_module()()
    ctx = Program.get_context(m)
    m.step(np.float32(2))
    held = ctx.get_global("_g")
    before = np.array(held)
    for _ in range(3):
        m.step(np.float32(3))
    np.testing.assert_array_equal(held, before)
    np.testing.assert_array_equal(ctx.get_global("_g"), ((2 * 0.5 + 3) * 0.5 + 3) * 0.5 + 3)


def test_in_place_global_update_has_no_page_faults_per_call(tmp_path):
    """kiln-run --benchmark: a steady-state call of the in-place update allocates nothing (no page
    faults); without planning each call allocates a fresh 4 MiB value (~1024 faults)."""
    import json

    from kiln.vm._native import kiln_run_path
    from runtime_tools import run

    faults = {}
    for planned in (True, False):
        path = tmp_path / f"decay_{planned}.vmfb"
        path.write_bytes(_decay_module(planned)._kiln_compile()[1].module_bytes)
        out = run(kiln_run_path(), f"--module={path}", "--function=step", "--input=f32=1", "--benchmark=100",
                  "--warmup=2", "--workers=1", "--benchmark_format=json").stdout
        faults[planned] = json.loads(out)["page_faults_per_call"] * 100
    # in all 100 calls together: the 1-2 faults kiln-run's own timing costs once, none per call
    assert faults[True] <= 3, faults
    assert faults[False] >= 50000, faults


_PEAK_PROBE = '''
import sys, numpy as np
from kiln.vm.runtime import Context, Instance, Module
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
ctx = Context(Module.from_bytes(Instance(), open(sys.argv[1], "rb").read()))
x, w = np.load(sys.argv[2]), np.load(sys.argv[3])
ctx.invoke("probe", [x, w])  # the thread pool and first-call paths warm
base = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")  # the high-water mark starts again from here
(y,) = ctx.invoke("run", [x, w])
print(status("VmHWM:") - base)
'''


def _deep_inputs(tmp_path):
    """x (262144 x 16, 16 MiB) and w (16 x 16) of the peak-memory tests, also saved as x.npy and w.npy."""
    x = np.random.default_rng(0).standard_normal((262144, 16)).astype(F32)
    w = (np.random.default_rng(1).standard_normal((16, 16)) * 0.25).astype(F32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    return x, w


def _peak_of_run(program, tmp_path):
    """(peak, bound, run's FunctionSpec): the peak resident memory of program's run(x, w) (measured by
    _PEAK_PROBE in a process of its own, on the inputs _deep_inputs saved) and the bound the plan gives it,
    the arena plus the results."""
    import subprocess
    import sys

    result = program._kiln_compile()[1]
    path = tmp_path / "peak.vmfb"
    path.write_bytes(result.module_bytes)
    out = subprocess.run([sys.executable, "-c", _PEAK_PROBE, str(path), str(tmp_path / "x.npy"),
                          str(tmp_path / "w.npy")], capture_output=True, text=True, timeout=120, check=True)
    run = next(f for f in result.spec.functions if f.name == "run")
    return int(out.stdout), run.transient_size + sum(r.type.byte_size for r in run.results), run


def test_peak_memory_of_a_call_is_within_the_planned_bound(tmp_path):
    """A call's peak resident memory (the process's high-water mark, VmHWM, measured from just before
    the call in a process that only loads the module) is at most the planned arena plus the results:
    the runtime allocates nothing else of size. The peak is also at least that bound less 1 MiB (the
    arena's two live intermediates and the result are all touched), which shows the measurement sees
    the call's allocations. (An unplanned module is no usable contrast: whether its freed 16 MiB
    intermediates stay resident depends on the C library's mmap threshold.)"""
    x, w = _deep_inputs(tmp_path)

    class Deep(Program, export_name="deep"):
        def run(self, x=Program.like(x), w=Program.like(w)):
            h = x
            for _ in range(5):  # each layer's value (16 MiB) materialized by its matmul kernel
                h = knp.tanh(h @ w) + h * 0.5
            return h

        def probe(self, x=Program.like(x), w=Program.like(w)):
            return x + w[0]

    peak, bound, run = _peak_of_run(Deep, tmp_path)
    assert run.transient_size >= 2 * x.nbytes  # intermediates planned (two live at a time)
    assert bound - (1 << 20) <= peak <= bound + (1 << 20), (peak, bound)


class _Train(Program, export_name="train_in_place"):
    _w = Program.export_global(np.ones((64, 8), np.float32), mutable=True)

    def step(self, x=Program.like(np.zeros((32, 64), np.float32))):
        def loss(w):
            return knp.sum(knp.tanh(x @ w) ** 2)
        self._w = self._w - 0.01 * kiln.grad(loss)(self._w)  # kernels read w before its update
        return loss(self._w)


def test_parameters_read_by_earlier_kernels_are_updated_in_place():
    """A training step: the parameter's value is read by the forward and backward kernels, then
    updated by the last kernel that reads it, which writes over it: the gradient product, whose epilogue
    the update is (epilogue_fusion._updates_stay_in_place; the product accumulated in the updated value,
    each work item copying its tile of w first); every call equals the unplanned module bit for bit and
    numpy's step closely."""
    import re

    _, result = _Train._kiln_compile()
    assert "(taken: updated in place)" in result.schedule_text()
    assert re.search(r"dispatch dot_general_\d+ reads .* \(output 0 in place over input \d\)", result.schedule_text())
    m = _Train()
    with planning_disabled():
        _Train._kiln_compiled = None
        reference = _Train()
    _Train._kiln_compiled = None
    assert "taken" not in reference._kiln_result.schedule_text()
    x = np.random.default_rng(3).standard_normal((32, 64)).astype(F32)
    w = np.ones((64, 8), np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(m.step(x), reference.step(x))
        t = np.tanh(x @ w)
        w = w - 0.01 * (x.T @ (2 * t * (1 - t * t)))
    got = Program.get_context(m).get_global("_w")
    np.testing.assert_array_equal(got, Program.get_context(reference).get_global("_w"))
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4)


def test_global_take_names_an_existing_global():
    spec = _module([Instr("global.take", 0, 3), Instr("ret", [])], [], 0)
    with pytest.raises(Exception, match=r"global.take g: global 3 out of range \(limit 0\)"):
        serialize(spec)
    with pytest.raises(KilnRuntimeError, match="word 0: global.take operand 'g' names global 3, but only 0 exist"):
        Module.from_bytes(Instance(), serialize(spec, check=False))


def test_transient_storage_cannot_change_while_the_function_runs():
    """Called from inside a call (a dispatch observer), kiln_context_set_transient_storage refuses:
    the arena is in use."""
    from kiln.vm._clib import _check, _lib

    x = CASES["chain"][1][0]
    ctx = Context(Module.from_bytes(Instance(), _chain_module("chain_busy")))
    fn, info = ctx._reflection.resolve("run")
    storage = _aligned_bytes(info.transient_size)
    errors = []

    def observer(record):
        try:
            _check(_lib().kiln_context_set_transient_storage(ctx._handle, fn, storage.ctypes.data, storage.nbytes))
        except KilnRuntimeError as e:
            errors.append(str(e))

    ctx.set_dispatch_observer(observer)
    ctx.invoke("run", [x])
    assert errors and all("set_transient_storage: 'run' is running on this context (its transient arena is in use)"
                          in e for e in errors), errors


# ---- loops and branches: carried values rotate through planned buffers (format 2.7) ----------------


def _random_loop_nest(seed):
    """A random program of while, fori, scan and cond steps, nested up to three deep, whose bodies are
    random DAGs with matmuls, reductions and dynamic_update_slice over carries of three sizes (8x8,
    8 and a scalar counter); carries are passed through, swapped, returned at two positions, read by
    inner loops and branches, their rows read by inner scans, and the loops' results go into later
    kernels, later loops, branch results and the returned values. Planned and unplanned modules must agree bit for bit."""
    rng = np.random.default_rng(seed)
    shape = [(int(rng.integers(0, 6)), int(rng.integers(0, 4)), int(rng.integers(1, 4))) for _ in range(12)]
    pick = iter(shape)

    def dag(r, m, v, steps):
        """New (8x8, 8) values from m and v: a few random kernels."""
        for _ in range(steps):
            op = int(r.integers(0, 6))
            if op == 0:
                m = knp.tanh(m @ m.T * 0.2) + m * 0.5
            elif op == 1:
                v = knp.sin(v) + knp.sum(m, axis=0) * 0.1
            elif op == 2:
                m = m - knp.max(m, axis=1, keepdims=True) * 0.3
            elif op == 3:
                m = m * 0.7 + v[None, :] * 0.2
            elif op == 4:
                v = knp.cos(m @ v * 0.1)
            else:
                m = knp.where(m > 0, m, m * 0.25)
        return m, v

    def block(depth, m, v, r):
        kind, trips, steps = next(pick, (4, 0, 1))
        if depth >= 3 or kind == 4:
            return dag(r, m, v, steps)
        sub = np.random.default_rng(int(r.integers(0, 1 << 30)))
        if kind == 0:  # fori with a counter, a matrix and a vector; sometimes swaps nothing back
            def body(i, c):
                mm, vv, s = c
                mm, vv = block(depth + 1, mm, vv, np.random.default_rng(int(sub.integers(0, 1 << 30))))
                row = knp.tanh(mm[i % 8] + vv)
                mm = kiln.lax.dynamic_update_slice(mm, row[None, :], (i % 8, 0))
                return mm, vv, s + knp.sum(vv)
            m, v, s = kiln.lax.fori_loop(0, trips, body, (m, v, knp.zeros((), np.float32)))
            return m + s * 0.01, v
        if kind == 1:  # while with a data-dependent trip count, a carry passed through (even trips) or
            def cond(c):  # one new value at two carry positions (odd)
                return (c[0] < trips) & (knp.sum(c[2]) < 1e6)  # 0 to 3 iterations

            def body(c):
                k, keep, mm, vv = c
                mm, vv = block(depth + 1, mm, vv, np.random.default_rng(int(sub.integers(0, 1 << 30))))
                mm = mm * 0.9
                return k + 1, mm if trips % 2 else keep, mm, vv
            _, keep, m, v = kiln.lax.while_loop(cond, body, (0, m * 2.0, m, v))
            return m + keep * 0.1, v
        if kind == 2:  # scan over rows with stacked outputs, the carry also stacked
            def step(c, row):
                mm, vv = block(depth + 1, knp.outer(c, row), c * row, np.random.default_rng(int(sub.integers(0, 1 << 30))))
                c2 = knp.tanh(vv + knp.sum(mm, axis=1) * 0.1)
                return c2, c2 * 2.0
            c, ys = kiln.lax.scan(step, v, m)
            return ys + m * 0.5, c
        if kind == 3:  # cond: one branch makes its result, the other passes an operand through
            def yes(a, b):
                return block(depth + 1, a, b, np.random.default_rng(int(sub.integers(0, 1 << 30))))

            def no(a, b):
                return a, knp.exp(-knp.abs(b))
            return kiln.lax.cond(knp.sum(m) > knp.sum(v), yes, no, m, v)
        # kind 5: a fori whose carried matrix an inner scan takes rows of; its result goes on as is
        # (returned, a branch's result, an enclosing body's carry: rotating through two arena spares)
        def body(i, mm):
            c, ys = kiln.lax.scan(lambda c, row: (c + row, c * row), v, mm)
            mm, c = block(depth + 1, mm + ys * 0.1, c, np.random.default_rng(int(sub.integers(0, 1 << 30))))
            return knp.tanh(mm + c * 0.01)
        return kiln.lax.fori_loop(0, trips, body, m), v

    def f(a, b):
        r = np.random.default_rng(seed + 7)
        m, v = knp.tanh(a), b
        outs = []
        for _ in range(3):
            m, v = block(0, m, v, r)
            outs.append(v)
            before = m
            m = m @ knp.tanh(m) * 0.3  # the loop's result read by a later kernel

        def rows(c):  # a carried matrix whose rows an inner scan reads, the loop's result returned
            k, mm = c
            s, ys = kiln.lax.scan(lambda s, row: (s + row, s * row), v, mm)
            return k + 1, knp.tanh(mm + ys * 0.1 + s * 0.01)
        trips = seed % 5  # 0 to 4 iterations; the result's buffer is never in the rotation
        if seed % 2:
            returned = kiln.lax.while_loop(lambda c: (c[0] < trips) & (knp.sum(c[1]) < 1e6), rows, (0, before))[1]
        else:
            returned = kiln.lax.fori_loop(0, trips, lambda i, mm: rows((i, mm))[1], before)
        return m, outs[0], outs[-1], returned

    return f


@pytest.mark.parametrize("seed", range(5))
def test_planned_and_unplanned_loop_nests_agree_bit_for_bit(seed):
    rng = np.random.default_rng(300 + seed)
    a, b = rng.standard_normal((8, 8)).astype(F32), rng.standard_normal(8).astype(F32)
    _assert_planned_agrees(_random_loop_nest, seed, a, b)  # the rotating carries reused by every call too


def _stateful_loop_nest(seed, planned=True):
    """_random_loop_nest's program as the step of a Program whose state is a mutable global: the
    global is read by the nest's kernels and is the operand of a last loop (a fori or a while of 0
    to 3 iterations, by seed) whose result is stored back into it, so global.store copies that
    arena buffer into the global's own buffer."""
    f = _random_loop_nest(seed)

    class Nest(Program, export_name=f"stateful_nest_{seed}"):
        _g = Program.export_global(np.eye(8, dtype=np.float32), mutable=True)

        def step(self, b=Program.like(np.zeros(8, np.float32))):
            m, v, _, returned = f(self._g, b)
            trips = seed % 4

            def body(i, c):
                return knp.tanh(c @ m * 0.5 + returned) * 0.5 + c * 0.25
            if seed % 2:
                self._g = kiln.lax.while_loop(lambda c: (c[0] < trips) & (knp.sum(c[1]) < 1e6),
                                              lambda c: (c[0] + 1, body(c[0], c[1])), (0, self._g))[1]
            else:
                self._g = kiln.lax.fori_loop(0, trips, body, self._g)
            return v

    if not planned:
        with planning_disabled():
            Nest._kiln_compile()
    return Nest


@pytest.mark.parametrize("seed", (2, 3))  # a fori of 2 iterations, a while of 3
def test_planned_and_unplanned_stateful_loop_nests_agree_bit_for_bit(seed):
    """Three calls of the planned and the unplanned step: the same results and global, bit for bit
    (the planned step's loop result is stored from the arena into the global's own buffer)."""
    b = np.random.default_rng(400 + seed).standard_normal(8).astype(F32)
    planned, unplanned = _stateful_loop_nest(seed)(), _stateful_loop_nest(seed, planned=False)()
    held = None
    for _ in range(3):
        np.testing.assert_array_equal(planned.step(b), unplanned.step(b))
        np.testing.assert_array_equal(Program.get_context(planned).get_global("_g"),
                                      Program.get_context(unplanned).get_global("_g"))
        if held is None:  # a value of the global someone holds is never written by a later store
            held = Program.get_context(planned).get_global("_g")
            kept = np.array(held)
    np.testing.assert_array_equal(held, kept)


N_LOOP = 256  # 256x256 f32 carries (256 KiB): a fresh one per iteration costs page faults


class _LoopFaults(Program, export_name="loop_faults"):
    _s = Program.export_global(np.zeros((N_LOOP, N_LOOP), np.float32), mutable=True)

    def fori(self, x=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32)),
             w=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32))):
        def body(i, c):
            h, s = c
            h = knp.tanh(h @ w) * 0.5 + h * 0.5                      # a matmul's carried output
            row = knp.tanh(h[i] + s)                                  # a dynamic row
            h = kiln.lax.dynamic_update_slice(h, row[None, :], (i, 0))
            return h, s + knp.max(h, axis=0) * 0.01                   # a reduction's carried output
        return kiln.lax.fori_loop(0, 5, body, (x, knp.zeros((N_LOOP,), np.float32)))

    def nest(self, x=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32))):
        def inner(j, c):
            return c * 0.9 + knp.mean(c, axis=1, keepdims=True) * 0.1

        def body(c):
            k, h = c
            h = kiln.lax.fori_loop(0, 2, inner, h)                     # a loop inside a loop
            h = kiln.lax.cond(knp.sum(h) > 0, lambda a: knp.sin(a) @ a * 0.01, lambda a: a.T, h)
            return k + 1, h

        return kiln.lax.while_loop(lambda c: (c[0] < 4) & (knp.sum(c[1]) < 1e30), body, (0, x))[1]

    def rows(self, x=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32))):
        def step(c, row):
            c = knp.tanh(c * 0.5 + row)
            return c, c * 2.0                                          # a carry and a stacked output
        return kiln.lax.scan(step, x[0], x @ x)

    def train(self, x=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32)),
              w=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32))):
        def body(i, s):
            return knp.tanh(s @ w + x) * 0.5 + s * 0.5                  # a training-like update
        self._s = kiln.lax.fori_loop(0, 3, body, self._s)              # the loop's result stored

    def rows_out(self, x=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32))):
        def body(i, m):
            c, ys = kiln.lax.scan(lambda c, r: (c + r, c * r * 0.01), x[0], m)  # rows of the carry
            return knp.tanh(m * 0.5 + ys + c * 0.01)
        return kiln.lax.fori_loop(0, 3, body, x)                        # and the loop's result returned

    def twice(self, x=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32)),
              w=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32))):
        def body(i, c):
            h = knp.tanh(c[0] @ w + c[1] * 0.5)
            return h, h                                                # one new value at two carry positions
        return kiln.lax.fori_loop(0, 3, body, (x, x * 0.5))

    def cond_rows(self, x=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32)),
                  w=Program.like(np.zeros((N_LOOP, N_LOOP), np.float32))):
        m = knp.tanh(x @ w)                                            # a kernel's output, in the arena

        def scanned(m):
            c, ys = kiln.lax.scan(lambda c, r: (c + r, c * r * 0.01), m[0], m)  # its rows, in a branch
            t = knp.tanh(ys + c * 0.01)
            return t, t                                                # one value at two results
        a, b = kiln.lax.cond(knp.sum(x) < 0, scanned, lambda m: (m * 0.5, m * 0.25), m)  # (the test's x: scanned)
        return a @ w + b


def _loop_faults_module(planned):
    if planned:
        return _LoopFaults._kiln_compile()[1]
    with planning_disabled():
        _LoopFaults._kiln_compiled = None
        try:
            return _LoopFaults._kiln_compile()[1]
        finally:
            _LoopFaults._kiln_compiled = None


def test_loops_and_branches_allocate_nothing_per_call(tmp_path):
    """kiln-run --benchmark: a steady-state call of functions with fori, while, scan and cond (nested,
    carries of several sizes, matmuls, reductions, dynamic_update_slice; a loop's result stored into a
    mutable global; a carry an inner scan takes rows of, returned; one new value at two carry
    positions, the second copied from the first; a kernel's output whose rows a scan in a cond
    branch takes, the branch returning one value at two results) has no page faults: every carry
    rotates through two planned buffers and every intermediate lies in the arena, so the bytecode
    allocates only results (global.store copies the arena value into the global's own buffer).
    Without planning each iteration allocates its carries (thousands of faults). The planned module
    computes what the unplanned one does, bit for bit."""
    import json

    from kiln.vm._native import kiln_run_path
    from runtime_tools import run

    rng = np.random.default_rng(11)
    x = (rng.standard_normal((N_LOOP, N_LOOP)) * 0.1).astype(F32)
    w = (rng.standard_normal((N_LOOP, N_LOOP)) * 0.05).astype(F32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    faults = {}
    results = {}
    for planned in (True, False):
        result = _loop_faults_module(planned)
        path = tmp_path / f"loops_{planned}.vmfb"
        path.write_bytes(result.module_bytes)
        ctx = Context(Module.from_bytes(Instance(), result.module_bytes))
        for fn in result.spec.functions:
            ops = [i.op for i in fn.code if isinstance(i, Instr)]
            if planned:  # nothing but results and arena buffers
                assert "alloc" not in ops and "buffer.copy" in ops, (fn.name, ops)
            args = [x, w][:len(fn.args)]
            results[planned, fn.name] = ctx.invoke(fn.name, args) or [ctx.get_global("_s")]
            out = run(kiln_run_path(), f"--module={path}", f"--function={fn.name}",
                      *[f"--input=@{tmp_path / n}.npy" for n in ("x", "w")[:len(fn.args)]],
                      "--benchmark=50", "--warmup=2", "--workers=1", "--benchmark_format=json").stdout
            faults[planned, fn.name] = json.loads(out)["page_faults_per_call"] * 50
    for name in ("fori", "nest", "rows", "train", "rows_out", "twice", "cond_rows"):
        for got, want in zip(results[True, name], results[False, name]):
            np.testing.assert_array_equal(got, want)
        # in all 50 calls together: the few faults kiln-run's own timing costs once, none per call
        assert faults[True, name] <= 5, faults
    assert sum(faults[False, name] for name in ("fori", "nest", "rows")) >= 2000, faults
    h, s = x.astype(np.float64), np.zeros(N_LOOP)
    for i in range(5):
        h = np.tanh(h @ w) * 0.5 + h * 0.5
        h[i] = np.tanh(h[i] + s)
        s = s + h.max(axis=0) * 0.01
    np.testing.assert_allclose(results[True, "fori"][0], h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(results[True, "fori"][1], s, rtol=1e-4, atol=1e-5)
    c, ys = x[0].astype(np.float64), []
    for row in x.astype(np.float64) @ x:
        c = np.tanh(c * 0.5 + row)
        ys.append(c * 2.0)
    np.testing.assert_allclose(results[True, "rows"][0], c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(results[True, "rows"][1], ys, rtol=1e-4, atol=1e-5)
    s = np.zeros((N_LOOP, N_LOOP))
    for _ in range(3):
        s = np.tanh(s @ w + x) * 0.5 + s * 0.5
    np.testing.assert_allclose(results[True, "train"][0], s, rtol=1e-4, atol=1e-5)
    m = x.astype(np.float64)
    for _ in range(3):
        c, ys = x[0].astype(np.float64), []
        for r in m:
            ys.append(c * r * 0.01)
            c = c + r
        m = np.tanh(m * 0.5 + np.array(ys) + c * 0.01)
    np.testing.assert_allclose(results[True, "rows_out"][0], m, rtol=1e-4, atol=1e-5)
    h, g = x.astype(np.float64), x * 0.5
    for _ in range(3):
        h = g = np.tanh(h @ w + g * 0.5)
    for got in results[True, "twice"]:
        np.testing.assert_allclose(got, h, rtol=1e-4, atol=1e-5)
    m = np.tanh(x.astype(np.float64) @ w)
    assert x.sum() < 0  # the branch that scans
    c, ys = m[0], []
    for r in m:
        ys.append(c * r * 0.01)
        c = c + r
    m = np.tanh(np.array(ys) + c * 0.01)
    np.testing.assert_allclose(results[True, "cond_rows"][0], m @ w + m, rtol=1e-4, atol=1e-5)


def test_peak_memory_of_a_loop_is_within_the_planned_bound(tmp_path):
    """A fori_loop whose 16 MiB carry rotates through the arena's spare and the result: the call's peak
    resident memory (as in test_peak_memory_of_a_call_is_within_the_planned_bound) is the planned
    arena plus the result, within 1 MiB either way; no iteration allocates a carry of its own."""
    x, w = _deep_inputs(tmp_path)

    class DeepLoop(Program, export_name="deep_loop"):
        def run(self, x=Program.like(x), w=Program.like(w)):
            return kiln.lax.fori_loop(0, 4, lambda i, h: knp.tanh(h @ w) + h * 0.5, x)

        def probe(self, x=Program.like(x), w=Program.like(w)):
            return x + w[0]

    peak, bound, run = _peak_of_run(DeepLoop, tmp_path)
    assert "alloc" not in [i.op for i in run.code if isinstance(i, Instr)]
    assert run.transient_size >= x.nbytes  # the carry's spare
    assert bound - (1 << 20) <= peak <= bound + (1 << 20), (peak, bound)


def _rows_of_a_carry(x, v):
    def body(i, m):
        c, ys = kiln.lax.scan(lambda c, r: (c + r, c * r), v, m)  # rows of the carried matrix
        return knp.tanh(m + ys * 0.1 + c * 0.01)
    return kiln.lax.fori_loop(0, 3, body, x) @ x  # the loop's result only read by a kernel


def test_a_carry_whose_rows_a_scan_takes_rotates_through_the_arena():
    """buffer.row does not freeze arena memory (format 2.7), so a carry an inner scan takes rows of
    still rotates when both its buffers lie in the arena (its loop's result only read by kernels):
    no alloc in the bytecode; bit for bit the unplanned module's values, and numpy's closely."""
    rng = np.random.default_rng(21)
    x, v = rng.standard_normal((8, 8)).astype(F32), rng.standard_normal(8).astype(F32)
    schedule = _schedule_of(_rows_of_a_carry, (x, v))
    (loop,) = [op for op in schedule.ops if getattr(op, "bodies", None)]
    assert 1 in loop.spares and schedule.buffers[loop.eqn.outvars[1].id].kind == "transient"

    def kinds(s):
        found = [b.kind for b in s.buffers.values()]
        for op in s.ops:
            for _, body in getattr(op, "bodies", ()):
                found += kinds(body)
        return found
    assert "heap" not in kinds(schedule) and "dest" in kinds(schedule)
    f = kiln.jit(_rows_of_a_carry)
    with planning_disabled():
        want = np.asarray(kiln.jit(_rows_of_a_carry)(x, v))
    for _ in range(3):
        np.testing.assert_array_equal(f(x, v), want)
    m = x.astype(np.float64)
    for _ in range(3):
        c, ys = v.astype(np.float64), []
        for r in m:
            ys.append(c * r)
            c = c + r
        m = np.tanh(m + np.array(ys) * 0.1 + c * 0.01)
    np.testing.assert_allclose(want, m @ x, rtol=1e-4, atol=1e-5)


def _state_through_cond(x, v):
    def body(i, c):
        m, s = c
        # both branches hand m back unchanged: the cond's result is m itself (pipeline._forward_cond_operands)
        m, s = kiln.lax.cond(knp.sum(s) > 0, lambda m, s: (m, s * 0.5), lambda m, s: (m, s + 1.0), m, s)
        return knp.tanh(m @ m * 0.1 + s), s
    return kiln.lax.fori_loop(0, 4, body, (x, v))


def test_a_carry_every_branch_hands_back_rotates():
    """A carry passed through a cond whose every branch returns it unchanged: the cond loses that
    output, the enclosing body reads the carry itself, and the carry rotates (no heap buffer
    anywhere); bit for bit the unplanned module's values, numpy's closely."""
    rng = np.random.default_rng(23)
    x, v = (rng.standard_normal((8, 8)) * 0.5).astype(F32), rng.standard_normal(8).astype(F32)
    schedule = _schedule_of(_state_through_cond, (x, v))
    assert " heap " not in schedule.format()
    (loop,) = [op for op in schedule.ops if getattr(op, "bodies", None)]
    (cond,) = [op for op in loop.bodies[0][1].ops if getattr(op, "bodies", None)]
    assert len(cond.eqn.outvars) == 1 and set(loop.spares) == {0, 1, 2}
    f = kiln.jit(_state_through_cond)
    with planning_disabled():
        want = [np.asarray(r) for r in kiln.jit(_state_through_cond)(x, v)]
    for _ in range(2):
        for got, w in zip(f(x, v), want):
            np.testing.assert_array_equal(got, w)
    m, s = x.astype(np.float64), v.astype(np.float64)
    for _ in range(4):
        s = s * 0.5 if s.sum() > 0 else s + 1.0
        m = np.tanh(m @ m * 0.1 + s)
    np.testing.assert_allclose(want[0], m, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(want[1], s, rtol=1e-5)
