//! `pgrun --generate WHAT`: the man pages and shell completions, generated
//! from the clap definition so that they cannot drift from the flags.
//!
//! The generated files are committed under `man/` and `completions/`, with
//! two Markdown tables (README.md's exit statuses, docs/design.md's
//! signals); `scripts/regenerate-docs` rewrites them and a test fails when
//! they are stale. The man page takes NAME, SYNOPSIS, DESCRIPTION and OPTIONS from
//! clap_mangen and converts the `--help` prose (see `help`) into the
//! remaining sections.

use crate::cli::{Artifact, with_long_help};
use clap_complete::Shell;

/// The man pages' date: when their prose last changed. Fixed, so that the
/// generated files only change when the definitions do.
const MAN_DATE: &str = "2026-12-03";

/// The man pages of the subcommands, which pgrun(1) refers to.
const SUBPAGES: [&str; 6] = ["pgrun-cancel", "pgrun-status", "pgrun-wait", "pgrun-output", "pgrun-ls", "pgrun-send"];

/// Render `what` as bytes.
pub fn render(what: Artifact) -> Vec<u8> {
    let mut cmd = with_long_help();
    cmd.build();
    let mut out = Vec::new();
    let shell = match what {
        Artifact::Man => return man_page(&cmd, "pgrun", &SUBPAGES),
        Artifact::ManCancel
        | Artifact::ManStatus
        | Artifact::ManWait
        | Artifact::ManOutput
        | Artifact::ManLs
        | Artifact::ManSend => {
            let (name, page) = match what {
                Artifact::ManCancel => ("cancel", "pgrun-cancel"),
                Artifact::ManStatus => ("status", "pgrun-status"),
                Artifact::ManWait => ("wait", "pgrun-wait"),
                Artifact::ManOutput => ("output", "pgrun-output"),
                Artifact::ManLs => ("ls", "pgrun-ls"),
                _ => ("send", "pgrun-send"),
            };
            let sub = cmd.find_subcommand(name).expect("subcommand").clone();
            let sub = sub.name(page).bin_name(format!("pgrun {name}")).version(env!("CARGO_PKG_VERSION"));
            return man_page(&sub, page, &["pgrun"]);
        }
        Artifact::Bash => return bash(&mut cmd),
        Artifact::Zsh => Shell::Zsh,
        Artifact::Fish => return fish(&mut cmd),
        Artifact::Elvish => Shell::Elvish,
        Artifact::Powershell => Shell::PowerShell,
        Artifact::ReadmeExitStatus => return readme_exit_status().into_bytes(),
        Artifact::DesignSignals => return crate::signal_policy::markdown_table().into_bytes(),
    };
    clap_complete::generate(shell, &mut cmd, "pgrun", &mut out);
    out
}

/// clap_complete's script for `shell`, as text.
fn script(shell: Shell, cmd: &mut clap::Command) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, cmd, "pgrun", &mut out);
    String::from_utf8(out).expect("clap_complete writes UTF-8")
}

/// The run mode's options that take their value as the next word (`-t`,
/// `--timeout`, ...): a completion skips that word to find COMMAND.
fn valued_options(cmd: &clap::Command) -> Vec<String> {
    let mut names = Vec::new();
    for arg in cmd.get_arguments().filter(|a| a.get_action().takes_values() && !a.is_positional()) {
        names.extend(arg.get_short().map(|c| format!("-{c}")));
        names.extend(arg.get_long().map(|l| format!("--{l}")));
    }
    names
}

/// clap's bash completion completes pgrun's own words only: after `--` it
/// offered pgrun's options again. Its function becomes `_pgrun_options`,
/// and `_pgrun` (the name `complete -F` registers) first finds where
/// COMMAND starts: the word after `--`, or the first that is neither an
/// option nor an option's value (`cancel`, `status`, `wait`, `output`
/// and `ls` first on the line are modes). COMMAND's name is completed as a command, its
/// arguments by its own completion where bash-completion is loaded
/// (`_comp_command_offset`, formerly `_command_offset`), else as files.
fn bash(cmd: &mut clap::Command) -> Vec<u8> {
    let clap = script(Shell::Bash, cmd);
    assert_eq!(clap.matches("_pgrun() {").count(), 1, "clap_complete's bash script changed shape");
    let clap = clap.replacen("_pgrun() {", "_pgrun_options() {", 1);
    let wrapper = BASH_COMMAND.replace("VALUED", &valued_options(cmd).join("|"));
    format!("{clap}\n{wrapper}").into_bytes()
}

