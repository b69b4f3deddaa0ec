"""The runs published in a folder: :func:`ls` over ``pgrun ls --json``, one
:class:`ListedRun` per pid file found there (a live run's, or a stale
one's), with the fields of ``status --json`` and the leader's command."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ._binary import binary
from ._errors import _error
from ._readers import Listening, LiveResources, _status_fields
from ._types import StrPath


@dataclass(frozen=True)
class ListedRun:
    """One pid file of the folder :func:`ls` listed: the fields of
    :class:`Status` (``state`` is ``running``, ``stopping`` or ``stale``,
    or ``starting`` while a starting run replaces a stale file; ``null`` is
    ``None``) but ``returncode``, and ``command``, the arguments of the
    run's leader (``None`` where they cannot be read: a stale file, another
    user's process)."""

    pidfile: str
    command: Optional[List[str]]
    state: str
    pgid: Optional[int]
    pid: Optional[int]
    processes: Optional[int]
    uptime_ms: Optional[int]
    cancel_pending: bool
    starting: bool
    other_pid_namespace: bool
    ignored_marker_uid: Optional[int]
    resources: Optional[LiveResources]
    listening: Optional[List[Listening]]
    blocked_on_input: Optional[bool]
    #: The whole object, fields a later pgrun adds included.
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def alive(self) -> bool:
        """Whether a run holds the pid file (running or stopping), as
        :attr:`Status.alive` says it."""
        return self.state in ("running", "stopping")


def ls(folder: StrPath) -> List[ListedRun]:
    """The runs published in ``folder`` (``pgrun ls --json``): every regular
    file there whose content is a pid file's, sorted by name; other files
    are not listed. pgrun reads only the folder, the pid files, their locks
    and markers, and the runs' own processes. Raises :class:`PgrunError` on
    pgrun's 125 (the folder cannot be read)."""
    done = subprocess.run(
        [binary(), "ls", "--json", "--", os.fspath(folder)], stdin=subprocess.DEVNULL, capture_output=True
    )
    if done.returncode != 0:
        raise _error(done.returncode, done.stderr, None)
    return [
        ListedRun(**_status_fields(obj), command=obj.get("command"), raw=obj) for obj in json.loads(done.stdout)
    ]
