"""Where in the user's code something happened: the innermost frame outside kiln."""
from __future__ import annotations

import linecache
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceInfo:
    filename: str
    lineno: int
    function: str
    line: str = ""

    def __str__(self):
        text = f"{self.filename}:{self.lineno} in {self.function}"
        return f"{text}: {self.line}" if self.line else text


# Frames of these top-level packages are never "the user's line": the standard library and
# numpy sit between kiln and the user (contextlib, functools, numpy's dispatch).
_LIBRARIES = frozenset(sys.stdlib_module_names) | {"numpy"}


def _module_of(frame) -> str:
    return frame.f_globals.get("__name__") or ""


def _is_kiln(frame) -> bool:
    name = _module_of(frame)
    return name == "kiln" or name.startswith("kiln.")


def is_user_frame(frame) -> bool:
    return not _is_kiln(frame) and _module_of(frame).partition(".")[0] not in _LIBRARIES


def _is_entry_point(frame) -> bool:
    """The `kiln` command: frames above it are click's and the script's, never the user's."""
    return _module_of(frame).startswith("kiln.cli")


def _info(frame, lineno: int) -> SourceInfo:
    filename = frame.f_code.co_filename
    line = linecache.getline(filename, lineno).strip()
    return SourceInfo(filename, lineno, frame.f_code.co_name, line)


def user_frame_info() -> SourceInfo | None:
    """The innermost frame on the current stack that is the user's code, or None."""
    frame = sys._getframe(1)
    while frame is not None:
        if _is_entry_point(frame):
            return None
        if is_user_frame(frame):
            return _info(frame, frame.f_lineno)
        frame = frame.f_back
    return None


def traceback_user_frame_info(tb) -> SourceInfo | None:
    """The innermost frame of traceback `tb` that is the user's code, or None."""
    found = None
    while tb is not None:
        if is_user_frame(tb.tb_frame) and not _is_entry_point(tb.tb_frame):
            found = _info(tb.tb_frame, tb.tb_lineno)
        tb = tb.tb_next
    return found
