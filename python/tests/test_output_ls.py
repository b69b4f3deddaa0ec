"""pgrun.output (DetachedRun.output) and pgrun.ls against the real binary.

Run as test_pgrun.py is (the environment's own pytest). The payloads write
their output in steps the test releases, each a file the test renames into
place; the test then polls, with a deadline, for the bytes to be in the
output file. Every run started is recorded and cancelled at the end through
its own pid file if it is still published.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

import pgrun

DEADLINE = 30.0  # generous: the CI machine is a loaded 2-core box
#: Every run's --timeout: a test killed before its cleanup (a hung test
#: under a harness's timeout) leaves no run behind for longer than this.
LIFETIME = DEADLINE * 10


def poll(what: str, done: Callable[[], bool], deadline: float = DEADLINE) -> None:
    """Wait until ``done()`` holds, failing after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while not done():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def runs() -> Iterator[List[Path]]:
    """Pid files of the runs a test starts; any still live at the end is
    cancelled (only through its own pid file)."""
    started: List[Path] = []
    yield started
    for pidfile in started:
        if pidfile.exists() and pgrun.status(pidfile).alive:
            pgrun.cancel(pidfile, timeout=5)


def stepped(folder: Path, count: int) -> List[str]:
    """A payload that writes the file ``folder/pK`` to stdout once the test
    has renamed it into place, for K from 0 to ``count - 1``, then ends."""
    script = "".join(f'while [ ! -e "$0/p{k}" ]; do sleep 0.01; done; cat "$0/p{k}"; ' for k in range(count))
    return ["sh", "-c", script, str(folder)]


def release(folder: Path, k: int, data: bytes) -> None:
    """Let the payload of :func:`stepped` write ``data`` as its step ``k``."""
    (folder / f"p{k}.tmp").write_bytes(data)
    os.rename(folder / f"p{k}.tmp", folder / f"p{k}")


def page(run: pgrun.DetachedRun, since: int) -> List[pgrun.OutputWindow]:
    """Windows of at most 4 bytes from ``since`` on until the file's end."""
    windows = [run.output(since=since, max=4)]
    while not windows[-1].eof:
        w = windows[-1]
        assert w.since == since and w.next > since, f"a window from {since} that does not move on: {w}"
        since = w.next
        windows.append(run.output(since=since, max=4))
    return windows


def test_windows_page_through_a_growing_file_without_gap_repeat_or_split_character(
    tmp_path: Path, runs: List[Path]
) -> None:
    # Steps that end inside a character (é is c3 a9, € e2 82 ac, 𝄞 f0 9d 84 9e).
    steps = [b"ab\xc3", b"\xa9cd\xe2\x82", b"\xacef\xf0\x9d", b"\x84\x9e", b"gh\xe2\x82\xac\xc3\xa9"]
    pidfile, out = tmp_path / "g.pid", tmp_path / "g.out"
    runs.append(pidfile)
    run = pgrun.start(stepped(tmp_path, len(steps)), pidfile=pidfile, output_file=out, timeout=LIFETIME)
    seen, since = b"", 0
    for k, step in enumerate(steps):
        release(tmp_path, k, step)
        written = b"".join(steps[: k + 1])
        poll(f"step {k} in the output file", lambda: out.read_bytes() == written)
        windows = page(run, since)
        for w in windows:
            assert w.since == since and w.skipped == 0
            assert w.run == ("running" if k < len(steps) - 1 else w.run)  # the last step ends the run
            assert w.outcome is pgrun.OutputOutcome.DATA
            assert w.data.decode() == w.text  # whole characters only
            assert len(w.data) <= 4
            seen, since = seen + w.data, w.next
            assert since == len(seen)
        # Everything but the start of a character the run may still complete.
        assert seen == written[: len(written.decode(errors="ignore").encode())]
        assert seen.decode() == written.decode(errors="ignore")
    assert run.result(timeout=DEADLINE).reason == "exited"
    last = run.output(since=since)
    assert (last.data, last.eof, last.run, last.next) == (b"", True, "over", since)
    assert seen == out.read_bytes() == b"".join(steps)


def test_the_window_holds_the_files_bytes_the_json_text_cannot(tmp_path: Path) -> None:
    # Bytes that never become UTF-8 pass as they are; the text has U+FFFD.
    out = tmp_path / "bin.out"
    out.write_bytes(b"ok\xff\xfe" + "é\n".encode())
    w = pgrun.output(out)
    assert w.data == b"ok\xff\xfe\xc3\xa9\n"
    assert w.text == "ok\ufffd\ufffdé\n"
    assert (w.since, w.next, w.skipped, w.eof, w.run) == (0, 7, 0, True, None)
    tail = pgrun.output(out, since=1, tail=4)
    assert (tail.data, tail.skipped, tail.next) == (b"\xfe\xc3\xa9\n", 2, 7)
    with pytest.raises(pgrun.PgrunError, match=r"^pgrun: .*"):
        pgrun.output(out, since=8)
    with pytest.raises(pgrun.PgrunError, match=r"^pgrun: .*"):
        pgrun.output(tmp_path / "missing.out")