const BASH_COMMAND: &str = r#"# COMMAND and its arguments are completed as a command line of their own,
# pgrun's own words by _pgrun_options (clap's).
_pgrun() {
    local i=1 dashdash=
    while (( i < COMP_CWORD )); do
        case ${COMP_WORDS[i]} in
            --) (( i++ )); dashdash=1; break ;;
            VALUED) (( i += 2 )) ;;
            -*) (( i++ )) ;;
            cancel|status|wait|output|ls|send)
                if (( i == 1 )); then _pgrun_options "$@"; return; fi
                break ;;
            *) break ;;
        esac
    done
    if (( i > COMP_CWORD )) || [[ -z $dashdash && $i -eq $COMP_CWORD && $2 == -* ]]; then
        _pgrun_options "$@"
        return
    fi
    if (( i < COMP_CWORD )); then
        COMPREPLY=()
        if declare -F _comp_command_offset >/dev/null; then
            _comp_command_offset "$i"
        elif declare -F _command_offset >/dev/null; then
            _command_offset "$i"
        fi
        return 0
    fi
    COMPREPLY=()
    [[ -n $dashdash ]] || _pgrun_options "$@"
    COMPREPLY+=( $(compgen -c -- "$2") )
}
"#;

/// clap's fish completion has two gaps, filled here. Its test for "pgrun's
/// own words" (`__fish_pgrun_needs_command`) fails on a line that does not
/// parse yet, which is every line ending in an option that waits for its
/// value: `pgrun --contain ` offered files, not the modes; now such a line
/// is pgrun's. And after `--`, or from the first word that is neither an
/// option nor an option's value, the words are COMMAND's: completed as a
/// command line of their own (fish's `__fish_complete_subcommand`).
fn fish(cmd: &mut clap::Command) -> Vec<u8> {
    let clap = script(Shell::Fish, cmd);
    const PARSE: &str = "    argparse -s (__fish_pgrun_global_optspecs) -- $cmd 2>/dev/null\n    or return\n";
    assert_eq!(clap.matches(PARSE).count(), 1, "clap_complete's fish script changed shape");
    let parse = "    # After `--`: COMMAND's words (see __fish_pgrun_command).\n    \
                 if contains -- -- $cmd\n        return 1\n    end\n    \
                 # A line that does not parse yet ends in an option waiting for its value.\n    \
                 argparse -s (__fish_pgrun_global_optspecs) -- $cmd 2>/dev/null\n    or return 0\n";
    let clap = clap.replacen(PARSE, parse, 1);
    let valued = valued_options(cmd).join(" ");
    format!("{clap}\n{}", FISH_COMMAND.replace("VALUED", &valued)).into_bytes()
}

const FISH_COMMAND: &str = r#"# COMMAND's words, from its name to the word being completed: printed, and
# true, where they are (after `--`, or from the first word that is neither
# an option nor an option's value; cancel, status, wait, output and ls
# first on the line are modes).
function __fish_pgrun_command
    set -l words (commandline -opc) (commandline -ct)
    set -e words[1]
    set -l i 1
    while set -q words[$i]
        switch $words[$i]
            case --
                set -e words[1..$i]
                printf '%s\n' $words
                return 0
            case VALUED
                set i (math $i + 2)
            case '-*'
                set i (math $i + 1)
            case cancel status wait output ls send
                test $i -gt 1; or return 1
                break
            case '*'
                break
        end
    end
    set -q words[$i]; or return 1
    printf '%s\n' $words[$i..-1]
end

complete -c pgrun -n __fish_pgrun_command -x -a '(__fish_complete_subcommand --commandline (__fish_pgrun_command))'
"#;

/// The block of `README.md` between its exit-status markers.
fn readme_exit_status() -> String {
    use crate::exit::{
        CANCEL_TABLE, LS_TABLE, OUTPUT_TABLE, RUN_TABLE, SEND_TABLE, STATUS_TABLE, WAIT_TABLE, markdown_table,
    };
    format!(
        "{}\n`pgrun cancel`:\n\n{}\n`pgrun status`:\n\n{}\n`pgrun wait`:\n\n{}\n`pgrun output`:\n\n{}\n`pgrun ls`:\n\n{}\n`pgrun send`:\n\n{}",
        markdown_table(RUN_TABLE),
        markdown_table(CANCEL_TABLE),
        markdown_table(STATUS_TABLE),
        markdown_table(WAIT_TABLE),
        markdown_table(OUTPUT_TABLE),
        markdown_table(LS_TABLE),
        markdown_table(SEND_TABLE)
    )
}

