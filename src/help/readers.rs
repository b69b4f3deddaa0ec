//! The help of `pgrun cancel`, `pgrun status`, `pgrun wait`, `pgrun output`
//! and `pgrun ls`: their one-line and long descriptions, and the text
//! after their options.

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
symlinks, and group ids <= 1, cancel's own group or its caller's are refused. \
With --report PATH (the path the run was given), a run that is over (none \
published, and that report names PIDFILE) is answered at once: exit 1, no \
marker left.";

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
system_ms; null where the file is not there). For a live run on Linux it \
also has listening, the TCP sockets the run's own processes listen on \
([{port, address, pid}]), and blocked_on_input, true when a process of the \
run waits to read its stdin (a read, or a poll or select on it as an editor \
does) and that stdin is a terminal or the run's --stdin-pipe: advisory, \
false where it cannot tell (a process status has no ptrace access to: \
another user's, or, under Yama's ptrace_scope 1 or more, one that status \
does not descend from, as with a detached run); both are absent on \
other systems and for a run in another PID namespace. A cancel marker owned by \
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
that report, at once if the run is already over (none published, and that \
report names PIDFILE: a run removes its old report before it publishes). \
With --ready listen[:PORT], wait waits instead until a process of the run \
listens on TCP port PORT (any port without one), IPv4 or IPv6, and exits 0; \
a socket held by a process outside the run never counts, even on the same \
port. 1 if the run was over first. Linux reads the run's own sockets from \
/proc (a look every 10 to 50 ms, the run's end seen at once); elsewhere \
--ready is an error (125).";

pub const WAIT_AFTER_LONG_HELP: &str = "\
Exit status:
{WAIT_EXIT}";

pub const OUTPUT_ABOUT: &str = "Read a window of a run's output file, from byte N.";

pub const OUTPUT_LONG_ABOUT: &str = "\
Read a window of a run's output file (--output-file), the way a harness \
pages through a command's output between its turns: at most SIZE bytes \
from byte N (--since, default 0; SIZE: --max, default 64K), or the last \
SIZE bytes past N (--tail, which says how many bytes before the window it \
skipped). Windows are cut on the rules of --max-output: a character is \
never split between two windows, and bytes that can never become valid \
UTF-8 pass as they are. Plain, the window's bytes go to stdout exactly as \
in FILE, and nothing else; --json prints one object instead: since, next \
(the --since of the next call), skipped, text (the window as a JSON \
string, each byte that is not valid UTF-8 as U+FFFD), eof (nothing more \
is in FILE now) and run (with --pidfile: running while the run is still \
published, else over; null without). --wait DUR waits until FILE holds \
bytes past N, the run in --pidfile is over, or DUR passes; --until REGEX \
(with --wait) waits for a line past N that matches, and the window then \
ends just after that line. output reads FILE (and the pid file, if \
--pidfile is given) and nothing else: it creates, removes and signals \
nothing.";

pub const OUTPUT_AFTER_LONG_HELP: &str = "\
Windows:
  FILE is read where the window lies (pread): a window of a large file
  costs what the window holds. SIZE takes the suffixes of --max-output
  (see pgrun(1)) and is at least 4, so that a window holds at least one
  character and every call moves on. A window ends before a character
  that reaches past SIZE, and before the start of a character the file
  ends inside while the run may still complete it; once the run in
  --pidfile is over, those bytes can never become a character and are
  passed. eof is true when the window reaches the end of FILE, or only
  such a start is left past it. A tail cut inside a character starts past
  its continuation bytes (at most 3), counted in skipped.

Waiting:
  --wait DUR is event-driven on Linux (inotify on FILE and the pid file,
  and a blocking read lock that learns when the run's lock is let go of,
  as pgrun wait does); where changes to files are not announced, FILE is
  looked at again in ticks of at most 20 ms. It returns once the window
  would hold a byte (0), the run is over (1) or DUR has passed (124), and
  answers with the window then. --wait 0 looks once, with the same exit
  statuses. If FILE is cut to less than N bytes meanwhile, that is an
  error.

Lines (--until):
  Lines start at N (the caller has seen what came before it) and end with
  a newline; REGEX (the syntax of the regex-lite crate: Perl-like, ASCII
  classes) is matched against each line without its newline, bytes that
  are not UTF-8 as U+FFFD. The line FILE ends inside is matched only once
  its newline comes, or once the run in --pidfile is over. A line longer
  than 1 MiB is matched on its first MiB. The window ends just after the
  first matching line: from N if that is at most SIZE bytes, else the last
  SIZE bytes up to the line's end (a line longer than the window: its last
  SIZE bytes), skipped saying how many bytes past N were left out. Without
  its line, a window that DUR ended (124) ends after its last whole line,
  if it has one, so that a next call from next sees every line whole.

Exit status:
{OUTPUT_EXIT}";

pub const LS_ABOUT: &str = "List the runs published in a folder.";

pub const LS_LONG_ABOUT: &str = "\
List the runs published in DIR: every regular file there whose content is \
a pid file's (a group id and a newline), sorted by name, one line each: \
its name, its state as pgrun status gives it (running, stopping, stale; \
starting while a starting run replaces a stale file), group id, pgrun \
pid, process count, age and the command line of the run's leader where it \
can be read. --json prints one JSON array of pgrun status --json objects \
instead, each with pidfile and command (the leader's arguments, or null). \
ls reads only the folder, the pid files, their locks and markers, and the \
run's own processes (the pgrun holding the lock and its descendants): it \
never looks for pgrun processes by name, never signals anything, and \
creates or removes nothing.";

pub const LS_AFTER_LONG_HELP: &str = "\
Exit status:
{LS_EXIT}";

pub const SEND_ABOUT: &str = "Write to a run's stdin pipe (--stdin-pipe).";

pub const SEND_LONG_ABOUT: &str = "\
Write TEXT (or the bytes of --file FILE, or of send's own stdin when \
neither is given) to the stdin pipe of the run published at PIDFILE, \
which was started with --stdin-pipe; --eof then closes the pipe, so that \
COMMAND reads end-of-file once every sender's bytes are read (--eof alone \
only closes it). TEXT is sent as given, without a newline.";

pub const SEND_AFTER_LONG_HELP: &str = "\
Order and senders:
  The bytes go in the order given, in writes of at most 4096 bytes each \
(PIPE_BUF): a write that size or smaller is never interleaved with \
another sender's, so a TEXT of at most 4096 bytes reaches COMMAND whole. \
send returns once every byte is in the pipe (COMMAND may not have read \
them yet).

Waiting:
  While the pipe is full, send waits for COMMAND to read; --timeout DUR \
gives up (124) once COMMAND has read nothing for DUR, saying on stderr \
how many bytes were written (those stay in the pipe). With --eof, send \
returns once the supervising pgrun has closed its end (or the run is \
over); --timeout bounds that wait as well.

Who can send:
  Only the run's owner, or root. On Linux send reaches the pipe through \
the supervising pgrun's own fd (/proc/PID/fd, which the kernel opens only \
for that process's user or root); elsewhere through a FIFO in the run's \
folder .NAME.pgrun-PID.stdin beside the pid file, which only the run's \
user can enter: send refuses (125) a folder that is a symlink, not the \
run's user's, or not of mode 0700. Nothing is created that another user \
could open.

Exit status:
{SEND_EXIT}";
