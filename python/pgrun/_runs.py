"""Running commands: :func:`run` (until nothing of the run is left, or
handed off with ``detach_after``), :func:`start` (``pgrun --detach``) and
:class:`DetachedRun`, the handle of a run that goes on without the caller,
whose methods are the readers of :mod:`._readers` and :mod:`._output` on
its pid file, report and output file."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import IO, Any, List, Mapping, Optional, Sequence, Tuple, Union

from ._binary import binary
from ._errors import PgrunError, _bytes, _error, _pgrun_line
from ._output import OutputWindow, output
from ._options import _at, _command, _duration_option, _flag, _run_options
from ._readers import CancelOutcome, ReadyOutcome, Status, WaitOutcome, WaitResult, cancel, status, wait, wait_ready
from ._report import Report
from ._send import SendOutcome, send
from ._types import FAILURE, HANDED_OFF, Arg, Argv, Duration, Size, StrPath


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
    :meth:`output` reads its output file in windows (:func:`output`);
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

    def output(
        self,
        since: int = 0,
        max: Optional[Size] = None,
        wait: Optional[Duration] = None,
        until: Optional[str] = None,
        *,
        tail: Optional[Size] = None,
    ) -> OutputWindow:
        """:func:`output`: a window of this run's output file, its end (with
        ``wait``, waiting for it) told by the pid file; pass the window's
        ``next`` as the next ``since`` to page on. Raises
        :class:`ValueError` if the run was started without an output file."""
        if self.output_file is None:
            raise ValueError(f"the run at {self.pidfile} was started with no output file")
        return output(
            self.output_file, since=since, max=max, tail=tail, wait=wait, until=until, pidfile=self.pidfile
        )

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

    def send(self, data: Union[bytes, str], eof: bool = False, timeout: Optional[Duration] = None) -> SendOutcome:
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
    :meth:`DetachedRun.send`)
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
    still running after DUR: pid file P, output F from byte N``. pgrun
    starts it on a line of its own (after a newline where the command's
    stderr ended mid-line); it is still looked for anywhere in the last
    line, as an older pgrun put it right after such bytes."""
    lines = _bytes(stderr or b"").decode(errors="replace").splitlines()
    at = lines[-1].rfind("pgrun: still running after ") if lines else -1
    if at < 0:
        return None
    _, sep, n = lines[-1][at:].rpartition(" from byte ")
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
