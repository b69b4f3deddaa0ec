"""The rows for the agent's loop: --detach and --detach-after, output
windows and --wait, ls of many runs, status at scale, send and wait
--ready (issues 31 and 32).
"""
import os
import signal
import statistics
import subprocess
import threading
import time

from bench_common import (
    OUR_GROUPS, PGRUN, QUICK, TMP, group_members, ms, paired, read_status, row, spread, start_published, switches, wait_until,
)


def detach_latency():
    """`pgrun --detach`: from the start to the caller's return (the run is
    published and live), next to a whole foreground run of /bin/true."""
    n = 3 if QUICK else 30
    detached, foreground = [], []
    for i in range(n):
        pidfile = os.path.join(TMP, f"detach{i}.pid")
        t0 = time.monotonic()
        subprocess.run([PGRUN, "--detach", "-p", pidfile, "--", "sleep", "300"], check=True)
        detached.append(time.monotonic() - t0)
        with open(pidfile) as f:
            OUR_GROUPS.add(int(f.read()))
        subprocess.run([PGRUN, "cancel", pidfile], check=True)
        t0 = time.monotonic()
        subprocess.run([PGRUN, "--", "/bin/true"], check=True)
        foreground.append(time.monotonic() - t0)
    d, f = statistics.median(detached), statistics.median(foreground)
    row("pgrun --detach: start to return (published)", ms(d), f"foreground pgrun -- /bin/true {ms(f)}",
        f"{(d - f) * 1000:+.2f} ms", "within ~1 ms of a foreground run")


def detach_after():
    """`--detach-after`: a run that ends within DUR next to the same run
    without it, taking turns run by run (`paired`): a short one (the extra
    fork) and one that pipes a big stream through the relay; then the
    hand-off of a run still going: from DUR to the return of a capturing
    caller (`capture_output=True`, which returns only once nothing holds
    its pipes)."""
    runs = 3 if QUICK else 30
    size = (64 << 20) if QUICK else (512 << 20)
    pid, log = os.path.join(TMP, "da.pid"), os.path.join(TMP, "da.log")
    plain = [PGRUN, "-p", pid, "--output-file", log]
    eye = [PGRUN, "--detach-after", "60", "-p", pid, "--output-file", log]
    (p, d), each = paired([plain + ["--", "/bin/true"], eye + ["--", "/bin/true"]], runs, each=True)
    row("--detach-after 60: a run of /bin/true that ends within DUR", ms(d), f"the same without --detach-after {ms(p)}",
        f"{(d - p) * 1000:+.2f} ms (rounds: {spread(each[1], each[0])})", "within ~1 ms of the plain run")
    produce = f"head -c {size} /dev/zero"
    sh = lambda line: ["sh", "-c", line]
    (p, d), each = paired([sh(f"{' '.join(plain)} -- {produce} | cat >/dev/null"),
                           sh(f"{' '.join(eye)} -- {produce} | cat >/dev/null")], 2 if QUICK else 9, warmup=1, each=True)
    gib = size / (1 << 30)
    row(f"--detach-after 60: {size >> 20} MiB relayed within DUR", f"{ms(d)} ({gib / d:.2f} GiB/s)",
        f"the same without --detach-after {ms(p)}", f"{d / p:.2f}x (rounds: {spread(each[1], each[0])})", "<= 1.05x")
    os.unlink(log)
    after = 0.2
    late = []
    for i in range(3 if QUICK else 20):
        pidfile = os.path.join(TMP, f"handoff{i}.pid")
        t0 = time.monotonic()
        r = subprocess.run([PGRUN, "--detach-after", str(after), "-p", pidfile, "--output-file", log,
                            "--", "sh", "-c", "echo started; exec sleep 300"], capture_output=True)
        late.append(time.monotonic() - t0 - after)
        if r.returncode != 122:
            raise RuntimeError(f"--detach-after: {r.returncode} {r.stderr!r}")
        with open(pidfile) as f:
            OUR_GROUPS.add(int(f.read()))
        subprocess.run([PGRUN, "cancel", pidfile], check=True)
    row(f"--detach-after {after}: DUR to a capturing caller's return", f"{ms(statistics.median(late))} after DUR",
        f"max {ms(max(late))}", "", "< 50 ms (hand-off), < 100 ms (capturing caller)")


