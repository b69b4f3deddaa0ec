//! The run mode's command line read without clap, for the lines where that
//! is certain to give what clap gives.
//!
//! clap builds its whole model of pgrun's command line (every option of
//! every mode, with its help) before it reads one argument, and frees it
//! after: about three quarters of the instructions a plain `pgrun --
//! COMMAND` ran, and 0.08 ms of its start-up here (issue 23). [`run_args`]
//! reads the run mode's options as they are commonly spelled (`--name
//! VALUE`, `--name=VALUE`, `-x VALUE`, `-v`, then `--` or the first word
//! that is not an option), with the value parsers clap uses, and gives up
//! (`None`) on anything else: a subcommand's name, `--help`, `--version`,
//! `--generate`, an option it does not know, an option given twice (but
//! `--rlimit`), a value that is empty, begins with `-` or does not parse,
//! another spelling (`-t5`, `-vp FILE`), options clap refuses together,
//! no command. clap then reads the line as it always did and says what is
//! wrong, so every usage error is still clap's, word for word.
//!
//! Whatever this module accepts, clap accepts with the same result: a
//! property test compares the two on generated command lines, another
//! checks that [`OPTIONS`] names every option of [`RunArgs`] as clap does
//! (long and short name, flag or value, repeatable or not), so an option
//! added to the command line without a line here is caught there; and two
//! more try every set of up to three options (what clap refuses together)
//! and every word clap may read as a mode (names, aliases, their
//! beginnings), which generated lines rarely hit.

use crate::cli::{Contain, RunArgs};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// How an option takes its part of the line.
#[derive(Clone, Copy)]
enum Takes {
    /// A flag: sets its field, takes no value.
    Flag(fn(&mut RunArgs) -> &mut bool),
    /// One value (the next argument, or after `=`), read into its field;
    /// `None` if it does not parse.
    Value(fn(&mut RunArgs, &OsStr) -> Option<()>),
}

/// One option of the run mode.
struct Opt {
    long: &'static str,
    short: Option<u8>,
    /// May be given more than once (clap's `Append`).
    repeatable: bool,
    takes: Takes,
}

/// A value that is text (each parser but the paths' needs it).
fn text(value: &OsStr) -> Option<&str> {
    value.to_str()
}

/// The run mode's options, as `cli::RunArgs` defines them for clap.
const OPTIONS: &[Opt] = &[
    value("timeout", Some(b't'), |a, v| {
        a.timeout = Some(crate::duration::parse_duration(text(v)?).ok()?);
        Some(())
    }),
    value("idle-timeout", None, |a, v| {
        a.idle_timeout = Some(crate::duration::parse_duration(text(v)?).ok()?);
        Some(())
    }),
    value("signal", Some(b's'), |a, v| {
        a.signal = Some(crate::stop::sequence::parse_step_signal(text(v)?).ok()?);
        Some(())
    }),
    value("kill-after", Some(b'k'), |a, v| {
        a.kill_after = Some(crate::duration::parse_duration(text(v)?).ok()?);
        Some(())
    }),
    value("escalate", None, |a, v| {
        a.escalate = Some(crate::stop::sequence::StopSequence::parse_escalate(text(v)?).ok()?);
        Some(())
    }),
    flag("preserve-status", None, |a| &mut a.preserve_status),
    flag("wait-group", None, |a| &mut a.wait_group),
    value("pidfile", Some(b'p'), |a, v| {
        a.pidfile = Some(PathBuf::from(v));
        Some(())
    }),
    value("cancel-file", None, |a, v| {
        a.cancel_file = Some(PathBuf::from(v));
        Some(())
    }),
    value("report", None, |a, v| {
        a.report = Some(PathBuf::from(v));
        Some(())
    }),
    value("max-output", None, |a, v| {
        a.max_output = Some(crate::size::parse_size(text(v)?).ok()?);
        Some(())
    }),
    value("output-file", None, |a, v| {
        a.output_file = Some(PathBuf::from(v));
        Some(())
    }),
    value("contain", None, |a, v| {
        a.contain = Some(match text(v)? {
            "group" => Contain::Group,
            "tree" => Contain::Tree,
            "cgroup" => Contain::Cgroup,
            "auto" => Contain::Auto,
            _ => return None,
        });
        Some(())
    }),
    flag("no-guard", None, |a| &mut a.no_guard),
    flag("die-with-parent", None, |a| &mut a.die_with_parent),
    flag("detach", None, |a| &mut a.detach),
    value("detach-after", None, |a, v| {
        a.detach_after = Some(crate::duration::parse_duration(text(v)?).ok()?);
        Some(())
    }),
    flag("stdin-pipe", None, |a| &mut a.stdin_pipe),
    Opt {
        long: "rlimit",
        short: None,
        repeatable: true,
        takes: Takes::Value(|a, v| {
            a.rlimit.push(crate::rlimit::parse_rlimit(text(v)?).ok()?);
            Some(())
        }),
    },
    value("memory-max", None, |a, v| {
        a.memory_max = Some(crate::size::parse_size(text(v)?).ok()?);
        Some(())
    }),
    value("pids-max", None, |a, v| {
        a.pids_max = Some(crate::cgroup_limits::parse_pids_max(text(v)?).ok()?);
        Some(())
    }),
    value("cpus", None, |a, v| {
        a.cpus = Some(crate::cgroup_limits::parse_cpus(text(v)?).ok()?);
        Some(())
    }),
    flag("setsid", None, |a| &mut a.setsid),
    flag("verbose", Some(b'v'), |a| &mut a.verbose),
];

