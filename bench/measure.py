#!/usr/bin/env python3
"""Measurements behind bench/run.sh; prints one Markdown table.

Every figure for pgrun stands next to the same figure for the tools it
replaces, measured in this same run. Each process group this script creates
is recorded and killed in `finally`, so an interrupted benchmark leaves
nothing behind. The shared helpers are in bench_common.py, the rows for
the agent's loop in rows_agent.py.
"""
import os
import shutil
import signal
import statistics
import subprocess
import threading
import time

from bench_common import (
    OUR_GROUPS, PGRUN, QUICK, TMP, args, group_alive, group_members, hyperfine, ms, paired, read_status, row, rows, spread, start_published, switches, wait_until,
)
from rows_agent import (
    detach_after, detach_latency, ls_runs, output_wait_latency, output_window, ready_latency, send_throughput,
    status_at_scale,
)

def startup():
    runs = 20 if QUICK else 1000
    pidfile = os.path.join(TMP, "start.pid")
    names = ["bare /bin/true", "pgrun", "pgrun --pidfile", "pgrun --timeout", "setsid -w", "timeout", "tini -s"]
    medians = paired([
        "/bin/true",
        f"{PGRUN} -- /bin/true",
        f"{PGRUN} --pidfile {pidfile} -- /bin/true",
        f"{PGRUN} --timeout 10 -- /bin/true",
        "setsid -w /bin/true",
        "timeout 10 /bin/true",
        "tini -s -- /bin/true",
    ], runs)
    m = dict(zip(names, medians))
    cost = {k: v - m["bare /bin/true"] for k, v in m.items()}
    anchors = f"setsid -w {ms(cost['setsid -w'])}, timeout {ms(cost['timeout'])}, tini {ms(cost['tini -s'])} (bare /bin/true {ms(m['bare /bin/true'])})"
    row(f"start-up, per run above /bin/true ({runs} runs each, interleaved)", ms(cost["pgrun"]), anchors,
        f"{cost['pgrun'] / cost['setsid -w']:.2f}x setsid, {cost['pgrun'] / cost['timeout']:.2f}x timeout", "<= 1.00x setsid, <= 0.80x timeout")
    row("start-up with --pidfile", ms(cost["pgrun --pidfile"]), f"setsid -w {ms(cost['setsid -w'])}",
        f"{cost['pgrun --pidfile'] / cost['setsid -w']:.2f}x setsid", "<= 1.10x setsid")
    row("start-up with --timeout", ms(cost["pgrun --timeout"]), f"timeout {ms(cost['timeout'])}",
        f"{cost['pgrun --timeout'] / cost['timeout']:.2f}x timeout", "")


SPAWN_100 = "for i in $(seq 99); do sleep 300 & done; wait"


def cancel_latency():
    reps = 2 if QUICK else 10
    ours, bash = [], []
    for i in range(reps):
        pidfile = os.path.join(TMP, f"lat{i}.pid")
        run, pgid = start_published(pidfile, SPAWN_100)
        wait_until(lambda: group_members(pgid) == 100, what="100 members")
        t0 = time.monotonic()
        subprocess.run([PGRUN, "cancel", pidfile], check=True)
        ours.append(time.monotonic() - t0)
        assert not group_alive(pgid), "cancel returned with the group alive"
        run.wait()
    for i in range(reps):
        # The bash approach pgrun replaces, on a group made with setsid; the
        # leader is reaped at once by a waiting thread, as a harness would.
        pidfile = os.path.join(TMP, f"bash{i}.pid")
        leader = subprocess.Popen(["sh", "-c", SPAWN_100], start_new_session=True)
        OUR_GROUPS.add(leader.pid)
        with open(pidfile, "w") as f:
            f.write(f"{leader.pid}\n")
        wait_until(lambda: group_members(leader.pid) == 100, what="100 members")
        threading.Thread(target=leader.wait, daemon=True).start()
        script = (f'touch {pidfile}.cancel; pg=$(cat {pidfile}); kill -TERM -- -$pg; '
                  f'while kill -0 -- -$pg 2>/dev/null; do sleep 0.1; done')
        t0 = time.monotonic()
        subprocess.run(["bash", "-c", script], check=True)
        bash.append(time.monotonic() - t0)
    o, b = statistics.median(ours), statistics.median(bash)
    row("cancel latency, group of 100", ms(o), f"bash kill+poll {ms(b)}", f"{b / o:.0f}x faster", "< 15 ms, >= 20x faster")


