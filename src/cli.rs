//! The command line: the one definition that `--help`, the man page and the
//! shell completions are all generated from.

use crate::duration::parse_duration;
use crate::help::*;
use crate::stop::sequence::{StepSignal, StopSequence, parse_step_signal};
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Parses SIG or `leader:SIG`; its possible values are the common names,
/// which shells complete (any other valid spelling is accepted too).
#[derive(Clone)]
struct SignalParser;

impl clap::builder::TypedValueParser for SignalParser {
    type Value = StepSignal;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<StepSignal, clap::Error> {
        let text = value.to_str().ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidUtf8).with_cmd(cmd))?;
        parse_step_signal(text).map_err(|e| {
            let name = arg.map_or_else(|| "SIG".to_string(), |a| a.to_string());
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("invalid value for '{name}': {e}\n"))
                .with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        const COMMON: [&str; 12] =
            ["TERM", "INT", "HUP", "QUIT", "KILL", "USR1", "USR2", "ALRM", "WINCH", "CONT", "STOP", "ABRT"];
        Some(Box::new(COMMON.iter().map(|n| clap::builder::PossibleValue::new(*n))))
    }
}

/// pgrun's whole command line as `--help`, the man pages and the
/// completions show it: [`Cli`]'s, with the long help's prose rendered
/// (the exit-status and signal tables filled in). Only these need it:
/// rendering it costs more than the rest of a run's parsing, so a run
/// parses with [`Cli`] alone (see `entry`).
pub fn with_long_help() -> clap::Command {
    use clap::CommandFactory;
    Cli::command()
        .after_long_help(render(AFTER_LONG_HELP))
        .mut_subcommand("cancel", |c| c.after_long_help(render(CANCEL_AFTER_LONG_HELP)))
        .mut_subcommand("status", |c| c.after_long_help(render(STATUS_AFTER_LONG_HELP)))
        .mut_subcommand("wait", |c| c.after_long_help(render(WAIT_AFTER_LONG_HELP)))
        .mut_subcommand("output", |c| c.after_long_help(render(OUTPUT_AFTER_LONG_HELP)))
        .mut_subcommand("ls", |c| c.after_long_help(render(LS_AFTER_LONG_HELP)))
        .mut_subcommand("send", |c| c.after_long_help(render(SEND_AFTER_LONG_HELP)))
}

/// pgrun's command line.
#[derive(Parser, Debug)]
#[command(
    name = "pgrun",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    subcommand_negates_reqs = true,
    // The modes in one line, which the Commands list below spells out:
    // `-h` stays one screen.
    override_usage = "pgrun [OPTIONS] [--] COMMAND [ARG]...\n       pgrun MODE [OPTIONS] ARG (MODE: cancel, status, wait, output, ls; pgrun MODE -h)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub action: Option<Action>,

    #[command(flatten)]
    pub run: RunArgs,

    /// Print a man page or a shell's completion script and exit.
    #[arg(
        long,
        value_name = "WHAT",
        exclusive = true,
        hide_possible_values = true,
        long_help = "Print a man page or a shell's completion script to stdout and exit: WHAT is man, \
                       man-cancel, man-status, man-wait, man-output, man-ls, man-send, bash, zsh, fish, elvish or \
                       powershell (see Man \
                       pages and shell completions below)."
    )]
    pub generate: Option<Artifact>,
}

/// What `--generate` can print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Artifact {
    /// man/pgrun.1
    Man,
    /// man/pgrun-cancel.1
    ManCancel,
    /// man/pgrun-status.1
    ManStatus,
    /// man/pgrun-wait.1
    ManWait,
    /// man/pgrun-output.1
    ManOutput,
    /// man/pgrun-ls.1
    ManLs,
    /// man/pgrun-send.1
    ManSend,
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
    /// The exit-status tables of README.md (between its markers).
    #[value(hide = true)]
    ReadmeExitStatus,
    /// The signal table of docs/design.md (between its markers).
    #[value(hide = true)]
    DesignSignals,
}

impl Artifact {
    /// Where the committed copy lives, relative to the repository root.
    pub fn path(self) -> &'static str {
        match self {
            Artifact::Man => "man/pgrun.1",
            Artifact::ManCancel => "man/pgrun-cancel.1",
            Artifact::ManStatus => "man/pgrun-status.1",
            Artifact::ManWait => "man/pgrun-wait.1",
            Artifact::ManOutput => "man/pgrun-output.1",
            Artifact::ManLs => "man/pgrun-ls.1",
            Artifact::ManSend => "man/pgrun-send.1",
            Artifact::Bash => "completions/pgrun.bash",
            Artifact::Zsh => "completions/_pgrun",
            Artifact::Fish => "completions/pgrun.fish",
            Artifact::Elvish => "completions/pgrun.elv",
            Artifact::Powershell => "completions/_pgrun.ps1",
            Artifact::ReadmeExitStatus => "README.md",
            Artifact::DesignSignals => "docs/design.md",
        }
    }
}

