"""numpy's own docstring examples, run against kiln.numpy (tests/numpy_docstring_examples.py): prints the
pass rate, and requires every in-scope example to pass except the deliberate differences below, each of
which docs/numpy.md lists (and each of which must still fail, so the list stays true)."""
from pathlib import Path

import pytest

import numpy_docstring_examples as examples

DOCS = (Path(__file__).resolve().parent.parent / "docs" / "numpy.md").read_text()

# (function, first line of the example) -> the difference, as docs/numpy.md names it
DELIBERATE_DIFFERENCES = {
    ("einsum", "a"): "immutable arrays: out= is refused",
    ("tensordot", "c == d"): "immutable arrays: x[idx] = v is refused (d[i, j] += ... on a kiln array)",
    ("linalg.tensordot", "c == d"): "immutable arrays: x[idx] = v is refused (d[i, j] += ... on a kiln array)",
}
# Examples that fail for want of a feature not built yet (not differences): each names the missing piece.
NOT_YET = {
    ("tensordot", "a; A"): "an earlier example's failure leaves A undefined",
    ("linalg.tensordot", "a; A"): "an earlier example's failure leaves A undefined",
}


@pytest.fixture(scope="module")
def outcomes():
    return examples.run_all()


def test_report(outcomes, capsys):
    with capsys.disabled():
        print("\n" + examples.report(outcomes))


def test_in_scope_examples_pass(outcomes):
    failing = {(o.name, source.splitlines()[0]): shown for o in outcomes for source, shown in o.failed}
    unexpected = {k: v for k, v in failing.items() if k not in DELIBERATE_DIFFERENCES and k not in NOT_YET}
    assert not unexpected, "numpy docstring examples that fail under kiln.numpy:\n" + "\n".join(
        f"  {name}: {src}  -> {shown[:200]}" for (name, src), shown in unexpected.items())
    fixed = [k for k in {**DELIBERATE_DIFFERENCES, **NOT_YET} if k not in failing]
    assert not fixed, f"these examples pass now; remove them from the lists: {fixed}"


@pytest.mark.parametrize("difference", sorted(set(DELIBERATE_DIFFERENCES.values())))
def test_each_difference_is_documented(difference):
    assert difference.split(":")[0] in DOCS, f"docs/numpy.md does not mention {difference!r}"
