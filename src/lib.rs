//! pgrun: run a command in its own process group, stop the whole group on
//! timeout or cancel, and exit only when nothing of it is left.
//!
//! The house by floors, from the top; a module imports only what stands
//! below it.
//! - The entry: [`entry`] parses the command line ([`cli`]; a run's usual
//!   line without clap: [`quick_args`]), runs the mode asked for and turns
//!   how it ended into the exit status ([`exit`], one table; 125, pgrun's
//!   own failure, is [`exit::FAILURE`] in every mode).
//! - The modes: [`run`] (the run mode as a checklist: [`run::plan`] resolves
//!   the command line once, then prepare, spawn and publish, the one event
//!   loop [`run::supervisor`], and [`run::finish`], the one way a started
//!   run ends; `--detach`: [`run::detach`]; `--detach-after`:
//!   [`run::detach_after`]); the readers of the pid file
//!   protocol, [`cancel`], [`status`] and [`wait`]; the readers of what
//!   runs leave behind, [`window`] (`pgrun output`: windows of an output
//!   file) and [`ls`] (the runs published in a folder); and the one
//!   writer to a run, [`send`] (`pgrun send`: bytes into its stdin pipe).
//! - The policies the modes drive: [`stop`] (the stop sequence, the pure
//!   [`stop::plan::StopPlan`] that says when to send which signal, and the
//!   blocking driver for runs nobody supervises: `cancel`'s fallback and the
//!   guard); [`guard`] (the process that stops the run if pgrun is
//!   SIGKILLed); [`output`] (`--max-output`, `--output-file` and
//!   `--idle-timeout`'s relay, and `--detach-after`'s hand-off of the
//!   caller's fds); [`pidfile`] (the pid file and the cancel
//!   marker, one file per role); [`contain`] (what "the run" is,
//!   `--contain`: one [`contain::Target`] per kind of run, the one rule
//!   for using a group's number, and where a cgroup comes from: a leaf
//!   under pgrun's own, or a scope from the user's systemd,
//!   [`contain::user_scope`]); [`terminal`] (job control);
//!   [`report`] (`--report`); [`stdin_pipe`] (`--stdin-pipe`: the pipe
//!   the supervisor holds, and how a sender finds it); [`resources`], [`rlimit`],
//!   [`cgroup_limits`], [`parent_death`], [`panic_stop`],
//!   [`timeout_hint`], [`signal_policy`] (which signal does what) and
//!   [`signame`].
//! - The documentation: [`help`] (the `--help` prose) and [`generate`]
//!   (man pages, completions, README's exit statuses and docs/design.md's
//!   signal table, from the definitions).
//! - What everything stands on: [`sys`] (every contact with the kernel,
//!   Linux strengths and portable paths behind one facade), [`dbus`] (a
//!   minimal D-Bus client: the user's systemd is asked for a scope over
//!   it), and small seams: [`atomic_file`] (write, then rename), [`exit_hooks`] (what an
//!   abrupt end must undo, recorded from below and read by
//!   [`panic_stop`]), [`backoff`] (waits no event announces), [`say`]
//!   (pgrun's only voice on stderr, and `verbose!`), [`duration`] and
//!   [`size`] (DUR and SIZE arguments, one parser each) and [`test_hook`]
//!   (pauses and faults for the test suite, debug builds only).
//!
//! Where a low module must tell a higher one something, it calls a small
//! trait the higher one implements ([`contain::Guardian`]: the guard's pid,
//! and "the group was seen empty"), or records it in [`exit_hooks`].

pub mod activity;
pub mod atomic_file;
pub mod backoff;
pub mod cancel;
pub mod cgroup_limits;
pub mod cli;
pub mod contain;
pub mod dbus;
pub mod duration;
pub mod entry;
pub mod exit;
pub mod exit_hooks;
pub mod generate;
pub mod guard;
pub mod help;
pub mod ls;
pub mod output;
pub mod panic_stop;
pub mod parent_death;
pub mod pidfile;
pub mod quick_args;
pub mod ready;
pub mod report;
pub mod resources;
pub mod rlimit;
pub mod run;
pub mod say;
pub mod send;
pub mod signal_policy;
pub mod signame;
pub mod size;
pub mod status;
pub mod stdin_pipe;
pub mod stop;
pub mod sys;
pub mod terminal;
pub mod test_hook;
pub mod timeout_hint;
pub mod wait;
pub mod window;

/// `verbose!`, defined in [`say`], at the crate root where every module
/// names it (`crate::verbose!`); crate-private, no `#[macro_export]`.
pub(crate) use say::verbose;
