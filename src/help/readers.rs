//! The help of `pgrun cancel`, `pgrun status` and `pgrun wait`: their
//! one-line and long descriptions, and the text after their options.

pub const CANCEL_ABOUT: &str = "Stop a run from another process, by its pid file.";

pub const CANCEL_LONG_ABOUT: &str = "\
Stop a run from another process, by its pid file. cancel first drops the \
cancel marker (PIDFILE.cancel), then looks for the pid file, waiting up to \
--wait-start for it to appear: a run that has not published yet finds the \
marker and never starts. A stale pid file is removed (its group left alone \
unless --force) and the wait goes on. A live run (its pid file write-locked \
on byte 0 by its owner's pgrun) is asked to stop by \
SIGTERM to the pgrun holding the lock, so it runs its own stop sequence; \
cancel then waits until that pgrun has exited and the group is gone, and \
only then says so. Pid files owned by another user, world-writable ones, \
symlinks, and group ids <= 1, cancel's own group or its caller's are refused.";

pub const CANCEL_AFTER_LONG_HELP: &str = "\
Exit status:
{CANCEL_EXIT}";

pub const STATUS_ABOUT: &str = "Say whether a run is alive, by its pid file.";

pub const STATUS_LONG_ABOUT: &str = "\
Say whether a run is alive, by its pid file, its lock and its cancel marker \
alone; status signals nothing and changes no file. It prints one line, e.g. \
'running: pgid 4242, pgrun pid 4241, 3 processes, up 12.4s', or with --json \
one object with state, pgid, pid, processes, uptime_ms, pidfile, \
cancel_pending, starting and other_pid_namespace (then processes is null: \
the file's group id names other processes here), and for a run in cgroup \
mode resources: what its leaf says so far (memory_bytes, pids, user_ms, \
system_ms; null where the file is not there). A cancel marker owned by \
another user is ignored and said so. States: running, stopping (a stop sequence is under way), \
stale (no live run holds the pid file), not-running, cancel-pending (only a \
marker exists).";

pub const STATUS_AFTER_LONG_HELP: &str = "\
Exit status:
{STATUS_EXIT}";

pub const WAIT_ABOUT: &str = "Wait for a run to be over, by its pid file.";

pub const WAIT_LONG_ABOUT: &str = "\
Wait, from another process of the run's user (or root), until the run \
published in PIDFILE is over. If no run is published yet, wait looks for one \
up to --wait-start, as cancel does. It then waits until the pgrun holding the \
lock has withdrawn the run (pid file removed, lock let go of, guard released; \
output it still owes a slow reader is not waited for) or has exited and, if \
that pgrun was killed, until its guard has stopped the run and the group is \
gone: event-driven (pidfds on Linux), no ticks while the run runs. wait never signals anything and creates or removes no file; a stale \
pid file is left as it is. Pid files owned by another user, world-writable \
ones and symlinks are refused, as cancel refuses them. With --report PATH \
(the path the run was given), wait exits with the run's own exit status from \
that report.";

pub const WAIT_AFTER_LONG_HELP: &str = "\
Exit status:
{WAIT_EXIT}";
