"""What every row of the benchmark shares: the arguments, the table's rows,
the process groups to kill at exit, and the timing helpers (hyperfine,
paired turns, polling). Imported by bench/measure.py and its row modules.

Every figure for pgrun stands next to the same figure for the tools it
replaces, measured in this same run. Each process group this script creates
is recorded and killed in `finally`, so an interrupted benchmark leaves
nothing behind.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--pgrun", required=True)
ap.add_argument("--quick", action="store_true", help="few iterations, for CI")
ap.add_argument("--fork-reference", help="bench/spawnwait.c built static: the cost of one fork")
ap.add_argument("--compare", help="another pgrun binary (an older build): the cancel-at-scale rows measure both, taking turns")
args = ap.parse_args()
PGRUN = os.path.abspath(args.pgrun)
QUICK = args.quick
TMP = tempfile.mkdtemp(prefix="pgrun-bench-")
OUR_GROUPS = set()  # process groups this script created, killed at exit
rows = []


def row(measure, pgrun, anchors, ratio="", target=""):
    rows.append((measure, pgrun, anchors, ratio, target))


def ms(seconds):
    return f"{seconds * 1000:.2f} ms"


def group_members(pgid):
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                if int(stat[stat.rindex(b")") + 2:].split()[2]) == pgid:
                    n += 1
            except (OSError, ValueError):
                pass
    return n


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def wait_until(cond, limit=60.0, what="condition"):
    end = time.monotonic() + limit
    pause = 0.001
    while not cond():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def hyperfine(commands, runs, ignore_failure=False, rounds=1):
    """Median wall time of each command. With several rounds, the commands
    take turns, so a slow phase of a busy machine hits them all alike."""
    out = os.path.join(TMP, "h.json")
    times = [[] for _ in commands]
    for _ in range(rounds):
        cmd = ["hyperfine", "-N", "--style", "none", "--warmup", str(min(20, runs)), "--runs", str(runs), "--export-json", out]
        if ignore_failure:
            cmd.append("-i")
        subprocess.run(cmd + commands, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            for i, r in enumerate(json.load(f)["results"]):
                times[i].extend(r["times"])
    return [statistics.median(t) for t in times]


def paired(commands, runs, warmup=None, each=False):
    """Median wall time of each command, the commands taking turns run by
    run (in alternating order), so that whatever else the machine does
    meanwhile falls on all of them alike: hyperfine's rounds interleave
    only blocks of runs, and a busy phase during one block moves its ratio
    by 10-20% on this 2-core machine. Each run is a posix_spawn and a
    waitpid from here, the same for every command. A command is a string
    split on spaces, or an argv list. `warmup` rounds first (default
    min(20, runs)) warm the caches and are not counted. With `each`, also
    the times themselves, run by run, for ratios round by round."""
    argvs = [c if isinstance(c, list) else c.split() for c in commands]
    paths = [shutil.which(a[0]) or a[0] for a in argvs]
    warmup = min(20, runs) if warmup is None else warmup
    times = [[] for _ in commands]
    order = list(range(len(commands)))
    for r in range(runs + warmup):
        for i in (order if r % 2 == 0 else order[::-1]):
            start = time.perf_counter_ns()
            pid = os.posix_spawn(paths[i], argvs[i], os.environ)
            _, status = os.waitpid(pid, 0)
            elapsed = time.perf_counter_ns() - start
            if os.waitstatus_to_exitcode(status) != 0:
                raise RuntimeError(f"{commands[i]} failed")
            if r >= warmup:
                times[i].append(elapsed / 1e9)
    medians = [statistics.median(t) for t in times]
    return (medians, times) if each else medians


def spread(ours, anchor):
    """The middle half of the round-by-round ratios of two commands
    measured by `paired` (each of ours over the anchor run next to it)."""
    ratios = sorted(o / a for o, a in zip(ours, anchor))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return f"{q[0]:.2f}x-{q[2]:.2f}x"


def start_published(pidfile, payload, extra=()):
    """Start pgrun -p PIDFILE -- sh -c PAYLOAD; return (Popen, pgid)."""
    p = subprocess.Popen([PGRUN, "-p", pidfile, *extra, "--", "sh", "-c", payload], stderr=subprocess.DEVNULL)
    wait_until(lambda: os.path.exists(pidfile), what="pid file")
    with open(pidfile) as f:
        pgid = int(f.read())
    OUR_GROUPS.add(pgid)
    return p, pgid


def read_status(path):
    fields = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    return fields


def switches(fields):
    return int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
