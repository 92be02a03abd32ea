"""The persistent kernel cache: hits, misses (IR, bindings, target, compiler version), damaged entries,
concurrent writers, the switches, and stage timings. Results are checked by running the kernels."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from conftest import Batch, Case, assert_matches, random_array
from kiln.compiler import cache as kernel_cache
from kiln.compiler import compile as compile_mod
from kiln.compiler.cache import CachedKernel, KernelCache, default_cache
from kiln.compiler.compile import compile_plan
from kiln.compiler.inprocess import KernelRunner
from kiln.compiler.target import Target
from kiln.compiler.timing import recording
from kiln.lax import prims

RNG = np.random.default_rng(11)
X = random_array(RNG, (37, 5), np.float32)
Y = random_array(RNG, (5, 9), np.float32)


def _cases():
    return {
        "tanh": Case(lambda x: [prims.mul.bind(prims.tanh.bind(x), x)], [X]),
        "sum": Case(lambda x: [prims.reduce_sum.bind(prims.exp.bind(x), axes=(1,))], [X]),
        "matmul": Case(lambda x, y: [prims.dot_general.bind(x, y, dimension_numbers=(((1,), (0,)), ((), ())))], [X, Y]),
    }


def _compile(cases, cache, target=None):
    """compile_plan of the cases' plans; the kernels' details ('name (cached)' or '(compiled)')."""
    with recording() as timings:
        compiled = compile_plan([c.plan for c in cases.values()], target, cache=cache)
    return compiled, [d for n, _, d in timings.stages if n == "kernel"]


def _check_numbers(compiled, cases):
    runner = KernelRunner(compiled)
    for case in cases.values():
        for got, want in zip(runner.run_plan(case.plan, case.graph, case.args), case.reference()):
            assert_matches(got, want, rtol=2e-6, atol=2e-6)


def _entries(directory):
    return sorted(p for p in (directory / "kernels").rglob("*") if p.is_file())


def test_second_compile_reads_every_kernel_and_runs_no_code_generation(tmp_path, monkeypatch):
    cache = KernelCache(tmp_path)
    cases = _cases()
    first, details = _compile(cases, cache)
    assert [d.endswith("(compiled)") for d in details] == [True] * 3
    assert len(_entries(tmp_path)) == 3

    def no_codegen(region):
        raise AssertionError("a cached kernel was generated again")

    monkeypatch.setattr(compile_mod, "_emitter_for", no_codegen)
    cases = _cases()  # traced again: other variables, the same regions
    second, details = _compile(cases, cache)
    assert [d.endswith("(cached)") for d in details] == [True] * 3
    assert second.image.code == first.image.code and second.image.relocs == first.image.relocs
    assert [(k.entry_offset, k.bindings) for k in second.kernels] == [(k.entry_offset, k.bindings) for k in first.kernels]
    assert second.workgroups == first.workgroups
    _check_numbers(second, cases)


def test_changed_ir_bindings_target_or_compiler_miss(tmp_path, monkeypatch):
    cache = KernelCache(tmp_path)
    _compile(_cases(), cache)
    other_op = {"log": Case(lambda x: [prims.mul.bind(prims.log.bind(x), x)], [np.abs(X) + 1])}
    assert _compile(other_op, cache)[1] == ["kiln_elementwise_0 (compiled)"]
    other_shape = {"tanh": Case(lambda x: [prims.mul.bind(prims.tanh.bind(x), x)], [X[:36]])}
    assert _compile(other_shape, cache)[1] == ["kiln_elementwise_0 (compiled)"]
    arm = Target.named("aarch64-unknown-linux-gnu", "cortex-a76", "+neon,+fp-armv8")
    _, details = _compile(_cases(), cache, arm)
    assert all(d.endswith("(compiled)") for d in details)
    assert all(d.endswith("(cached)") for d in _compile(_cases(), cache, arm)[1])
    monkeypatch.setattr(kernel_cache, "compiler_version", lambda: "another compiler")
    cases = _cases()
    compiled, details = _compile(cases, cache)
    assert all(d.endswith("(compiled)") for d in details)
    _check_numbers(compiled, cases)
    assert len(_entries(tmp_path)) == 3 + 2 + 3 + 3


def test_keys_name_what_the_kernel_depends_on():
    host = Target.host()
    key = kernel_cache.kernel_key("region", [(16, False), (16, True)], host)
    assert key == kernel_cache.kernel_key("region", [(16, False), (16, True)], host)
    assert len({key,
                kernel_cache.kernel_key("region2", [(16, False), (16, True)], host),
                kernel_cache.kernel_key("region", [(16, False), (32, True)], host),
                kernel_cache.kernel_key("region", [(16, False), (16, True)], Target(host.triple, host.cpu, "")),
                kernel_cache.kernel_key("region", [(16, False), (16, True)], Target(host.triple, "generic", host.features)),
                }) == 5


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "garbage", "empty", "other format"])
def test_damaged_entries_are_ignored_and_rewritten(tmp_path, damage):
    cache = KernelCache(tmp_path)
    cases = _cases()
    first, _ = _compile(cases, cache)
    for path in _entries(tmp_path):
        data = bytearray(path.read_bytes())
        if damage == "truncated":
            data = data[: len(data) // 2]
        elif damage == "flipped byte":
            data[-100] ^= 0x40
        elif damage == "garbage":
            data = bytearray(b"not a kernel" * 10)
        elif damage == "empty":
            data = bytearray()
        else:
            data[8] += 1  # the entry format number
        path.write_bytes(bytes(data))
        assert cache.get(path.name) is None
    second, details = _compile(cases, cache)
    assert all(d.endswith("(compiled)") for d in details)
    assert second.image.code == first.image.code
    _check_numbers(second, cases)
    assert all(cache.get(path.name) is not None for path in _entries(tmp_path))
    assert all(d.endswith("(cached)") for d in _compile(_cases(), cache)[1])


def test_entry_round_trip_and_atomic_write(tmp_path):
    cache = KernelCache(tmp_path)
    cache.put("ab" * 32, CachedKernel(b"\x7fELF object", 7))
    assert cache.get("ab" * 32) == CachedKernel(b"\x7fELF object", 7)
    assert cache.get("cd" * 32) is None
    assert [p.name for p in (tmp_path / "kernels" / "ab").iterdir()] == ["ab" * 32]  # no temporary left


def test_unwritable_cache_only_costs_the_compile(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    cache = KernelCache(blocker)
    cases = _cases()
    compiled, details = _compile(cases, cache)
    assert all(d.endswith("(compiled)") for d in details)
    _check_numbers(compiled, cases)
    assert cache.get("ab" * 32) is None


def test_switches_and_location(tmp_path, monkeypatch):
    monkeypatch.delenv("KILN_CACHE", raising=False)
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "here"))
    assert default_cache().directory == tmp_path / "here"
    monkeypatch.delenv("KILN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache().directory == tmp_path / "xdg" / "kiln"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache().directory == tmp_path / "home" / ".cache" / "kiln"
    for off in ("0", "off", "OFF", "false", "no"):
        monkeypatch.setenv("KILN_CACHE", off)
        assert default_cache() is None
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "off"))
    cases = _cases()
    compiled, details = _compile(cases, "default")
    assert all(d.endswith("(compiled)") for d in details) and not (tmp_path / "off").exists()
    monkeypatch.setenv("KILN_CACHE", "1")
    _compile(cases, "default")
    assert len(_entries(tmp_path / "off")) == 3


_WORKER = """
import sys
import numpy as np
import kiln
f = kiln.jit(lambda x, y: (kiln.numpy.tanh(x) @ y + 1.0, kiln.numpy.sum(kiln.numpy.exp(x), axis=0)))
x = np.linspace(-2, 2, 6 * 7, dtype=np.float32).reshape(6, 7)
y = np.linspace(1, 3, 7 * 5, dtype=np.float32).reshape(7, 5)
a, b = f(x, y)
np.save(sys.argv[1], np.concatenate([np.ravel(a), np.ravel(b)]))
"""


def test_concurrent_processes_share_one_cache(tmp_path):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "shared"), KILN_CACHE="1")
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path / f"out{i}.npy")], env=env,
                              stderr=subprocess.PIPE, text=True) for i in range(3)]
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stderr.read()
    x = np.linspace(-2, 2, 42, dtype=np.float32).reshape(6, 7)
    y = np.linspace(1, 3, 35, dtype=np.float32).reshape(7, 5)
    want = np.concatenate([np.ravel(np.tanh(x) @ y + 1), np.exp(x).sum(axis=0)])
    for i in range(3):
        np.testing.assert_allclose(np.load(tmp_path / f"out{i}.npy"), want, rtol=1e-5)
    entries = _entries(tmp_path / "shared")
    assert entries and not [p for p in entries if p.name.endswith(".tmp")]
    cache = KernelCache(tmp_path / "shared")
    assert all(cache.get(p.name) is not None for p in entries)


def test_jit_reads_kernels_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KILN_CACHE", "1")
    x = random_array(RNG, (300,), np.float32)
    with recording() as first:
        got = kiln.jit(lambda v: kiln.numpy.sin(v) * 3.0)(x)
    with recording() as second:
        again = kiln.jit(lambda v: kiln.numpy.sin(v) * 3.0)(x)
    assert [d for n, _, d in first.stages if n == "kernel"] == ["kiln_elementwise_0 (compiled)"]
    assert [d for n, _, d in second.stages if n == "kernel"] == ["kiln_elementwise_0 (cached)"]
    np.testing.assert_allclose(got, np.sin(x.astype(np.float64)) * 3, rtol=1e-6)
    np.testing.assert_array_equal(again, got)


def test_stages_are_recorded_in_order():
    batch_cases = _cases()
    with recording() as timings:
        Batch(batch_cases)
    names = [n for n, _, _ in timings.stages]
    assert names == ["kernel"] * 3 + ["link"]
    text = timings.format()
    assert "kernels" in text and "3 kernels" in text and "link" in text
    assert all(seconds >= 0 for _, seconds, _ in timings.stages)


def _put(cache, key, size, mtime):
    cache.put(key, CachedKernel(b"\0" * size, 1))
    os.utime(cache.path(key), (mtime, mtime))


def test_least_recently_used_entries_are_evicted_past_the_size_limit(tmp_path):
    entry_size = len(kernel_cache._encode(CachedKernel(b"\0" * 1000, 1)))
    cache = KernelCache(tmp_path, max_bytes=10 * entry_size)
    keys = [f"{i:02x}" * 32 for i in range(10)]
    for age, key in enumerate(keys):
        _put(cache, key, 1000, 1_000_000 + age)
    assert cache.usage() == kernel_cache.CacheUsage(10, 10 * entry_size)  # at the limit: nothing evicted
    assert cache.get(keys[0]) is not None  # a hit makes the oldest entry the newest
    cache._written_since_trim = None  # the next write checks the size
    _put(cache, "ff" * 32, 1000, 2_000_000_000)
    # over the limit: trimmed to 80% (8 entries), the least recently used first (keys 1, 2, 3)
    assert cache.usage().entries == 8
    assert [cache.get(k) is not None for k in keys[:5]] == [True, False, False, False, True]
    assert cache.get("ff" * 32) is not None


def test_trim_removes_dead_writers_temporaries_and_clear_empties(tmp_path):
    cache = KernelCache(tmp_path)
    _put(cache, "ab" * 32, 100, 1_000_000)
    stale = cache.path("ab" * 32).parent / ".abababab.x.tmp"
    stale.write_bytes(b"half an entry")
    os.utime(stale, (1_000_000, 1_000_000))
    fresh = cache.path("ab" * 32).parent / ".abababab.y.tmp"
    fresh.write_bytes(b"a writer at work")
    assert cache.trim() == len(b"half an entry")
    assert not stale.exists() and fresh.exists() and cache.get("ab" * 32) is not None
    assert cache.clear() > 0 and cache.usage() == kernel_cache.CacheUsage(0, 0)


def test_size_limit_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KILN_CACHE", raising=False)
    for text, size in (("", kernel_cache.DEFAULT_MAX_BYTES), ("4096", 4096), ("64K", 65536), ("2M", 2 << 20),
                       ("1.5G", 3 << 29), ("512kb", 512 << 10)):
        monkeypatch.setenv("KILN_CACHE_MAX_SIZE", text)
        assert default_cache().max_bytes == size
    for bad in ("lots", "-1M", "0"):
        monkeypatch.setenv("KILN_CACHE_MAX_SIZE", bad)
        with pytest.raises(ValueError, match="KILN_CACHE_MAX_SIZE"):
            default_cache()


def test_kiln_cache_command(tmp_path):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path), KILN_CACHE="1")
    cache = KernelCache(tmp_path)
    _put(cache, "ab" * 32, 100, 1_000_000)

    def kiln_cache(*args):
        return subprocess.run([sys.executable, "-m", "kiln", "cache", *args], env=env, capture_output=True,
                              text=True, timeout=120)

    info = kiln_cache()
    assert info.returncode == 0 and f"{tmp_path}: 1 kernels" in info.stdout
    cleared = kiln_cache("clear")
    assert cleared.returncode == 0 and "0 kernels, 0 bytes" in cleared.stdout
    bad = kiln_cache("shrink")
    assert bad.returncode != 0 and "shrink" in bad.stderr
    off = subprocess.run([sys.executable, "-m", "kiln", "cache"], env=dict(env, KILN_CACHE="0"),
                         capture_output=True, text=True, timeout=120)
    assert off.returncode == 0 and "off" in off.stdout
