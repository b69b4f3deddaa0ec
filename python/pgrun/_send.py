"""``pgrun send``: bytes to the stdin pipe of a run started with
``--stdin-pipe`` (:class:`SendOutcome`, :func:`send`)."""

from __future__ import annotations

import os
import subprocess
from typing import List, Optional, Union

from ._binary import binary
from ._errors import _bytes, _error
from ._options import _duration_option, _flag
from ._types import Duration, StrPath, _Outcome


class SendOutcome(_Outcome):
    """How ``pgrun send`` ended (its exit status)."""

    #: Every byte is in the run's stdin pipe (with ``eof``: and it is closed).
    SENT = 0
    #: No live run was found.
    NO_RUN = 1
    #: ``timeout`` passed while the command read nothing (part may have
    #: been written: pgrun's line says how much).
    TIMED_OUT = 124


def send(
    pidfile: StrPath,
    data: Union[bytes, str],
    *,
    eof: bool = False,
    timeout: Optional[Duration] = None,
) -> SendOutcome:
    """Write ``data`` (``str`` as UTF-8) to the stdin pipe of the run
    published in ``pidfile`` (``pgrun send``; the run was started with
    ``--stdin-pipe``), in writes of at most 4096 bytes that no other
    sender's interleave; ``eof=True`` then closes the pipe (``data`` may be
    empty: only close it). ``timeout`` gives up once the command has read
    nothing for that long. Raises :class:`PgrunError` on pgrun's 125: no
    stdin pipe, a closed one, another user's run."""
    payload = _bytes(data)
    args = [binary(), "send"] + _duration_option("--timeout", timeout) + _flag("--eof", eof)
    # The bytes through send's stdin, whatever they are (a NUL, any
    # length): with --eof, send reads stdin only when --file names it.
    # No bytes: an empty TEXT (nothing written, the run still looked for),
    # or with eof, nothing at all (only close the pipe).
    source: List[str]
    if payload:
        source = ["--file", "/dev/stdin", "--", os.fspath(pidfile)]
    elif eof:
        source = ["--", os.fspath(pidfile)]
    else:
        source = ["--", os.fspath(pidfile), ""]
    done = subprocess.run([*args, *source], input=payload, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode not in (0, 1, 124):
        raise _error(done.returncode, done.stderr, None)
    return SendOutcome(done.returncode)