def send_throughput():
    """`pgrun send` of 1 MiB into the stdin pipe of a run whose command
    reads it (`cat`), next to the same bytes through a direct pipe (`cat
    FILE | cat`), taking turns run by run (`paired`). Linux only."""
    if not os.path.isdir("/proc/self/fd"):
        return
    runs = 3 if QUICK else 21
    data = os.path.join(TMP, "send.bin")
    with open(data, "wb") as f:
        f.write(os.urandom(1 << 20))
    pid = os.path.join(TMP, "send.pid")
    subprocess.run([PGRUN, "--detach", "--stdin-pipe", "-p", pid, "--", "sh", "-c", "exec cat >/dev/null"], check=True)
    with open(pid) as f:
        OUR_GROUPS.add(int(f.read()))
    try:
        (direct, sent), each = paired([["sh", "-c", f"cat {data} | cat >/dev/null"], [PGRUN, "send", "--file", data, pid]],
                                      runs, each=True)
        row("pgrun send: 1 MiB into a run's stdin pipe, read by cat", ms(sent), f"cat FILE piped to cat {ms(direct)}",
            f"{sent / direct:.2f}x (rounds: {spread(each[1], each[0])})", "<= 1.5x")
    finally:
        subprocess.run([PGRUN, "cancel", pid], check=True)
        os.unlink(data)


def blocked_in_poll(pid):
    """Whether process PID sleeps in poll (its main thread's wait channel)."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return "poll" in f.read()
    except OSError:
        return False


def output_wait_latency():
    """`pgrun output --wait`: from new bytes reaching the file to the
    waiter's return, the bytes written once the waiter is known to wait
    (asleep in poll, /proc/PID/wchan); and its context switches while
    nothing comes (event-driven: none)."""
    n, secs = (5, 1) if QUICK else (50, 3)
    log = os.path.join(TMP, "window.log")
    took, idle = [], None
    with open(log, "wb") as f:
        f.write(b"start\n")
    for i in range(n):
        size = os.path.getsize(log)
        waiter = subprocess.Popen([PGRUN, "output", "--wait", "60", "--since", str(size), log], stdout=subprocess.DEVNULL)
        wait_until(lambda: blocked_in_poll(waiter.pid), what="the waiter to wait")
        if idle is None:
            first = read_status(f"/proc/{waiter.pid}/status")
            time.sleep(secs)
            idle = switches(read_status(f"/proc/{waiter.pid}/status")) - switches(first)
        ended = {}

        def reap():
            waiter.wait()
            ended["at"] = time.monotonic()

        t = threading.Thread(target=reap)
        t.start()
        with open(log, "ab") as f:
            t0 = time.monotonic()
            f.write(b"line %d\n" % i)
        t.join()
        assert waiter.returncode == 0, f"output --wait exited {waiter.returncode}"
        took.append(ended["at"] - t0)
    row("pgrun output --wait: return after new bytes reach the file", ms(statistics.median(took)),
        f"worst {ms(max(took))} ({n} rounds)", "", "< 50 ms")
    row(f"pgrun output --wait: context switches over {secs}s while nothing comes", str(idle), "", "", "0")


def output_window():
    """A 64 KiB window of a 1 GiB output file, in its middle and at its
    end (--tail), whole runs of `pgrun output` taking turns with `tail -c
    64K` (which seeks too) and /bin/true: pgrun reads where the window
    lies, never the file from its start."""
    runs = 10 if QUICK else 200
    size = (64 << 20) if QUICK else (1 << 30)
    big = os.path.join(TMP, "big.log")
    line = "0123456789 the quick brown fox jumps over the lazy dog \u20ac\n".encode()
    chunk = line * ((1 << 20) // len(line))
    with open(big, "wb") as f:
        written = 0
        while written < size:
            f.write(chunk)
            written += len(chunk)
    middle = written // 2
    quiet = lambda line: ["sh", "-c", f"exec {line} >/dev/null"]
    (true, mid, tail, anchor) = paired([
        quiet("/bin/true"),
        quiet(f"{PGRUN} output --since {middle} --max 64K {big}"),
        quiet(f"{PGRUN} output --tail 64K {big}"),
        quiet(f"tail -c 65536 {big}"),
    ], runs)
    os.unlink(big)
    anchors = f"tail -c 64K {ms(anchor)}, /bin/true {ms(true)} (each under sh -c 'exec ... >/dev/null')"
    row(f"pgrun output: a 64 KiB window in the middle of a {written >> 20} MiB file, whole run", ms(mid), anchors,
        f"{mid / anchor:.2f}x tail -c", "< 5 ms")
    row(f"pgrun output --tail 64K of a {written >> 20} MiB file, whole run", ms(tail), anchors,
        f"{tail / anchor:.2f}x tail -c", "< 5 ms")


def ls_runs():
    """`pgrun ls` of a folder with 1,000 published runs (detached `sleep`s
    with their pgrun and guard), whole runs taking turns with `ls -l` of
    the same folder and a `ps` of every process."""
    n = 50 if QUICK else 1000
    runs = 5 if QUICK else 20
    folder = os.path.join(TMP, "runs")
    os.mkdir(folder)
    pgids = []
    try:
        for i in range(n):
            pidfile = os.path.join(folder, f"run{i:04d}.pid")
            subprocess.run([PGRUN, "--detach", "-p", pidfile, "--output-file", os.path.join(folder, f"run{i:04d}.log"),
                            "--", "sleep", "300"], check=True)
            with open(pidfile) as f:
                pgid = int(f.read())
            OUR_GROUPS.add(pgid)
            pgids.append(pgid)
        listed = subprocess.run([PGRUN, "ls", folder], check=True, capture_output=True, text=True).stdout
        running = sum(1 for line in listed.splitlines() if line.split()[1:2] == ["running"])
        assert running == n, f"pgrun ls listed {running} running of {n}"
        quiet = lambda line: ["sh", "-c", f"exec {line} >/dev/null"]
        ours, ls_l, ps = paired([quiet(f"{PGRUN} ls {folder}"), quiet(f"ls -l {folder}"), quiet("ps -e -o pid,pgid,args")], runs)
        # Its CPU time too (user + system, all its threads): what a busy
        # machine's wall time hides.
        import resource
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(runs):
            subprocess.run([PGRUN, "ls", folder], check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / runs
        row(f"pgrun ls: a folder of {n} published runs, whole run", f"{ms(ours)} (CPU {ms(cpu)})",
            f"ls -l {ms(ls_l)}, ps -e {ms(ps)}", f"{ours / ls_l:.1f}x ls -l", "< 200 ms")
    finally:
        for pgid in pgids:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
        wait_until(lambda: not any(f.endswith(".pid") for f in os.listdir(folder)), limit=120, what="the runs to end")


LISTEN_AT_GATE = """
import os, socket, sys, time
gate, stamp = sys.argv[1], sys.argv[2]
s = socket.socket()
s.bind(("127.0.0.1", 0))
while not os.path.exists(gate):
    time.sleep(0.001)