/// The `--contain` values as the command line spells them; the run knows
/// them as [`crate::contain::Mode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Contain {
    /// The command's process group only.
    Group,
    /// The group and every descendant of pgrun (Linux).
    Tree,
    /// Everything in a new cgroup v2 leaf (Linux, delegated cgroup2).
    Cgroup,
    /// cgroup where a leaf can be created, else tree.
    Auto,
}

impl Contain {
    pub fn mode(self) -> crate::contain::Mode {
        use crate::contain::Mode;
        match self {
            Contain::Group => Mode::Group,
            Contain::Tree => Mode::Tree,
            Contain::Cgroup => Mode::Cgroup,
            Contain::Auto => Mode::Auto,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Action {
    #[command(about = CANCEL_ABOUT, long_about = CANCEL_LONG_ABOUT)]
    Cancel(CancelArgs),
    #[command(about = STATUS_ABOUT, long_about = STATUS_LONG_ABOUT)]
    Status(StatusArgs),
    #[command(about = WAIT_ABOUT, long_about = WAIT_LONG_ABOUT)]
    Wait(WaitArgs),
    #[command(about = OUTPUT_ABOUT, long_about = OUTPUT_LONG_ABOUT)]
    Output(OutputArgs),
    #[command(about = LS_ABOUT, long_about = LS_LONG_ABOUT)]
    Ls(LsArgs),
    #[command(about = SEND_ABOUT, long_about = SEND_LONG_ABOUT)]
    Send(SendArgs),
}

/// Options of the run mode: `pgrun [OPTIONS] [--] COMMAND [ARG]...`.
/// (Read without clap where it can be: [`crate::quick_args`].)
#[derive(Args, Debug, Default)]
pub struct RunArgs {
    /// Stop the run after DUR (30, 1.5, 250ms, 2m, 1h, 1d; 0 = none).
    // Every DUR takes a value that begins with `-` (allow_hyphen_values):
    // `-1` or `-5s` then reaches parse_duration, which says that a duration
    // cannot be negative, instead of clap taking it for an unknown option.
    #[arg(short = 't', long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true,
          long_help = "Stop the run after DUR (e.g. 30, 1.5, 250ms, 2m, 1h, 1d; 0 = none) [default: none].")]
    pub timeout: Option<Duration>,

    /// Stop the run when COMMAND has written no output for DUR.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true,
          long_help = "Stop the run, as --timeout does (124), when COMMAND has written nothing to \
                       stdout or stderr for DUR; both then go through pgrun (see Idle timeout \
                       below; 0 = none) [default: none].")]
    pub idle_timeout: Option<Duration>,

    /// First signal of the stop sequence [default: TERM].
    #[arg(short = 's', long, value_name = "SIG", value_parser = SignalParser, hide_possible_values = true,
          long_help = "First signal of the stop sequence; leader:SIG sends it to COMMAND's own \
                       process only (see Stop sequence below) [default: TERM].")]
    pub signal: Option<StepSignal>,

    /// Grace between that signal and SIGKILL [default: 10s].
    #[arg(short = 'k', long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true,
          long_help = "Grace between that signal and SIGKILL (0: KILL right after it) [default: 10s].")]
    pub kill_after: Option<Duration>,

    /// The whole stop sequence, e.g. INT/2s/TERM/5s/KILL.
    #[arg(long, value_name = "SCHED", value_parser = StopSequence::parse_escalate,
          long_help = "The whole stop sequence, SIG/DUR/SIG/DUR/..., e.g. INT/2s/TERM/5s/KILL; a \
                       final KILL is implied, a signal with no DUR gets 10s; a step leader:SIG goes \
                       to COMMAND's own process only (see Stop sequence below).",
          conflicts_with_all = ["signal", "kill_after"])]
    pub escalate: Option<StopSequence>,

    /// On timeout (or idle timeout), exit with COMMAND's status instead of 124.
    #[arg(long)]
    pub preserve_status: bool,

    /// When COMMAND exits, let the rest of its group finish on its own.
    #[arg(
        long,
        long_help = "When COMMAND exits, let the rest of its group finish on its own instead of \
                             stopping it (a timeout or cancel still applies)."
    )]
    pub wait_group: bool,

    /// Publish the run: the group id, locked while the run lives.
    #[arg(short = 'p', long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub pidfile: Option<PathBuf>,

    /// The cancel marker [default: PIDFILE.cancel].
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub cancel_file: Option<PathBuf>,

    /// Write a JSON outcome report to PATH at exit.
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub report: Option<PathBuf>,

    /// Bound stdout and stderr to SIZE bytes each (64K, 1M): head and tail.
    #[arg(long, value_name = "SIZE", value_parser = crate::size::parse_size,
          long_help = "Bound COMMAND's stdout and stderr to SIZE bytes each (e.g. 64K, 1m, 1MiB, 10MB; \
                       see Sizes below): a longer stream keeps its first and last SIZE/2 bytes around \
                       a line `[pgrun: N bytes omitted]`.")]
    pub max_output: Option<u64>,

    /// Also write stdout and stderr, complete and in read order, to PATH.
    ///
    /// Also write COMMAND's stdout and stderr, complete and in the order
    /// pgrun read them, to PATH (mode 0644, in place once COMMAND has
    /// started); the streams still go to their own destinations, whole or
    /// bounded by --max-output.
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub output_file: Option<PathBuf>,

    // What is stopped and waited for. The long text (--help, the man page)
    // is given apart from the short one, so that it is printed once.
    #[arg(long, value_name = "MODE", value_enum, hide_possible_values = true,
          help = "What is stopped: group, tree, cgroup or auto [default: tree on Linux]",
          long_help = CONTAIN_LONG_HELP)]
    pub contain: Option<Contain>,

    /// Run without the guard that stops the run if pgrun is killed with
    /// SIGKILL.
    #[arg(long)]
    pub no_guard: bool,

    /// Stop the run as if cancelled when the process that started pgrun
    /// dies.
    #[arg(long)]
    pub die_with_parent: bool,

    /// Return once the run is published; it lives on in a session of its own.
    #[arg(
        long,
        requires = "pidfile",
        conflicts_with = "die_with_parent",
        long_help = "Return once the run is published (needs --pidfile); the run lives on in a session \
of its own, with stdin, stdout and stderr on /dev/null (see Detached runs below)."
    )]
    pub detach: bool,

    /// Wait as for any run, but hand the run off after DUR (exit 122).
    #[arg(
        long,
        value_name = "DUR",
        value_parser = parse_duration,
        allow_hyphen_values = true,
        requires_all = ["pidfile", "output_file"],
        conflicts_with_all = ["detach", "die_with_parent"],
        long_help = "An ordinary attached run until DUR (needs --pidfile and --output-file); if COMMAND is \
still running then, say `pgrun: still running after DUR: pid file P, output F from byte N` on stderr and \
exit 122, and the run goes on detached, its output in the output file only (see Keep an eye, then let go \
below)."
    )]
    pub detach_after: Option<Duration>,

    /// COMMAND's stdin is a pipe pgrun holds open: write to it with `pgrun send`.
    // Not in -h: the `send` line there names it.
    #[arg(
        long,
        requires = "pidfile",
        hide_short_help = true,
        long_help = "COMMAND's stdin is a pipe that this pgrun holds open (needs --pidfile), instead of \
pgrun's own stdin: COMMAND reads what `pgrun send PIDFILE` writes, and end-of-file only after \
`pgrun send --eof PIDFILE` (see pgrun-send(1))."
    )]
    pub stdin_pipe: bool,

    /// A limit NAME=SOFT[:HARD] for COMMAND, e.g. nofile=1024 (repeatable).
    ///
    /// Set in COMMAND's process before exec. NAME is as, core, cpu, data,
    /// fsize, memlock, nofile, nproc or stack; a value is a SIZE (byte
    /// limits), a DUR (cpu), a number (nofile, nproc) or unlimited; one
    /// value sets both limits, SOFT: only the soft one, :HARD only the hard
    /// one.
    #[arg(long, value_name = "LIMIT", value_parser = crate::rlimit::parse_rlimit,
          action = clap::ArgAction::Append)]
    pub rlimit: Vec<crate::rlimit::RlimitArg>,

    /// The run's memory, all members together (cgroup memory.max, no swap).
    ///
    /// The run's memory, all its processes together: memory.max = SIZE and
    /// memory.swap.max = 0 in the run's cgroup leaf, and memory.oom.group =
    /// 1, so an out-of-memory kill ends the whole run (report reason oom,
    /// exit 137). SIZE as for --max-output (512m, 2G; see Sizes below).
    /// Needs --contain cgroup, which it makes the default.
    #[arg(long, value_name = "SIZE", value_parser = crate::size::parse_size)]
    pub memory_max: Option<u64>,

    /// At most N tasks in the run at once (cgroup pids.max).
    ///
    /// At most N tasks (processes and threads) in the run at once: pids.max
    /// in the run's cgroup leaf; a fork past it fails with EAGAIN inside the
    /// run. Needs --contain cgroup, which it makes the default.
    #[arg(long, value_name = "N", value_parser = crate::cgroup_limits::parse_pids_max)]
    pub pids_max: Option<u64>,

    /// CPU bandwidth worth X CPUs, e.g. 0.5 or 2 (cgroup cpu.max).
    ///
    /// CPU bandwidth worth X CPUs (0.5, 2): cpu.max = X*100000 per 100000
    /// µs in the run's cgroup leaf. Needs --contain cgroup, which it makes
    /// the default.
    #[arg(long, value_name = "X", value_parser = crate::cgroup_limits::parse_cpus)]
    pub cpus: Option<u64>,

    /// Start COMMAND in a new session instead of a new group (no terminal).
    #[arg(long)]
    pub setsid: bool,

    /// Say what pgrun does, one line per action on stderr.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    // In --help only: the usage line says it, and -h keeps to one line
    // per option and per mode.
    /// The command to run and its arguments.
    #[arg(value_name = "COMMAND", trailing_var_arg = true, required_unless_present = "generate",
          value_hint = clap::ValueHint::CommandWithArguments, hide_short_help = true,
          long_help = "The command to run and its arguments")]
    pub command: Vec<OsString>,
}

