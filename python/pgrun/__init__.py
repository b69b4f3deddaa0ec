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
"""

from __future__ import annotations

import datetime
import enum
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union, overload

__all__ = [
    "FAILURE",
    "HANDED_OFF",
    "CancelOutcome",
    "DetachedRun",
    "ExitStatus",
    "LiveResources",
    "Listening",
    "Output",
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
    "run",
    "send",
    "start",
    "status",
    "wait",
    "wait_ready",
]

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


class PgrunError(Exception):
    """pgrun itself failed (exit status 125, or 4 from ``pgrun status``).

    ``message`` is pgrun's one error line (``pgrun: ...``); where pgrun
    said none that this module saw (a run cancelled before it started, a
    report :func:`wait` cannot read, a 125 without a report or a captured
    stderr), it is the module's own account, not prefixed. ``returncode``
    the status pgrun exited with, ``stderr`` all that it wrote there (empty
    when stderr was not captured) and ``report`` the run's report if one
    was written.
    """

    def __init__(
        self,
        message: str,
        returncode: int,
        stderr: bytes = b"",
        report: Optional["Report"] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.returncode = returncode
        self.stderr = stderr
        self.report = report


# ---------------------------------------------------------------- the report


class _Outcome(enum.IntEnum):
    """An exit status with a name: compares and converts as the number,
    prints as the name (``str()``, ``format()`` and f-strings without a
    format spec), as every enum of this module does."""

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return self.name if not spec else int(self).__format__(spec)


@dataclass(frozen=True)
class ExitStatus:
    """How the command ended: its exit ``code`` or the ``signal`` name that
    ended it (the other ``None``; both ``None`` if it never ran)."""

    code: Optional[int]
    signal: Optional[str]


@dataclass(frozen=True)
class SentSignal:
    """A stop-sequence signal pgrun sent, ``at_ms`` after pgrun started."""

    signal: str
    at_ms: int


@dataclass(frozen=True)
class StreamStats:
    """One output stream that went through pgrun: ``bytes`` the command
    wrote, ``omitted`` by ``--max-output``, and ``error`` when a failed read
    or write cut the stream short (``None`` when nothing failed)."""

    bytes: int
    omitted: int
    error: Optional[str] = None


@dataclass(frozen=True)
class Output:
    """The report's ``output``: per stream, and the ``--output-file`` path
    (``file``) with the error that ended its copy early (``file_error``)."""

    stdout: StreamStats
    stderr: StreamStats
    file: Optional[str] = None
    file_error: Optional[str] = None


@dataclass(frozen=True)
class Resources:
    """What the run used. The cgroup figures are ``None`` outside
    ``--contain cgroup`` (or where the leaf lacks the file)."""

    user_ms: int
    system_ms: int
    max_rss_kb: int
    memory_peak_bytes: Optional[int]
    pids_peak: Optional[int]
    oom_kills: Optional[int]


@dataclass(frozen=True)
class Report:
    """pgrun's ``--report`` JSON, field by field (``null`` is ``None``).

    ``reason`` is one of ``exited``, ``signaled``, ``timeout``,
    ``idle-timeout``, ``oom``, ``cancelled``, ``cancelled-before-start``,
    ``error``; ``error`` is pgrun's message when ``reason`` is ``error``.
    ``raw`` holds the whole object, fields a later pgrun adds included.
    """

    exit_code: int
    reason: str
    status: ExitStatus
    pgid: Optional[int]
    #: The run's pid file by its absolute path (``None`` without one, or
    #: in a report of a pgrun before reports named it).
    pidfile: Optional[str]
    signals: List[SentSignal]
    stragglers: int
    unreaped: int
    unstopped: int
    output: Optional[Output]
    contain: str
    cgroup_via: Optional[str]
    escaped: int
    cgroup_left: Optional[str]
    resources: Resources
    duration_ms: int
    error: Optional[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Report":
        """Build a report from the parsed JSON object."""
        output = obj["output"]
        return cls(
            exit_code=obj["exit_code"],
            reason=obj["reason"],
            status=ExitStatus(code=obj["status"]["code"], signal=obj["status"]["signal"]),
            pgid=obj["pgid"],
            pidfile=obj.get("pidfile"),
            signals=[SentSignal(signal=s["signal"], at_ms=s["at_ms"]) for s in obj["signals"]],
            stragglers=obj["stragglers"],
            unreaped=obj["unreaped"],
            unstopped=obj["unstopped"],
            output=None
            if output is None
            else Output(
                stdout=_stream(output["stdout"]),
                stderr=_stream(output["stderr"]),
                file=output.get("file"),
                file_error=output.get("file_error"),
            ),
            contain=obj["contain"],
            cgroup_via=obj.get("cgroup_via"),
            escaped=obj["escaped"],
            cgroup_left=obj["cgroup_left"],
            resources=Resources(**{k: obj["resources"][k] for k in _RESOURCE_FIELDS}),
            duration_ms=obj["duration_ms"],
            error=obj.get("error"),
            raw=dict(obj),
        )

    @classmethod
    def load(cls, path: StrPath) -> "Report":
        """Read and parse the report pgrun wrote to ``path``."""
        with open(path, "rb") as f:
            return cls.from_json(json.load(f))


_RESOURCE_FIELDS = ("user_ms", "system_ms", "max_rss_kb", "memory_peak_bytes", "pids_peak", "oom_kills")


def _stream(obj: Mapping[str, Any]) -> StreamStats:
    return StreamStats(bytes=obj["bytes"], omitted=obj["omitted"], error=obj.get("error"))


# ---------------------------------------------------------------- the binary


def binary() -> str:
    """The path of the ``pgrun`` binary this package installed.

    Looked for in the scripts folder of the environment the module is
    installed in (a venv's ``bin``), the user scheme's (``pip install
    --user``), next to the package (``pip install --target DIR`` puts it in
    ``DIR/bin``), and last on ``PATH``. Raises :class:`FileNotFoundError`
    if there is none.
    """
    name = "pgrun" + (sysconfig.get_config_var("EXE") or "")
    candidates = [sysconfig.get_path("scripts")]
    user_scheme = _user_scheme()
    if user_scheme is not None:
        candidates.append(sysconfig.get_path("scripts", scheme=user_scheme))
    candidates.append(str(Path(__file__).resolve().parent.parent / "bin"))
    for folder in candidates:
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found is not None:
        return found
    raise FileNotFoundError(f"no {name} binary in {', '.join(candidates)} or on PATH")


def _user_scheme() -> Optional[str]:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    scheme = f"{os.name}_user"
    return scheme if scheme in sysconfig.get_scheme_names() else None


# ---------------------------------------------------------------- run


@dataclass(frozen=True)
class Result:
    """A finished run: pgrun's exit status (the command's, 124 on timeout,
    128+N for signal N, 126/127 when the command could not be run, 143
    when cancelled before it started), what was captured, and the report
    (``None`` when ``report=False`` was asked for, and when pgrun wrote
    none: a usage error, or a report it could not write, which it said on
    stderr)."""

    #: What was run: the pgrun binary, its options, ``--`` and ``argv``'s
    #: items as given (str, bytes or path-like).
    args: List[Arg]
    returncode: int
    #: bytes, or str with ``text=True``; ``None`` when not captured (as
    #: :class:`subprocess.CompletedProcess` types it: ``Any``).
    stdout: Any
    #: As ``stdout``.
    stderr: Any
    report: Optional[Report]
    #: ``detach_after``: the run still going on, detached, when it was
    #: handed off (``returncode`` :data:`HANDED_OFF`); else ``None``. Its
    #: report, if one was asked for, is written when it ends.
    detached: Optional["DetachedRun"] = None
    #: With ``detached``: the byte of its output file up to which stdout and
    #: stderr got the output (``None`` if stderr, which says it, was not
    #: captured); read on from there.
    since: Optional[int] = None


def run(
    argv: Argv,
    *,
    timeout: Optional[Duration] = None,
    idle_timeout: Optional[Duration] = None,
    signal: Optional[str] = None,
    kill_after: Optional[Duration] = None,
    escalate: Optional[str] = None,
    preserve_status: bool = False,
    wait_group: bool = False,
    pidfile: Optional[StrPath] = None,
    cancel_file: Optional[StrPath] = None,
    report: Union[bool, StrPath] = True,
    max_output: Optional[Size] = None,
    output_file: Optional[StrPath] = None,
    contain: Optional[str] = None,
    no_guard: bool = False,
    die_with_parent: bool = False,
    rlimits: Sequence[str] = (),
    memory_max: Optional[Size] = None,
    pids_max: Optional[int] = None,
    cpus: Optional[Union[int, float, str]] = None,
    setsid: bool = False,
    verbose: bool = False,
    detach_after: Optional[Duration] = None,
    extra_args: Sequence[str] = (),
    capture_output: bool = True,
    input: Optional[Union[bytes, str]] = None,
    stdin: Union[None, int, IO[Any]] = None,
    stdout: Union[None, int, IO[Any]] = None,
    stderr: Union[None, int, IO[Any]] = None,
    text: bool = False,
    cwd: Optional[StrPath] = None,
    env: Optional[Mapping[str, str]] = None,
) -> Result:
    """Run ``argv`` under pgrun and wait until nothing of the run is left.

    Each keyword up to ``extra_args`` is the pgrun option of the same name
    (``timeout`` is pgrun's ``--timeout``, not a limit on this call);
    ``rlimits`` are ``--rlimit`` values (``"nofile=1024"``), ``extra_args``
    more options placed before ``--``. ``report=True`` (the default) has
    pgrun write its report to a temporary file, parsed into
    ``Result.report`` and removed; a path keeps it there; ``False`` asks
    for none. Relative paths (``report``, ``pidfile``, ``cancel_file``,
    ``output_file``) are taken in ``cwd`` when it is given, as the run
    takes them. The rest is :func:`subprocess.run`'s: by default stdout and
    stderr are captured (as bytes, ``text=True`` for str), and this call
    returns once the run is over and every process holding the pipes has
    closed them (as :func:`subprocess.run` does, it reads them to the end).
    On Linux pgrun's default ``contain`` mode (``tree``; ``cgroup`` too)
    stops every descendant of the command, wherever it moved, so none is
    left to hold them; in ``group`` mode (the only one off Linux) a
    process that left the group (``setsid``) is not part of the run, and
    this call waits until it closes them or exits, unless ``max_output``,
    ``output_file`` or ``idle_timeout`` is given: the command's output then
    goes through pipes of pgrun's own, and only pgrun holds the caller's.
    ``contain="cgroup"`` and the limits (``memory_max``, ``pids_max``,
    ``cpus``) need a cgroup: root, a delegated one, or for an ordinary
    user on a systemd host the user manager, which pgrun asks for a scope
    itself (``Report.cgroup_via`` says which); elsewhere pgrun fails (125)
    saying why.

    Raises :class:`PgrunError` when pgrun itself fails: exit 125 that the
    report attributes to pgrun rather than to the command. With
    ``report=False`` there is no report: a captured stderr that ends with
    pgrun's own ``pgrun: `` line tells pgrun's failure from the command's
    own exit 125 (returned as a result). Without a captured stderr, or with
    ``verbose`` (whose lines start with ``pgrun: `` too), the two cannot
    be told apart, and every 125 raises, with a message that says so.

    ``detach_after`` (``--detach-after``, with ``pidfile`` and
    ``output_file``): a run that ends within that long is returned as
    usual; one still running then is handed off and goes on detached, and
    this call returns at once with ``returncode`` :data:`HANDED_OFF`
    (122), ``detached`` the :class:`DetachedRun` and ``since`` the byte of
    the output file up to which stdout and stderr got the output. The
    report is then not yet written: with ``report=True`` it is kept in its
    temporary folder, the run's ``report``, for the run to write when it
    ends.
    """
    pidfile, cancel_file, output_file = (_at(cwd, p) for p in (pidfile, cancel_file, output_file))
    if not isinstance(report, bool):
        report = _at(cwd, report)
    options = _run_options(
        timeout=timeout,
        idle_timeout=idle_timeout,
        signal=signal,
        kill_after=kill_after,
        escalate=escalate,
        preserve_status=preserve_status,
        wait_group=wait_group,
        pidfile=pidfile,
        cancel_file=cancel_file,
        max_output=max_output,
        output_file=output_file,
        contain=contain,
        no_guard=no_guard,
        die_with_parent=die_with_parent,
        rlimits=rlimits,
        memory_max=memory_max,
        pids_max=pids_max,
        cpus=cpus,
        setsid=setsid,
        verbose=verbose,
    )
    options = _duration_option("--detach-after", detach_after) + options
    report_request = _ReportPath(report)
    with report_request as report_path:
        if report_path is not None:
            options += ["--report", report_path]
        args: List[Arg] = [binary(), *options, *extra_args, "--", *_command(argv)]
        if capture_output:
            if stdout is not None or stderr is not None:
                raise ValueError("stdout and stderr may not be given with capture_output=True")
            stdout = stderr = subprocess.PIPE
        before = _file_identity(report_path)
        done = subprocess.run(
            args, input=input, stdin=stdin, stdout=stdout, stderr=stderr, text=text, cwd=cwd, env=env
        )
        parsed = None
        if report_path is not None and _file_identity(report_path) != before:
            parsed = Report.load(report_path)
        since = _handed_off_at(done.stderr) if detach_after is not None else None
        handed_off = done.returncode == HANDED_OFF and (
            since is not None or (done.stderr is None and report_path is not None and parsed is None)
        )
        if handed_off:
            report_request.keep()
            assert pidfile is not None  # pgrun refuses --detach-after without it
            detached = DetachedRun(
                pidfile=pidfile, report=report_path, output_file=output_file, cancel_file=cancel_file
            )
            return Result(
                args=args,
                returncode=done.returncode,
                stdout=done.stdout,
                stderr=done.stderr,
                report=None,
                detached=detached,
                since=since,
            )
    if done.returncode == FAILURE:
        if report_path is not None:
            if parsed is None or parsed.reason == "error":
                raise _error(done.returncode, done.stderr, parsed)
        elif done.stderr is None or verbose:
            why = "--verbose lines start with 'pgrun: ' too" if verbose else "stderr was not captured"
            raise PgrunError(
                "pgrun exited with status 125: its own failure and the command's own exit 125 cannot be "
                f"told apart without a report ({why}; pgrun's line, if any, is on stderr)",
                done.returncode,
                b"" if done.stderr is None else _bytes(done.stderr),
            )
        else:
            said = _pgrun_line(done.stderr)
            if said is not None:
                raise PgrunError(said, done.returncode, _bytes(done.stderr))
    return Result(
        args=args, returncode=done.returncode, stdout=done.stdout, stderr=done.stderr, report=parsed
    )


@dataclass(frozen=True)
class DetachedRun:
    """A run started with :func:`start`: its pid file, and its report path
    (beside the pid file unless :func:`start` was told otherwise; ``None``
    with ``report=False``). :meth:`status`, :meth:`cancel` and :meth:`wait`
    are the module's functions on this pid file (with its report);
    :meth:`result` is how the run ended. As a context manager it cancels
    the run on exit, if it is still running::

        with pgrun.start(["./server"], pidfile="/tmp/srv.pid") as srv:
            ...                      # the server runs here
        srv.result().reason          # 'cancelled' (or how it ended before)
    """

    pidfile: str
    report: Optional[str]
    output_file: Optional[str]
    cancel_file: Optional[str] = None

    def status(self) -> "Status":
        """:func:`status` of this run."""
        return status(self.pidfile, cancel_file=self.cancel_file)

    def cancel(self, **kwargs: Any) -> "CancelOutcome":
        """:func:`cancel` of this run (keywords as there). It was published
        when :func:`start` returned, so a pid file found empty means the run
        is over: ``wait_start`` is 0 unless given, and with the report,
        pgrun answers at once (:attr:`CancelOutcome.NO_RUN`)."""
        kwargs.setdefault("cancel_file", self.cancel_file)
        kwargs.setdefault("report", self.report)
        kwargs.setdefault("wait_start", 0)
        return cancel(self.pidfile, **kwargs)

    def wait(self, **kwargs: Any) -> "WaitResult":
        """:func:`wait` for this run; the result carries its report (at once
        if the run is over already). ``wait_start`` is 0 unless given, as
        for :meth:`cancel`."""
        kwargs.setdefault("report", self.report)
        kwargs.setdefault("wait_start", 0)
        return wait(self.pidfile, **kwargs)

    def result(self, timeout: Optional[Duration] = None) -> "Report":
        """How the run ended: its report, at once if it is over, else once
        it is (``pgrun wait --report``), or :class:`TimeoutError` once
        ``timeout`` passes with the run still running (it is left alone).
        Raises :class:`PgrunError` if the run has no report (``report=False``,
        or a pgrun killed before it could write one)."""
        if self.report is None:
            raise PgrunError(f"the run at {self.pidfile} was started with no report", FAILURE)
        waited = wait(self.pidfile, timeout=timeout, wait_start=0, report=self.report)
        if waited.outcome is WaitOutcome.TIMED_OUT:
            raise TimeoutError(f"the run at {self.pidfile} is still running after timeout={timeout!r}")
        if waited.report is None:
            raise PgrunError(f"the run at {self.pidfile} is over, with no report at {self.report}", FAILURE)
        return waited.report

    def __enter__(self) -> "DetachedRun":
        return self

    def __exit__(self, *exc: object) -> None:
        """Cancel the run if it is still running, and wait until it is
        gone; a run over already is left as it is."""
        self.cancel()

    def wait_ready(self, port: Optional[int] = None, timeout: Optional[Duration] = None) -> "ReadyOutcome":
        """:func:`wait_ready` for this run: until a process of it listens
        on TCP ``port`` (any port if ``None``)."""
        return wait_ready(self.pidfile, port=port, timeout=timeout)

    def send(self, data: Union[bytes, str], eof: bool = False, timeout: Optional[Duration] = None) -> "SendOutcome":
        """:func:`send` ``data`` to this run's stdin pipe (it was started
        with ``stdin_pipe=True``); ``eof=True`` then closes the pipe."""
        return send(self.pidfile, data, eof=eof, timeout=timeout)


def start(
    argv: Argv,
    *,
    pidfile: StrPath,
    output_file: Optional[StrPath] = None,
    report: Union[bool, StrPath] = True,
    timeout: Optional[Duration] = None,
    idle_timeout: Optional[Duration] = None,
    signal: Optional[str] = None,
    kill_after: Optional[Duration] = None,
    escalate: Optional[str] = None,
    preserve_status: bool = False,
    wait_group: bool = False,
    cancel_file: Optional[StrPath] = None,
    max_output: Optional[Size] = None,
    contain: Optional[str] = None,
    no_guard: bool = False,
    rlimits: Sequence[str] = (),
    memory_max: Optional[Size] = None,
    pids_max: Optional[int] = None,
    cpus: Optional[Union[int, float, str]] = None,
    setsid: bool = False,
    stdin_pipe: bool = False,
    extra_args: Sequence[str] = (),
    cwd: Optional[StrPath] = None,
    env: Optional[Mapping[str, str]] = None,
) -> DetachedRun:
    """Start ``argv`` as a detached run (``pgrun --detach``) and return once
    it is published in ``pidfile``.

    The run lives on in a session of its own, with stdin on ``/dev/null``
    (``stdin_pipe=True``: a pipe the run's pgrun holds open, written to by
    :meth:`DetachedRun.send`; Linux only)
    and stdout and stderr in ``output_file`` (else ``/dev/null``); the
    keywords are pgrun's options as for :func:`run`, relative paths taken
    in ``cwd`` when it is given (the returned run holds them joined to it,
    so that its methods find them from anywhere). ``report=True`` (the
    default) puts the report beside the pid file (``PIDFILE.report.json``),
    so that how the run ended can be learnt later (:meth:`DetachedRun.result`);
    a path puts it there; ``False`` asks for none. Raises
    :class:`PgrunError` if the run did not start: pgrun's 125, 126 or 127,
    with pgrun's message; or 143 (128+N for another termination signal N)
    when it was cancelled before it started (a pending cancel marker,
    consumed, or SIGTERM to pgrun), which pgrun does not comment on: the
    message says so.
    """
    pidfile = _at(cwd, pidfile)
    cancel_file, output_file = (_at(cwd, p) for p in (cancel_file, output_file))
    report_path = _report_beside(pidfile, report, cwd)
    options = _run_options(
        timeout=timeout,
        idle_timeout=idle_timeout,
        signal=signal,
        kill_after=kill_after,
        escalate=escalate,
        preserve_status=preserve_status,
        wait_group=wait_group,
        pidfile=pidfile,
        cancel_file=cancel_file,
        max_output=max_output,
        output_file=output_file,
        contain=contain,
        no_guard=no_guard,
        die_with_parent=False,
        rlimits=rlimits,
        memory_max=memory_max,
        pids_max=pids_max,
        cpus=cpus,
        setsid=setsid,
        verbose=False,
    )
    if report_path is not None:
        options += ["--report", report_path]
    options += _flag("--stdin-pipe", stdin_pipe)
    args = [binary(), "--detach", *options, *extra_args, "--", *_command(argv)]
    done = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, cwd=cwd, env=env)
    if done.returncode > 128 and _pgrun_line(done.stderr) is None:
        # pgrun says nothing when a signal kept the run from starting (a
        # pending cancel marker it names in a line, taken as its message).
        marker = cancel_file if cancel_file is not None else pidfile + ".cancel"
        if done.returncode == 143:
            how = f"a pending cancel marker ({marker}) was consumed, or pgrun got SIGTERM"
        else:
            how = f"pgrun got signal {done.returncode - 128}"
        raise PgrunError(
            f"cancelled before it started: {how} before the command ran (exit status {done.returncode})",
            done.returncode,
            done.stderr,
        )
    if done.returncode != 0:
        raise _error(done.returncode, done.stderr, None)
    return DetachedRun(pidfile=pidfile, report=report_path, output_file=output_file, cancel_file=cancel_file)


def _report_beside(pidfile: str, report: Union[None, bool, StrPath], cwd: Optional[StrPath]) -> Optional[str]:
    """:func:`start`'s report path: beside the pid file for ``True``, the
    path given (taken in ``cwd``), or none for ``False`` (and ``None``)."""
    if report is None or report is False:
        return None
    if report is True:
        return pidfile + ".report.json"
    return _at(cwd, report)


# ---------------------------------------------------------------- status


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
    #: Whether a process of a live run is blocked reading its terminal on
    #: its stdin: advisory, ``None`` where ``listening`` is.
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
    live = obj.get("resources")
    return Status(
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
        returncode=done.returncode,
        raw=obj,
        listening=None
        if obj.get("listening") is None
        else [Listening(port=l["port"], address=l["address"], pid=l["pid"]) for l in obj["listening"]],
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


class ReadyOutcome(enum.IntEnum):
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

# ---------------------------------------------------------------- send


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


# ---------------------------------------------------------------- helpers


@overload
def _at(cwd: Optional[StrPath], path: StrPath) -> str: ...


@overload
def _at(cwd: Optional[StrPath], path: None) -> None: ...


@overload
def _at(cwd: Optional[StrPath], path: Optional[StrPath]) -> Optional[str]: ...


def _at(cwd: Optional[StrPath], path: Optional[StrPath]) -> Optional[str]:
    """``path`` as the run (started in ``cwd``) and this process both find
    it: a relative path joined to ``cwd`` made absolute (not normalised, so
    ``..`` after a symlink means what it means to pgrun)."""
    if path is None:
        return None
    path = os.fspath(path)
    if cwd is None or os.path.isabs(path):
        return path
    folder = os.fspath(cwd)
    return os.path.join(os.getcwd(), folder, path)


def _duration(value: Duration) -> str:
    """A DUR as pgrun spells it; numbers are seconds, never in exponent form."""
    if isinstance(value, str):
        return value
    if isinstance(value, datetime.timedelta):
        value = Decimal(value.days * 86400 + value.seconds) + Decimal(value.microseconds) / 1000000
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise TypeError(f"a duration is a number of seconds, a timedelta or a string, not {value!r}")
    d = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not d.is_finite() or d < 0:
        raise ValueError(f"a duration must be a finite number of seconds >= 0, not {value!r}")
    return format(d, "f")


def _duration_option(name: str, value: Optional[Duration]) -> List[str]:
    return [] if value is None else [name, _duration(value)]


def _flag(name: str, on: bool) -> List[str]:
    return [name] if on else []


def _value_option(name: str, value: Optional[Union[int, float, str, "os.PathLike[str]"]]) -> List[str]:
    if value is None:
        return []
    if isinstance(value, bool):
        raise TypeError(f"{name} takes a value, not {value!r}")
    return [name, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]


def _run_options(
    *,
    timeout: Optional[Duration],
    idle_timeout: Optional[Duration],
    signal: Optional[str],
    kill_after: Optional[Duration],
    escalate: Optional[str],
    preserve_status: bool,
    wait_group: bool,
    pidfile: Optional[StrPath],
    cancel_file: Optional[StrPath],
    max_output: Optional[Size],
    output_file: Optional[StrPath],
    contain: Optional[str],
    no_guard: bool,
    die_with_parent: bool,
    rlimits: Sequence[str],
    memory_max: Optional[Size],
    pids_max: Optional[int],
    cpus: Optional[Union[int, float, str]],
    setsid: bool,
    verbose: bool,
) -> List[str]:
    """The options of a run, in the order ``pgrun --help`` lists them."""
    options: List[str] = []
    options += _duration_option("--timeout", timeout)
    options += _duration_option("--idle-timeout", idle_timeout)
    options += _value_option("--signal", signal)
    options += _duration_option("--kill-after", kill_after)
    options += _value_option("--escalate", escalate)
    options += _flag("--preserve-status", preserve_status) + _flag("--wait-group", wait_group)
    options += _value_option("--pidfile", pidfile) + _value_option("--cancel-file", cancel_file)
    options += _value_option("--max-output", max_output) + _value_option("--output-file", output_file)
    options += _value_option("--contain", contain)
    options += _flag("--no-guard", no_guard) + _flag("--die-with-parent", die_with_parent)
    for limit in rlimits:
        options += ["--rlimit", limit]
    options += _value_option("--memory-max", memory_max) + _value_option("--pids-max", pids_max)
    options += _value_option("--cpus", cpus)
    options += _flag("--setsid", setsid) + _flag("--verbose", verbose)
    return options


def _command(argv: Argv) -> List[Arg]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv is a sequence of arguments, not one string (pgrun runs no shell)")
    command = list(argv)
    if not command:
        raise ValueError("argv is empty: pgrun needs a command")
    return command


class _ReportPath:
    """The report path of a run: a temporary one (removed afterwards) for
    ``True``, the caller's path, or ``None``."""

    def __init__(self, report: Union[bool, StrPath]) -> None:
        self._request = report
        self._folder: Optional[str] = None

    def __enter__(self) -> Optional[str]:
        if self._request is False:
            return None
        if self._request is True:
            self._folder = tempfile.mkdtemp(prefix="pgrun-report-")
            return os.path.join(self._folder, "report.json")
        return os.fspath(self._request)

    def keep(self) -> None:
        """Leave a temporary report's folder in place (a run handed off
        writes its report there later)."""
        self._folder = None

    def __exit__(self, *exc: object) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


