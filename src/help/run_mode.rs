//! The run mode's long help (`pgrun --help` after the options, and the
//! man page pgrun(1)): the prose, in the format [`super`] describes.

pub const AFTER_LONG_HELP: &str = "\
Stop sequence:
  One sequence serves every way a run is stopped: timeout, cancel, SIGTERM to
  pgrun, and processes left in the group after COMMAND exits. Each step sends
  its signal to the whole group (then SIGCONT, unless the signal is KILL or
  CONT, so stopped members can act on it), waits up to the step's grace for
  the group to be gone, and moves on only if it is not. The last step is
  always SIGKILL. Default: TERM/10s/KILL. Waiting is event-driven: while
  COMMAND simply runs, pgrun does not wake up at all.

  When COMMAND exits, whatever is left in its group is stopped with the same
  sequence (--wait-group: waited for instead), and pgrun exits with COMMAND's
  status once the group is gone.

  The leader first: a step written leader:SIG (in --escalate, or -s
  leader:SIG) sends SIG to COMMAND's own process only, not to its group:
  --escalate leader:TERM/5s/TERM/5s/KILL gives COMMAND TERM and 5s to stop
  its children itself, then TERM to the whole run, then KILL. Choose it
  for a command that cleans up after itself and whose children should hear
  from it, not from pgrun: a test runner that tears down its fixtures, a
  make or a shell script with an exit trap, a server that drains its
  workers (what tini does by default, and dumb-init --single-child). Keep
  the default for a command that does not forward or handle signals: its
  children would only get the later steps. The step's grace still waits
  for the whole run to be gone. pgrun sends it only while COMMAND has not
  been reaped (pgrun is its parent, so the pid is still COMMAND's); if
  COMMAND has already exited (stragglers being stopped), the step is
  skipped, its grace not waited, and the report does not list it. Whatever
  the last step is, a final KILL to the whole run follows: leader:KILL is
  not the final KILL. -s leader:TERM -k DUR is --escalate
  leader:TERM/DUR/KILL. The guard (pgrun killed) sends a leader step only
  through a pidfd it opened on the leader while it was in the group (Linux);
  where it has none (the leader has exited, or off Linux) it skips the step
  rather than signal a pid it does not own. pgrun cancel's own fallback
  (--force, --timeout) uses the default sequence.

Signals sent to pgrun:
{SIGNALS}

  HUP, INT and QUIT ask the command to end, so a SIGCONT follows them (as GNU
  timeout does): a member stopped on terminal access, or by Ctrl-Z, must be
  able to act on Ctrl-C. USR1, USR2, ALRM, WINCH and the real-time signals ask
  a program to do something and carry on; a SIGCONT after them would wake a
  member that was stopped on purpose (kill -STOP, a job put aside), which
  acts on them once it is continued.

  Forwarded signals go to COMMAND's process group only, whatever --contain
  says: a process that left the group (a daemon, a setsid child) belongs to
  the run for stopping, not for Ctrl-C or a reload. Only the stop sequence
  reaches it.

Containment (--contain MODE):
  A process group is not a seal: a descendant can call setsid or setpgid
  (daemons, `set -m` job control, `nohup ... &`, test fixtures that start
  servers) and leave it, and a zombie whose parent left the group holds the
  group open. --contain says what the run is, and so what every step of the
  stop sequence reaches and what pgrun waits for:
    group    the process group only (POSIX; the only mode off Linux)
    tree     the group and every descendant of pgrun, wherever it moved
             (Linux default): pgrun is the subreaper, so an orphan becomes
             its child, and each step walks pgrun's children
             (/proc/PID/task/TID/children, or a /proc scan) and signals
             each process outside the group through a pidfd opened while it
             was still a descendant, so a reused pid is never hit. The run
             is gone when the group is gone and pgrun has no child left but
             its guard.
    cgroup   everything in a new cgroup v2 leaf, pgrun-PID-RANDOM under
             pgrun's own cgroup (the cgroup2 mount is found in
             /proc/self/mountinfo). COMMAND joins it before it execs. Each
             step signals every member, the last step is cgroup.kill, gone
             is cgroup.events saying populated 0 (watched with poll, not in
             ticks); the leaf is removed at exit. Where no leaf can be made
             (no cgroup2 mount, read-only, not delegated) it is exit 125
             before the start, with the reason.
    auto     cgroup where a leaf can be made, else tree
  --wait-group waits for the whole run as the mode defines it. A process
  outside the run is never signalled. The report says which mode was in
  force (contain) and how many processes outside the group the stop
  reached (escaped); status counts the run's processes as its mode defines
  it (read from that pgrun's command line).

  In every mode, COMMAND itself is stopped by its pid should it leave its
  group (setpgid, setsid): pgrun is its parent, so that pid is its own until
  pgrun reaps it, and the run is not gone before (it counts as escaped).
  The group itself is signalled by its number only until pgrun first sees
  it empty, never after. One window is left: a forwarded signal or a stop
  step sent after the group emptied but before pgrun looked again can reach
  a new group that took the number in between. pgrun looks at each
  SIGCHLD, but members that are not its children (a zombie whose parent is
  outside the run; off Linux, orphans) end without one, and once COMMAND
  has exited pgrun looks for that on a backoff of up to 100 ms (so while
  --wait-group drains, too). A number comes back only once the kernel's pid
  counter has gone round pid_max.

  A zombie member whose parent is outside pgrun's reach (group mode, or no
  subreaper off Linux) cannot be reaped by pgrun. After the final KILL and
  one more second pgrun exits as usual with one warning line, and the
  report counts it (unreaped). While draining (--wait-group),
  a group left with nothing but such zombies is over at once (pgrun checks
  every 100 ms at most once COMMAND has exited; on the portable paths,
  without /proc, it waits).

  Side by side: timeout, setsid and tini stop (or wait for) the group only;
  a setsid'd or double-forked descendant outlives them, a zombie held by an
  escaped parent keeps timeout sending KILL, and killing them with SIGKILL
  leaves the group running. pgrun closes the first two with tree or cgroup
  and the third with its guard (which, once pgrun is dead, reaches what left
  the group only in cgroup mode: see Guard).