/// `pgrun cancel [OPTIONS] PIDFILE`.
#[derive(Args, Debug)]
pub struct CancelArgs {
    /// How long to wait for a pid file to appear.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true, default_value = "5s")]
    pub wait_start: Duration,

    /// Bound the wait for the run to stop; past it, SIGKILL the group.
    #[arg(short = 't', long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub timeout: Option<Duration>,

    /// If no run appears, leave the marker so the run is cancelled when it starts.
    #[arg(long)]
    pub keep_pending: bool,

    /// Return as soon as the request is delivered.
    #[arg(long)]
    pub no_wait: bool,

    /// Stop the group named by a stale pid file (nobody holds its lock).
    #[arg(long)]
    pub force: bool,

    /// The cancel marker, if the run was given --cancel-file [default: PIDFILE.cancel].
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub cancel_file: Option<PathBuf>,

    /// The run's report (the PATH it was given): a run over answers at once (exit 1).
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub report: Option<PathBuf>,

    /// Say what cancel does, on stderr.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// The run's pid file.
    #[arg(value_name = "PIDFILE", value_hint = clap::ValueHint::FilePath)]
    pub pidfile: PathBuf,
}

/// `pgrun status [--json] PIDFILE`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Print one JSON object instead of a line.
    #[arg(long)]
    pub json: bool,

    /// The cancel marker, if the run was given --cancel-file [default: PIDFILE.cancel].
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub cancel_file: Option<PathBuf>,

    /// The run's pid file.
    #[arg(value_name = "PIDFILE", value_hint = clap::ValueHint::FilePath)]
    pub pidfile: PathBuf,
}

