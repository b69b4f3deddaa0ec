"""Windows of a run's output file: :func:`output` over ``pgrun output
--json``, the :class:`OutputWindow` it answers with (the window's bytes,
the offset to read on from, what was skipped, whether the file's end was
reached and whether the run is still published) and how a ``wait`` ended
(:class:`OutputOutcome`)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from typing import List, Optional

from ._binary import binary
from ._errors import PgrunError, _error
from ._options import _duration_option, _value_option
from ._types import FAILURE, Duration, Size, StrPath, _Outcome


class OutputOutcome(_Outcome):
    """How ``pgrun output`` ended (its exit status); without ``wait``,
    always :attr:`DATA`."""

    #: The window was read; with ``wait``, bytes past ``since`` came (with
    #: ``until``, a matching line).
    DATA = 0
    #: With ``wait``: the run (``pidfile``) was over first.
    OVER = 1
    #: With ``wait``: the time given passed first.
    TIMED_OUT = 124


@dataclass(frozen=True)
class OutputWindow:
    """A window of an output file (``pgrun output --json``).

    ``data`` is the window's bytes exactly as in the file, from byte
    ``since + skipped`` up to ``next``; ``text`` the window as pgrun gave it
    in its JSON (each byte that is not valid UTF-8 as U+FFFD). A window
    never ends inside a character while the run may still complete it.
    """

    data: bytes
    text: str
    #: The byte the window was asked from.
    since: int
    #: The byte to read on from: the ``since`` of the next call.
    next: int
    #: Bytes past ``since`` left out before the window (``tail``, or a
    #: matching line longer than ``max`` with ``until``).
    skipped: int
    #: Nothing more is in the file now (or only the start of a character
    #: the run may still complete).
    eof: bool
    #: With a pid file: ``running`` while the run is still published, else
    #: ``over``; ``None`` without one.
    run: Optional[str]
    outcome: OutputOutcome


def output(
    path: StrPath,
    *,
    since: int = 0,
    max: Optional[Size] = None,
    tail: Optional[Size] = None,
    wait: Optional[Duration] = None,
    until: Optional[str] = None,
    pidfile: Optional[StrPath] = None,
) -> OutputWindow:
    """A window of the output file ``path`` (``pgrun output --json``): at
    most ``max`` bytes from byte ``since`` (pgrun's default 64K), or with
    ``tail`` the last ``tail`` bytes past it. ``wait`` waits up to that long
    for bytes past ``since`` (or, with ``pidfile``, for the run's end),
    ``until`` (a regex, with ``wait``) for a line past ``since`` that
    matches, the window then ending just after it. Page through a growing
    file by passing each window's ``next`` as the next ``since``: no byte is
    read twice or left out, and no character is split. Raises
    :class:`PgrunError` on pgrun's 125 (no such file, ``since`` past its
    end, an invalid regex, ...)."""
    if isinstance(since, bool) or not isinstance(since, int) or since < 0:
        raise ValueError(f"since is a byte offset >= 0, not {since!r}")
    args: List[str] = [binary(), "output", "--json", "--since", str(since)]
    args += _value_option("--max", max) + _value_option("--tail", tail)
    args += _duration_option("--wait", wait) + _value_option("--until", until)
    args += _value_option("--pidfile", pidfile)
    file = os.fspath(path)
    done = subprocess.run([*args, "--", file], stdin=subprocess.DEVNULL, capture_output=True)
    if done.returncode not in (0, 1, 124):
        raise _error(done.returncode, done.stderr, None)
    obj = json.loads(done.stdout)
    start, end = obj["since"] + obj["skipped"], obj["next"]
    # The JSON's text is lossy (U+FFFD for bytes that are not UTF-8): the
    # bytes are read where pgrun says the window lies, in a file that is
    # only appended to.
    data = _read_at(file, start, end)
    if len(data) != end - start:
        raise PgrunError(
            f"output file {file} was cut while its window (bytes {start} to {end}) was read", FAILURE
        )
    return OutputWindow(
        data=data,
        text=obj["text"],
        since=obj["since"],
        next=end,
        skipped=obj["skipped"],
        eof=obj["eof"],
        run=obj["run"],
        outcome=OutputOutcome(done.returncode),
    )


def _read_at(file: str, start: int, end: int) -> bytes:
    """Bytes ``start`` up to ``end`` of ``file``, or fewer where it ends."""
    chunks: List[bytes] = []
    with open(file, "rb") as f:
        while start < end:
            chunk = os.pread(f.fileno(), end - start, start)
            if not chunk:
                break
            chunks.append(chunk)
            start += len(chunk)
    return b"".join(chunks)
