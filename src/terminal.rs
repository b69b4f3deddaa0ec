//! The terminal and job control: who holds the controlling terminal while
//! pgrun runs, and what pgrun does when a member of its command's group is
//! stopped. Everything pgrun decides about the terminal is here; the calls
//! themselves are in [`crate::sys::terminal`].
//!
//! pgrun behaves like a shell running one job: the command gets the
//! terminal when it needs it, and nothing else in the user's job loses it.
//! - At the start, the command's group is made the terminal's foreground
//!   group only when stdin and stdout are both the controlling terminal and
//!   pgrun's own group is in the foreground (`pgrun -- vim`, or a script
//!   that runs it). The child takes it before exec, so the command never
//!   touches the terminal from the background, and only if pgrun's group
//!   still has it (Ctrl-Z and `bg` may have come in between).
//! - Otherwise (a pipeline such as `pgrun -- seq 100 | less` or
//!   `seq 100 | pgrun -- less`, stdin from a file, pgrun in the background)
//!   there is no hand-off: the other half of the user's job keeps the
//!   terminal. If a member of the command's group is then stopped by SIGTTIN
//!   or SIGTTOU (it touched the terminal from the background) while
//!   pgrun's job holds the foreground, pgrun hands the command's group the
//!   terminal and continues it, as a shell's `fg` would.
//! - In the background, pgrun stops its job (its own process group, as the
//!   terminal would have) with that same signal, so the
//!   shell reports the job stopped (`Stopped (tty input)`); on `fg` it hands
//!   the terminal over and continues the command. With `--timeout` (or a
//!   stop sequence under way) it does not stop itself, since a stopped pgrun
//!   could not keep its deadline: it leaves the command stopped, and the
//!   SIGCONT that `fg` sends is forwarded, so the command touches the
//!   terminal again and this time gets it.
//! - Ctrl-Z while the command holds the terminal stops its group: pgrun
//!   takes the terminal back and stops its whole job the same way (a script
//!   or pipeline that shares pgrun's group stops too); when continued
//!   it hands the terminal back if it is in the foreground again (`fg`, not
//!   `bg`) and continues the group.
//! - Only the leader's stops and those of orphans pgrun adopted as subreaper
//!   reach pgrun (stop reports go to the parent). SIGTTIN and SIGTTOU are
//!   sent to the reader's whole group, so the leader stops too unless it
//!   catches or ignores them; for that case HUP, INT and QUIT forwarded to
//!   the group are followed by SIGCONT, so Ctrl-C still ends a member
//!   stopped on terminal access. WINCH, USR1, USR2, ALRM and real-time
//!   signals are forwarded without one: they ask a program to do something
//!   and carry on, not to end, and a SIGCONT would wake a member that was
//!   stopped on purpose (`kill -STOP`, a Ctrl-Z'd job); it acts on them
//!   when it is continued.
//! - Whenever the run ends, on every path (a failed spawn included), the
//!   terminal is given back to pgrun's own group if the command's group (or
//!   the dead child's) still holds it; a shell that took it back keeps it.
//! - `--setsid`: the command has no controlling terminal; nothing here
//!   applies.

use crate::contain::OwnGroup;
use crate::signame::Signal;
use crate::sys::process;
use crate::sys::terminal as tty;
use crate::sys::{self, Pid};
use crate::verbose;
use std::cell::{Cell, OnceCell};
use std::os::fd::{AsRawFd, OwnedFd};

/// How often pgrun looks whether its job was brought to the foreground
/// while a member waits for the terminal (see [`Terminal::poll_waiting`]).
pub const WAITING_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Where the run is, as far as a stopped member is concerned.
#[derive(Clone, Copy, Debug)]
pub struct RunState {
    /// A stop sequence is under way: it continues the group itself.
    pub stopping: bool,
    /// A timeout is pending: pgrun must not stop itself.
    pub timed: bool,
}