def _handed_off_at(stderr: Optional[Union[bytes, str]]) -> Optional[int]:
    """N from ``--detach-after``'s line, if stderr ends with it: ``pgrun:
    still running after DUR: pid file P, output F from byte N``."""
    said = _pgrun_line(stderr)
    if said is None or not said.startswith("pgrun: still running after "):
        return None
    _, sep, n = said.rpartition(" from byte ")
    return int(n) if sep and n.isdigit() else None


def _file_identity(path: Optional[str]) -> Optional[Tuple[int, int, int, int]]:
    """What tells a file pgrun wrote (a rename: a new inode) from one that
    was there before; ``None`` for no file."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _bytes(data: Union[bytes, str]) -> bytes:
    return data.encode() if isinstance(data, str) else data


def _pgrun_line(stderr: Optional[Union[bytes, str]]) -> Optional[str]:
    """pgrun's own line, if stderr ends with one: pgrun says its failure (and
    wait its outcome) last, after the run is gone, prefixed ``pgrun: ``."""
    lines = _bytes(stderr or b"").decode(errors="replace").splitlines()
    if lines and lines[-1].startswith("pgrun: "):
        return lines[-1]
    return None


def _error(returncode: int, stderr: Optional[Union[bytes, str]], report: Optional[Report]) -> PgrunError:
    """The exception for pgrun's own failure: its first stderr line, else
    the report's error."""
    raw = stderr or b""
    data = raw.encode() if isinstance(raw, str) else raw
    lines = data.decode(errors="replace").splitlines()
    if report is not None and report.error:
        # With --verbose, stderr has other pgrun: lines: take the error's.
        said = f"pgrun: {report.error}"
        message = said if said in lines or not lines else next(
            (line for line in lines if line.startswith("pgrun: ") and report.error in line), said
        )
    elif lines:
        message = lines[0]
    else:
        message = f"pgrun: failed with exit status {returncode}"
    return PgrunError(message, returncode, data, report)


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("pgrun")
    except Exception:  # not installed (a source checkout on sys.path)
        return "0+unknown"


#: The version of this package (and of the pgrun binary it ships).
__version__ = _package_version()