def timeout_precision():
    runs = 3 if QUICK else 20
    p, t = hyperfine([f"{PGRUN} --timeout 0.2 -- sleep 10", "timeout 0.2 sleep 10"], runs, ignore_failure=True)
    row("timeout overshoot (--timeout 0.2)", ms(p - 0.2), f"timeout {ms(t - 0.2)}", f"{(p - t) * 1000:+.2f} ms", "within 2 ms of timeout")


def idle_status(wrapper, secs):
    """Under WRAPPER, a command that snapshots its parent's (the wrapper's)
    /proc status once settled and again SECS later. Returns the wrapper's
    context switches between the two (its idle cost) and its peak RSS."""
    a, b = os.path.join(TMP, "a"), os.path.join(TMP, "b")
    script = f"sleep 0.2; cat /proc/$PPID/status > {a}; sleep {secs}; cat /proc/$PPID/status > {b}"
    subprocess.run([*wrapper, "sh", "-c", script], check=True)
    first, last = read_status(a), read_status(b)
    return switches(last) - switches(first), int(last["VmHWM"].split()[0])


def idle_and_memory():
    secs = 1 if QUICK else 3
    p_sw, p_rss = idle_status([PGRUN, "--"], secs)
    t_sw, t_rss = idle_status(["timeout", "60"], secs)
    n_sw, n_rss = idle_status(["tini", "-s", "--"], secs)
    row(f"idle: context switches over {secs}s", str(p_sw), f"timeout {t_sw}, tini {n_sw}", f"{p_sw - t_sw:+d} vs timeout", "<= timeout")
    row("peak RSS (VmHWM)", f"{p_rss} KiB", f"timeout {t_rss} KiB, tini {n_rss} KiB", f"{(p_rss - t_rss) / 1024:+.2f} MiB vs timeout", "<= timeout + 1 MiB")
    sizes = {name: os.path.getsize(shutil.which(name)) for name in ["timeout", "tini"]}
    size = os.path.getsize(PGRUN)
    row("binary size (stripped, static)", f"{size / 2**20:.2f} MiB", f"timeout {sizes['timeout'] / 2**20:.2f} MiB, tini {sizes['tini'] / 2**20:.2f} MiB (dynamic)", "", "< 2.5 MiB")


def scale():
    n = 20 if QUICK else 200
    runs = []
    for i in range(n):
        pidfile = os.path.join(TMP, f"scale{i}.pid")
        runs.append((pidfile, *start_published(pidfile, "for i in $(seq 9); do sleep 300 & done; wait")))
    for _, _, pgid in runs:
        wait_until(lambda: group_members(pgid) == 10, what="10 members")
    t0 = time.monotonic()
    cancels = [subprocess.Popen([PGRUN, "cancel", pidfile]) for pidfile, _, _ in runs]
    for c in cancels:
        c.wait()
    elapsed = time.monotonic() - t0
    for _, run, _ in runs:
        run.wait()
    survivors = sum(group_members(pgid) for _, _, pgid in runs)
    left = [f for f in os.listdir(TMP) if f.startswith("scale")]
    row(f"scale: {n} runs x 10 processes, all cancelled", ms(elapsed), f"survivors {survivors}, files left {len(left)}", "", "< 2 s, 0 survivors, 0 files")

    big = 200 if QUICK else 2000
    pidfile = os.path.join(TMP, "big.pid")
    run, pgid = start_published(pidfile, f"for i in $(seq {big - 1}); do sleep 300 & done; wait")
    wait_until(lambda: group_members(pgid) == big, limit=120, what=f"{big} members")
    t0 = time.monotonic()
    subprocess.run([PGRUN, "cancel", pidfile], check=True)
    elapsed = time.monotonic() - t0
    run.wait()
    row(f"scale: one group of {big} cancelled", ms(elapsed), f"survivors {group_members(pgid)}", "", "< 1 s")


