"""Finding the Program class that `kiln export` names: FILE.py:Class or package.module:Class."""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import click


def load_program_class(target: str):
    from kiln import Program

    if ":" not in target:
        raise click.UsageError(f"expected FILE.py:ClassName or package.module:ClassName, got {target!r}")
    where, _, class_name = target.rpartition(":")
    if where.endswith(".py") or os.sep in where:
        if not os.path.isfile(where):
            raise click.BadParameter(f"no such file: {where}", param_hint="PROGRAM")
        module_name = "_kiln_export_" + os.path.splitext(os.path.basename(where))[0]
        spec = importlib.util.spec_from_file_location(module_name, where)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.pop(0)
    else:
        if os.getcwd() not in sys.path:  # as `python -m` does: packages in the current directory import
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as e:
            raise click.BadParameter(f"cannot import {where}: {e}", param_hint="PROGRAM") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise click.BadParameter(f"{where} has no attribute {class_name!r}", param_hint="PROGRAM")
    if not (isinstance(cls, type) and issubclass(cls, Program)):
        raise click.BadParameter(f"{where}:{class_name} is not a kiln Program subclass", param_hint="PROGRAM")
    return cls