const fn flag(long: &'static str, short: Option<u8>, field: fn(&mut RunArgs) -> &mut bool) -> Opt {
    Opt { long, short, repeatable: false, takes: Takes::Flag(field) }
}

const fn value(long: &'static str, short: Option<u8>, set: fn(&mut RunArgs, &OsStr) -> Option<()>) -> Opt {
    Opt { long, short, repeatable: false, takes: Takes::Value(set) }
}

/// Words that, first on the line, clap reads as a mode, not as the command
/// (after an option it reads them as the command; left to it all the same).
const SUBCOMMANDS: [&[u8]; 6] = [b"cancel", b"status", b"wait", b"output", b"ls", b"send"];

/// The `--contain` mode in force for a pgrun started with `argv` (its own
/// command line, read from /proc by `pgrun status`), as the run resolved
/// it; `None` if `argv` is no run mode's line.
pub fn contain_mode_of(argv: Vec<OsString>) -> Option<crate::contain::Mode> {
    let run = match run_args(&argv) {
        Some(run) => run,
        None => match <crate::cli::Cli as clap::Parser>::try_parse_from(argv).ok()? {
            crate::cli::Cli { action: None, run, .. } => run,
            _ => return None,
        },
    };
    let limits = crate::cgroup_limits::CgroupLimits {
        memory_max: run.memory_max,
        pids_max: run.pids_max,
        cpu_quota_us: run.cpus,
    };
    Some(crate::contain::Mode::resolve(run.contain.map(Contain::mode), &limits))
}