/// `pgrun wait [OPTIONS] PIDFILE`.
#[derive(Args, Debug)]
pub struct WaitArgs {
    /// How long to wait for a pid file to appear.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true, default_value = "5s")]
    pub wait_start: Duration,

    /// Give up after DUR (exit 124), leaving the run alone.
    #[arg(short = 't', long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub timeout: Option<Duration>,

    /// The run's report (the PATH it was given): exit with the run's own status.
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub report: Option<PathBuf>,

    /// Wait until a process of the run listens on TCP port PORT (any port
    /// without one), not for its end: 0 ready, 1 the run was over first.
    #[arg(long, value_name = "listen[:PORT]", value_parser = parse_ready, conflicts_with = "report")]
    pub ready: Option<ReadyListen>,

    /// Say what wait does, on stderr.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// The run's pid file.
    #[arg(value_name = "PIDFILE", value_hint = clap::ValueHint::FilePath)]
    pub pidfile: PathBuf,
}

/// `wait --ready listen[:PORT]`: what to wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadyListen {
    /// The TCP port (`None`: any).
    pub port: Option<u16>,
}

fn parse_ready(text: &str) -> Result<ReadyListen, String> {
    match text.split_once(':') {
        None if text == "listen" => Ok(ReadyListen { port: None }),
        Some(("listen", port)) => match port.parse::<u16>() {
            Ok(port) if port > 0 => Ok(ReadyListen { port: Some(port) }),
            _ => Err(format!("'{port}' is no TCP port (1 to 65535)")),
        },
        _ => Err(format!("'{text}' is not listen or listen:PORT")),
    }
}