Guard (--no-guard to turn it off):
  Before COMMAND starts, pgrun forks a guard: not exec'd, named pgrun-guard
  in ps, in a process group of its own (so a kill of the caller's group does
  not take it), blocked on a socket whose other end only pgrun holds, using
  no CPU. When pgrun exits normally it releases the guard and reaps it:
  nothing of pgrun outlives pgrun. When pgrun is killed (SIGKILL from a
  harness's timeout, the OOM killer, kill -9, a kill of its whole group),
  the guard runs the same stop sequence on the group (in cgroup mode on the
  leaf, which it then removes), and once the run is gone removes the pid
  file and the marker if they are still the ones pgrun published (and a
  cancel request that was there when pgrun died, if the command had
  started: one for a run that never started stays pending; while it stops
  the run, such a request gives way to pgrun's stopping note, so a run
  started meanwhile on the stale pid file is not cancelled by it), and every
  temporary name pgrun had made and not yet placed (.NAME.pgrun-PID.tmp,
  .NAME.pgrun-starting.tmp beside the pid file) if it is still the file
  pgrun made, and exits: pgrun makes none before the guard is forked (on
  Linux the report's temporary file has no name until it is placed) and
  lets the guard go only once the last is placed or removed, so a SIGKILL
  of pgrun leaves none. It is not the group's parent:
  it checks for the group's end with a backoff, and gives up with a warning
  1s after the final KILL (on Linux, what is left then that is dying of
  that KILL, its KILL pending or its exit begun, is waited for up to 30s
  more: a loaded machine may not run it for a while). A zombie still
  holds its group: when nothing else is left, the guard waits for the zombie's new parent to reap it, as
  long as the sequence's longest grace and at least 1s, then gives up with
  a warning. It acts only once pgrun is gone (it was
  reparented), and stops only what it can prove is the run's: on Linux the
  processes pgrun handed it as pidfds (the command from the moment it
  exists; up to 32 members, each once, when a stop starts or the leader is
  reaped), the members of the group found while one of those is not yet
  reaped, and the group by its number while pgrun never saw it empty; it
  never signals a group by a number that may have been reused. Elsewhere it
  signals the group by its number. In tree mode the descendants that had
  already left the group are out of its reach once pgrun is dead (they are
  reparented elsewhere); cgroup mode covers them. The guard holds the
  command from the moment it exists (it looks for it among pgrun's
  children as pgrun creates it): only a kill of pgrun in the instant
  before it has looked is not covered.

Parent death (--die-with-parent):
  When the process that started pgrun dies, the run is stopped as if
  cancelled (reason cancelled; 143 if COMMAND had not started). On Linux
  pgrun arms PR_SET_PDEATHSIG (SIGURG) before COMMAND starts; the kernel
  also sends it when only the parent *thread* exits, so pgrun acts only if
  its parent process really changed (getppid) and carries on otherwise: a
  harness may start pgrun from a short-lived thread. Elsewhere pgrun checks
  getppid() once a second while the run lasts.

Detached runs (--detach, needs --pidfile):
  The process the caller started prepares and starts the run exactly as
  without --detach, and exits as soon as the run is published (the pid file
  is live and names the group): status 0, nothing written to stdout. A run
  that does not get that far gives the status it would have had without
  --detach (125 with the reason on stderr, 126, 127, 143 cancelled before
  the start) and leaves nothing running and no file behind; a signal the
  caller's process gets meanwhile is passed on (a TERM is a cancel before
  the start). The supervising pgrun lives on in a new session of its own:
  neither the caller's exit, nor a signal to the caller's process group, nor
  a hang-up of its terminal reaches the run. It holds none of the caller's
  fds, so subprocess.run(..., capture_output=True) returns at once:
  COMMAND's stdin (unless --stdin-pipe), stdout and stderr are /dev/null
  and no fd above 2 is inherited. --timeout, cancel, status, wait, the guard, containment and
  --report work as for any run. --die-with-parent is refused (125).

Keep an eye, then let go (--detach-after DUR, needs --pidfile and --output-file):
  An ordinary attached run until DUR: a run that ends within DUR gives its
  own output, status and report, and leaves nothing. If COMMAND is still
  running after DUR (counted from pgrun's start), the process the caller
  started writes one line on stderr,
    pgrun: still running after DUR: pid file P, output F from byte N
  and exits 122; the run goes on as a detached run (see above): its output
  goes to F only, it holds none of the caller's fds (a capturing caller
  returns at once), and neither a signal to the caller's process group nor
  a hang-up of its terminal reaches it. N is the byte of F up to which the
  caller's stdout and stderr got the output and past which they got
  nothing: `pgrun output --since N F` goes on exactly from there. (So that
  N is exact, the caller's stdout and stderr get the output in F's order:
  while one of its readers stalls, the other stream waits too. Under
  --max-output the caller got a cut of F up to N: each stream's head.)
  --timeout, --idle-timeout, the limits and --report still apply, counted
  from the start: \"background after 10 s, but never longer than 1 h\" is
  --detach-after 10 --timeout 1h. Until the hand-off a signal to the
  caller's pgrun acts on the run as for any run (TERM cancels it, INT is
  forwarded; a cancel it passed on is waited out, not handed off, and a
  signal that comes with the hand-off is not passed on), and if that pgrun is killed (SIGKILL: a harness's own
  timeout) the run is stopped as cancelled, not left in the background. COMMAND's stdin is /dev/null and no fd above 2 is inherited,
  since it may outlive the caller. Without --pidfile or --output-file, or
  with --detach or --die-with-parent, it is a usage error (125).

Exit status:
{RUN_EXIT}

Pid file:
  --pidfile PATH publishes the run: one line, the process-group id in decimal
  and a newline, so `kill -TERM -- -$(cat PATH)` works. It is written to a
  temporary file in the same folder and renamed into place once the group
  exists, so a reader sees no file or the whole line. Mode 0644 whatever the
  umask; removed at exit, after the group is gone.

  Liveness is a lock, so pid reuse cannot fool a reader. While the run lives,
  pgrun holds a POSIX write lock (fcntl F_SETLK, F_WRLCK) from byte 0 to the
  end of the file; once its run is over (it takes no more cancel requests)
  it lets go of byte 1 alone, until it withdraws the file. The run is alive exactly when F_GETLK for a write lock on
  byte 0 reports l_type F_WRLCK held by a process running as the file's
  owner; l_pid is then pgrun's pid (0 if it runs in a PID namespace the
  reader cannot see). Anything else (no lock, a read lock, another user's
  lock) means the file is not a live run's.

  A pid file held by a live run makes pgrun exit 125 without starting
  anything; a symlink or a missing folder is refused (125). A stale one is
  replaced: the starting run write-locks the one byte at offset 1073741824
  (2^30) of the old file, never byte 0, so no reader takes it for a live
  run; it then checks that the path still names the file it locked (and
  starts over if not), and waits while another starting run holds that
  byte. If another user's process holds a lock over that byte, pgrun exits
  125 naming it. Starters also meet, file or no file, at the name
  .NAME.pgrun-starting.tmp beside the pid file: the new record, already
  write-locked from byte 0, is linked there before COMMAND starts, and a
  run that finds it held (by a live process) waits, then refuses the run
  that published or goes on if that one gave up; one left unlocked by a
  killed pgrun is removed. So of several runs started at once on one pid
  file, one runs COMMAND and the others exit 125 without running theirs
  (unless the one ends first: runs follow each other, never overlap). Another user's file at that name (or their lock on it) is exit
  125 naming it. A starting run that ends before it publishes removes the
  stale file it claimed. Everything that can fail (the temporary file, its
  space, its lock, the report's temporary file) is prepared before COMMAND
  starts; a read-only or full folder, a name too long, or no fd left is exit
  125 with nothing run. SIGTERM, INT, HUP or QUIT received before COMMAND
  starts ends pgrun with 128+N, COMMAND never run.

Cancel marker:
  An empty file, PIDFILE.cancel unless --cancel-file says otherwise (which
  must not name the pid file itself, by any spelling or link: 125). It
  counts only if it is owned by the user running pgrun or by root; another
  user's (in a sticky /tmp, anyone can create one) is ignored, with a line
  under --verbose. Present before the start: pgrun removes it and exits 143
  without running anything; removing it is the check, so a marker created
  at that moment is either consumed or found right after publishing.
  Present right after publishing: the run is stopped as if cancelled. pgrun
  creates it whenever it starts a stop sequence, so a marker next to a live
  pid file means \"stopping\", and removes it when it exits. The marker
  pgrun creates itself is not empty: it holds one line, `pgrun-stopping
  pgrun=PID pgid=PGID`. A regular file that starts with `pgrun-stopping `
  or `pgrun-consumed ` is a note pgrun wrote, never a cancel request. So a
  marker pgrun cannot remove (a failing disk, a read-only remount, a folder
  whose permissions changed) cancels no later run: pgrun says so in one
  `pgrun: warning:` line naming the path and the error, and overwrites a
  request it consumed but cannot remove with `pgrun-consumed pgrun=PID`. A
  starting run ignores a note; status says stopping only for the note of
  the pgrun holding the pid file; the next run that stops or ends there
  replaces or removes it; cancel turns a note into a request when it drops
  its marker. A published run takes every request it finds at its end (one
  made while it was published is a cancel of this run); a request made once
  the run is over (byte 1 of its lock let go of) is withdrawn by the cancel
  that made it, --no-wait included, so a cancel of a finishing run never
  cancels the next one. A run that withdraws itself with a marker there (it
  was cancelled, or stopped) puts its stopping note in its place, write-locked
  by pgrun, before it removes its pid file, and removes it as the last
  thing before it exits: a cancel that comes while pgrun finishes (writes
  its report and held output) finds the run's end under way and waits for
  that pgrun to exit. Held or not, it is a note.

Cancel and status:
  `pgrun cancel PIDFILE` drops the marker, then waits up to --wait-start
  (5s; a value too large to represent waits forever) for a live run to be
  published. It sends SIGTERM to the pgrun holding the lock (through a pidfd
  on Linux) and waits until that pgrun has exited (not only let go of its
  lock: it does so before it writes its report and held output) and the
  group is gone: on Linux on a pidfd of that pgrun, elsewhere on the lock
  of the note pgrun holds until it exits (see Cancel marker; a run that had
  no marker there leaves only its lock to go by). A cancel that finds no
  pid file but that note (another cancel, or the run itself, is stopping
  it) waits for that same exit and exits 0; so does one that saw the run
  live before it dropped its marker and then finds it withdrawn (it ended
  as cancel looked). With --report PATH (the path the run was given), no
  run published and a report there that names PIDFILE, the run is over:
  cancel exits 1 at once and leaves no marker.
  With no run found, cancel says how long it waited (--wait-start 0 skips
  that for a run that may be over already).
  --timeout DUR bounds the wait: past it, cancel SIGKILLs the group itself
  while it is still the run's: on Linux, while it holds a descendant of
  that pgrun (pgrun is a child subreaper) or has not been seen empty since
  cancel found it the run's (a member the run cannot stop, such as a zombie
  whose parent is outside the run, keeps it so; cancel looks at it with a
  backoff of at most 100 ms while it waits). A group that took the number
  after the run's group ended, while pgrun was still finishing, is left
  alone and cancel exits 0.
  Once that pgrun has exited, cancel stops the group itself only if the pid
  file it found is still in place (pgrun died without withdrawing it, e.g.
  SIGKILL) and, on Linux, the group still held a descendant of that pgrun
  when cancel found it: a run that withdrew its record is over, and a group
  that took its number since is never signalled.
  A stale pid file is removed (its group signalled only with --force) and
  the wait goes on: a run may be starting. A file a starting run has
  claimed is not published yet: cancel waits for it and never signals the
  claimant. If the marker cannot be created (a read-only folder, another
  user's file at its path), a live run that appears within --wait-start is
  still stopped; with none, that is an error (125), --keep-pending included.
  It refuses pid files owned
  by another user, world-writable ones, symlinks, and group ids <= 1, its
  own group or its caller's.

  PID namespaces: the group id in the file is the one in the run's
  namespace. When the pgrun holding the lock runs in another PID namespace
  (a container's pid file on a shared mount), cancel acts only through that
  pgrun and never signals the file's number; status counts no processes.
{CANCEL_EXIT}

  `pgrun status PIDFILE` prints e.g. `running: pgid 4242, pgrun pid 4241, 3
  processes, up 12.4s` (--json: one object with state, pgid, pid,
  processes, uptime_ms, starting, other_pid_namespace). States: running,
  stopping, stale, not-running (also while a starting run replaces a stale
  file: starting is true), cancel-pending. On Linux only descendants of the
  pgrun holding the lock are counted: a group that took the number while
  that pgrun finishes is not the run's.
{STATUS_EXIT}

Waiting for a run:
  `pgrun wait PIDFILE` waits, from any process of the run's user (or root),
  until the run published in PIDFILE is over: its pgrun has withdrawn it
  (removed the pid file and let go of the lock; it may still be writing
  held output to a slow reader, which wait does not wait for, guard or no
  guard) or exited and, if that pgrun was killed, its guard has stopped the
  run and the group is gone. Like cancel, it waits up to --wait-start for a
  run to publish and refuses the same pid files. Waiting is event-driven (a
  blocking read lock of byte 0, taken and let go of at once when the run's
  lock is let go of; a pidfd of the pgrun holding the lock, on Linux): a
  waiter does not wake up while the run runs. --timeout DUR gives up after DUR (124),
  leaving the run alone. --report PATH (the path the run was given) makes
  wait exit with the run's own status, read from that report, which pgrun
  writes as it withdraws the run; with no run published and a report that
  names PIDFILE, the run is over and wait answers at once (see Report).
  Without it, a wait that found no run says how long it waited: `no run
  at P (waited 5s for one to start; --wait-start 0 if it may be over
  already)`. wait never signals anything and
  creates or removes no file (a stale pid file is left as it is); any
  number of waiters may wait on one run.
{WAIT_EXIT}

Output windows and the runs in a folder:
  `pgrun output [--since N] [--max SIZE | --tail SIZE] [--wait DUR]
  [--until REGEX] [--pidfile P] [--json] FILE` reads a window of a run's
  output file (--output-file) from byte N, never splitting a character,
  and can wait for more, for a line that matches, or for the run's end:
  see pgrun-output(1). `pgrun ls [--json] DIR` lists the runs published
  in a folder, with their state as status gives it: see pgrun-ls(1).

Input (--stdin-pipe, needs --pidfile):
  COMMAND's stdin is a pipe that the supervising pgrun holds open (with or
  without --detach), instead of pgrun's own stdin: COMMAND reads what
  `pgrun send [--eof] [--file F] [--timeout DUR] PIDFILE [TEXT]` writes,
  in order, and end-of-file only once a send --eof asked for it. Only the
  run's user (or root) can send, and nothing is created that another
  user could open: on Linux the pipe is reached through this pgrun's own
  fd (/proc/PID/fd); elsewhere it is a FIFO in a folder of mode 0700,
  .NAME.pgrun-PID.stdin beside the pid file, which pgrun makes (a name
  that exists already is never used: 125) and removes at the run's end.
  See pgrun-send(1).

Report:
  --report PATH writes one JSON object atomically at exit (with output
  still held for a slow reader: once the run is withdrawn, before that
  output is written; see Output limit), for example
    {\"exit_code\": 124, \"reason\": \"timeout\",
     \"status\": {\"code\": null, \"signal\": \"KILL\"}, \"pgid\": 4242,
     \"signals\": [{\"signal\": \"TERM\", \"at_ms\": 1001},
                 {\"signal\": \"KILL\", \"at_ms\": 11002}],
     \"stragglers\": 2, \"unreaped\": 0, \"unstopped\": 0, \"contain\": \"tree\",
     \"escaped\": 0, \"duration_ms\": 11010}
  reason is exited, signaled, timeout, idle-timeout, cancelled,
  cancelled-before-start or error (then with an error message); status holds
  COMMAND's exit code or the name of the signal that ended it; signals lists
  the stop-sequence signals sent, in milliseconds since pgrun started (a
  leader step sent to COMMAND alone is named as written, leader:TERM; one
  skipped is not listed); stragglers counts the members
  still alive when COMMAND exited (0 when it never ran; off Linux, where
  pgrun cannot count them, 1 means some); unreaped counts zombies pgrun
  stopped waiting for (see below and Containment), unstopped the processes
  pgrun gave up on because it may not signal them (see below); contain is the
  --contain mode in force, escaped the processes outside the group the stop
  reached; output (--max-output, --output-file, --idle-timeout) gives
  bytes and omitted per stream, and file, the --output-file PATH; pidfile
  is the pid file's absolute path (its folder resolved), null without one.
  The path is checked before anything else,
  so every exit after that writes the report; cancelled is written only
  once the group is confirmed gone. A report path another live run uses
  as its report, or that is a live run's pid file, is refused (125, nothing
  runs, nothing written). An old report at PATH is removed
  before the run publishes its pid file, so a report found while no run is
  published there is the last run's: `pgrun wait --report PATH PIDFILE` then
  exits at once with that run's status, and `pgrun cancel --report PATH
  PIDFILE` exits 1 at once (no live run) and leaves no marker, neither
  sitting out --wait-start.

Resources:
  Every report has resources, what the run used, for example
    \"resources\": {\"user_ms\": 1520, \"system_ms\": 210, \"max_rss_kb\": 48212,
                  \"memory_peak_bytes\": null, \"pids_peak\": null, \"oom_kills\": null}
  user_ms and system_ms are the CPU time of the run's processes: in group
  and tree mode of every process pgrun reaped for the run, each with what
  it had reaped itself (wait4's rusage, the RUSAGE_CHILDREN rule: a
  grandchild its parent waited for counts, one nobody waited for, a child of
  a parent that ignores SIGCHLD, does not), never the guard's nor pgrun's
  own; in cgroup mode the leaf's cpu.stat, which counts every member.
  max_rss_kb is the largest peak resident set of any one of those processes
  (ru_maxrss), in every mode. memory_peak_bytes (memory.peak), pids_peak
  (pids.peak) and oom_kills (oom_kill in memory.events) come from the leaf in
  cgroup mode where those files exist (the parent cgroup enables the memory
  and pids controllers), and are null otherwise. pgrun reads them once the
  run is gone, before it removes the leaf; nothing is measured before the
  start. A run whose command never started reports zeros and nulls. `pgrun
  status --json` of a live run in cgroup mode adds resources with what the
  leaf says so far: memory_bytes (memory.current), pids (pids.current),
  user_ms and system_ms.

Sizes:
  A SIZE (--max-output, --memory-max, the byte limits of --rlimit) is a
  number of bytes with an optional unit, as head -c takes it and as Docker's
  --memory is written: K, M or G, in either case, alone or followed by iB,
  is 1024-based (1k, 512m, 2G, 1KiB, 1MiB); followed by B it is 1000-based
  (1kB, 1KB, 10MB). No fraction, sign or space; b alone (512-byte blocks to
  head, bytes to Docker), kb and T are refused. 0 is refused but as a
  --rlimit value (core=0).

Limits:
  --memory-max SIZE, --pids-max N and --cpus X limit the run as a whole, in
  its cgroup leaf: memory.max = SIZE with memory.swap.max = 0 and
  memory.oom.group = 1 (an out-of-memory kill ends the whole run at once:
  report reason oom, exit 137, resources.oom_kills counts it); pids.max = N
  tasks, processes and threads (a fork past it fails with EAGAIN inside the
  run); cpu.max = X*100000 per 100000 µs (X may be 0.5 or 2). They need
  --contain cgroup and make it the default (auto too); with --contain group
  or tree they are an error (125). The leaf is made under pgrun's own
  cgroup, which must offer the controller (memory, pids, cpu: its
  cgroup.controllers) and have it enabled in cgroup.subtree_control, which
  pgrun does itself. cgroup v2 allows that only in a cgroup with no process
  of its own (the root excepted): where pgrun is alone in its cgroup (a
  container's PID 1 in its own cgroup namespace), it first moves itself into
  a leaf of its own beside the run's (pgrun-PID-self-..., left behind empty
  when pgrun exits); where other processes share it, or a controller is
  missing, pgrun exits 125 before the start, naming the controller and why.
  pgrun never moves any process but itself and COMMAND. This needs root or
  a delegated cgroup.

  --rlimit NAME=SOFT[:HARD] sets a resource limit for COMMAND, in its own
  process before it execs, so it holds from COMMAND's first instruction and
  never binds pgrun (repeatable; a later one for the same NAME replaces an
  earlier one; every mode and platform). NAME is spelled as prlimit(1)
  spells it: as, core, cpu, data, fsize, memlock, nofile, nproc, stack. As
  with prlimit, one value sets both the soft and the hard limit, SOFT:HARD
  each, SOFT: only the soft one and :HARD only the hard one (the other stays
  as pgrun has it). A value is unlimited, a SIZE for the byte limits (as,
  core, data, fsize, memlock, stack: 64M, 1g, 512KB, plain bytes, 0), a DUR
  for cpu (rounded up to whole seconds; the kernel sends SIGXCPU at the soft
  limit and SIGKILL at the hard one, so on Linux one value gives SIGKILL,
  exit 137),
  or a plain number for nofile and nproc. A bad name or value is a usage
  error (125). Before the start pgrun checks each limit against its own: a
  soft limit above the hard one, or a hard limit raised without the
  privilege to (CAP_SYS_RESOURCE), is exit 125 and COMMAND never runs; what
  only the kernel refuses (nofile above fs.nr_open) is refused in COMMAND's
  process before exec, and is 125 too. With --rlimit pgrun starts COMMAND
  with fork and exec rather than posix_spawn, which cannot set limits.

Output limit:
  --max-output SIZE bounds COMMAND's stdout and stderr, for harnesses that
  hand the output to a person or a model. SIZE is bytes, with K, M, G
  (1024-based) or KB, MB, GB (1000-based), as head -c takes them (see
  Sizes); 0 is refused. Each stream gets a pipe that pgrun reads and its own budget of
  SIZE bytes; stdin and every other fd still pass through. A stream of at
  most SIZE bytes comes out byte-identical. A longer one comes out as its
  first SIZE/2 bytes, written as they arrive, then the line
  `[pgrun: N bytes omitted]` (after a newline only if the head does not end
  with one), then its last SIZE/2 bytes, kept in a ring and written when the
  stream ends. Memory stays within about SIZE per stream, reserved before
  COMMAND starts (a SIZE too large for memory is exit 125).

  Cuts fall on UTF-8 character boundaries; nothing is transcoded. Only the
  start of a character that the next byte could still complete is held back
  at the head's end (never C0, C1, F5..FF, a continuation byte, or E0 80..9F,
  F0 80..8F, ED A0..BF, F4 90..BF); the tail starts at the first byte that is
  not a continuation byte, at most 3 bytes in; a prefix held at the very end
  of a stream is written as it is.

  Nothing pgrun read is lost, however the run ends: once the run is over,
  pgrun reads what the pipes hold at that moment and no more (a process
  outside the run that still holds a pipe cannot keep it waiting), removes
  the pid file and the marker and releases the guard (status says
  not-running from then on, and wait returns), writes the report (the
  output counts are final by then), then writes the rest, waiting for its
  readers as long as they take, and exits. Should a write fail in that
  last part (other than EPIPE), the report is written again with the
  error. A signal to pgrun then changes nothing:
  the run is over; SIGKILL ends a pgrun that holds only its output. No
  write of pgrun's ever blocks: a reader that stops reading holds up
  COMMAND, as a direct pipe would, never pgrun's timeout or signals, and a
  non-blocking stdout that is full (EAGAIN) is waited for. A stream also
  ends when COMMAND's side of it is closed. If the reader of pgrun's stdout
  or stderr goes away (EPIPE), that stream's relay stops and COMMAND gets
  EPIPE or SIGPIPE on its next write; the run goes on. A pipe's reader
  leaving is noticed even while pgrun has nothing to write to it (past the
  head, say: `pgrun --max-output 1K -- yes | head -1` ends as `yes | head
  -1` does); a terminal's or socket's, at pgrun's next write. Any other write
  error, or a failed read of COMMAND's output, ends that stream the same
  way, with one line on stderr. The report gains output: per stream, bytes
  (what COMMAND wrote) and omitted, and error when the stream was cut short
  by such a failure; null when the output did not go through pgrun. pgrun's
  own error lines still go straight to its stderr. If the head is empty
  (SIZE 1, or a first character longer than SIZE/2), the marker line is the
  first line.

Output file:
  --output-file PATH writes every byte of COMMAND's stdout and stderr,
  complete and in the order pgrun read them, to PATH (a new file, mode 0644
  whatever the umask), while the streams still reach their own
  destinations: bounded by --max-output if given, else whole (a tee), as
  above. PATH gets the report path's checks before COMMAND starts (a
  missing folder, a symlink, a folder, a read-only or full file system, a
  name too long, the pid file, the marker or the report: exit 125); the
  file is prepared beside it and takes its place (replacing what was there)
  only once COMMAND has started: a run that never starts (125, 126, 127,
  cancelled) leaves an existing PATH as it was and creates none. Nothing
  pgrun read is lost from it, however the run ends. A
  failed write to it (a full disk) is said in one line and ends the copy,
  not the run: the file keeps what came before, the streams go on, and the
  report's output gains file_error. The report's output is an object with
  --output-file too, naming the file and counting per stream the bytes
  COMMAND wrote.

Idle timeout:
  --idle-timeout DUR stops the run, as --timeout does, when COMMAND has
  written nothing to stdout or stderr for DUR: the \"no output for N
  minutes\" watchdog of CI systems, or a command stuck on a prompt that
  never comes. Exit status 124 (--preserve-status: COMMAND's own), report
  reason idle-timeout; the same stop sequence. stdout and stderr then go
  through pgrun as for --max-output, bounded only if --max-output is given,
  else whole: every byte, in order, as it arrives (stdin and every other fd
  still pass through). Each read of either stream moves the one deadline;
  pgrun still wakes for nothing else. Only bytes count: a COMMAND that is
  blocked writing because pgrun's reader stopped reading is idle too. It
  combines with --timeout (whichever comes first) and --max-output; 0 means
  none. The report's output gives bytes per stream.

Terminal:
  pgrun behaves like a shell running one job: COMMAND gets the terminal when
  it needs it, and nothing else in the user's job loses it.

  When stdin and stdout are both the controlling terminal and pgrun's group
  is the foreground group (`pgrun -- vim`, or a script that runs it), COMMAND's
  group is made the foreground group before COMMAND can read, so it reads
  typed lines, Ctrl-C and Ctrl-\\ reach it directly (Ctrl-C on a command
  ending of SIGINT gives 130), and Ctrl-Z stops it: pgrun then takes the
  terminal back and stops its whole job (its own process group: a script or
  pipeline around it too) the same way, so the shell reports the job
  stopped; `fg` hands the terminal back and continues the group, `bg`
  continues it in the background.

  Otherwise (a pipeline such as `pgrun -- seq 100 | less` or
  `seq 100 | pgrun -- less`, stdin from a file) pgrun does no hand-off at the
  start: the rest of the job keeps the terminal. If COMMAND (its leader, or
  an orphan pgrun adopted) is then stopped by SIGTTIN or SIGTTOU for touching
  the terminal while pgrun's job is in the foreground, pgrun hands COMMAND's
  group the terminal and continues it, as `fg` would; meanwhile the rest of
  the job is in the background. A leader that catches or ignores SIGTTIN
  hides such a stop from pgrun; Ctrl-C still ends it (see Signals).

  In the background (`pgrun -- cmd &`) there is no hand-off. When COMMAND
  touches the terminal there, pgrun stops its job with the same signal, so the
  shell reports the job stopped (`Stopped (tty input)`), and `fg` hands
  COMMAND the terminal and continues it. With --timeout pgrun does not stop
  itself, since a stopped pgrun cannot keep its deadline: it leaves COMMAND
  stopped until the timeout, or until `fg`: a shell sends no SIGCONT to a job
  it sees running, so while COMMAND waits for the terminal pgrun looks every
  50 ms whether its job is in the foreground, and then hands it over.

  While pgrun is stopped as a job it does nothing: a timeout that passes
  meanwhile fires when it is continued, and a SIGTERM waits until then.
  pgrun gives the terminal back to its own group before it exits, however
  the run ends, a command that cannot be run included. With --setsid
  COMMAND gets a new session and no controlling terminal, as with setsid(1).
  Terminal settings (termios) are left to COMMAND.

Details the contract leaves open:
  In --escalate, a token right after a signal that reads as a duration is
  that signal's grace: in 15/2/9, 2 is two seconds. Write names to avoid
  doubt. Steps after the first KILL are dropped; a final KILL is added.
  Once a stop sequence is under way, the timeout and further SIGTERMs change
  nothing; it runs to its end. When COMMAND has exited and its stragglers
  are being stopped, the exit status stays COMMAND's own.
  If the run survives the final KILL (a process in uninterruptible sleep,
  one that forked meanwhile), pgrun sends KILL again every second and keeps
  waiting: it never exits while a live member it can signal exists. A group
  pgrun may not signal (kill fails, e.g. with EPERM for members that changed
  their user id) cannot be ended by it: after three refused KILLs in a row,
  a second apart, pgrun gives up with one error line, reports the processes
  left as unstopped and exits 125. Zombies are the other exception: a
  member whose parent is outside the run (it left the group and does not
  reap) cannot be reaped by pgrun. When only such
  zombies are left after the final KILL and one more second, pgrun prints
  one warning line, reports them as unreaped and exits as usual. Where
  pgrun cannot tell zombies from live members (off Linux), whatever
  survives the final KILL and one more second counts as such.
  A DUR above zero, however small, is a timeout: values are exact decimals
  rounded up to the nanosecond (0.0000000001 is 1ns, not 0).
  A panic (a bug in pgrun) prints one 'pgrun: internal error' line, sends
  SIGKILL to COMMAND's group, waits up to 5s for it to be gone, and exits
  125.
  A report that cannot be written at exit is reported on stderr; the exit
  status stays that of the run.
  If another run creates the same pid file where there was none, in the
  instant between this run's checks and its publication, this run stops its
  command and exits 125.
  A file or folder of any kind at the cancel marker's path counts as a
  marker, if its owner is the user running pgrun or root, except a note
  pgrun wrote there (a regular file that starts with `pgrun-stopping ` or
  `pgrun-consumed `).

Man pages and shell completions:
  The binary carries its own: pgrun --generate WHAT prints one to stdout,
  WHAT being man (pgrun(1)), man-cancel, man-status, man-wait, man-output,
  man-ls, man-send, bash, zsh, fish, elvish or powershell. To install them
  from the binary alone:
    pgrun --generate man > ~/.local/share/man/man1/pgrun.1
    pgrun --generate bash > ~/.local/share/bash-completion/completions/pgrun
    pgrun --generate fish > ~/.config/fish/completions/pgrun.fish
    pgrun --generate zsh > ~/.local/share/zsh/site-functions/_pgrun
  zsh looks there once ~/.zshrc has, before compinit:
    fpath=(~/.local/share/zsh/site-functions $fpath)

Examples:
  In a script, with a deadline and a longer grace:
    pgrun --timeout 10m --kill-after 30s -- make -j8 test

  In a terminal, exactly like timeout(1), but nothing survives:
    pgrun --timeout 30 -- make test

  One exec runs it, another stops it:
    pgrun --pidfile /tmp/job.pid -- ./build &
    pgrun cancel /tmp/job.pid

  Start in one exec, look, stop or wait in the next ones:
    pgrun --detach --pidfile /tmp/srv.pid --report /tmp/srv.json -- ./server
    pgrun status /tmp/srv.pid
    pgrun cancel /tmp/srv.pid
    pgrun wait --report /tmp/srv.json /tmp/srv.pid

  Wait for a detached server's ready line, then read on from there:
    pgrun --detach --pidfile /tmp/srv.pid --output-file /tmp/srv.log -- ./server
    pgrun output --wait 30s --until 'listening on' --pidfile /tmp/srv.pid --json /tmp/srv.log
    pgrun output --since NEXT --wait 10s --pidfile /tmp/srv.pid /tmp/srv.log
    pgrun ls /tmp

  An agent's command: wait up to 10 s, then let it run on (122), 1 h at most:
    pgrun --detach-after 10 --timeout 1h --pidfile /tmp/t.pid --output-file /tmp/t.log \\
      --report /tmp/t.json -- make test
    pgrun output --since N --wait 10s --pidfile /tmp/t.pid /tmp/t.log
    pgrun wait --report /tmp/t.json /tmp/t.pid

  Gentle escalation for a server:
    pgrun --escalate INT/2s/TERM/5s/KILL -- ./server

  A test runner that cleans up its own fixtures gets the first TERM alone:
    pgrun --timeout 30m --escalate leader:TERM/30s/TERM/5s/KILL -- pytest

  A CI step stopped after 10 minutes without output:
    pgrun --idle-timeout 10m --timeout 2h -- ./long-build

  A Python harness; output returns as soon as the command is done:
    r = subprocess.run([\"pgrun\", \"--timeout\", \"30\", \"--\", \"make\", \"test\"],
                       capture_output=True)
    timed_out = r.returncode == 124

  A container entrypoint (as PID 1 pgrun reaps every zombie):
    ENTRYPOINT [\"pgrun\", \"--\", \"/app/server\"]";