def cancel_one(pgrun, payload, members):
    """Start `pgrun -p PIDFILE -- sh -c PAYLOAD`, wait for MEMBERS processes
    in its group, and time `pgrun cancel` (the same binary) from its start
    to its return; the run must be gone by then."""
    pidfile = os.path.join(TMP, "storm.pid")
    run = subprocess.Popen([pgrun, "-p", pidfile, "--", "sh", "-c", payload], stderr=subprocess.DEVNULL)
    wait_until(lambda: os.path.exists(pidfile), what="pid file")
    with open(pidfile) as f:
        pgid = int(f.read())
    OUR_GROUPS.add(pgid)
    wait_until(lambda: group_members(pgid) >= members, limit=300, what=f"{members} members")
    t0 = time.monotonic()
    subprocess.run([pgrun, "cancel", pidfile], check=True)
    elapsed = time.monotonic() - t0
    run.wait()
    assert not group_alive(pgid), "cancel returned with the group alive"
    return elapsed


def cancel_at_scale():
    """`pgrun cancel` of one group of 4000 (a shell and its `sleep`s) and of
    a fork storm (a shell forking `sleep`s without pause, cancelled once
    2000 are up), from the cancel's start to its return. With --compare
    OLD, OLD's runs and cancels take turns with ours, round by round in
    alternating order, so that a busy phase of the machine hits both."""
    rounds = 1 if QUICK else 9
    big, storm = (400, 200) if QUICK else (4000, 2000)
    binaries = [PGRUN] + ([os.path.abspath(args.compare)] if args.compare else [])
    for name, payload, members in [
        (f"cancel: one group of {big}", f"for i in $(seq {big - 1}); do sleep 300 & done; wait", big),
        (f"cancel: a fork storm, at {storm} members", "while :; do sleep 300 & done", storm),
    ]:
        times = [[] for _ in binaries]
        for r in range(rounds):
            order = list(range(len(binaries)))
            for i in (order if r % 2 == 0 else order[::-1]):
                times[i].append(cancel_one(binaries[i], payload, members))
        ours = statistics.median(times[0])
        if len(binaries) == 1:
            row(name, ms(ours), f"{rounds} rounds", "", "")
            continue
        old = statistics.median(times[1])
        row(name, f"{ms(ours)} (rounds {ms(min(times[0]))}-{ms(max(times[0]))})",
            f"{os.path.basename(binaries[1])} {ms(old)} (rounds {ms(min(times[1]))}-{ms(max(times[1]))})",
            f"{ours / old:.2f}x (rounds: {spread(times[0], times[1])})", "<= 1.00x the previous landing")


def output_relay():
    """1 GiB through the relay: passing whole under --max-output 2G (the head
    spliced pipe to pipe on Linux), cut by --max-output 1M (the head spliced,
    the rest read into the ring), and whole for --idle-timeout (spliced),
    next to a direct pipe and a cat in between. The commands take turns run
    by run (`paired`), so a busy phase of the machine hits them alike; the
    ratio is of the medians, and the middle half of the round-by-round
    ratios follows it: a direct pipe's own time moves by a third from run
    to run here (whether head and cat meet on one core or not)."""
    size = (64 << 20) if QUICK else (1 << 30)
    runs = 2 if QUICK else 11
    produce = f"head -c {size} /dev/zero"
    sh = lambda line: ["sh", "-c", line]
    (direct, cat, passing, cut, idle), each = paired([
        sh(f"{produce} | cat >/dev/null"),
        sh(f"{produce} | cat | cat >/dev/null"),
        sh(f"{PGRUN} --max-output 2G -- {produce} | cat >/dev/null"),
        sh(f"{PGRUN} --max-output 1M -- {produce} | cat >/dev/null"),
        sh(f"{PGRUN} --idle-timeout 1h -- {produce} | cat >/dev/null"),
    ], runs, warmup=1, each=True)
    gib = size / (1 << 30)
    anchors = f"direct pipe {ms(direct)}, through cat {ms(cat)}"
    for what, t, times in [(f"--max-output 2G passing {size >> 20} MiB whole", passing, each[2]),
                           (f"--max-output 1M cutting {size >> 20} MiB", cut, each[3]),
                           (f"--idle-timeout passing {size >> 20} MiB whole", idle, each[4])]:
        row(what, f"{ms(t)} ({gib / t:.2f} GiB/s)", anchors,
            f"{t / direct:.2f}x direct pipe (rounds: {spread(times, each[0])}), {t / cat:.2f}x cat",
            "<= 1.5x direct pipe")


