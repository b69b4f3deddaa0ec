"""The pgrun module against the real binary it installs.

Run with the environment's own pytest, ``VENV/bin/pytest -q python/tests``,
so that ``import pgrun`` is the installed package (``python -m pytest`` from
inside python/ would put the source tree's module first). Each test that starts a
run records its pid file and its payload's pids, and the ``runs`` fixture
cancels whatever is still published when the test ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

import pgrun

DEADLINE = 30.0  # generous: the CI machine is a loaded 2-core box


def poll(what: str, done: Callable[[], bool], deadline: float = DEADLINE) -> None:
    """Wait until ``done()`` holds, failing after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while not done():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def dead(pid: int) -> bool:
    """A process is dead when /proc/PID/stat is gone or shows state Z."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def own_children() -> List[int]:
    """The pids of this process's children (every thread's)."""
    pids: List[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            pids += [int(p) for p in Path(f"/proc/self/task/{task}/children").read_text().split()]
        except FileNotFoundError:
            pass
    return pids


def waits_on_a_run(pid: int) -> bool:
    """Whether ``pid`` is a ``pgrun wait`` that holds a pidfd (on the run's
    pgrun: it has found the run)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if argv[1:2] != [b"wait"]:
            return False
        fds = os.listdir(f"/proc/{pid}/fd")
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[pidfd]" for fd in fds)
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[List[Path]]:
    """Pid files of the runs a test starts; any still live at the end is
    cancelled (only through its own pid file)."""
    started: List[Path] = []
    yield started
    for pidfile in started:
        if pidfile.exists() and pgrun.status(pidfile).alive:
            pgrun.cancel(pidfile, timeout=5)


def test_binary_is_the_installed_static_one() -> None:
    path = pgrun.binary()
    assert os.access(path, os.X_OK)
    out = subprocess.run([path, "--version"], capture_output=True, check=True).stdout
    assert out.startswith(b"pgrun ")
    if os.environ.get("PGRUN_TEST_INSTALLED"):
        # CI: the venv's own binary, next to its python, not a build tree's.
        assert Path(path).parent == Path(sys.executable).parent, path
        assert Path(pgrun.__file__).parent.parent.name == "site-packages", pgrun.__file__


def test_capture_returns_at_once_although_a_background_child_holds_the_pipe(tmp_path: Path) -> None:
    started = time.monotonic()
    r = pgrun.run(["sh", "-c", "sleep 100 & echo $!; echo hi"], timeout=60)
    elapsed = time.monotonic() - started
    child = int(r.stdout.split()[0])
    # The sleep held stdout's pipe: pgrun stopped it before returning.
    assert r.stdout.split()[1] == b"hi"
    assert r.returncode == 0
    assert r.report is not None and r.report.stragglers == 1
    assert [s.signal for s in r.report.signals] == ["TERM"]
    assert elapsed < 20, f"took {elapsed:.1f}s: waited for the background sleep"
    assert dead(child), f"the background sleep {child} outlived the run"


