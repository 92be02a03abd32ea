"""Where in the user's code something happened: the first frame outside kiln."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class SourceInfo:
    filename: str
    lineno: int
    function: str
    line: str = ""

    def __str__(self):
        text = f"{self.filename}:{self.lineno} in {self.function}"
        return f"{text}: {self.line}" if self.line else text


def _is_internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_KILN_DIR + os.sep) or "/contextlib.py" in path or "/functools.py" in path


def user_frame_info() -> SourceInfo | None:
    """The innermost frame that is not kiln's own code, or None."""
    frame = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    import linecache

    filename = frame.f_code.co_filename
    line = linecache.getline(filename, frame.f_lineno).strip()
    return SourceInfo(filename, frame.f_lineno, frame.f_code.co_name, line)