def output_file():
    """--output-file: a tee of a big stream to a file and on to stdout, next
    to a direct pipe and to `tee FILE | cat`, taking turns run by run
    (`paired`). The file is rewritten by every run, in the bench's
    temporary folder."""
    size = (64 << 20) if QUICK else (1 << 30)
    runs = 2 if QUICK else 9
    produce = f"head -c {size} /dev/zero"
    log = os.path.join(TMP, "output.log")
    sh = lambda line: ["sh", "-c", line]
    (direct, tee, ours, ours_cut), each = paired([
        sh(f"{produce} | cat >/dev/null"),
        sh(f"{produce} | tee {log} | cat >/dev/null"),
        sh(f"{PGRUN} --output-file {log} -- {produce} | cat >/dev/null"),
        sh(f"{PGRUN} --output-file {log} --max-output 2G -- {produce} | cat >/dev/null"),
    ], runs, warmup=1, each=True)
    os.unlink(log)
    gib = size / (1 << 30)
    anchors = f"direct pipe {ms(direct)}, tee FILE piped to cat {ms(tee)}"
    row(f"--output-file: a tee of {size >> 20} MiB to a file and stdout", f"{ms(ours)} ({gib / ours:.2f} GiB/s)",
        anchors, f"{ours / tee:.2f}x tee (rounds: {spread(each[2], each[1])})", "<= 1.2x tee")
    row("--output-file --max-output 2G: the same, under a SIZE it fits", f"{ms(ours_cut)} ({gib / ours_cut:.2f} GiB/s)",
        anchors, f"{ours_cut / tee:.2f}x tee (rounds: {spread(each[3], each[1])})", "<= 1.2x tee")


def guard_startup():
    """Issue 23's start-up figures, all in the same interleaved runs: the
    default mode (tree + guard) against setsid -w as whole wall times, and
    the guard's cost (the default minus --no-guard) against one fork of a
    static binary (bench/spawnwait.c with --fork minus without) and against
    the least any guard that lives until the command has ended costs
    (bench/spawnwait.c with --guard minus without): its exit and reaping
    come after the command's, on the run's critical path."""
    if not args.fork_reference:
        return
    ref = os.path.abspath(args.fork_reference)
    runs = 20 if QUICK else 3000
    variants = [
        ("default", f"{PGRUN} -- /bin/true"),
        ("--no-guard", f"{PGRUN} --no-guard -- /bin/true"),
        ("setsid -w", "setsid -w /bin/true"),
        ("static spawn", f"{ref} /bin/true"),
        ("static fork + spawn", f"{ref} --fork /bin/true"),
        ("static guard + spawn", f"{ref} --guard /bin/true"),
    ]
    m = dict(zip([n for n, _ in variants], paired([c for _, c in variants], runs)))
    row(f"start-up, default (tree + guard), whole run ({runs} runs each, interleaved)", ms(m["default"]), f"setsid -w /bin/true {ms(m['setsid -w'])}",
        f"{m['default'] / m['setsid -w']:.2f}x setsid", "<= 1.10x setsid")
    row("start-up, --no-guard, whole run", ms(m["--no-guard"]), f"setsid -w /bin/true {ms(m['setsid -w'])}",
        f"{m['--no-guard'] / m['setsid -w']:.2f}x setsid")
    guard, fork = m["default"] - m["--no-guard"], m["static fork + spawn"] - m["static spawn"]
    row("start-up, the guard's cost (default minus --no-guard)", ms(guard),
        f"one fork of a static binary {ms(fork)}", f"{guard / fork:.2f}x a fork" if fork > 0 else "", "<= 1 fork")
    least = m["static guard + spawn"] - m["static spawn"]
    row("start-up, the guard's cost, against the least a guard costs", ms(guard),
        f"a static C guard (fork, block on a pipe, killed and reaped after the command) {ms(least)}",
        f"{guard / least:.2f}x" if least > 0 else "")


