"""The frontend's layers point one way (DESIGN.md §9, docs/internals.md "Layers").

core imports nothing above it; transforms import only core; lax imports core and transforms;
kiln.numpy sits on lax; kiln.random sits on kiln.numpy, kiln.scipy on kiln.numpy and kiln.random (Rotation.random
draws with it); kiln.vm imports nothing from the frontend. Every import counts, function-local
ones included. A new upward import fails here with the file, the line and the rule it breaks; the few
that stay on purpose are listed in ALLOWED_EXCEPTIONS with the reason.
"""
from __future__ import annotations

import ast
import functools
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_ROOTS = {"kiln": ROOT / "exporter" / "kiln", "kiln.vm": ROOT / "vm"}

# layer -> the layers it may import
RULES = {
    "core": {"core"},
    "transforms": {"core", "transforms"},
    "lax": {"core", "transforms", "lax"},
    "numpy": {"core", "transforms", "lax", "numpy"},
    "scipy": {"core", "transforms", "lax", "numpy", "random", "scipy"},
    "random": {"core", "transforms", "lax", "numpy", "random"},
    "vm": {"vm"},
}

_USER_API = ("the user-facing transformations (grad, vmap, jacfwd, ...) sit above lax like jax._src.api: they "
             "convert user outputs with kiln.numpy.asarray (lists of tracers stack) and reshape Jacobians")
# (file relative to the repository, imported module) -> why this upward import stays
ALLOWED_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("exporter/kiln/core/trace.py", "kiln.numpy"):
        "lazy: kiln.numpy installs the operators tracers forward to their aval; core imports it only when "
        "nothing has installed them yet, so `import kiln.lax` alone still gives traced arrays their operators",
    ("exporter/kiln/transforms/api.py", "kiln.lax.prims"): _USER_API + "; stop_gradient binds lax's primitive",
    ("exporter/kiln/transforms/api.py", "kiln.numpy"): _USER_API,
    ("exporter/kiln/transforms/api.py", "kiln.numpy._base"): _USER_API,
    ("exporter/kiln/transforms/custom.py", "kiln.numpy._base"):
        "custom_jvp/custom_vjp are user API: they convert the user's rule outputs with kiln.numpy.asarray",
    ("exporter/kiln/transforms/linear_call.py", "kiln.numpy._base"):
        "linear_call is user API, as custom_jvp/custom_vjp: it converts the user's function outputs with "
        "kiln.numpy.asarray",
    ("exporter/kiln/lax/api.py", "kiln.config"):
        "function-local read of JAX's flag jax_allow_f16_reductions (kiln.config holds the flag values only)",
    ("exporter/kiln/scipy/special/_logsumexp.py", "kiln.config"):
        "function-local read of JAX's flag jax_softmax_custom_jvp (kiln.config holds the flag values only)",
}


@dataclass(frozen=True)
class Import:
    file: str
    line: int
    source_layer: str
    target: str
    target_layer: str
    function_local: bool


def module_name(path: Path) -> str:
    """The import name of a source file under one of the package roots."""
    for package, folder in sorted(PACKAGE_ROOTS.items(), key=lambda item: -len(item[0])):
        if path.is_relative_to(folder):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([package, *parts])
    raise ValueError(path)


def layer_of(module: str) -> str:
    """kiln.core.trace -> core, kiln.vm.reader -> vm, kiln.jit -> jit, kiln -> kiln (the top)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_submodule(module: str) -> bool:
    for package, folder in sorted(PACKAGE_ROOTS.items(), key=lambda item: -len(item[0])):
        if module == package or module.startswith(package + "."):
            rest = module[len(package):].lstrip(".").split(".") if module != package else []
            base = folder.joinpath(*rest)
            return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
    return False


def imported_modules(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The kiln modules an import statement loads (`from pkg import sub` counts as pkg.sub)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == "kiln"]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    if source.split(".")[0] != "kiln":
        return []
    targets = [f"{source}.{alias.name}" for alias in node.names if _is_submodule(f"{source}.{alias.name}")]
    return targets or [source]


def all_imports() -> list[Import]:
    found = []
    for folder in PACKAGE_ROOTS.values():
        for path in sorted(folder.rglob("*.py")):
            if "_native" in path.parts or "_generated" in path.parts:
                continue
            module = module_name(path)
            tree = ast.parse(path.read_text(), str(path))
            local_lines = {n.lineno for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                           for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                for target in imported_modules(node, module, path.name == "__init__.py"):
                    found.append(Import(str(path.relative_to(ROOT)), node.lineno, layer_of(module), target,
                                        layer_of(target), node.lineno in local_lines))
    return found


@functools.cache  # both tests read every source file's imports: parsed once (4 s of CPU each)
def upward_imports() -> tuple[Import, ...]:
    return tuple(i for i in all_imports() if i.source_layer in RULES and i.target_layer not in RULES[i.source_layer])


def test_imports_point_down():
    violations = [i for i in upward_imports() if (i.file, i.target) not in ALLOWED_EXCEPTIONS]
    message = "\n".join(
        f"{i.file}:{i.line}: {i.source_layer} imports {i.target} ({i.target_layer}); "
        f"rule: {i.source_layer} may import only {', '.join(sorted(RULES[i.source_layer]))}"
        for i in violations)
    assert not violations, "upward imports:\n" + message


def test_allowed_exceptions_are_still_needed():
    present = {(i.file, i.target) for i in upward_imports()}
    stale = sorted(set(ALLOWED_EXCEPTIONS) - present)
    assert not stale, f"exceptions no longer used (remove them from ALLOWED_EXCEPTIONS): {stale}"


@pytest.mark.parametrize("module", ["kiln.vm.reader", "kiln.vm.runtime", "kiln.vm"])
def test_vm_loads_without_the_frontend(module):
    code = (f"import sys, {module}\n"
            "frontend = ['kiln.core', 'kiln.lax', 'kiln.numpy', 'kiln.transforms', 'kiln.program', 'kiln.compiler']\n"
            "print(' '.join(m for m in frontend if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert not loaded, f"import {module} loaded the frontend: {loaded}"


def test_lazy_package_names_work_as_before():
    code = ("import kiln.program, kiln\n"  # loading the submodule kiln.jit must not hide the function kiln.jit
            "from kiln import Program, grad\n"
            "import kiln.numpy as knp\n"
            "assert callable(kiln.jit) and kiln.Program is Program and kiln.grad is grad\n"
            "assert set(kiln.__all__) <= set(dir(kiln))\n"
            "assert all(getattr(kiln, name) is not None for name in kiln.__all__)\n"
            "print(float(kiln.jit(lambda x: knp.sum(x * 2))(knp.ones(3))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "6.0"


if __name__ == "__main__":
    for imp in upward_imports():
        print(f"{imp.file}:{imp.line}: {imp.source_layer} -> {imp.target} ({'local' if imp.function_local else 'module'})")
