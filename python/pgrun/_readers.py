"""What can be asked of a published run from any process, by its pid file:
:func:`status` (``pgrun status --json``), :func:`cancel`, :func:`wait`
(with the run's report) and :func:`wait_ready` (``wait --ready listen``),
with their result types."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from ._binary import binary
from ._errors import PgrunError, _error, _pgrun_line
from ._options import _duration_option, _flag
from ._report import Report
from ._types import FAILURE, Duration, StrPath, _Outcome


@dataclass(frozen=True)
class LiveResources:
    """What a live ``--contain cgroup`` run's leaf says so far."""

    memory_bytes: Optional[int]
    pids: Optional[int]
    user_ms: Optional[int]
    system_ms: Optional[int]


@dataclass(frozen=True)
class Listening:
    """A TCP socket a process of the run listens on (``status --json``'s
    ``listening``)."""

    port: int
    #: The local address as text (IPv6 in its usual form).
    address: str
    #: The process of the run that holds it.
    pid: int


@dataclass(frozen=True)
class Status:
    """``pgrun status --json``, field by field (``null`` is ``None``).

    ``state`` is ``running``, ``stopping``, ``stale``, ``not-running`` or
    ``cancel-pending``; ``returncode`` the LSB status pgrun exited with (0
    running or stopping, 1 stale, 3 not running or cancel pending).
    """

    state: str
    pgid: Optional[int]
    pid: Optional[int]
    processes: Optional[int]
    uptime_ms: Optional[int]
    pidfile: str
    cancel_pending: bool
    starting: bool
    other_pid_namespace: bool
    ignored_marker_uid: Optional[int]
    resources: Optional[LiveResources]
    returncode: int
    raw: Dict[str, Any] = field(repr=False, compare=False)
    #: A live run's listening TCP sockets (``None`` where pgrun cannot
    #: tell: off Linux, a run in another PID namespace, no live run).
    listening: Optional[List[Listening]] = None
    #: Whether a process of a live run waits for input from its stdin (a
    #: read, or an editor's poll or select on it) and that stdin is a
    #: terminal or the run's stdin pipe: advisory, ``None`` where
    #: ``listening`` is.
    blocked_on_input: Optional[bool] = None

    @property
    def alive(self) -> bool:
        """Whether a run holds the pid file (running or stopping)."""
        return self.returncode == 0


def status(pidfile: StrPath, *, cancel_file: Optional[StrPath] = None) -> Status:
    """Whether the run published in ``pidfile`` is alive
    (``pgrun status --json``). Raises :class:`PgrunError` on pgrun's
    status 4 (an unreadable pid file, content that is not a group id) or
    125 (a usage error)."""
    args = [binary(), "status", "--json"]
    if cancel_file is not None:
        args += ["--cancel-file", os.fspath(cancel_file)]
    done = subprocess.run([*args, "--", os.fspath(pidfile)], stdin=subprocess.DEVNULL, capture_output=True)
    if done.returncode not in (0, 1, 3):
        raise _error(done.returncode, done.stderr, None)
    obj = json.loads(done.stdout)
    return Status(**_status_fields(obj), returncode=done.returncode, raw=obj)


def _status_fields(obj: Mapping[str, Any]) -> Dict[str, Any]:
    """The fields of a ``status --json`` object (also each of ``ls
    --json``'s) as :class:`Status` and :class:`~pgrun.ListedRun` hold them,
    but for ``returncode`` and ``raw``."""
    live = obj.get("resources")
    listening = obj.get("listening")
    return dict(
        state=obj["state"],
        pgid=obj["pgid"],
        pid=obj["pid"],
        processes=obj["processes"],
        uptime_ms=obj["uptime_ms"],
        pidfile=obj["pidfile"],
        cancel_pending=obj["cancel_pending"],
        starting=obj["starting"],
        other_pid_namespace=obj["other_pid_namespace"],
        ignored_marker_uid=obj.get("ignored_marker_uid"),
        resources=None
        if live is None
        else LiveResources(
            memory_bytes=live.get("memory_bytes"),
            pids=live.get("pids"),
            user_ms=live.get("user_ms"),
            system_ms=live.get("system_ms"),
        ),
        listening=None
        if listening is None
        else [Listening(port=l["port"], address=l["address"], pid=l["pid"]) for l in listening],
        blocked_on_input=obj.get("blocked_on_input"),
    )


# ---------------------------------------------------------------- cancel


class CancelOutcome(_Outcome):
    """How ``pgrun cancel`` ended (its exit status)."""

    #: The run is gone (stopped, or kept from starting).
    GONE = 0
    #: No live run was found (also when the cancel was left pending).
    NO_RUN = 1
    #: The group was still alive 1 s after the SIGKILL ``timeout`` led to.
    SURVIVED = 2