/// `pgrun output [OPTIONS] FILE`.
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Start the window at byte N of FILE.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub since: u64,

    /// At most SIZE bytes from N on (at least 4) [default: 64K].
    #[arg(long, value_name = "SIZE", value_parser = crate::size::parse_size, conflicts_with = "tail")]
    pub max: Option<u64>,

    /// The last SIZE bytes past N instead (at least 4).
    #[arg(long, value_name = "SIZE", value_parser = crate::size::parse_size)]
    pub tail: Option<u64>,

    /// Wait up to DUR for bytes past N, or the run's end (with --pidfile).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub wait: Option<Duration>,

    /// With --wait: wait for a line past N that matches REGEX.
    #[arg(long, value_name = "REGEX", requires = "wait", allow_hyphen_values = true)]
    pub until: Option<String>,

    /// The pid file of the run that writes FILE: say, and wait for, its end.
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub pidfile: Option<PathBuf>,

    /// Print one JSON object instead of the window's bytes.
    #[arg(long)]
    pub json: bool,

    /// The run's output file (--output-file).
    #[arg(value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub file: PathBuf,
}

/// `pgrun ls [--json] DIR`.
#[derive(Args, Debug)]
pub struct LsArgs {
    /// Print one JSON array of status --json objects instead of lines.
    #[arg(long)]
    pub json: bool,

    /// The folder whose pid files to list.
    #[arg(value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub dir: PathBuf,
}

/// `pgrun send [--eof] [--file F] [--timeout DUR] PIDFILE [TEXT]`.
#[derive(Args, Debug)]
pub struct SendArgs {
    /// Then close the pipe: COMMAND reads end-of-file (alone: only close it).
    #[arg(long)]
    pub eof: bool,

    /// Send the bytes of FILE instead of TEXT.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath, conflicts_with = "text")]
    pub file: Option<PathBuf>,

    /// Give up (exit 124) when COMMAND has read nothing for DUR.
    #[arg(short = 't', long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub timeout: Option<Duration>,

    /// Say what send does, on stderr.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// The run's pid file.
    #[arg(value_name = "PIDFILE", value_hint = clap::ValueHint::FilePath)]
    pub pidfile: PathBuf,

    /// The bytes to send (without a newline: add one if COMMAND reads lines).
    #[arg(value_name = "TEXT", allow_hyphen_values = true)]
    pub text: Option<OsString>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
        with_long_help().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("pgrun").chain(args.iter().copied()))
    }

    #[test]
    fn command_keeps_its_own_flags() {
        let cli = parse(&["-t", "5", "ls", "-v", "--timeout", "x"]).unwrap();
        assert!(cli.action.is_none());
        assert!(!cli.run.verbose);
        assert_eq!(cli.run.command, ["ls", "-v", "--timeout", "x"]);
    }

    #[test]
    fn subcommand_names_after_double_dash_are_programs() {
        let cli = parse(&["--", "cancel", "x"]).unwrap();
        assert!(cli.action.is_none());
        assert_eq!(cli.run.command, ["cancel", "x"]);
        assert!(matches!(parse(&["cancel", "x"]).unwrap().action, Some(Action::Cancel(_))));
        let cli = parse(&["--", "wait", "x"]).unwrap();
        assert!(cli.action.is_none());
        assert_eq!(cli.run.command, ["wait", "x"]);
        assert!(matches!(parse(&["wait", "x"]).unwrap().action, Some(Action::Wait(_))));
    }

    #[test]
    fn escalate_excludes_signal_and_kill_after() {
        assert!(parse(&["--escalate", "INT/KILL", "-s", "TERM", "true"]).is_err());
        assert!(parse(&["--escalate", "INT/KILL", "-k", "1", "true"]).is_err());
    }

    #[test]
    fn each_contain_value_is_the_mode_of_its_name() {
        use clap::ValueEnum;
        for value in Contain::value_variants() {
            assert_eq!(value.to_possible_value().unwrap().get_name(), value.mode().name());
        }
    }
}