s.listen()
t = time.monotonic_ns()
with open(stamp + ".tmp", "w") as f:
    f.write("%d\\n" % t)
os.rename(stamp + ".tmp", stamp)
time.sleep(300)
"""


def ready_latency():
    """`pgrun wait --ready listen`: from the payload's listen() (python
    takes CLOCK_MONOTONIC right after it) to the waiter's exit as seen
    here, the waiter having waited 0.3 to 0.35 s first (its backoff at
    its 50 ms ceiling, the listen() at a random point between two looks).
    Linux only."""
    if not os.path.isdir("/proc/self/fd"):
        return
    import random
    n = 3 if QUICK else 40
    script = os.path.join(TMP, "listen_at_gate.py")
    with open(script, "w") as f:
        f.write(LISTEN_AT_GATE)
    took = []
    for i in range(n):
        pidfile, gate, stamp = (os.path.join(TMP, f"ready{i}.{x}") for x in ("pid", "gate", "stamp"))
        run, _ = start_published(pidfile, f"exec python3 {script} {gate} {stamp}")
        try:
            waiter = subprocess.Popen([PGRUN, "wait", "-v", "--ready", "listen", pidfile], stderr=subprocess.PIPE, text=True)
            while "waiting until a process" not in waiter.stderr.readline():
                pass
            time.sleep(random.uniform(0.3, 0.35))
            ended = {}

            def reap():
                waiter.wait()
                ended["at"] = time.monotonic_ns()

            t = threading.Thread(target=reap)
            t.start()
            open(gate, "w").close()
            t.join()
            if waiter.returncode != 0:
                raise RuntimeError(f"wait --ready exited {waiter.returncode}")
            with open(stamp) as f:
                listened = int(f.read())
            took.append((ended["at"] - listened) / 1e9)
        finally:
            subprocess.run([PGRUN, "cancel", pidfile], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            run.wait()
    p90 = statistics.quantiles(took, n=10, method="inclusive")[-1]
    row("pgrun wait --ready listen: return after the run's listen()", ms(statistics.median(took)),
        f"p90 {ms(p90)}, max {ms(max(took))} ({n} rounds; a look every 10 to 50 ms)", "", "< 100 ms")


def status_at_scale():
    """`pgrun status --json` of one run of 1,000 processes (`sleep`s), which
    reads each one's fd table for `listening` and `blocked_on_input`, taking
    turns with the plain `pgrun status` (the count alone) and a `ps` of every
    process."""
    n = 50 if QUICK else 1000
    runs = 5 if QUICK else 20
    pidfile = os.path.join(TMP, "status-scale.pid")
    run, pgid = start_published(pidfile, f"for i in $(seq {n - 1}); do sleep 300 & done; wait")
    try:
        wait_until(lambda: group_members(pgid) == n, limit=120, what=f"{n} members")
        quiet = lambda line: ["sh", "-c", f"exec {line} >/dev/null"]
        ours, plain, ps = paired([quiet(f"{PGRUN} status --json {pidfile}"), quiet(f"{PGRUN} status {pidfile}"),
                                  quiet("ps -e -o pid,pgid,args")], runs)
        row(f"status --json: one run of {n} processes (listening, blocked_on_input)", ms(ours),
            f"plain status {ms(plain)}, ps -e {ms(ps)}", f"{ours / plain:.1f}x plain status", "< 50 ms")
    finally:
        subprocess.run([PGRUN, "cancel", pidfile], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run.wait()
