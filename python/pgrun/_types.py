"""The module's shared vocabulary: pgrun's exit statuses that are not the
command's (:data:`FAILURE`, :data:`HANDED_OFF`), the type aliases of its
arguments (paths, durations, sizes, commands) and the base of its named
exit statuses (:class:`_Outcome`). It imports nothing of the package."""

from __future__ import annotations

import datetime
import enum
import os
from decimal import Decimal
from typing import Sequence, Union

#: pgrun's own failure status (usage errors included), in every mode.
FAILURE = 125
#: ``--detach-after``: the command was still running after DUR, and the run
#: goes on detached.
HANDED_OFF = 122

StrPath = Union[str, "os.PathLike[str]"]
#: A duration: seconds as a number, a :class:`datetime.timedelta`, or a
#: string pgrun parses itself (``"30"``, ``"250ms"``, ``"2m"``).
Duration = Union[int, float, Decimal, datetime.timedelta, str]
#: A size in bytes: a number, or a string pgrun parses (``"64K"``, ``"1MB"``).
Size = Union[int, str]
#: One argument of a command, passed to pgrun as it is.
Arg = Union[str, bytes, "os.PathLike[str]"]
Argv = Sequence[Arg]


class _Outcome(enum.IntEnum):
    """An exit status with a name: compares and converts as the number,
    prints as the name (``str()``, ``format()`` and f-strings without a
    format spec), as every enum of this module does."""

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return self.name if not spec else int(self).__format__(spec)