/// The controlling terminal as pgrun uses it for one run.
pub struct Terminal {
    /// pgrun's own process group.
    own: Pid,
    /// fd 0, when the command's group takes the terminal at the start.
    at_start: Option<i32>,
    /// The terminal, found when first needed (stdin, stdout, stderr or
    /// `/dev/tty`); `None` inside: pgrun has no controlling terminal.
    tty: OnceCell<Option<Tty>>,
    /// The command's group, once spawned: the one whose hold on the
    /// terminal is given back at the end. (Signals to it go through the
    /// run's [`OwnGroup`], handed to each call.)
    group: Cell<Option<Pid>>,
    /// A member is stopped waiting for the terminal while pgrun runs on in
    /// the background (it has a deadline to keep): `fg` gives pgrun's group
    /// the terminal without a signal, so pgrun looks, and then hands over.
    waiting: Cell<Option<i32>>,
}

enum Tty {
    Std(i32),
    Opened(OwnedFd),
}

impl Tty {
    fn fd(&self) -> i32 {
        match self {
            Tty::Std(fd) => *fd,
            Tty::Opened(fd) => fd.as_raw_fd(),
        }
    }
}

impl Terminal {
    /// The terminal rules for a run; `None` with `--setsid` (no controlling
    /// terminal for the command). Decides the hand-off at the start.
    pub fn new(setsid: bool) -> Option<Terminal> {
        if setsid {
            return None;
        }
        let own = sys::getpgrp();
        // tcgetpgrp succeeds only on the controlling terminal.
        let at_start = (tty::foreground_group(libc::STDIN_FILENO) == Some(own)
            && tty::foreground_group(libc::STDOUT_FILENO) == Some(own))
        .then_some(libc::STDIN_FILENO);
        let found = OnceCell::new();
        if let Some(fd) = at_start {
            let _ = found.set(Some(Tty::Std(fd)));
        }
        Some(Terminal { own, at_start, tty: found, group: Cell::new(None), waiting: Cell::new(None) })
    }

    /// The fd on which the child takes the terminal before exec, if the
    /// command gets it at the start.
    pub fn hand_off_at_start(&self) -> Option<i32> {
        self.at_start
    }

    /// The command is running as group `pgid`.
    pub fn started(&self, pgid: Pid) {
        self.group.set(Some(pgid));
        if let Some(fd) = self.at_start
            && tty::foreground_group(fd) == Some(pgid)
        {
            verbose!("handed the terminal to process group {pgid}");
        }
    }

    fn fd(&self) -> Option<i32> {
        let found = self.tty.get_or_init(|| {
            for fd in [libc::STDIN_FILENO, libc::STDOUT_FILENO, libc::STDERR_FILENO] {
                if tty::foreground_group(fd).is_some() {
                    return Some(Tty::Std(fd));
                }
            }
            tty::open_controlling().filter(|fd| tty::foreground_group(fd.as_raw_fd()).is_some()).map(Tty::Opened)
        });
        found.as_ref().map(Tty::fd)
    }

    /// A child of pgrun in the command's `group` was stopped by `signal`
    /// (reported by waitpid with WUNTRACED). Act as the module doc says.
    pub fn on_stopped(&self, group: &OwnGroup, pid: Pid, signal: i32, state: RunState) {
        let pgid = group.pgid();
        match signal {
            libc::SIGTTIN | libc::SIGTTOU if sys::getpgid(pid) == Some(pgid) => {
                self.wants_terminal(group, signal, state)
            }
            _ if pid == pgid && !state.stopping => self.job_stopped(group, signal),
            _ => {}
        }
    }

