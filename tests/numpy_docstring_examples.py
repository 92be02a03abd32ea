"""Runs numpy's own docstring examples against kiln.numpy: each example of a function that kiln.numpy shares
with numpy runs twice, once with numpy and once with `np` standing for kiln.numpy (numpy's names where kiln has none), and every
value the examples display is compared (shape, dtype, values; NaN equal to NaN; 1e-6 relative tolerance for
floats, since kiln may round float32 differently in the last place).

Out of scope, as issue 9 states: examples that involve complex, string, object, datetime, structured or
masked data, and examples whose numpy result is not reproducible (unseeded random numbers, timings).

    python tests/numpy_docstring_examples.py            # the report, per function and in total
"""
from __future__ import annotations

import contextlib
import doctest
import io
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

_OUT_OF_SCOPE_SOURCE = re.compile(
    r"\d[jJ]\b|complex|np\.ma\b|masked|datetime|timedelta|dtype=object|dtype=\"?'?[OSUMmV]|'<U|np\.str_|"
    r"np\.bytes_|np\.void|np\.char\b|np\.rec\b|recarray|np\.random\.(?!seed|default_rng\(\d)|np\.matrix|np\.poly1d|"
    r"np\.lib\.|np\.testing|np\.empty|np\.errstate|set_printoptions|printoptions|tofile|fromfile|np\.save|np\.load|"
    r"StringIO|BytesIO|\bstr\(|np\.memmap|__array_function__|np\.emath|np\.polynomial|np\.fft|ctypes|"
    r"np\.dtype\(\[|np\.array\(\[\(|dtype=\[|timeit|\(t2 ?- ?t1\)")


@dataclass
class Outcome:
    name: str
    passed: int = 0
    failed: list = field(default_factory=list)
    out_of_scope: int = 0


def _kinds(value):
    if isinstance(value, (tuple, list)):
        out = set()
        for v in value:
            out |= _kinds(v)
        return out
    if isinstance(value, np.ndarray | np.generic):
        return {value.dtype.kind}
    if isinstance(value, complex | str | bytes):
        return {"c"}
    return set()


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        if not isinstance(a, (tuple, list)) or not isinstance(b, (tuple, list)) or len(a) != len(b):
            return False
        return all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray | np.generic | int | float | bool) or isinstance(b, np.ndarray | np.generic):
        try:
            x, y = np.asarray(a), np.asarray(b)
        except Exception:
            return False
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.dtype.kind == "f":
            return bool(np.allclose(x, y, rtol=1e-6, atol=0, equal_nan=True))
        return bool(np.array_equal(x, y))
    if a is None or b is None:
        return a is b
    try:
        return bool(a == b)
    except Exception:
        return repr(a) == repr(b)


def _run(example, namespace):
    """(displayed value or printed text, exception type or None)."""
    source = example.source
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            try:
                code = compile(source, "<example>", "eval")
            except SyntaxError:
                exec(compile(source, "<example>", "exec"), namespace)
                return ("printed", out.getvalue()), None
            value = eval(code, namespace)
            return ("value", value, out.getvalue()), None
        except Exception as e:  # noqa: BLE001 - an example may raise on purpose
            return None, type(e)


class _KilnFirst:
    """kiln.numpy where it has the name, numpy where it does not (constants, dtypes, the long tail)."""

    def __init__(self, kiln_module, numpy_module):
        self._kiln, self._numpy = kiln_module, numpy_module

    def __getattr__(self, attr):
        if attr == "linalg" and hasattr(self._kiln, "linalg"):
            return _KilnFirst(self._kiln.linalg, self._numpy.linalg)
        value = getattr(self._kiln, attr, None)
        return value if value is not None else getattr(self._numpy, attr)


def _namespace(np_module):
    return {"np": np_module, "numpy": np_module}


def _displayed_equal(want, got) -> bool:
    if want[0] != got[0]:
        return False
    if want[0] == "printed":
        return want[1] == got[1] or _numbers_equal(want[1], got[1])
    return _same(want[1], got[1]) and (want[2] == got[2] or _numbers_equal(want[2], got[2]))


_SCALAR_REPR = re.compile(r"(?:np\.\w+|Array)\(([^()]*)\)")


def _numbers_equal(a: str, b: str) -> bool:
    """Printed text equal up to float rounding in the last places, and up to how a scalar shows
    (numpy's np.int64(5) and a 0-d kiln array's Array(5) are both 5)."""
    a, b = _SCALAR_REPR.sub(r"\1", a), _SCALAR_REPR.sub(r"\1", b)
    number = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf"
    if re.sub(number, "#", a) != re.sub(number, "#", b):
        return False
    xs, ys = re.findall(number, a), re.findall(number, b)
    return all(np.isclose(float(x), float(y), rtol=1e-6, equal_nan=True) for x, y in zip(xs, ys))


def check_function(path: str, numpy_function) -> Outcome:
    """Runs the docstring examples of numpy's `path` (e.g. "linalg.norm") with `np` standing for kiln.numpy
    (numpy's names where kiln has none); counts the examples doctest would check (those that display something or raise)."""
    outcome = Outcome(path)
    examples = doctest.DocTestParser().get_examples(numpy_function.__doc__ or "")
    if not examples:
        return outcome
    import kiln.numpy as knp

    name = path.rpartition(".")[2]
    reference, second, kiln_ns = _namespace(np), _namespace(np), _namespace(_KilnFirst(knp, np))
    np.random.seed(0)
    for example in examples:
        want, want_error = _run(example, reference)
        again, _ = _run(example, second)
        got, got_error = _run(example, kiln_ns)
        values = [want[1]] if want is not None and want[0] == "value" else []
        if (_OUT_OF_SCOPE_SOURCE.search(example.source) or _kinds(values) & set("cOSUMmV")
                or (want is not None and again is not None and not _displayed_equal(want, again))):
            outcome.out_of_scope += 1
            continue
        if not example.want.strip() and want_error is None:
            continue
        if want is None:
            ok = got is None
        else:
            ok = got is not None and _displayed_equal(want, got)
        if ok:
            outcome.passed += 1
        else:
            shown = f"raised {got_error.__name__}" if got is None else repr(got[1])[:200]
            outcome.failed.append((example.source.strip(), shown))
    return outcome


def shared_functions():
    """(path, numpy function, kiln function) for every callable both numpy and kiln.numpy (and .linalg) have."""
    import kiln.numpy as knp

    pairs = []
    for module_path, npm, km in (("", np, knp), ("linalg", np.linalg, getattr(knp, "linalg", None))):
        if km is None:
            continue
        for name in sorted(dir(km)):
            if name.startswith("_") or not hasattr(npm, name):
                continue
            nf, kf = getattr(npm, name), getattr(km, name)
            if not callable(nf) or isinstance(nf, type) or not getattr(nf, "__doc__", None):
                continue
            pairs.append((f"{module_path}.{name}".lstrip("."), nf, kf))
    return pairs


def run_all():
    return [check_function(path, nf) for path, nf, _ in shared_functions()]


def report(outcomes) -> str:
    passed = sum(o.passed for o in outcomes)
    failed = sum(len(o.failed) for o in outcomes)
    scope = sum(o.out_of_scope for o in outcomes)
    lines = [f"numpy docstring examples through kiln.numpy: {passed} / {passed + failed} in-scope examples pass "
             f"({100 * passed / max(passed + failed, 1):.1f}%) over {len(outcomes)} functions; {scope} out of scope"]
    for o in outcomes:
        for source, shown in o.failed:
            lines.append(f"  FAIL {o.name}: {source.splitlines()[0][:110]}  -> {shown[:120]}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run_all()))