def containment_startup():
    """Start-up of each --contain mode and of the guard, next to group
    without a guard and setsid/timeout, all in the same hyperfine rounds."""
    runs = 20 if QUICK else 1000
    cgroup = subprocess.run([PGRUN, "--contain", "cgroup", "--no-guard", "--", "true"],
                            stderr=subprocess.DEVNULL).returncode == 0
    variants = [
        ("bare", "/bin/true"),
        ("group --no-guard", f"{PGRUN} --contain group --no-guard -- /bin/true"),
        ("group + guard", f"{PGRUN} --contain group -- /bin/true"),
        ("tree --no-guard", f"{PGRUN} --contain tree --no-guard -- /bin/true"),
        ("tree + guard (default)", f"{PGRUN} -- /bin/true"),
        ("setsid -w", "setsid -w /bin/true"),
        ("timeout", "timeout 10 /bin/true"),
    ]
    if cgroup:
        variants.insert(5, ("cgroup + guard", f"{PGRUN} --contain cgroup -- /bin/true"))
    medians = paired([c for _, c in variants], runs)
    m = dict(zip([n for n, _ in variants], medians))
    cost = {k: v - m["bare"] for k, v in m.items()}
    base = cost["group --no-guard"]
    anchors = f"group --no-guard {ms(base)}, setsid -w {ms(cost['setsid -w'])}, timeout {ms(cost['timeout'])}"
    for name in ["group + guard", "tree --no-guard", "tree + guard (default)", "cgroup + guard"]:
        if name in cost:
            target = "<= +0.15 ms" if name == "tree + guard (default)" else ""
            row(f"start-up, --contain {name}", ms(cost[name]), anchors, f"{(cost[name] - base) * 1000:+.3f} ms vs group --no-guard", target)


def containment_stop():
    """Time to stop a tree of 1000 processes, half of which left the group
    (setsid), by SIGTERM to pgrun, in tree and cgroup mode."""
    n = 50 if QUICK else 500
    payload = f"for i in $(seq {n}); do sleep 300 & setsid sleep 300 & done; wait"
    modes = ["tree"]
    if subprocess.run([PGRUN, "--contain", "cgroup", "--no-guard", "--", "true"], stderr=subprocess.DEVNULL).returncode == 0:
        modes.append("cgroup")
    for mode in modes:
        pidfile = os.path.join(TMP, f"stop-{mode}.pid")
        run, pgid = start_published(pidfile, payload, extra=("--contain", mode))

        def children():
            out = []
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        with open(f"/proc/{entry}/stat", "rb") as f:
                            stat = f.read()
                        fields = stat[stat.rindex(b")") + 2:].split()
                        if int(fields[1]) == pgid and fields[0] != b"Z":
                            out.append((int(entry), int(fields[2])))
                    except (OSError, ValueError):
                        pass
            return out

        wait_until(lambda: len(children()) == 2 * n and sum(1 for _, g in children() if g != pgid) == n,
                   what=f"{2 * n} processes, {n} escaped")
        pids = [p for p, _ in children()]
        t0 = time.monotonic()
        run.send_signal(signal.SIGTERM)
        run.wait()
        elapsed = time.monotonic() - t0
        left = 0
        for p in pids:
            try:
                with open(f"/proc/{p}/stat", "rb") as f:
                    stat = f.read()
                left += stat[stat.rindex(b")") + 2:].split()[0] != b"Z"
            except OSError:
                pass
        row(f"stop {2 * n} processes, {n} escaped, --contain {mode}", ms(elapsed), f"survivors {left}", "",
            "0 survivors (timeout, setsid, tini: the escaped half survives)")


