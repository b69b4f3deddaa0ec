//! The entry point of every mode: parse the command line, run the mode it
//! asks for, and turn how that mode ended into the process exit status.
//! Usage errors are answered here, with one `pgrun: ` line, a hint and
//! [`FAILURE`] (never clap's 2).

use crate::cli::{Action, CancelArgs, Cli, LsArgs, OutputArgs, SendArgs, StatusArgs, WaitArgs};
use crate::exit::{FAILURE, StatusExit};
use crate::{cancel, generate, ls, panic_stop, run, say, send, status, sys, test_hook, wait, window};
use clap::Parser;
use clap::error::ErrorKind;
use std::ffi::OsString;
use std::io::Write;
use std::time::Instant;

/// Parse `args` (program name first), run the mode they ask for, and return
/// the process exit status.
pub fn main(args: Vec<OsString>) -> u8 {
    let started = Instant::now();
    panic_stop::install();
    // First thing, in every mode: a closed stderr must not kill pgrun with
    // SIGPIPE, and a caller's ignored SIGCHLD must not hide the command's
    // status. The caller's own settings are kept for the command.
    let taken_over = sys::sigmask::take_over_at_start(test_hook::active(test_hook::KEEP_SIGCHLD_IGNORED));
    sys::reserve_standard_fds();
    // A run's usual line without clap's cost; anything else through clap.
    let quick = crate::quick_args::run_args(&args).map(|run| Cli { action: None, run, generate: None });
    let cli = match quick.map_or_else(|| Cli::try_parse_from(&args), Ok) {
        Ok(cli) => cli,
        // The help with its long prose, which only --help shows.
        Err(err) if err.kind() == ErrorKind::DisplayHelp => {
            return usage_error(crate::cli::with_long_help().try_get_matches_from(args).err().unwrap_or(err));
        }
        Err(err) => return usage_error(err),
    };
    if let Err(e) = taken_over {
        // pgrun cannot answer for what it does with an unknown signal set-up:
        // its own failure, as each mode spells it (status: 4, "unknown").
        say::line(format_args!("{e}"));
        return match cli.action {
            Some(Action::Status(_)) => StatusExit::Unknown.code(),
            _ => FAILURE,
        };
    }
    if let Some(what) = cli.generate {
        return generate::print(what);
    }
    match cli.action {
        None => run::run(&run::RunPlan::new(&cli.run), started),
        Some(Action::Cancel(args)) => cancel::cancel(&cancel_options(args)).code(),
        Some(Action::Status(args)) => status::status(&status_options(args)).code(),
        Some(Action::Wait(args)) => wait::wait(&wait_options(args)).code(),
        Some(Action::Output(args)) => window::output(&output_options(args)).code(),
        Some(Action::Ls(args)) => ls::ls(&ls_options(args)).code(),
        Some(Action::Send(args)) => send::send(&send_options(args)).code(),
    }
}

/// Help and version go to stdout with status 0; every other parse failure
/// is one `pgrun: ` line plus a hint, with status 125 (never clap's 2).
fn usage_error(err: clap::Error) -> u8 {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            if say::to_stdout(err.render().to_string().as_bytes()) {
                0
            } else {
                FAILURE
            }
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingRequiredArgument
            if err.to_string().contains("<COMMAND>") =>
        {
            say::line(format_args!("no command given"));
            hint();
            FAILURE
        }
        _ => {
            let text = err.render().to_string();
            let mut lines = text.lines();
            let first = lines.next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            // "...were not provided:" is followed by what was not: name it.
            match first.strip_suffix(':').zip(lines.next()) {
                Some((what, detail)) => say::line(format_args!("{what}: {}", detail.trim())),
                None => match (valid_values(&err), tips(&text)) {
                    (Some(valid), _) => say::line(format_args!("{first} (valid values: {valid})")),
                    (None, Some(tips)) => say::line(format_args!("{first} ({tips})")),
                    (None, None) => say::line(format_args!("{first}")),
                },
            }
            hint();
            FAILURE
        }
    }
}

/// The values a bad value could have been, as clap lists them on a line of
/// their own (which the one-line error would drop): `man, bash, ...`.
fn valid_values(err: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    match err.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(values)) if err.kind() == ErrorKind::InvalidValue && !values.is_empty() => {
            Some(values.join(", "))
        }
        _ => None,
    }
}

/// clap's tips, which it prints on lines of their own below the error
/// (`tip: a similar argument exists: '--timeout'`), joined into one; but
/// "to pass '-x' as a value, use '-- -x'", which for pgrun would make `-x`
/// the command.
fn tips(rendered: &str) -> Option<String> {
    let tips: Vec<&str> = rendered
        .lines()
        .filter_map(|l| l.trim().strip_prefix("tip: "))
        .filter(|tip| !tip.starts_with("to pass "))
        .collect();
    (!tips.is_empty()).then(|| format!("tip: {}", tips.join("; ")))
}

fn hint() {
    let _ = writeln!(std::io::stderr(), "Try 'pgrun --help' for more information.");
}

/// The plain request `pgrun cancel` acts on.
fn cancel_options(args: CancelArgs) -> cancel::Options {
    let CancelArgs { wait_start, timeout, keep_pending, no_wait, force, cancel_file, report, verbose, pidfile } = args;
    cancel::Options { pidfile, cancel_file, wait_start, timeout, keep_pending, no_wait, force, report, verbose }
}

/// The plain question `pgrun status` answers.
fn status_options(args: StatusArgs) -> status::Options {
    let StatusArgs { json, cancel_file, pidfile } = args;
    status::Options { pidfile, cancel_file, json }
}

/// The plain request `pgrun wait` acts on.
fn wait_options(args: WaitArgs) -> wait::Options {
    let WaitArgs { wait_start, timeout, report, ready, verbose, pidfile } = args;
    let ready = ready.map(|listen| crate::ready::Target::Listen(listen.port));
    wait::Options { pidfile, wait_start, timeout, report, ready, verbose }
}

/// The plain request `pgrun output` acts on.
fn output_options(args: OutputArgs) -> window::Options {
    let OutputArgs { since, max, tail, wait, until, pidfile, json, file } = args;
    let shape = match tail {
        Some(size) => window::Shape::Tail(size),
        None => window::Shape::Head(max.unwrap_or(DEFAULT_WINDOW)),
    };
    window::Options { file, since, shape, wait, until, pidfile, json }
}

/// `pgrun output`'s SIZE without `--max`: 64K.
const DEFAULT_WINDOW: u64 = 64 << 10;

/// The plain question `pgrun ls` answers.
fn send_options(args: SendArgs) -> send::Options {
    let SendArgs { eof, file, timeout, verbose, pidfile, text } = args;
    send::Options { pidfile, text, file, eof, timeout, verbose }
}

fn ls_options(args: LsArgs) -> ls::Options {
    let LsArgs { json, dir } = args;
    ls::Options { dir, json }
}
