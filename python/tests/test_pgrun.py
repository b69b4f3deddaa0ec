"""The pgrun module against the real binary it installs.

Run with the environment's own pytest, ``VENV/bin/pytest -q python/tests``,
so that ``import pgrun`` is the installed package (``python -m pytest`` from
inside python/ would put the source tree's module first). Each test that starts a
run records its pid file and its payload's pids, and the ``runs`` fixture
cancels whatever is still published when the test ends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import typing
from pathlib import Path
from typing import Callable, Iterator, List, Union

import pytest

import pgrun
from pgrun._runs import _handed_off_at

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
    assert rep.cgroup_via is None
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
    done = run.wait()
    assert done.outcome is pgrun.WaitOutcome.OVER  # over: its report says how, at once
    rep = pgrun.Report.load(report)
    assert done.report == rep
    assert rep.reason == "cancelled" and rep.exit_code == 143
    assert rep.pidfile == str(pidfile.resolve())
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


def traced_by(pid: int) -> List[int]:
    """The tracer pids of every thread of ``pid`` (0 for an untraced one)."""
    tracers = []
    for task in os.listdir(f"/proc/{pid}/task"):
        for line in Path(f"/proc/{pid}/task/{task}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                tracers.append(int(line.split()[1]))
    return tracers


@pytest.mark.parametrize("earlier", ["a stale report", "no report"])
def test_wait_gives_this_runs_report_while_its_rename_is_held(
    tmp_path: Path, runs: List[Path], earlier: str
) -> None:
    """``pgrun wait`` is over once the run's guard is released, before pgrun
    renames the report into place: the module must not read the file then
    (it would find the earlier run's report, or none). strace holds pgrun's
    rename for 2 s to force that window open."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed: this test needs it to hold pgrun's rename of the report")
    pidfile, report, go = tmp_path / "w.pid", tmp_path / "w.json", tmp_path / "go"
    runs.append(pidfile)
    if earlier == "a stale report":
        assert pgrun.run(["sh", "-c", "exit 3"], report=report).returncode == 3
    script = f"while [ ! -e {go} ]; do sleep 0.01; done; exit 7"
    run = pgrun.start(["sh", "-c", script], pidfile=pidfile, report=report)
    holder = run.status().pid
    assert holder is not None
    tracer = subprocess.Popen(
        [strace, "-qq", "-f", "-o", "/dev/null", "-p", str(holder), "-e", "trace=rename,renameat,renameat2",
         "-e", "inject=rename,renameat,renameat2:delay_enter=2000000"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    waiter: List[pgrun.WaitResult] = []
    errors: List[BaseException] = []

    def wait() -> None:
        try:
            waiter.append(run.wait(timeout=DEADLINE))
        except BaseException as e:  # handed to the test's thread
            errors.append(e)

    t = threading.Thread(target=wait)
    try:
        poll("strace to attach to pgrun", lambda: tracer.poll() is not None or all(
            p == tracer.pid for p in traced_by(holder)))
        assert tracer.poll() is None, tracer.communicate()[1]
        t.start()
        poll("pgrun wait to find the run", lambda: any(waits_on_a_run(pid) for pid in own_children()))
        go.touch()
        t.join(DEADLINE + 10)
    finally:
        if tracer.poll() is None:
            poll("strace to end with pgrun", lambda: tracer.poll() is not None)
        tracer.communicate()
    assert not errors, errors
    assert waiter[0].outcome is pgrun.WaitOutcome.OVER
    assert waiter[0].report is not None
    assert (waiter[0].report.exit_code, waiter[0].report.status.code) == (7, 7)


def test_relative_paths_are_the_runs_cwd(tmp_path: Path, runs: List[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    there, here = tmp_path / "there", tmp_path / "here"
    there.mkdir()
    here.mkdir()
    monkeypatch.chdir(here)
    r = pgrun.run(["sh", "-c", "exit 125"], report="r.json", cwd=there)
    assert r.returncode == 125 and r.report is not None and r.report.reason == "exited"
    assert (there / "r.json").exists() and not (here / "r.json").exists()
    runs.append(there / "d.pid")
    run = pgrun.start(["sleep", "30"], pidfile="d.pid", report="d.json", output_file="d.out",
                      cancel_file="d.stop", cwd="../there")
    assert (run.pidfile, run.report, run.output_file, run.cancel_file) == tuple(
        os.path.join(os.getcwd(), "../there", name) for name in ("d.pid", "d.json", "d.out", "d.stop"))
    st = run.status()
    assert st.state == "running" and st.alive
    assert run.cancel(timeout=20) is pgrun.CancelOutcome.GONE
    rep = pgrun.Report.load(there / "d.json")
    assert rep.reason == "cancelled" and rep.output is not None and rep.output.file is not None
    assert os.path.samefile(rep.output.file, there / "d.out")
    assert st.pgid is not None and dead(st.pgid)
    assert not list(here.iterdir())


def test_without_a_report_the_commands_own_125_is_a_result() -> None:
    own = pgrun.run(["sh", "-c", "echo pgrun: not really >&2; echo done >&2; exit 125"], report=False)
    assert own.returncode == 125 and own.report is None and own.stderr.endswith(b"done\n")
    with pytest.raises(pgrun.PgrunError) as failed:
        pgrun.run(["sh", "-c", "exit 125"], report=False, pidfile="/nonexistent/x.pid")
    assert failed.value.message == "pgrun: pid file folder /nonexistent: No such file or directory"
    # Not captured: pgrun's line went to the caller's stderr, unseen.
    with pytest.raises(pgrun.PgrunError) as unseen:
        pgrun.run(["sh", "-c", "exit 125"], report=False, capture_output=False, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL)
    assert unseen.value.returncode == 125 and "cannot be told apart" in unseen.value.message
    assert not unseen.value.message.startswith("pgrun: ")
    # --verbose: pgrun's last lines are its own, whoever exited 125.
    with pytest.raises(pgrun.PgrunError) as verbose:
        pgrun.run(["sh", "-c", "exit 125"], report=False, verbose=True)
    assert "cannot be told apart" in verbose.value.message and b"pgrun: " in verbose.value.stderr


def test_start_cancelled_before_it_started_says_so(tmp_path: Path) -> None:
    pidfile = tmp_path / "c.pid"
    marker = tmp_path / "c.pid.cancel"
    marker.touch()
    with pytest.raises(pgrun.PgrunError) as cancelled:
        pgrun.start(["true"], pidfile=pidfile)
    assert cancelled.value.returncode == 143
    assert "cancelled before it started" in cancelled.value.message
    assert str(marker) in cancelled.value.message
    assert not marker.exists() and not pidfile.exists()


def test_result_args_keeps_bytes_and_paths_as_given(tmp_path: Path) -> None:
    r = pgrun.run(["printf", b"%s", tmp_path])
    assert r.stdout == os.fsencode(tmp_path)
    assert r.args[-2:] == [b"%s", tmp_path]
    hint = typing.get_type_hints(pgrun.Result)["args"]
    assert hint == List[Union[str, bytes, os.PathLike[str]]], hint


def test_in_group_mode_an_escapee_holds_the_pipe_unless_pgrun_relays(tmp_path: Path) -> None:
    """What run()'s docstring says: a process that left the group (group
    mode) can hold captured pipes open; with max_output only pgrun holds
    the caller's, so the call returns once the run is over."""
    setsid = shutil.which("setsid")
    if setsid is None:
        pytest.skip("no setsid binary to make a process leave the group")
    escapees: List[int] = []

    def escapee_script(name: str) -> str:
        # The escapee holds stdout and stderr until its go file appears. The
        # leader ends only once the escapee has left the group (its pid file
        # is written after setsid): a leader that ended first would have the
        # rest of its group, the escapee-to-be among it, stopped with it.
        pid = tmp_path / f"{name}.pid"
        return (f"{setsid} sh -c 'echo $$ > {pid}.tmp; mv {pid}.tmp {pid}; "
                f"while [ ! -e {tmp_path / name}.go ]; do sleep 0.01; done' & "
                f"while [ ! -e {pid} ]; do sleep 0.01; done; echo hi")

    def escapee(name: str) -> int:
        pid = int((tmp_path / f"{name}.pid").read_text())
        escapees.append(pid)
        return pid

    try:
        # Relayed: the call returns while the escapee still holds the inner pipe.
        r = pgrun.run(["sh", "-c", escapee_script("a")], contain="group", max_output="1M", timeout=60)
        assert r.returncode == 0 and r.stdout == b"hi\n"
        poll("the escapee's pid", lambda: (tmp_path / "a.pid").exists())
        assert not dead(escapee("a"))
        # Not relayed: the run is over (its report written) but the call
        # waits for the escapee to let go of the pipe.
        report = tmp_path / "b.json"
        result: List[pgrun.Result] = []
        t = threading.Thread(target=lambda: result.append(
            pgrun.run(["sh", "-c", escapee_script("b")], contain="group", timeout=60, report=report)))
        t.start()
        poll("the run to be over", lambda: report.exists() and (tmp_path / "b.pid").exists())
        assert not dead(escapee("b"))
        assert t.is_alive() and not result
        (tmp_path / "b.go").touch()
        t.join(DEADLINE)
        assert not t.is_alive() and result[0].returncode == 0 and result[0].stdout == b"hi\n"
    finally:
        for name in ("a", "b"):
            (tmp_path / f"{name}.go").touch()
        for pid in escapees:
            poll(f"the escapee {pid} to end", lambda: dead(pid))


INSTALL = Path(__file__).resolve().parents[2] / "scripts" / "install"


@pytest.mark.skipif(not INSTALL.exists(), reason="not a checkout: no scripts/install next to the tests")
def test_install_script_takes_relative_paths_from_the_caller_and_checks_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "DESTDIR": "stage", "PREFIX": "prefix"}
    # A binary that is not there, or is not pgrun: nothing is created.
    for wrong in ("missing/pgrun", "/bin/true"):
        failed = subprocess.run(["sh", str(INSTALL)], env={**env, "PGRUN_BIN": wrong}, capture_output=True)
        assert failed.returncode != 0 and failed.stderr.startswith(b"scripts/install: "), failed
        assert not list(here.iterdir()) and not (tmp_path / "home").exists()
    # A relative PGRUN_BIN, PREFIX and DESTDIR, all from the caller's folder.
    (here / "from").mkdir()
    os.symlink(pgrun.binary(), here / "from" / "pgrun")
    done = subprocess.run(["sh", str(INSTALL)], env={**env, "PGRUN_BIN": "from/pgrun"}, capture_output=True)
    assert done.returncode == 0, done.stderr
    root = Path(f"{here}/stage{os.getcwd()}/prefix")
    installed = root / "bin" / "pgrun"
    assert installed.read_bytes() == Path(pgrun.binary()).read_bytes()
    assert os.access(installed, os.X_OK)
    for page in ("pgrun", "pgrun-cancel", "pgrun-status", "pgrun-wait"):
        assert (root / "share/man/man1" / f"{page}.1").read_bytes().startswith(b".")
    for completion in ("bash-completion/completions/pgrun", "zsh/site-functions/_pgrun",
                       "fish/vendor_completions.d/pgrun.fish"):
        assert (root / "share" / completion).stat().st_size > 0
    assert sorted(p.name for p in here.iterdir()) == ["from", "stage"]


def test_start_writes_a_report_beside_the_pid_file_unless_told_not_to(tmp_path: Path, runs: List[Path]) -> None:
    pidfile = tmp_path / "b.pid"
    runs.append(pidfile)
    run = pgrun.start(["sh", "-c", "exit 6"], pidfile=pidfile)
    assert run.report == str(pidfile) + ".report.json"
    rep = run.result()
    assert (rep.exit_code, rep.reason, rep.pidfile) == (6, "exited", str(pidfile.resolve()))
    assert pgrun.Report.load(run.report) == rep
    none = pgrun.start(["true"], pidfile=tmp_path / "n.pid", report=False)
    runs.append(tmp_path / "n.pid")
    assert none.report is None
    with pytest.raises(pgrun.PgrunError, match="no report"):
        none.result()


def test_the_outcome_of_a_run_that_is_over_comes_at_once(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, report = tmp_path / "o.pid", tmp_path / "o.json"
    runs.append(pidfile)
    run = pgrun.start(["sh", "-c", "exit 9"], pidfile=pidfile, report=report)
    poll("the run to be over", lambda: not pidfile.exists() and report.exists())
    # However long they would wait for a run to start, wait and cancel
    # answer at once: the report names the pid file, and no run is there.
    began = time.monotonic()
    waited = pgrun.wait(pidfile, report=report, wait_start=120)
    assert waited.outcome is pgrun.WaitOutcome.OVER
    assert waited.report is not None and waited.report.exit_code == 9
    assert pgrun.cancel(pidfile, report=report, wait_start=120) is pgrun.CancelOutcome.NO_RUN
    assert time.monotonic() - began < 20
    assert not Path(str(pidfile) + ".cancel").exists()
    assert run.result().exit_code == 9


def test_result_waits_for_a_live_run_or_times_out(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, go = tmp_path / "r.pid", tmp_path / "go"
    runs.append(pidfile)
    run = pgrun.start(["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.01; done; exit 4"], pidfile=pidfile)
    with pytest.raises(TimeoutError):
        run.result(timeout=0.1)
    assert run.status().alive  # left alone
    go.touch()
    assert run.result(timeout=DEADLINE).exit_code == 4


def test_a_detached_run_as_a_context_manager_is_cancelled_on_exit(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, out = tmp_path / "c.pid", tmp_path / "c.out"
    runs.append(pidfile)
    with pgrun.start(["sh", "-c", "echo up; exec sleep 300"], pidfile=pidfile, output_file=out) as run:
        poll("the run's output", lambda: out.exists() and out.read_bytes() == b"up\n")
        pgid = run.status().pgid
        assert pgid is not None
    assert not pidfile.exists() and dead(pgid)
    assert run.result().reason == "cancelled"
    # A run over before the block ends is left as it is.
    with pgrun.start(["true"], pidfile=pidfile) as run:
        poll("the run to be over", lambda: not pidfile.exists())
    assert run.result().reason == "exited"
    assert not Path(str(pidfile) + ".cancel").exists()


def test_enums_print_their_names_and_compare_as_numbers() -> None:
    for value in (*pgrun.CancelOutcome, *pgrun.WaitOutcome, *pgrun.SendOutcome, *pgrun.ReadyOutcome, *pgrun.OutputOutcome):
        assert str(value) == value.name and f"{value}" == value.name and f"{value:d}" == str(int(value))
        assert value == int(value)
    assert str(pgrun.WaitOutcome.TIMED_OUT) == "TIMED_OUT" and int(pgrun.WaitOutcome.TIMED_OUT) == 124


def test_detach_after_a_run_that_ends_in_time_is_an_ordinary_result(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, out = tmp_path / "q.pid", tmp_path / "q.log"
    runs.append(pidfile)
    r = pgrun.run(["sh", "-c", "echo quick; exit 3"], detach_after=30, pidfile=pidfile, output_file=out)
    assert (r.returncode, r.stdout, r.detached, r.since) == (3, b"quick\n", None, None)
    assert r.report is not None and r.report.exit_code == 3
    assert not pidfile.exists()


def test_detach_after_hands_off_a_run_still_going(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, out = tmp_path / "h.pid", tmp_path / "h.log"
    runs.append(pidfile)
    started = time.monotonic()
    r = pgrun.run(
        ["sh", "-c", "echo before; sleep 1; echo after; exec sleep 100"],
        detach_after=0.5,
        timeout="1h",
        pidfile=pidfile,
        output_file=out,
    )
    assert time.monotonic() - started < 20
    assert r.returncode == pgrun.HANDED_OFF and r.report is None
    assert r.stdout == b"before\n" and r.since == len(b"before\n")
    run = r.detached
    assert run is not None and run.pidfile == str(pidfile) and run.output_file == str(out)
    report_path = run.report
    assert report_path is not None
    assert run.status().alive
    poll("the output after the hand-off", lambda: out.read_bytes()[r.since or 0 :] == b"after\n")
    assert run.cancel(timeout=20) is pgrun.CancelOutcome.GONE
    # The report the run wrote when it ended, in the folder kept for it.
    poll("the handed-off run's report", lambda: os.path.exists(report_path))
    assert pgrun.Report.load(report_path).reason == "cancelled"
    shutil.rmtree(os.path.dirname(report_path))


def test_detach_after_hands_off_a_run_whose_stderr_ends_mid_line(tmp_path: Path, runs: List[Path]) -> None:
    """The command's stderr up to the hand-off does not end with a newline:
    pgrun starts its line with one, so that it is a line of its own, and it
    is still a hand-off, with its N, not a plain 122."""
    pidfile, out = tmp_path / "m.pid", tmp_path / "m.log"
    runs.append(pidfile)
    r = pgrun.run(
        ["sh", "-c", "printf partial >&2; exec sleep 100"],
        detach_after=2,
        pidfile=pidfile,
        output_file=out,
        report=False,
    )
    assert r.returncode == pgrun.HANDED_OFF
    assert r.stderr.startswith(b"partial\npgrun: still running after 2s: "), r.stderr
    assert r.detached is not None and r.since == len(b"partial")
    assert r.detached.cancel(timeout=20) is pgrun.CancelOutcome.GONE


def test_the_hand_off_line_is_found_on_a_line_of_its_own_or_mid_line() -> None:
    """N from the line as pgrun says it (after a newline of its own where
    the command's stderr ended mid-line), and as an older pgrun did (right
    after those bytes)."""
    line = b"pgrun: still running after 2s: pid file p, output f from byte 7\n"
    assert _handed_off_at(b"partial\n" + line) == 7
    assert _handed_off_at(b"partial" + line) == 7
    assert _handed_off_at(line) == 7
    assert _handed_off_at(b"partial\n") is None


def test_detach_after_without_its_files_is_pgruns_failure(tmp_path: Path) -> None:
    with pytest.raises(pgrun.PgrunError) as e:
        pgrun.run(["true"], detach_after=1, pidfile=tmp_path / "p.pid")
    assert e.value.returncode == pgrun.FAILURE and "--output-file" in str(e.value)

LISTENER = """
import os, socket, sys, time
s = socket.socket(socket.AF_INET)
s.bind(("127.0.0.1", 0))
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d" % s.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
s.listen()
time.sleep(300)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="--ready reads Linux's /proc")
def test_wait_ready_and_the_listening_sockets_in_status(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, portfile, gate = tmp_path / "srv.pid", tmp_path / "port", tmp_path / "gate"
    runs.append(pidfile)
    run = pgrun.start([sys.executable, "-c", LISTENER, str(portfile), str(gate)], pidfile=pidfile)
    poll("the listener's port", portfile.exists)
    port = int(portfile.read_text())
    # Bound, not listening yet: not ready, for its port or any.
    assert run.wait_ready(port=port, timeout=0.3) is pgrun.ReadyOutcome.TIMED_OUT
    assert pgrun.wait_ready(pidfile, timeout="300ms") is pgrun.ReadyOutcome.TIMED_OUT
    st = run.status()
    assert st.listening == [] and st.blocked_on_input is False
    gate.touch()
    assert run.wait_ready(port=port, timeout=30) is pgrun.ReadyOutcome.READY
    assert run.wait_ready() is pgrun.ReadyOutcome.READY
    st = run.status()
    assert st.listening is not None and [(l.port, l.address) for l in st.listening] == [(port, "127.0.0.1")]
    assert st.listening[0].pid != st.pid  # the command's, not pgrun's
    assert run.cancel(timeout=20) is pgrun.CancelOutcome.GONE
    assert run.wait_ready(port=port) is pgrun.ReadyOutcome.OVER  # no run
    with pytest.raises(ValueError):
        pgrun.wait_ready(pidfile, port=0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="blocked_on_input reads Linux's /proc")
def test_blocked_on_input_for_a_read_of_a_terminal(tmp_path: Path, runs: List[Path]) -> None:
    import pty

    pidfile = tmp_path / "in.pid"
    runs.append(pidfile)
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [pgrun.binary(), "-p", str(pidfile), "--", "sh", "-c", "read answer"], stdin=slave, stdout=subprocess.DEVNULL
        )
        poll("the run to publish", lambda: pidfile.exists() and pgrun.status(pidfile).alive)
        poll("blocked_on_input", lambda: pgrun.status(pidfile).blocked_on_input is True)
        os.write(master, b"yes\n")
        assert proc.wait(timeout=DEADLINE) == 0
    finally:
        os.close(master)
        os.close(slave)

def test_a_detached_run_with_a_stdin_pipe_reads_what_is_sent(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, out = tmp_path / "s.pid", tmp_path / "s.out"
    runs.append(pidfile)
    run = pgrun.start(["sh", "-c", "read -r first; echo \"first $first\"; cat"], pidfile=pidfile, output_file=out,
                      stdin_pipe=True)
    assert run.send("yes\n") is pgrun.SendOutcome.SENT
    poll("the first line read", lambda: out.exists() and out.read_bytes() == b"first yes\n")
    assert run.status().alive  # its stdin did not end
    assert run.send(b"a\0b\n", eof=True) is pgrun.SendOutcome.SENT
    assert run.result(timeout=DEADLINE).exit_code == 0  # cat read end-of-file
    assert out.read_bytes() == b"first yes\na\0b\n"
    assert run.send("late") is pgrun.SendOutcome.NO_RUN


def test_send_to_a_run_without_a_stdin_pipe_raises_and_a_full_pipe_times_out(tmp_path: Path, runs: List[Path]) -> None:
    plain, piped = tmp_path / "plain.pid", tmp_path / "piped.pid"
    runs += [plain, piped]
    without = pgrun.start(["sleep", "300"], pidfile=plain)
    with pytest.raises(pgrun.PgrunError) as e:
        without.send("x")
    assert e.value.returncode == pgrun.FAILURE and "has no stdin pipe" in str(e.value)
    deaf = pgrun.start(["sleep", "300"], pidfile=piped, stdin_pipe=True)
    assert deaf.send(b"x" * (1 << 20), timeout=0.5) is pgrun.SendOutcome.TIMED_OUT
    assert deaf.send(b"", eof=True) is pgrun.SendOutcome.SENT