/// The run mode's options and command from `args` (the program's name
/// first), where they are certain to be what clap would make of them;
/// `None` where clap must read the line (see the module doc).
pub fn run_args(args: &[OsString]) -> Option<RunArgs> {
    const _: () = assert!(OPTIONS.len() <= u32::BITS as usize, "one bit of `given` per option");
    let mut run = RunArgs::default();
    let mut given = 0u32;
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let bytes = arg.as_bytes();
        let (at, inline) = if bytes == b"--" {
            run.command = rest.cloned().collect();
            break;
        } else if let Some(long) = bytes.strip_prefix(b"--") {
            let (name, inline) = match long.iter().position(|&b| b == b'=') {
                Some(i) => (&long[..i], Some(OsStr::from_bytes(&long[i + 1..]))),
                None => (long, None),
            };
            (OPTIONS.iter().position(|o| o.long.as_bytes() == name)?, inline)
        } else if let [b'-', short] = bytes {
            (OPTIONS.iter().position(|o| o.short == Some(*short))?, None)
        } else if bytes.starts_with(b"-") || SUBCOMMANDS.contains(&bytes) {
            return None;
        } else {
            run.command = std::iter::once(arg).chain(rest).cloned().collect();
            break;
        };
        let opt = &OPTIONS[at];
        if given & (1 << at) != 0 && !opt.repeatable {
            return None;
        }
        given |= 1 << at;
        match opt.takes {
            Takes::Flag(field) if inline.is_none() => *field(&mut run) = true,
            Takes::Flag(_) => return None,
            Takes::Value(set) => {
                let value = match inline {
                    Some(value) => value,
                    None => rest.next()?.as_os_str(),
                };
                if value.is_empty() || value.as_bytes().starts_with(b"-") {
                    return None;
                }
                set(&mut run, value)?;
            }
        }
    }
    // What clap refuses: no command; --escalate with -s or -k; --detach
    // without --pidfile or with --die-with-parent; --detach-after without
    // --pidfile or --output-file, or with --detach or --die-with-parent;
    // --stdin-pipe without --pidfile.
    let refused = run.command.is_empty()
        || (run.stdin_pipe && run.pidfile.is_none())
        || (run.escalate.is_some() && (run.signal.is_some() || run.kill_after.is_some()))
        || (run.detach && (run.pidfile.is_none() || run.die_with_parent))
        || (run.detach_after.is_some()
            && (run.pidfile.is_none() || run.output_file.is_none() || run.detach || run.die_with_parent));
    (!refused).then_some(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::{CommandFactory, Parser};

    fn os(words: &[&[u8]]) -> Vec<OsString> {
        std::iter::once(&b"pgrun"[..]).chain(words.iter().copied()).map(|w| OsStr::from_bytes(w).to_owned()).collect()
    }

    /// clap's reading of `args`, where it is a run.
    fn clap_run(args: &[OsString]) -> Result<RunArgs, String> {
        match Cli::try_parse_from(args) {
            Ok(Cli { action: None, run, generate: None }) => Ok(run),
            Ok(other) => Err(format!("not a run: {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn the_table_names_every_option_of_the_run_as_clap_does() {
        let cli = Cli::command();
        let mut clap_options: Vec<String> = Vec::new();
        for arg in cli.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if ["help", "version", "generate"].contains(&long) {
                continue;
            }
            clap_options.push(long.to_string());
            let opt = OPTIONS.iter().find(|o| o.long == long).unwrap_or_else(|| panic!("--{long} is not in OPTIONS"));
            assert_eq!(opt.short.map(char::from), arg.get_short(), "--{long}'s short name");
            assert_eq!(matches!(opt.takes, Takes::Value(_)), arg.get_action().takes_values(), "--{long} takes a value");
            assert_eq!(opt.repeatable, matches!(arg.get_action(), clap::ArgAction::Append), "--{long} may be repeated");
        }
        let table: Vec<String> = OPTIONS.iter().map(|o| o.long.to_string()).collect();
        clap_options.sort();
        let mut sorted = table.clone();
        sorted.sort();
        assert_eq!(sorted, clap_options, "OPTIONS and clap's run options");
        let mut names: Vec<&[u8]> = cli
            .get_subcommands()
            .flat_map(|c| std::iter::once(c.get_name()).chain(c.get_all_aliases()))
            .map(str::as_bytes)
            .collect();
        names.sort();
        let mut ours = SUBCOMMANDS.to_vec();
        ours.sort();
        assert_eq!(ours, names, "the words clap may read as a mode");
    }

    #[test]
    fn common_lines_are_read_as_clap_reads_them() {
        let lines: &[&[&[u8]]] = &[
            &[b"--", b"true"],
            &[b"true"],
            &[b"sh", b"-c", b"exit 3"],
            &[b"--timeout", b"30", b"--", b"make", b"test"],
            &[b"-t", b"1.5", b"-k", b"2", b"-s", b"INT", b"sleep", b"9"],
            &[b"--pidfile", b"/tmp/job.pid", b"--", b"./build"],
            &[b"-p", b"job.pid", b"--cancel-file=c", b"--report=r.json", b"-v", b"x"],
            &[b"--escalate", b"INT/2s/TERM/5s/KILL", b"--contain", b"group", b"x"],
            &[b"--max-output", b"1M", b"--output-file", b"out.log", b"--idle-timeout=5m", b"x"],
            &[b"--rlimit", b"nofile=1024", b"--rlimit=core=0", b"--memory-max", b"1G", b"--pids-max", b"9", b"x"],
            &[b"--cpus", b"0.5", b"--no-guard", b"--setsid", b"--preserve-status", b"--wait-group", b"x"],
            &[b"--detach", b"-p", b"p", b"x"],
            &[b"--die-with-parent", b"--signal", b"leader:TERM", b"-p", b"\xff\xfe", b"\xff"],
            &[b"--", b"--", b"cancel"],
            &[b"--", b"-v"],
            &[b"help"],
        ];
        for words in lines {
            let args = os(words);
            let quick = run_args(&args);
            let clap = clap_run(&args);
            match (&quick, &clap) {
                (Some(q), Ok(c)) => assert_eq!(format!("{q:?}"), format!("{c:?}"), "{args:?}"),
                _ => panic!("{args:?}: quick {quick:?}, clap {clap:?}"),
            }
        }
    }

    #[test]
    fn what_it_does_not_read_for_certain_it_leaves_to_clap() {
        let lines: &[&[&[u8]]] = &[
            &[],
            &[b"--"],
            &[b"-t", b"5"],
            &[b"--help"],
            &[b"-h"],
            &[b"--version"],
            &[b"-V"],
            &[b"--generate", b"man"],
            &[b"cancel", b"p"],
            &[b"status", b"p"],
            &[b"wait", b"p"],
            &[b"output", b"f"],
            &[b"ls", b"d"],
            &[b"-v", b"wait", b"p"],
            &[b"-t5", b"x"],
            &[b"-vt", b"5", b"x"],
            &[b"-t", b"5", b"-t", b"6", b"x"],
            &[b"-v", b"--verbose", b"x"],
            &[b"--timeout", b"-5", b"x"],
            &[b"--timeout=", b"x"],
            &[b"--timeout", b"soon", b"x"],
            &[b"--contain", b"Group", b"x"],
            &[b"--escalate", b"INT/KILL", b"-s", b"TERM", b"x"],
            &[b"--escalate", b"INT/KILL", b"-k", b"1", b"x"],
            &[b"--detach", b"x"],
            &[b"--detach", b"-p", b"p", b"--die-with-parent", b"x"],
            &[b"--detach-after", b"1", b"-p", b"p", b"x"],
            &[b"--detach-after", b"1", b"--output-file", b"f", b"x"],
            &[b"--detach-after", b"1", b"-p", b"p", b"--output-file", b"f", b"--detach", b"x"],
            &[b"--detach-after", b"1", b"-p", b"p", b"--output-file", b"f", b"--die-with-parent", b"x"],
            &[b"--verbose=yes", b"x"],
            &[b"--bogus", b"x"],
            &[b"-", b"x"],
            &[b"--pidfile"],
            &[b"--timeout", b"\xff", b"x"],
        ];
        for words in lines {
            let args = os(words);
            assert!(run_args(&args).is_none(), "{args:?} was read without clap");
        }
    }

    /// Whether `run_args` and clap read `args` alike: what `run_args`
    /// reads, clap reads the same; with `exactly`, also nothing more.
    fn assert_read_alike(args: &[OsString], exactly: bool) {
        let quick = run_args(args);
        let clap = clap_run(args);
        match (&quick, &clap) {
            (Some(q), Ok(c)) => assert_eq!(format!("{q:?}"), format!("{c:?}"), "{args:?}"),
            (Some(q), Err(e)) => panic!("{args:?}: read as {q:?}, clap: {e}"),
            (None, Ok(c)) if exactly => panic!("{args:?}: left to clap, which reads {c:?}"),
            (None, _) => {}
        }
    }

    /// Every set of up to three options (each once, with a value that
    /// parses; --rlimit also twice or three times), then a command:
    /// `run_args` reads exactly the lines clap takes, and alike. Whatever
    /// clap says of options together (conflicts_with, requires, exclusive)
    /// must be in `run_args`'s refusals, and a relation clap gains is caught
    /// here: the generated lines rarely pair two given options (a conflict
    /// of --setsid with --detach, which needs --pidfile too, went unseen).
    #[test]
    fn options_together_are_read_exactly_where_clap_takes_them() {
        let n = OPTIONS.len();
        let mut sets = std::collections::BTreeSet::new();
        for i in 0..n {
            for j in i..n {
                for k in j..n {
                    for set in [vec![i], vec![i, j], vec![i, j, k]] {
                        let repeats_only_what_may_be = set.windows(2).all(|w| w[0] != w[1] || OPTIONS[w[0]].repeatable);
                        if repeats_only_what_may_be {
                            sets.insert(set);
                        }
                    }
                }
            }
        }
        for set in sets {
            let mut words: Vec<Vec<u8>> = Vec::new();
            for &at in &set {
                let opt = &OPTIONS[at];
                words.push(format!("--{}", opt.long).into_bytes());
                if let Takes::Value(_) = opt.takes {
                    words.push(good_values(opt.long)[0].as_bytes().to_vec());
                }
            }
            words.push(b"true".to_vec());
            let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
            assert_read_alike(&os(&words), true);
        }
    }

    /// A word clap may read as a mode (a subcommand's name or alias, and
    /// each beginning of one, should clap ever infer subcommands): first
    /// on the line `run_args` leaves it to clap; after an option or `--`
    /// it is read alike.
    #[test]
    fn words_clap_may_read_as_a_mode_are_left_to_it() {
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            for name in std::iter::once(sub.get_name()).chain(sub.get_all_aliases()) {
                for end in 1..=name.len() {
                    let word = &name.as_bytes()[..end];
                    for words in [&[word, b"p"][..], &[b"-v", word, b"p"], &[b"--", word, b"p"]] {
                        assert_read_alike(&os(words), false);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        // A tenth of the cases in plain `cargo test`; all with the long tests.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            if cfg!(feature = "long-tests") { 50000 } else { 5000 }))]

        /// On lines made of options (right and wrong, each way of spelling
        /// them), values (good and bad for each kind), subcommand names and
        /// command words: whatever `run_args` reads, clap reads alike.
        #[test]
        fn whatever_it_reads_clap_reads_alike(
            units in proptest::collection::vec(unit(), 0..6),
            end in proptest::sample::select(ENDS),
        ) {
            let words: Vec<&[u8]> = units.iter().flatten().map(Vec::as_slice).chain(end.iter().copied()).collect();
            let args = os(&words);
            if let Some(quick) = run_args(&args) {
                let clap = clap_run(&args);
                proptest::prop_assert!(clap.is_ok(), "{:?}: read as {:?}, clap: {:?}", args, quick, clap);
                proptest::prop_assert_eq!(format!("{quick:?}"), format!("{:?}", clap.unwrap()), "{:?}", args);
            }
        }
    }

    /// How a generated line ends: mostly with a command, as lines do.
    const ENDS: &[&[&[u8]]] = &[
        &[b"true"],
        &[b"true"],
        &[b"true"],
        &[b"--", b"true"],
        &[b"--", b"true"],
        &[b"sh", b"-c", b"x", b"-v"],
        &[b"--", b"-v", b"--"],
        &[b"cancel", b"p"],
        &[b"-"],
        &[],
    ];

    /// Values that parse for `long`, besides the generic ones.
    fn good_values(long: &str) -> &'static [&'static str] {
        match long {
            "timeout" | "idle-timeout" | "kill-after" | "detach-after" => &["5", "0", "1.5", "250ms"],
            "signal" => &["TERM", "leader:INT", "KILL", "9"],
            "escalate" => &["INT/2s/KILL", "TERM", "leader:TERM/1/KILL"],
            "max-output" | "memory-max" => &["64K", "1M", "0"],
            "contain" => &["group", "tree", "cgroup", "auto"],
            "rlimit" => &["nofile=1024", "core=0:1", "cpu=1.5"],
            "pids-max" => &["9", "1"],
            "cpus" => &["0.5", "2"],
            _ => &["/tmp/p", "job.pid", "a=b"],
        }
    }

    /// A part of a command line: an option (each way of spelling it, with
    /// a value that fits it or any value), a word that is no option of the
    /// run, or a value on its own (which may begin the command).
    fn unit() -> impl proptest::strategy::Strategy<Value = Vec<Vec<u8>>> {
        use proptest::prelude::*;
        let values: Vec<Vec<u8>> = [
            "5", "0", "1.5", "-1", "", "soon", "TERM", "leader:", "TERM/1e3", "2G", "x1", "bogus=1", "Group", "/tmp/p",
            "cancel", "status", "wait", "output", "ls", "send", "help", "true", "sh", "-c", "-v", "--",
        ]
        .iter()
        .map(|v| v.as_bytes().to_vec())
        .chain([b"\xff\xfe".to_vec()])
        .collect();
        // Options with a value that fits (most lines that clap takes have
        // several), and options misspelled or with any value.
        let mut options: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut wrong: Vec<Vec<Vec<u8>>> = Vec::new();
        for opt in OPTIONS {
            let long = format!("--{}", opt.long).into_bytes();
            let mut spellings = vec![long.clone()];
            spellings.extend(opt.short.map(|s| vec![b'-', s]));
            match opt.takes {
                Takes::Flag(_) => {
                    for spelling in spellings {
                        options.push(vec![spelling]);
                    }
                    wrong.push(vec![[&long[..], b"=x"].concat()]);
                }
                Takes::Value(_) => {
                    for good in good_values(opt.long) {
                        for spelling in &spellings {
                            options.push(vec![spelling.clone(), good.as_bytes().to_vec()]);
                        }
                        options.push(vec![[&long[..], b"=", good.as_bytes()].concat()]);
                        wrong.extend(opt.short.map(|s| vec![[&[b'-', s][..], good.as_bytes()].concat()]));
                    }
                    for any in &values {
                        wrong.push(vec![long.clone(), any.clone()]);
                        wrong.push(vec![[&long[..], b"=", any].concat()]);
                    }
                    wrong.push(vec![long]);
                }
            }
        }
        let odd: Vec<Vec<Vec<u8>>> =
            ["--help", "-h", "--version", "-V", "--generate", "--bogus", "-x", "-vp", "-", "--", "--=5"]
                .iter()
                .map(|w| vec![w.as_bytes().to_vec()])
                .collect();
        prop_oneof![
            12 => proptest::sample::select(options),
            2 => proptest::sample::select(wrong),
            1 => proptest::sample::select(odd),
            1 => proptest::sample::select(values).prop_map(|v| vec![v]),
        ]
    }
}
