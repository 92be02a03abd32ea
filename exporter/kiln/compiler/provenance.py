"""Provenance: what a module records about where it came from (Module.provenance, format 2.3).

The producer and its versions (kiln, Python, numpy, llvmlite, LLVM), the target the kernels were
compiled for, the export options, and per traced function a SHA-256 of its IR and of each source file
its operations came from, so that a module found in a deployment can be traced back to the code and
the toolchain that made it (`kiln dump`, `kiln-run --list`)."""
from __future__ import annotations

import hashlib
import platform
import sys
from collections import Counter

import numpy as np

from ..core.ir import Graph


def _sha256_of_file(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _sources(graph: Graph) -> list[str]:
    """The files the graph's operations were traced from, most operations first."""
    counts = Counter(e.source_info.filename for e in graph.eqns if e.source_info is not None)
    return [name for name, _ in counts.most_common()]


def _version() -> str:
    import kiln

    return kiln.__version__  # the distribution's (kiln._version), read once per process


def module_provenance(procedures, target, export: str = "") -> dict[str, str]:
    """The provenance entries of a module made from `procedures` (pipeline.ProcedureSource) for
    `target` (compiler.target.Target); `export` says how it was exported (options, command)."""
    import llvmlite
    from llvmlite import binding as llvm

    out = {
        "producer": f"kiln {_version()}",
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "numpy": np.__version__,
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(str(v) for v in llvm.llvm_version_info),
        "target": f"{target.triple} cpu={target.cpu} features={target.features or '-'}",
    }
    if export:
        out["export"] = export
    for proc in procedures:
        out[f"function.{proc.name}.ir_sha256"] = hashlib.sha256(str(proc.graph).encode()).hexdigest()
        for path in _sources(proc.graph)[:4]:
            digest = _sha256_of_file(path)
            if digest is not None:
                out[f"function.{proc.name}.source.{path}"] = f"sha256 {digest}"
    return out