def output_waiters() -> List[int]:
    """This process's children that are a ``pgrun output --wait``."""
    found = []
    for task in os.listdir("/proc/self/task"):
        try:
            children = Path(f"/proc/self/task/{task}/children").read_text().split()
        except FileNotFoundError:
            continue
        for pid in children:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except FileNotFoundError:
                continue
            if argv[1:2] == [b"output"] and b"--wait" in argv:
                found.append(int(pid))
    return found


def test_wait_returns_when_bytes_come_and_says_when_the_run_is_over(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, out = tmp_path / "w.pid", tmp_path / "w.out"
    runs.append(pidfile)
    run = pgrun.start(stepped(tmp_path, 2), pidfile=pidfile, output_file=out, timeout=LIFETIME)
    timed_out = run.output(wait=0.2)
    assert (timed_out.outcome, timed_out.data, timed_out.next) == (pgrun.OutputOutcome.TIMED_OUT, b"", 0)
    answers: List[pgrun.OutputWindow] = []
    waiter = threading.Thread(target=lambda: answers.append(run.output(wait=DEADLINE * 4)))
    started = time.monotonic()
    waiter.start()
    poll("pgrun output --wait to run", lambda: bool(output_waiters()))
    release(tmp_path, 0, b"hello\n")
    waiter.join(DEADLINE * 5)
    assert time.monotonic() - started < DEADLINE * 4 - 1  # the bytes, not the time, ended it
    assert [(w.outcome, w.data, w.next, w.run) for w in answers] == [
        (pgrun.OutputOutcome.DATA, b"hello\n", 6, "running")
    ]
    # With nothing more to come before it ends, the wait ends with the run.
    answers.clear()
    waiter = threading.Thread(target=lambda: answers.append(run.output(since=6, wait=DEADLINE * 4)))
    waiter.start()
    poll("pgrun output --wait to run", lambda: bool(output_waiters()))
    assert run.cancel(timeout=20) is pgrun.CancelOutcome.GONE
    waiter.join(DEADLINE * 5)
    assert [(w.outcome, w.data, w.next, w.run) for w in answers] == [(pgrun.OutputOutcome.OVER, b"", 6, "over")]


def test_until_waits_for_a_matching_line(tmp_path: Path, runs: List[Path]) -> None:
    pidfile, out = tmp_path / "u.pid", tmp_path / "u.out"
    runs.append(pidfile)
    run = pgrun.start(stepped(tmp_path, 1), pidfile=pidfile, output_file=out, timeout=LIFETIME)
    answers: List[pgrun.OutputWindow] = []
    waiter = threading.Thread(target=lambda: answers.append(run.output(wait=DEADLINE * 4, until="^ready")))
    waiter.start()
    poll("pgrun output --wait to run", lambda: bool(output_waiters()))
    release(tmp_path, 0, b"starting\nready on 80\nmore\n")
    waiter.join(DEADLINE * 5)
    assert [(w.outcome, w.data) for w in answers] == [(pgrun.OutputOutcome.DATA, b"starting\nready on 80\n")]


def test_output_of_a_run_without_an_output_file_is_refused(tmp_path: Path, runs: List[Path]) -> None:
    pidfile = tmp_path / "n.pid"
    runs.append(pidfile)
    run = pgrun.start(["sleep", "100"], pidfile=pidfile, timeout=LIFETIME)
    with pytest.raises(ValueError, match="no output file"):
        run.output()


def test_ls_lists_the_live_runs_and_a_stale_file_as_stale(tmp_path: Path, runs: List[Path]) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    a, b = folder / "a.pid", folder / "b.pid"
    runs += [a, b]
    pgrun.start(["sleep", "100"], pidfile=a, report=False, timeout=LIFETIME)
    pgrun.start(["sh", "-c", "exec sleep 101"], pidfile=b, report=False, timeout=LIFETIME)
    # A stale pid file: the group id of a process that is gone (reaped).
    gone = subprocess.Popen(["true"])
    gone.wait()
    (folder / "c.pid").write_text(f"{gone.pid}\n")
    (folder / "notes.txt").write_text("not a pid file\n")
    listed = pgrun.ls(folder)
    assert [(r.pidfile, r.state, r.alive) for r in listed] == [
        (str(a), "running", True),
        (str(b), "running", True),
        (str(folder / "c.pid"), "stale", False),
    ]
    assert [r.command for r in listed] == [["sleep", "100"], ["sleep", "101"], None]
    for r, pidfile in zip(listed[:2], (a, b)):
        st = pgrun.status(pidfile)
        assert (r.pgid, r.pid, r.processes) == (st.pgid, st.pid, 1)
        assert r.uptime_ms is not None and r.raw["pidfile"] == str(pidfile)
    assert (listed[2].pgid, listed[2].pid) == (gone.pid, None)
    with pytest.raises(pgrun.PgrunError, match=r"^pgrun: .*"):
        pgrun.ls(folder / "missing")
