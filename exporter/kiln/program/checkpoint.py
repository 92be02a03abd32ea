"""Globals checkpoints in kiln-run's .npz format, so Python and `kiln-run --globals-in/--globals-out`
read each other's files.

The archive holds one stored `NAME.npy` entry per global, NAME being the module's global name
(`_params.w1`, `_step`), every global in the module's order. numpy has no bfloat16, so a bf16 global is
written as its raw bits (uint16), as kiln-run writes it; reading takes uint16 or ml_dtypes' void `V2`
for a bf16 global. Reading checks every entry (a global of the module, its dtype and shape) and, unless
partial, that every global is present, before it sets any.
"""
from __future__ import annotations

import io
import os
import zipfile

import numpy as np

_DOS_EPOCH = (1980, 1, 1, 0, 0, 0)  # a fixed entry date, as kiln-run writes: the same state gives the same file


def save_globals(context, path, where: str) -> None:
    """Writes every global of `context` to the .npz at `path` (through a temporary file, so a failed save
    leaves no partial archive)."""
    path = os.fspath(path)
    entries = []
    for info in context.module.globals:
        value = context.get_global(info.name)
        if info.kiln_dtype == "bf16":
            value = value.view(np.uint16)
        entries.append((info.name, value.astype(value.dtype.newbyteorder("<"), copy=False)))
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
            for name, value in entries:
                data = io.BytesIO()
                np.lib.format.write_array(data, value, allow_pickle=False)
                archive.writestr(zipfile.ZipInfo(name + ".npy", _DOS_EPOCH), data.getvalue())
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise OSError(f"{where}: cannot write '{path}': {e.strerror or e}") from None


def load_globals(context, path, partial: bool, where: str) -> None:
    """Sets globals of `context` from the .npz at `path` after checking all of it."""
    from kiln.vm._dtypes import kiln_dtype

    path = os.fspath(path)
    module = context.module
    infos = {g.name: g for g in module.globals}
    try:
        archive = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: no such file '{path}'") from None
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"{where}: '{path}' is not a .npz archive ({e})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{where}: '{path}' is a single .npy array, not a .npz archive of globals")
    values = {}
    with archive:
        for name in archive.files:
            info = infos.get(name)
            if info is None:
                raise ValueError(f"{where}: '{path}': module '{module.name}' has no global '{name}'")
            try:
                value = archive[name]
            except (OSError, ValueError, zipfile.BadZipFile) as e:
                raise ValueError(f"{where}: '{path}': global '{name}': unreadable entry ({e})") from None
            if not isinstance(value, np.ndarray):
                raise ValueError(f"{where}: '{path}': global '{name}': the entry is not a .npy array")
            value = value.astype(value.dtype.newbyteorder("="), copy=False)
            if info.kiln_dtype == "bf16" and value.dtype in (np.dtype(np.uint16), np.dtype("V2")):
                value = value.view(info.dtype)
            got = kiln_dtype(value.dtype, expected=info.kiln_dtype)
            if got != info.kiln_dtype or value.shape != info.shape:
                got_type = "x".join([*(str(d) for d in value.shape), got or f"numpy {value.dtype}"])
                raise ValueError(f"{where}: '{path}': global '{name}': expected {info.type_str}, got {got_type}")
            values[name] = value
    missing = [name for name in infos if name not in values]
    if missing and not partial:
        listed = ", ".join(f"'{n}'" for n in missing[:8]) + (", ..." if len(missing) > 8 else "")
        raise ValueError(
            f"{where}: '{path}' lacks {len(missing)} of the {len(infos)} globals of module '{module.name}': "
            f"{listed} (give every global, or pass partial=True to keep the others' values)")
    for name, value in values.items():
        context.set_global(name, value)
