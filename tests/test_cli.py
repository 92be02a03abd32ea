"""The kiln command: export (file and module forms), run, dump, and its error handling."""
import os

import numpy as np

from kiln_tools import ROOT, run_kiln_cli

EXAMPLE = os.path.join(ROOT, "examples", "linear.py")


def test_export_run_and_dump(tmp_path, linear_example):
    out = tmp_path / "linear.vmfb"
    proc = run_kiln_cli("export", f"{EXAMPLE}:Linear", "-o", str(out))
    assert "wrote" in proc.stdout and out.stat().st_size > 0
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    np.save(tmp_path / "x.npy", x)
    run = run_kiln_cli("run", str(out), "--function", "predict", f"--input=@{tmp_path / 'x.npy'}",
                       f"--output=@{tmp_path / 'y.npy'}")
    assert run.returncode == 0
    p = linear_example.params
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.tanh(x @ p.w + p.b), rtol=1e-5)
    text = run_kiln_cli("run", str(out), "--function", "predict", "--input=4x3xf32=1").stdout
    assert "4x4xf32" in text
    dump = run_kiln_cli("dump", str(out)).stdout
    for expected in ("module 'linear'", "predict(x: 4x3xf32)", "_params.w: 3x4xf32 mutable", "dispatch kernel(",
                     "global.store global(_calls)", "x86_64"):
        assert expected in dump, expected


def test_export_by_module_path(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "prog.py").write_text(
        "import numpy as np\nimport kiln.numpy as knp\nfrom kiln import Program\n"
        "class Doubler(Program):\n"
        "    def double(self, x=Program.like(np.zeros((3,), np.float32))):\n"
        "        return x * 2\n"
    )
    out = tmp_path / "d.vmfb"
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env_path}"
    try:
        run_kiln_cli("export", "mypkg.prog:Doubler", "-o", str(out))
    finally:
        os.environ["PYTHONPATH"] = env_path
    text = run_kiln_cli("run", str(out), "-f", "double", "--input=3xf32=1,2,3").stdout
    assert "2" in text and "6" in text


def test_errors_are_one_line_and_exit_nonzero(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import numpy as np\nfrom kiln import Program\n"
        "class Bad(Program):\n"
        "    def f(self, x=Program.like(np.zeros((2,), np.float32))):\n"
        "        if x.sum() > 0:\n"
        "            return x\n"
        "        return -x\n"
    )
    proc = run_kiln_cli("export", f"{bad}:Bad", "-o", str(tmp_path / "o.vmfb"), check=False)
    assert proc.returncode != 0
    assert proc.stderr.startswith("kiln: error: ConcretizationError")
    assert "bad.py:5" in proc.stderr and "Traceback" not in proc.stderr
    verbose = run_kiln_cli("--verbose", "export", f"{bad}:Bad", "-o", str(tmp_path / "o.vmfb"), check=False)
    assert verbose.returncode != 0 and "Traceback" in verbose.stderr

    missing = run_kiln_cli("export", f"{tmp_path}/nope.py:X", "-o", str(tmp_path / "o.vmfb"), check=False)
    assert missing.returncode != 0 and "no such file" in missing.stderr
    not_program = run_kiln_cli("export", f"{EXAMPLE}:Params", "-o", str(tmp_path / "o.vmfb"), check=False)
    assert not_program.returncode != 0 and "not a kiln Program" in not_program.stderr
    no_class = run_kiln_cli("export", f"{EXAMPLE}:Nope", "-o", str(tmp_path / "o.vmfb"), check=False)
    assert no_class.returncode != 0 and "Nope" in no_class.stderr

    garbage = tmp_path / "garbage.vmfb"
    garbage.write_bytes(b"\x00" * 64)
    dumped = run_kiln_cli("dump", str(garbage), check=False)
    assert dumped.returncode != 0 and "kiln: error" in dumped.stderr and "Traceback" not in dumped.stderr
    ran = run_kiln_cli("run", str(garbage), "-f", "x", check=False)
    assert ran.returncode != 0 and "error" in ran.stderr


def test_kiln_run_unknown_function_through_the_cli(tmp_path):
    out = tmp_path / "linear.vmfb"
    run_kiln_cli("export", f"{EXAMPLE}:Linear", "-o", str(out))
    proc = run_kiln_cli("run", str(out), "-f", "nope", check=False)
    assert proc.returncode != 0 and "nope" in proc.stderr
