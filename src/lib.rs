//! pgrun: run a command in its own process group, stop the whole group on
//! timeout or cancel, and exit only when nothing of it is left.
//!
//! Where to start reading: [`main`] parses the command line and maps every
//! outcome to an exit status; [`run`] holds the run mode as a
//! checklist of named steps, and [`supervisor`] the one event loop that
//! watches the running command until the run is gone. All contact with the
//! kernel goes through [`sys`].
//!
//! Where each policy lives, by file:
//! - which signal does what: [`signal_policy`];
//! - which exit status, and its documentation: [`exit`];
//! - how a run is stopped: [`stop_sequence`] (the steps), [`stop_plan`]
//!   (when to send which, the KILL grace and repeats, when to give up),
//!   driven by [`supervisor`] (a run pgrun supervises) and by
//!   [`unsupervised`] (one it does not: `pgrun cancel`'s fallback and the
//!   [`guard`]);
//! - what "the run" is (`--contain`): [`contain`];
//! - the pid file protocol and the cancel marker: [`pidfile`], and its
//!   readers [`cancel`] and [`status`];
//! - the terminal and job control: [`terminal`];
//! - what the run used (the report's `resources`): [`resources`];
//!   `--rlimit`: [`rlimit`]; `--memory-max`, `--pids-max`, `--cpus`:
//!   [`cgroup_limits`], set on the leaf by [`contain::cgroup`];
//! - `--max-output`: [`output`]; `--report`: [`report`]; `--die-with-parent`:
//!   [`parent_death`]; a panic: [`panic_stop`];
//! - small seams: [`atomic_file`] (write, then rename), [`backoff`] (waits no
//!   event announces), [`say`] (pgrun's only voice on stderr), [`test_hook`]
//!   (pauses for the test suite, debug builds only).

pub mod atomic_file;
pub mod backoff;
pub mod cancel;
pub mod cgroup_limits;
pub mod cli;
pub mod contain;
pub mod duration;
pub mod exit;
pub mod generate;
pub mod guard;
pub mod help;
pub mod output;
pub mod panic_stop;
pub mod parent_death;
pub mod pidfile;
pub mod report;
pub mod resources;
pub mod rlimit;
pub mod run;
pub mod say;
pub mod signal_policy;
pub mod signame;
pub mod status;
pub mod stop_plan;
pub mod stop_sequence;
pub mod supervisor;
pub mod sys;
pub mod terminal;
pub mod test_hook;
pub mod unsupervised;

use clap::Parser;
use clap::error::ErrorKind;
use cli::{Action, Cli};
use std::ffi::OsString;
use std::io::Write;
use std::time::Instant;

/// Status of every usage error, of every mode.
pub const USAGE_ERROR: u8 = 125;

/// Parse `args` (program name first), run the mode they ask for, and return
/// the process exit status.
pub fn main(args: Vec<OsString>) -> u8 {
    let started = Instant::now();
    panic_stop::install();
    // First thing, in every mode: a closed stderr must not kill pgrun with
    // SIGPIPE, and a caller's ignored SIGCHLD must not hide the command's
    // status. The caller's own settings are kept for the command.
    if let Err(e) = sys::sigmask::take_over_at_start() {
        say::line(format_args!("{e}"));
        return USAGE_ERROR;
    }
    sys::reserve_standard_fds();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => return usage_error(err),
    };
    if let Some(what) = cli.generate {
        return generate::print(what);
    }
    match cli.action {
        None => run::run(&cli.run, started),
        Some(Action::Cancel(args)) => cancel::cancel(&args).code(),
        Some(Action::Status(args)) => status::status(&args).code(),
    }
}

/// Help and version go to stdout with status 0; every other parse failure
/// is one `pgrun: ` line plus a hint, with status 125 (never clap's 2).
fn usage_error(err: clap::Error) -> u8 {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let mut out = std::io::stdout().lock();
            match write!(out, "{}", err.render()).and_then(|()| out.flush()) {
                Ok(()) => 0,
                Err(e) => {
                    say::line(format_args!("cannot write to stdout: {e}"));
                    exit::RunExit::Failed.code()
                }
            }
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingRequiredArgument
            if err.to_string().contains("<COMMAND>") =>
        {
            say::line(format_args!("no command given"));
            hint();
            USAGE_ERROR
        }
        _ => {
            let text = err.render().to_string();
            let mut lines = text.lines();
            let first = lines.next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            // "...were not provided:" is followed by what was not: name it.
            match first.strip_suffix(':').zip(lines.next()) {
                Some((what, detail)) => say::line(format_args!("{what}: {}", detail.trim())),
                None => say::line(format_args!("{first}")),
            }
            hint();
            USAGE_ERROR
        }
    }
}

fn hint() {
    let _ = writeln!(std::io::stderr(), "Try 'pgrun --help' for more information.");
}