def zombie_holder():
    """--wait-group, group mode: the last member exits as a zombie of a
    parent that left the group (and never reaps it); how long until pgrun
    notices the group is over."""
    reps = 3 if QUICK else 10
    took = []
    for i in range(reps):
        d = os.path.join(TMP, f"holder{i}")
        os.mkdir(d)
        with open(os.path.join(d, "holder.py"), "w") as f:
            f.write("import os, time\n"
                    "if os.fork() == 0:\n"
                    f"    while not os.path.exists({d!r} + '/go'): time.sleep(0.001)\n"
                    "    os._exit(0)\n"
                    "os.setsid()\n"
                    f"open({d!r} + '/holder.pid', 'w').write(str(os.getpid()))\n"
                    "time.sleep(300)\n")
        run = subprocess.Popen([PGRUN, "--contain", "group", "--wait-group", "--", "sh", "-c",
                                f"python3 {d}/holder.py & while [ ! -s {d}/holder.pid ]; do sleep 0.01; done"],
                               stderr=subprocess.DEVNULL)
        wait_until(lambda: os.path.exists(f"{d}/holder.pid") and os.path.getsize(f"{d}/holder.pid") > 0, what="holder")
        with open(f"{d}/holder.pid") as f:
            holder = int(f.read())
        OUR_GROUPS.add(holder)
        time.sleep(0.3)  # let the supervisor's backoff reach its 100 ms ceiling, as in a long run
        t0 = time.monotonic()
        open(f"{d}/go", "w").close()
        run.wait()
        took.append(time.monotonic() - t0)
        os.kill(holder, signal.SIGKILL)
    row("--wait-group: end noticed after the last member exits as an unreapable zombie", ms(statistics.median(took)),
        f"worst {ms(max(took))}; timeout/setsid/tini: never (they do not wait for the group)", "", "< 100 ms")


def wait_latency():
    """`pgrun wait` from another process: how soon after the run's pgrun
    exits it returns, and its context switches while the run simply runs;
    next to `tail --pid`, which polls."""
    n, secs = (3, 1) if QUICK else (20, 3)
    ours, tails, idle = [], [], None
    for i in range(n):
        pidfile = os.path.join(TMP, f"wait{i}.pid")
        go = os.path.join(TMP, f"wait{i}.go")
        run, _ = start_published(pidfile, f"while [ ! -e {go} ]; do sleep 0.01; done")
        waiter = subprocess.Popen([PGRUN, "wait", "-v", pidfile], stderr=subprocess.PIPE, text=True)
        while "waiting for pgrun" not in waiter.stderr.readline():
            pass
        tail = subprocess.Popen(["tail", f"--pid={run.pid}", "-f", "/dev/null"])
        if idle is None:
            first = read_status(f"/proc/{waiter.pid}/status")
            time.sleep(secs)
            idle = switches(read_status(f"/proc/{waiter.pid}/status")) - switches(first)
        ended = {}

        def reap(name, p):
            p.wait()
            ended[name] = time.monotonic()

        threads = [threading.Thread(target=reap, args=a) for a in (("run", run), ("wait", waiter), ("tail", tail))]
        for t in threads:
            t.start()
        open(go, "w").close()
        for t in threads:
            t.join()
        ours.append(ended["wait"] - ended["run"])
        tails.append(ended["tail"] - ended["run"])
    row("pgrun wait: return after the run's end", ms(statistics.median(ours)), f"tail --pid {ms(statistics.median(tails))}",
        f"{statistics.median(tails) / max(statistics.median(ours), 1e-6):.0f}x sooner", "< 5 ms")
    row(f"pgrun wait: context switches over {secs}s while the run runs", str(idle), "", "", "0")


ONLY = os.environ.get("PGRUN_BENCH_ONLY", "").split(",") if os.environ.get("PGRUN_BENCH_ONLY") else None
try:
    for measure in [startup, guard_startup, containment_startup, containment_stop, zombie_holder, cancel_latency, timeout_precision,
                    idle_and_memory, scale, cancel_at_scale, output_relay, output_file, wait_latency, detach_latency, detach_after,
                    output_wait_latency, output_window, ls_runs, status_at_scale, send_throughput,
                    ready_latency]:
        if ONLY is None or measure.__name__ in ONLY:
            measure()
finally:
    for pgid in OUR_GROUPS:
        if pgid > 1 and group_alive(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
    shutil.rmtree(TMP, ignore_errors=True)

print(f"pgrun benchmark{' (quick: figures not meaningful)' if QUICK else ''}, {time.strftime('%Y-%m-%d')}, "
      f"{os.cpu_count()} cores, {os.uname().release}")
print()
print("| measure | pgrun | anchors, same run | ratio | target |")
print("|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
