"""Run commands under pgrun from Python: a typed wrapper around the binary.

pgrun runs a command in its own process group, publishes the group id to a
pid file, stops the whole group (TERM, grace, KILL) on timeout or cancel,
and exits only when nothing of the run is left. This module runs the
``pgrun`` binary that this package installs (see :func:`binary`) with
:mod:`subprocess` and maps its exit statuses and JSON to Python types, as
pgrun's contract defines them. It adds no behaviour of its own: every
keyword is one pgrun option, and ``pgrun --help`` (or ``man pgrun``) says
what it does.

>>> import pgrun
>>> r = pgrun.run(["sh", "-c", "sleep 100 & echo hi"], timeout=30)
>>> r.stdout, r.report.reason, r.report.stragglers
(b'hi\\n', 'exited', 1)

pgrun's own failures (exit status 125: a usage error, a pid file held by a
live run, ...) raise :class:`PgrunError` carrying pgrun's one-line message
(see :func:`run` for ``report=False``).

The package is a set of small modules, each owning one part, re-exported
here (import from ``pgrun``, not from them): ``_types`` the exit statuses
and argument types, ``_report`` the report's types, ``_errors``
:class:`PgrunError`, ``_binary`` :func:`binary`, ``_options`` the command
lines, ``_readers`` :func:`status`, :func:`cancel`, :func:`wait` and
:func:`wait_ready`, ``_output`` :func:`output`, ``_ls`` :func:`ls`, and
``_runs`` :func:`run`, :func:`start` and :class:`DetachedRun`.
"""

from __future__ import annotations

# The private helpers and the type aliases are imported here too, so that
# every name ``pgrun.X`` gave when the module was one file still resolves.
from ._binary import _user_scheme, binary
from ._errors import PgrunError, _bytes, _error, _pgrun_line
from ._ls import ListedRun, ls
from ._options import _at, _command, _duration, _duration_option, _flag, _run_options, _value_option
from ._output import OutputOutcome, OutputWindow, output
from ._readers import (
    CancelOutcome,
    LiveResources,
    Listening,
    ReadyOutcome,
    Status,
    WaitOutcome,
    WaitResult,
    _status_fields,
    cancel,
    status,
    wait,
    wait_ready,
)
from ._report import _RESOURCE_FIELDS, ExitStatus, Output, Report, Resources, SentSignal, StreamStats, _stream
from ._send import SendOutcome, send
from ._runs import DetachedRun, Result, _file_identity, _handed_off_at, _report_beside, _ReportPath, run, start
from ._types import FAILURE, HANDED_OFF, Arg, Argv, Duration, Size, StrPath, _Outcome

__all__ = [
    "FAILURE",
    "HANDED_OFF",
    "CancelOutcome",
    "DetachedRun",
    "ExitStatus",
    "ListedRun",
    "LiveResources",
    "Listening",
    "Output",
    "OutputOutcome",
    "OutputWindow",
    "PgrunError",
    "ReadyOutcome",
    "Report",
    "Resources",
    "Result",
    "SendOutcome",
    "SentSignal",
    "Status",
    "StreamStats",
    "WaitOutcome",
    "WaitResult",
    "binary",
    "cancel",
    "ls",
    "output",
    "run",
    "send",
    "start",
    "status",
    "wait",
    "wait_ready",
]


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("pgrun")
    except Exception:  # not installed (a source checkout on sys.path)
        return "0+unknown"


#: The version of this package (and of the pgrun binary it ships).
__version__ = _package_version()
