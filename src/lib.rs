//! pgrun: run a command in its own process group, stop the whole group on
//! timeout or cancel, and exit only when nothing of it is left.
//!
//! Where to start reading: [`entry`] parses the command line ([`cli`]; a
//! run's usual line without clap: [`quick_args`]) and
//! turns how each mode ended into an exit status; [`run`] holds the run
//! mode as a checklist of named steps, [`lifecycle`] what each party (the
//! run's scope, the terminal, the panic stop, the guard, the cancel marker)
//! does when the command has started, the run is published, a stop starts,
//! the run is gone and withdrawn, and [`supervisor`] the one event loop
//! that watches the running command until the run is gone. All contact
//! with the kernel goes through [`sys`].
//!
//! Where each policy lives, by file:
//! - which signal does what: [`signal_policy`]; signal names: [`signame`]
//!   (on the platform's tables in [`sys::signals`]);
//! - which exit status, and its documentation: [`exit`] (125, pgrun's own
//!   failure, is [`exit::FAILURE`] in every mode);
//! - how a run is stopped: [`stop_sequence`] (the steps), [`stop_plan`]
//!   (when to send which, the KILL grace and repeats, when to give up),
//!   driven by [`supervisor`] (a run pgrun supervises) and by
//!   [`unsupervised`] (one it does not: `pgrun cancel`'s fallback and the
//!   [`guard`], which stops the run if pgrun is SIGKILLed);
//! - what "the run" is (`--contain`), how it is signalled and when it is
//!   gone: [`contain`], one [`contain::Target`] per kind of run (the
//!   supervised [`contain::Scope`] around its [`contain::OwnGroup`]; the
//!   [`contain::ForeignGroup`] that `cancel` and the guard hold by pidfds;
//!   the guard's [`contain::cgroup::Leaf`]), and one rule for using a
//!   group's number ([`contain::group::GroupNumber`]);
//! - the pid file protocol and the cancel marker: [`pidfile`] (one file per
//!   role: claim, record, marker), and its readers [`cancel`], [`status`]
//!   and [`wait`];
//! - the terminal and job control: [`terminal`];
//! - `--detach` (the caller's process, and the supervising pgrun's
//!   session and fds): [`detach`];
//! - `--max-output`, `--output-file` and `--idle-timeout`'s relay: [`output`]
//!   (the idle deadline itself: [`supervisor`]); `--report`: [`report`]
//!   (it borrows the run's [`report::Outcome`]);
//!   `--die-with-parent`: [`parent_death`]; a panic: [`panic_stop`]; the hint
//!   for `pgrun 30 ...`: [`timeout_hint`]; DUR arguments: [`duration`];
//! - the documentation: [`help`] (the `--help` prose), [`generate`] (man
//!   pages, completions and README's exit statuses, from the definitions);
//! - what the run used (the report's `resources`): [`resources`];
//!   `--rlimit`: [`rlimit`]; `--memory-max`, `--pids-max`, `--cpus`:
//!   [`cgroup_limits`], set on the leaf by [`contain::cgroup`];
//! - small seams: [`atomic_file`] (write, then rename), [`backoff`] (waits no
//!   event announces), [`say`] (pgrun's only voice on stderr, and
//!   `verbose!`), [`test_hook`] (pauses for the test suite, debug builds
//!   only).

pub mod atomic_file;
pub mod backoff;
pub mod cancel;
pub mod cgroup_limits;
pub mod cli;
pub mod contain;
pub mod duration;
pub mod entry;
pub mod exit;
pub mod exit_hooks;
pub mod generate;
pub mod guard;
pub mod help;
pub mod output;
pub mod panic_stop;
pub mod parent_death;
pub mod pidfile;
pub mod quick_args;
pub mod report;
pub mod resources;
pub mod rlimit;
pub mod run;
pub mod say;
pub mod signal_policy;
pub mod signame;
pub mod status;
pub mod stop;
pub mod sys;
pub mod terminal;
pub mod test_hook;
pub mod timeout_hint;
pub mod wait;

/// `verbose!`, defined in [`say`], at the crate root where every module
/// names it (`crate::verbose!`); crate-private, no `#[macro_export]`.
pub(crate) use say::verbose;
