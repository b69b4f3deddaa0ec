//! The prose of `--help` and of the man page: one text, two renderings.
//!
//! The format is plain text that reads well in a terminal and converts
//! mechanically to roff (see `generate`): a line at column 0 ending in `:`
//! is a section heading, lines indented by two spaces are running prose
//! (paragraphs split by blank lines), and lines indented by four or more
//! are kept as they are (tables, examples). `{RUN_EXIT}`, `{CANCEL_EXIT}`,
//! `{STATUS_EXIT}`, `{WAIT_EXIT}`, `{OUTPUT_EXIT}` and `{LS_EXIT}` stand
//! for the exit-status tables of [`crate::exit`], `{SIGNALS}` for the
//! table of [`crate::signal_policy`]; [`render`] fills them in.

pub const ABOUT: &str = "Run a command in its own process group; stop the whole group, leave nothing behind.";

pub const LONG_ABOUT: &str = "\
Run COMMAND in a fresh process group, stop that whole group on timeout, on \
cancel or when COMMAND exits, and exit only once every process in the group \
is gone: kill(-PGID, 0) fails with ESRCH (EPERM still counts as alive). \
Background children, grandchildren that ignore SIGTERM and stopped processes \
are all ended; none is left behind. On Linux pgrun is a child subreaper and \
reaps every orphan it inherits, so zombies never hold the group open, even \
when pgrun is PID 1 of a container; and by default (--contain tree) it also \
stops every descendant that left the group. A guard process stops the run \
if pgrun itself is killed with SIGKILL.

COMMAND inherits pgrun's stdin, stdout, stderr and every other fd unchanged \
(no pipes in between; --max-output, --output-file and --idle-timeout put one under stdout and stderr), its environment, working directory, signal mask and \
ignored signals. pgrun stays in its caller's process group and session \
(--detach: see below). It \
writes to stdout only for --help and --version, and to stderr only its own \
errors (one line, prefixed 'pgrun: ') and, with --verbose, one line per action.";

mod readers;
mod run_mode;

pub use readers::*;
pub use run_mode::*;

/// `--contain` in `--help` and the man page (`-h` has a one-line summary).
pub const CONTAIN_LONG_HELP: &str = "\
What is stopped and waited for: group (the command's process group), tree \
(the group and every descendant of pgrun, wherever it moved), cgroup \
(everything in a new cgroup v2 leaf the command is born in), auto (cgroup \
where a leaf can be created, else tree) [default: tree on Linux, group \
elsewhere].";

/// A help text with its exit-status tables filled in from [`crate::exit`].
///
/// Every start of pgrun renders these (clap builds its whole command line
/// first), so this is one pass over the text, and each table is made only
/// where the text asks for it: five `str::replace`s of the 32 KB run help
/// and twenty tables made on every start were a fifth of pgrun's page
/// faults, and a larger heap for the guard's fork to copy.
pub fn render(text: &str) -> String {
    use crate::exit::{
        CANCEL_TABLE, LS_TABLE, OUTPUT_TABLE, RUN_TABLE, SEND_TABLE, STATUS_TABLE, WAIT_TABLE, help_table,
    };
    let tables: [(&str, &dyn Fn() -> String); 8] = [
        ("{RUN_EXIT}", &|| help_table(RUN_TABLE)),
        ("{CANCEL_EXIT}", &|| help_table(CANCEL_TABLE)),
        ("{STATUS_EXIT}", &|| help_table(STATUS_TABLE)),
        ("{WAIT_EXIT}", &|| help_table(WAIT_TABLE)),
        ("{OUTPUT_EXIT}", &|| help_table(OUTPUT_TABLE)),
        ("{LS_EXIT}", &|| help_table(LS_TABLE)),
        ("{SEND_EXIT}", &|| help_table(SEND_TABLE)),
        ("{SIGNALS}", &crate::signal_policy::help_table),
    ];
    let mut out = String::with_capacity(text.len() + 8192);
    let mut rest = text;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        match tables.iter().find(|(name, _)| rest.starts_with(name)) {
            Some((name, table)) => {
                out.push_str(&table());
                rest = &rest[name.len()..];
            }
            None => {
                out.push('{');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}