def cancel(
    pidfile: StrPath,
    *,
    timeout: Optional[Duration] = None,
    wait_start: Optional[Duration] = None,
    keep_pending: bool = False,
    no_wait: bool = False,
    force: bool = False,
    cancel_file: Optional[StrPath] = None,
    report: Optional[StrPath] = None,
    verbose: bool = False,
) -> CancelOutcome:
    """Stop the run published in ``pidfile`` from any process
    (``pgrun cancel``) and, unless ``no_wait``, wait until it is gone. With
    ``report`` (the path the run was given), a run that is over already
    (none published, and that report names ``pidfile``) is
    :attr:`CancelOutcome.NO_RUN` at once, with no marker left. Raises
    :class:`PgrunError` on pgrun's 125."""
    args = [binary(), "cancel"]
    args += _duration_option("--timeout", timeout) + _duration_option("--wait-start", wait_start)
    args += _flag("--keep-pending", keep_pending) + _flag("--no-wait", no_wait) + _flag("--force", force)
    args += _flag("--verbose", verbose)
    if cancel_file is not None:
        args += ["--cancel-file", os.fspath(cancel_file)]
    if report is not None:
        args += ["--report", os.fspath(report)]
    done = subprocess.run(
        [*args, "--", os.fspath(pidfile)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if done.returncode not in (0, 1, 2):
        raise _error(done.returncode, done.stderr, None)
    return CancelOutcome(done.returncode)


# ---------------------------------------------------------------- wait


class WaitOutcome(_Outcome):
    """How ``pgrun wait`` ended (its exit status)."""

    #: The run is over.
    OVER = 0
    #: No live run was found (none appeared in time, or the file is stale).
    NO_RUN = 1
    #: ``timeout`` passed while the run still lives (it is left alone).
    TIMED_OUT = 124


@dataclass(frozen=True)
class WaitResult:
    """The outcome of :func:`wait`, and the run's report when a report path
    was given and the run is over."""

    outcome: WaitOutcome
    report: Optional[Report]


def wait(
    pidfile: StrPath,
    *,
    timeout: Optional[Duration] = None,
    wait_start: Optional[Duration] = None,
    report: Optional[StrPath] = None,
) -> WaitResult:
    """Wait from any process until the run published in ``pidfile`` is over
    (``pgrun wait``). With ``report`` (the path the run was given), it is
    ``pgrun wait --report``: once the run is over, pgrun checks that the
    report there is this run's (it names the run's process group; it gives
    pgrun a moment to write it) and the report is then parsed. A run that
    is over already (none published, and that report names ``pidfile``) is
    answered at once, without ``wait_start``. Raises
    :class:`PgrunError` on pgrun's 125, and when the run is over but its
    report is missing, unreadable or another run's."""
    args = [binary(), "wait"]
    args += _duration_option("--timeout", timeout) + _duration_option("--wait-start", wait_start)
    if report is not None:
        args += ["--report", os.fspath(report)]
    done = subprocess.run(
        [*args, "--", os.fspath(pidfile)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    said = _pgrun_line(done.stderr)
    if report is None or said is not None:
        # Without --report, or wait's own outcome (it says each in a line):
        # 0 over, 1 no run, 124 timed out, 125 an error.
        if done.returncode not in (0, 1, 124):
            raise _error(done.returncode, done.stderr, None)
        return WaitResult(outcome=WaitOutcome(done.returncode), report=None)
    # Over, and the exit status is the run's own, from its report (which
    # pgrun wait said nothing about: it found it and it was this run's).
    try:
        parsed = Report.load(report)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PgrunError(f"cannot read report {os.fspath(report)}: {e}", FAILURE) from e
    if parsed.exit_code != done.returncode:
        raise PgrunError(
            f"report {os.fspath(report)} was replaced: it gives exit status {parsed.exit_code}, "
            f"pgrun wait read {done.returncode} there",
            FAILURE,
            report=parsed,
        )
    return WaitResult(outcome=WaitOutcome.OVER, report=parsed)


class ReadyOutcome(_Outcome):
    """How ``pgrun wait --ready`` ended (its exit status)."""

    #: A process of the run listens as asked.
    READY = 0
    #: The run was over first (or no live run was found).
    OVER = 1
    #: ``timeout`` passed first (the run is left alone).
    TIMED_OUT = 124


def wait_ready(
    pidfile: StrPath,
    *,
    port: Optional[int] = None,
    timeout: Optional[Duration] = None,
    wait_start: Optional[Duration] = None,
) -> ReadyOutcome:
    """Wait until a process of the run published in ``pidfile`` listens on
    TCP ``port`` (any port if ``None``), IPv4 or IPv6
    (``pgrun wait --ready listen[:PORT]``); a socket held outside the run
    never counts. Linux only. Raises :class:`PgrunError` on pgrun's 125
    (also off Linux, where it is not available)."""
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise ValueError(f"port must be a TCP port from 1 to 65535, not {port!r}")
    args = [binary(), "wait", "--ready", "listen" if port is None else f"listen:{port}"]
    args += _duration_option("--timeout", timeout) + _duration_option("--wait-start", wait_start)
    done = subprocess.run(
        [*args, "--", os.fspath(pidfile)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if done.returncode not in (0, 1, 124):
        raise _error(done.returncode, done.stderr, None)
    return ReadyOutcome(done.returncode)
