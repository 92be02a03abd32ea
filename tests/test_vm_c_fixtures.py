"""runtime-c/tests/vm_test_modules.h matches what its generator writes now."""

import importlib.util
from pathlib import Path

GEN = Path(__file__).resolve().parent.parent / "runtime-c" / "tests" / "gen_vm_test_modules.py"


def test_c_test_modules_are_up_to_date():
    spec = importlib.util.spec_from_file_location("gen_vm_test_modules", GEN)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.HEADER.read_text() == gen.render(), \
        "run: python runtime-c/tests/gen_vm_test_modules.py"