    /// A member touched the terminal from the background.
    fn wants_terminal(&self, group: &OwnGroup, signal: i32, state: RunState) {
        let Some(fd) = self.fd() else { return };
        let pgid = group.pgid();
        let fg = tty::foreground_group(fd);
        if fg == Some(pgid) {
            // It has the terminal already (it was stopped before it got it).
            continue_group(group);
        } else if fg == Some(self.own) {
            self.hand_over(fd, group, signal);
        } else if !state.stopping && !state.timed {
            verbose!("process group {pgid} stopped by {} in the background; stopping too", Signal(signal));
            stop_own_job(signal);
            if tty::foreground_group(fd) == Some(self.own) {
                self.hand_over(fd, group, signal);
            }
            // Otherwise (`bg`, or the stop was discarded): the SIGCONT that
            // continued pgrun is forwarded, and the command tries again.
        } else if !state.stopping {
            // pgrun keeps its deadline, so it does not stop; a shell's `fg`
            // then sends no SIGCONT (the job looks running) and only gives
            // pgrun's group the terminal. Look for that (see `poll_waiting`).
            verbose!(
                "process group {pgid} waits for the terminal; watching for the job to be brought to the foreground"
            );
            self.waiting.set(Some(signal));
        }
    }

    /// Whether a member waits for the terminal while pgrun runs in the
    /// background: the loop then looks every [`WAITING_POLL`] (only then;
    /// never while the command simply runs).
    pub fn is_waiting(&self) -> bool {
        self.waiting.get().is_some()
    }

    /// The job was brought to the foreground: hand the terminal to the
    /// member of the command's `group` that waits for it.
    pub fn poll_waiting(&self, group: &OwnGroup) {
        let (Some(signal), Some(fd)) = (self.waiting.get(), self.fd()) else { return };
        match tty::foreground_group(fd) {
            Some(fg) if fg == self.own => {
                self.waiting.set(None);
                self.hand_over(fd, group, signal);
            }
            Some(fg) if fg == group.pgid() => {
                self.waiting.set(None);
                continue_group(group);
            }
            _ => {}
        }
    }

    fn hand_over(&self, fd: i32, group: &OwnGroup, signal: i32) {
        let pgid = group.pgid();
        verbose!("process group {pgid} stopped by {}: handing it the terminal", Signal(signal));
        if let Err(e) = tty::set_foreground_group(fd, pgid) {
            verbose!("cannot hand the terminal to process group {pgid}: {e}");
            return;
        }
        continue_group(group);
    }

    /// The leader was stopped some other way (Ctrl-Z, SIGSTOP). Only while
    /// it holds the terminal is that the job stopping.
    fn job_stopped(&self, group: &OwnGroup, signal: i32) {
        let Some(fd) = self.fd() else { return };
        let pgid = group.pgid();
        if tty::foreground_group(fd) != Some(pgid) {
            return;
        }
        verbose!("command stopped by {}; stopping too", Signal(signal));
        let _ = tty::set_foreground_group(fd, self.own);
        stop_own_job(signal);
        if tty::foreground_group(fd) == Some(self.own) {
            let _ = tty::set_foreground_group(fd, pgid);
        }
        continue_group(group);
    }
}

/// SIGCONT to the command's group, through the run's [`OwnGroup`] (so
/// never to a number the group no longer holds).
fn continue_group(group: &OwnGroup) {
    let pgid = group.pgid();
    verbose!("continuing process group {pgid}");
    if let Err(e) = group.signal(Signal::CONT) {
        verbose!("cannot send CONT to process group {pgid}: {e}");
    }
}

impl Drop for Terminal {
    /// Give the terminal back if the command's group holds it; after a
    /// failed spawn, if a group that no longer exists holds it (the child
    /// took it and died before exec).
    fn drop(&mut self) {
        let Some(Some(found)) = self.tty.get() else { return };
        let fd = found.fd();
        let fg = tty::foreground_group(fd);
        let give_back = match self.group.get() {
            Some(pgid) => fg == Some(pgid),
            None => self.at_start.is_some() && fg.is_none_or(|g| g > 1 && g != self.own && !process::group_exists(g)),
        };
        if give_back && tty::set_foreground_group(fd, self.own).is_ok() {
            verbose!("took the terminal back");
        }
    }
}

/// Stop pgrun's own job with `signal` ([`tty::stop_job`]); a failure is
/// said (the job then simply goes on, as after `bg`).
fn stop_own_job(signal: i32) {
    if let Err(e) = tty::stop_job(Signal(signal)) {
        crate::say::line(format_args!("cannot stop pgrun's job with {}: {e}", Signal(signal)));
    }
}
