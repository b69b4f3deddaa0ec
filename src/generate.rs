//! `pgrun --generate WHAT`: the man pages and shell completions, generated
//! from the clap definition so that they cannot drift from the flags.
//!
//! The generated files are committed under `man/` and `completions/`;
//! `scripts/regenerate-docs` rewrites them and a test fails when they are
//! stale. The man page takes NAME, SYNOPSIS, DESCRIPTION and OPTIONS from
//! clap_mangen and converts the `--help` prose (see `help`) into the
//! remaining sections.

use crate::cli::{Artifact, with_long_help};
use clap_complete::Shell;

/// The man pages' date: when their prose last changed. Fixed, so that the
/// generated files only change when the definitions do.
const MAN_DATE: &str = "2026-11-30";

/// Render `what` as bytes.
pub fn render(what: Artifact) -> Vec<u8> {
    let mut cmd = with_long_help();
    cmd.build();
    let mut out = Vec::new();
    let shell = match what {
        Artifact::Man => return man_page(&cmd, "pgrun", &["pgrun-cancel", "pgrun-status", "pgrun-wait"]),
        Artifact::ManCancel | Artifact::ManStatus | Artifact::ManWait => {
            let (name, page) = match what {
                Artifact::ManCancel => ("cancel", "pgrun-cancel"),
                Artifact::ManStatus => ("status", "pgrun-status"),
                _ => ("wait", "pgrun-wait"),
            };
            let sub = cmd.find_subcommand(name).expect("subcommand").clone();
            let sub = sub.name(page).bin_name(format!("pgrun {name}")).version(env!("CARGO_PKG_VERSION"));
            return man_page(&sub, page, &["pgrun"]);
        }
        Artifact::Bash => Shell::Bash,
        Artifact::Zsh => Shell::Zsh,
        Artifact::Fish => Shell::Fish,
        Artifact::Elvish => Shell::Elvish,
        Artifact::Powershell => Shell::PowerShell,
        Artifact::ReadmeExitStatus => return readme_exit_status().into_bytes(),
    };
    clap_complete::generate(shell, &mut cmd, "pgrun", &mut out);
    out
}

/// The block of `README.md` between its exit-status markers.
fn readme_exit_status() -> String {
    use crate::exit::{CANCEL_TABLE, RUN_TABLE, STATUS_TABLE, WAIT_TABLE, markdown_table};
    format!(
        "{}\n`pgrun cancel`:\n\n{}\n`pgrun status`:\n\n{}\n`pgrun wait`:\n\n{}",
        markdown_table(RUN_TABLE),
        markdown_table(CANCEL_TABLE),
        markdown_table(STATUS_TABLE),
        markdown_table(WAIT_TABLE)
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