/// Print `what` to stdout; the status for `main`.
pub fn print(what: Artifact) -> u8 {
    if crate::say::to_stdout(&render(what)) { 0 } else { crate::exit::FAILURE }
}

fn man_page(cmd: &clap::Command, title: &str, see_also: &[&str]) -> Vec<u8> {
    let version = cmd.get_version().unwrap_or_default();
    let man = clap_mangen::Man::new(cmd.clone())
        .title(title.to_uppercase())
        .section("1")
        .date(MAN_DATE)
        .source(format!("pgrun {version}"))
        .manual("User Commands");
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    man.render_title(&mut out).unwrap();
    man.render_name_section(&mut out).unwrap();
    man.render_synopsis_section(&mut out).unwrap();
    man.render_description_section(&mut out).unwrap();
    man.render_options_section(&mut out).unwrap();
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out).unwrap();
    }
    if let Some(prose) = cmd.get_after_long_help() {
        out.extend_from_slice(prose_to_roff(&prose.to_string()).as_bytes());
    }
    let refs: Vec<String> = see_also.iter().map(|p| format!("\\fB{p}\\fR(1)")).collect();
    let mut tail = String::from(".SH \"SEE ALSO\"\n");
    tail.push_str(&refs.join(", "));
    tail.push_str(", \\fBtimeout\\fR(1), \\fBsetsid\\fR(1), \\fBkill\\fR(1)\n");
    out.extend_from_slice(tail.as_bytes());
    man.render_version_section(&mut out).unwrap();
    out
}

/// Convert the help prose format (see `help`) to roff.
pub fn prose_to_roff(text: &str) -> String {
    let mut out = String::new();
    let mut in_pre = false;
    let mut paragraph_open = false;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let body = line.trim();
        if body.is_empty() {
            if in_pre {
                out.push_str(".fi\n.RE\n");
                in_pre = false;
            }
            paragraph_open = false;
            continue;
        }
        if indent == 0 && body.ends_with(':') {
            if in_pre {
                out.push_str(".fi\n.RE\n");
                in_pre = false;
            }
            out.push_str(&format!(".SH \"{}\"\n", escape(&body[..body.len() - 1].to_uppercase())));
            // A section heading starts a paragraph of its own.
            paragraph_open = true;
            continue;
        }
        if indent >= 4 {
            if !in_pre {
                out.push_str(".RS 4\n.nf\n");
                in_pre = true;
            }
            out.push_str(&escape_line(&line[4.min(line.len())..]));
            out.push('\n');
            continue;
        }
        if in_pre {
            out.push_str(".fi\n.RE\n");
            in_pre = false;
            paragraph_open = false;
        }
        if !paragraph_open {
            out.push_str(".PP\n");
            paragraph_open = true;
        }
        // (paragraph_open is reset by blank lines and preformatted blocks)
        out.push_str(&escape_line(body));
        out.push('\n');
    }
    if in_pre {
        out.push_str(".fi\n.RE\n");
    }
    out
}

/// Escape roff's specials within a line.
fn escape(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
}

/// Escape a whole text line: also a leading `.` or `'`, which roff would
/// read as a request.
fn escape_line(text: &str) -> String {
    let escaped = escape(text);
    if escaped.starts_with('.') || escaped.starts_with('\'') { format!("\\&{escaped}") } else { escaped }
}

#[cfg(test)]
mod tests {
    use super::prose_to_roff;

    #[test]
    fn prose_becomes_sections_paragraphs_and_preformatted_blocks() {
        let roff = prose_to_roff("Exit status:\n  Some prose\n  more.\n\n    124   timeout\n    .dot\nNext:\n  x-y\n");
        assert_eq!(
            roff,
            ".SH \"EXIT STATUS\"\nSome prose\nmore.\n.RS 4\n.nf\n124   timeout\n\\&.dot\n.fi\n.RE\n.SH \"NEXT\"\nx\\-y\n"
        );
    }
}