def test_report_round_trip(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    r = pgrun.run(
        ["sh", "-c", "printf 'x%.0s' $(seq 1 100); echo err >&2; exit 3"],
        max_output=20,
        report=report,
        text=True,
    )
    assert r.returncode == 3
    assert r.stdout.startswith("x" * 10) and "[pgrun: 80 bytes omitted]" in r.stdout
    assert r.stderr == "err\n"
    rep = r.report
    assert rep is not None
    assert rep == pgrun.Report.load(report)  # the kept file says the same
    assert rep.raw == __import__("json").loads(report.read_text())
    assert (rep.exit_code, rep.reason) == (3, "exited")
    assert rep.status == pgrun.ExitStatus(code=3, signal=None)
    assert rep.pgid is not None and rep.pgid > 1
    assert rep.signals == [] and rep.stragglers == 0 and rep.unreaped == 0 and rep.unstopped == 0
    assert rep.output == pgrun.Output(
        stdout=pgrun.StreamStats(bytes=100, omitted=80), stderr=pgrun.StreamStats(bytes=4, omitted=0)
    )
    assert rep.contain in ("tree", "group") and rep.escaped == 0 and rep.cgroup_left is None
    assert rep.resources.memory_peak_bytes is None and rep.resources.oom_kills is None
    assert rep.error is None and rep.duration_ms >= 0
    # Every field of the JSON is mapped (raw aside).
    fields = set(pgrun.Report.__dataclass_fields__) - {"raw", "error"}
    assert fields == set(rep.raw), set(rep.raw) ^ fields


def test_timeout_report_and_a_failure_to_run() -> None:
    r = pgrun.run(["sleep", "100"], timeout=0.2, kill_after=5)
    assert r.returncode == 124
    assert r.report is not None and r.report.reason == "timeout"
    assert r.report.status == pgrun.ExitStatus(code=None, signal="TERM")
    missing = pgrun.run(["/nonexistent/command"])
    assert missing.returncode == 127  # the command's failure, not pgrun's: no exception
    assert missing.report is not None and missing.report.reason == "error" and missing.report.pgid is None


def test_cancel_from_another_process(tmp_path: Path, runs: List[Path]) -> None:
    pidfile = tmp_path / "job.pid"
    runs.append(pidfile)
    result: List[pgrun.Result] = []
    runner = threading.Thread(target=lambda: result.append(pgrun.run(["sleep", "100"], pidfile=pidfile)))
    runner.start()
    try:
        poll("the run to be published", lambda: pidfile.exists() and pgrun.status(pidfile).state == "running")
        st = pgrun.status(pidfile)
        assert st.alive and st.returncode == 0 and st.pgid is not None and st.pid is not None
        assert st.processes == 1 and st.pidfile == str(pidfile) and not st.cancel_pending
        code = (
            "import sys, pgrun\n"
            "print(pgrun.cancel(sys.argv[1], timeout=20).name)\n"
        )
        other = subprocess.run([sys.executable, "-c", code, str(pidfile)], capture_output=True, text=True)
        assert other.returncode == 0, other.stderr
        assert other.stdout == "GONE\n"
    finally:
        runner.join(DEADLINE)
    assert not runner.is_alive()
    r = result[0]
    assert r.returncode == 143
    assert r.report is not None and r.report.reason == "cancelled"
    assert st.pgid is not None and dead(st.pgid)
    after = pgrun.status(pidfile)
    assert (after.state, after.returncode, after.alive) == ("not-running", 3, False)
    assert pgrun.cancel(pidfile, wait_start=0) is pgrun.CancelOutcome.NO_RUN


def test_detached_start_status_wait_cancel(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, out, report = tmp_path / "d.pid", tmp_path / "d.out", tmp_path / "d.json"
    runs.append(pidfile)
    run = pgrun.start(["sh", "-c", "echo started; exec sleep 100"], pidfile=pidfile, output_file=out, report=report)
    assert run.pidfile == str(pidfile)
    st = run.status()
    assert st.state == "running" and st.alive
    poll("the detached run's output", lambda: out.exists() and out.read_bytes() == b"started\n")
    waited = run.wait(timeout=0.1)
    assert waited.outcome is pgrun.WaitOutcome.TIMED_OUT and waited.report is None
    assert pgrun.status(pidfile).alive  # wait left it alone
    assert run.cancel(timeout=20) is pgrun.CancelOutcome.GONE
    done = run.wait(wait_start=0)
    assert done.outcome is pgrun.WaitOutcome.NO_RUN  # over, and its pid file is gone
    rep = pgrun.Report.load(report)
    assert rep.reason == "cancelled" and rep.exit_code == 143
    assert rep.output is not None and rep.output.file == str(out)
    assert st.pgid is not None and dead(st.pgid)


def test_wait_returns_the_report_of_a_run_that_ends(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, report, go = tmp_path / "w.pid", tmp_path / "w.json", tmp_path / "go"
    runs.append(pidfile)
    script = f"while [ ! -e {go} ]; do sleep 0.01; done; exit 7"
    run = pgrun.start(["sh", "-c", script], pidfile=pidfile, report=report)
    waiter: List[pgrun.WaitResult] = []
    t = threading.Thread(target=lambda: waiter.append(run.wait(timeout=DEADLINE)))
    t.start()
    # Let the run end only once `pgrun wait` holds a pidfd on the run's
    # pgrun: it has found the run, so whatever comes next it says "over"
    # (a run that ended before wait looked would be "no run").
    poll("pgrun wait to find the run", lambda: any(waits_on_a_run(pid) for pid in own_children()))
    go.touch()
    t.join(DEADLINE + 5)
    assert waiter[0].outcome is pgrun.WaitOutcome.OVER
    assert waiter[0].report is not None and waiter[0].report.status.code == 7


def test_pgrun_failures_raise_with_the_one_line(tmp_path: Path) -> None:
    with pytest.raises(pgrun.PgrunError) as usage:
        pgrun.run(["true"], extra_args=["--no-such-flag"])
    assert usage.value.returncode == 125 and usage.value.report is None
    assert usage.value.message.startswith("pgrun: ") and "--no-such-flag" in usage.value.message
    with pytest.raises(pgrun.PgrunError) as bad_value:
        pgrun.run(["true"], timeout="soon")
    assert "soon" in bad_value.value.message
    with pytest.raises(pgrun.PgrunError) as folder:
        pgrun.run(["true"], pidfile="/nonexistent/x.pid")
    assert folder.value.message == "pgrun: pid file folder /nonexistent: No such file or directory"
    assert folder.value.report is not None and folder.value.report.reason == "error"
    with pytest.raises(pgrun.PgrunError):
        pgrun.start(["true"], pidfile="/nonexistent/x.pid")
    # A report left by an earlier run is not taken for this one's.
    report = tmp_path / "old.json"
    assert pgrun.run(["true"], report=report).returncode == 0
    with pytest.raises(pgrun.PgrunError) as stale:
        pgrun.run(["true"], report=report, extra_args=["--no-such-flag"])
    assert stale.value.report is None
    # The command's own 125 is a result, not pgrun's failure.
    own = pgrun.run(["sh", "-c", "exit 125"])
    assert own.returncode == 125 and own.report is not None and own.report.reason == "exited"


def test_arguments_are_checked_before_pgrun_runs() -> None:
    with pytest.raises(TypeError):
        pgrun.run("echo hi")
    with pytest.raises(ValueError):
        pgrun.run(["true"], timeout=-1)
    r = pgrun.run(["true"], timeout=1e-7, kill_after=0.5, report=False)
    assert r.returncode in (0, 124) and r.report is None  # a tiny timeout is still a timeout, not "none"
