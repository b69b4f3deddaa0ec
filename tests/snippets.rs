//! Every shell and Python snippet of README.md and docs/*.md runs as
//! written, and every link between the docs leads somewhere.
//!
//! A fenced block is run according to its language: `sh` with `sh -c`,
//! `python` with python3, `makefile` as the Makefile of a `make` (its
//! first target), `console` as the commands after each `$ `, each
//! one's output compared with the lines below it (digits stand for any
//! digits, a line `...` for any lines, a trailing `  # comment` is the
//! reader's). Each block runs alone, in a sandbox of its own: new PID,
//! mount and network namespaces (so `/tmp`, ports and `pgrep` are its
//! own, and everything it leaves running dies with it), a fresh tmpfs on
//! `/tmp`, the built `pgrun` first on `PATH`, the Python module on
//! `PYTHONPATH` (both bound under a private `/mnt` first, so that a
//! checkout under `/tmp` works too), `HOME` in `/tmp/home`, and `/tmp/work` as its folder.
//! A shell, Python or make block must exit 0.
//!
//! An HTML comment on the line before a block speaks to this test only:
//! `<!-- test: setup CODE -->` runs CODE (sh) in the sandbox first, for
//! what the reader has and the sandbox lacks (a Makefile, a release's
//! files); `<!-- test: linux ... -->` runs a block that shows one of
//! Linux's strengths only where they are built (not with the
//! `posix-fallback` feature); `<!-- untested: WHY -->` skips a block that
//! cannot run here, saying what checks it instead. Blocks in other languages (`dockerfile`,
//! `yaml`, `text`, ...) are shown, not run; a block without a language is
//! refused, so that no snippet escapes by accident.

use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Languages that run.
const RUN: [&str; 4] = ["sh", "console", "python", "makefile"];
/// Languages that are only shown.
const SHOWN: [&str; 7] = ["text", "json", "dockerfile", "yaml", "hcl", "toml", "ini"];

/// The docs whose snippets run, besides README.md: every file in docs/.
fn docs() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A fenced block of a Markdown file.
struct Block {
    /// Where it starts: `FILE:LINE`.
    at: String,
    lang: String,
    text: String,
    /// The HTML comment on the line before the fence, without `<!--` and
    /// `-->`.
    note: Option<String>,
}

fn blocks(path: &Path) -> Vec<Block> {
    let markdown = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = path.strip_prefix(repo("")).unwrap_or(path).display().to_string();
    let lines: Vec<&str> = markdown.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            i += 1;
            continue;
        };
        let indent = lines[i].len() - trimmed.len();
        let start = i;
        let mut text = String::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != "```" {
            let line = lines[i];
            let cut = line.len() - line.trim_start().len();
            text.push_str(&line[cut.min(indent)..]);
            text.push('\n');
            i += 1;
        }
        assert!(i < lines.len(), "{name}:{}: a block that never closes", start + 1);
        i += 1;
        let note = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!--")?.strip_suffix("-->"))
            .map(|n| n.trim().to_string());
        let lang = info.split_whitespace().next().unwrap_or_default().to_string();
        found.push(Block { at: format!("{name}:{}", start + 1), lang, text, note });
    }
    found
}

/// Run `args` in a sandbox of its own (see the module doc), after `setup`.
fn in_sandbox(setup: &str, args: &[&str]) -> std::process::Output {
    // The binary and the Python module are bound under a private /mnt
    // first: the checkout (and so the build) may itself live under /tmp,
    // which the sandbox's own /tmp hides.
    let inside = "mount -t tmpfs tmpfs /mnt && mkdir /mnt/bin /mnt/python \
                  && mount --bind \"${PGRUN%/*}\" /mnt/bin && mount --bind \"$PGRUN_PYTHON\" /mnt/python \
                  && PGRUN=\"/mnt/bin/${PGRUN##*/}\" && export PGRUN \
                  && mount -t tmpfs tmpfs /tmp && mkdir /tmp/bin /tmp/home /tmp/work \
                  && ln -s \"$PGRUN\" /tmp/bin/pgrun && cd /tmp/work && eval \"$SETUP\" && \"$@\"";
    let mut cmd = Command::new("timeout");
    // KILL of unshare (--kill-child) ends the namespace, and all in it,
    // before the suite's deadline.
    cmd.args(["-s", "KILL", "25", "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount", "--net"])
        .args(["--", "sh", "-c", inside, "sh"])
        .args(args)
        .env("PGRUN", pgrun_path())
        .env("SETUP", setup)
        .env("HOME", "/tmp/home")
        .env("PATH", format!("/tmp/bin:{}", std::env::var("PATH").unwrap_or_default()))
        .env("PGRUN_PYTHON", repo("python"))
        .env("PYTHONPATH", "/mnt/python")
        .stdin(Stdio::null());
    run(default_signals(&mut cmd))
}

/// A console block's commands (after `$ `, with their `\` continuation
/// lines) and the output each one shows.
fn console(text: &str) -> Vec<(String, Vec<String>)> {
    let mut commands: Vec<(String, Vec<String>)> = Vec::new();
    let mut continued = false;
    for line in text.lines() {
        if continued {
            let (command, _) = commands.last_mut().unwrap();
            command.push('\n');
            command.push_str(line);
        } else if let Some(command) = line.strip_prefix('$').filter(|c| c.is_empty() || c.starts_with(' ')) {
            // `$` alone, or with a comment only: a prompt where nothing was printed.
            let command = command.trim();
            commands.push((if command.starts_with('#') { "" } else { command }.to_string(), Vec::new()));
        } else {
            let shown = line.find("  #").map_or(line, |at| &line[..at]);
            commands.last_mut().expect("output before the first command").1.push(shown.trim().to_string());
            continue;
        }
        continued = line.ends_with('\\');
    }
    commands
}

/// The line between two commands' output in a console block's run.
const SEPARATOR: &str = "@@ pgrun docs: next command @@";

/// Whether `got` is `want`, a digit run in `want` standing for any digit
/// run.
fn line_matches(want: &str, got: &str) -> bool {
    let (mut w, mut g) = (want.chars().peekable(), got.chars().peekable());
    loop {
        match (w.peek().copied(), g.peek().copied()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a.is_ascii_digit() && b.is_ascii_digit() => {
                while w.next_if(char::is_ascii_digit).is_some() {}
                while g.next_if(char::is_ascii_digit).is_some() {}
            }
            (Some(a), Some(b)) if a == b => {
                w.next();
                g.next();
            }
            _ => return false,
        }
    }
}

/// Whether `got` is what `want` shows (`...`: any lines).
fn lines_match(want: &[String], got: &[String]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((first, rest)) if first == "..." => (0..=got.len()).any(|skip| lines_match(rest, &got[skip..])),
        Some((first, rest)) => {
            got.split_first().is_some_and(|(g, more)| line_matches(first, g) && lines_match(rest, more))
        }
    }
}

/// Run one block; `Err` says how it failed.
fn run_block(block: &Block) -> Result<(), String> {
    let setup = block.note.as_deref().and_then(|n| n.strip_prefix("test: setup ")).unwrap_or("");
    let shown = |out: &std::process::Output| {
        let cut = |b: &[u8]| String::from_utf8_lossy(&b[b.len().saturating_sub(3000)..]).into_owned();
        format!("exit {}\nstdout:\n{}\nstderr:\n{}", code_of(out.status), cut(&out.stdout), cut(&out.stderr))
    };
    match block.lang.as_str() {
        "sh" | "python" => {
            let interpreter = if block.lang == "sh" { "sh" } else { python3() };
            let out = in_sandbox(setup, &[interpreter, "-c", &block.text]);
            if out.status.success() { Ok(()) } else { Err(shown(&out)) }
        }
        "makefile" => {
            let out = in_sandbox(setup, &["sh", "-c", "printf '%s' \"$1\" > Makefile && make", "sh", &block.text]);
            if out.status.success() { Ok(()) } else { Err(shown(&out)) }
        }
        "console" => {
            let commands = console(&block.text);
            // Each command in a group of its own (a trailing comment cannot
            // swallow its end), with the status of the one before as `$?`.
            let mut script = String::from("status=0\n");
            for (command, _) in &commands {
                let command = if command.is_empty() { ":" } else { command };
                script.push_str(&format!(
                    "printf '\\n%s\\n' '{SEPARATOR}'; (exit $status); {{ {command}\n}} 2>&1; status=$?\n"
                ));
            }
            let out = in_sandbox(setup, &["bash", "-c", &script]);
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let between = format!("\n{SEPARATOR}\n");
            let mut chunks = stdout.split(&between).skip(1);
            for (command, want) in &commands {
                let chunk = chunks.next().unwrap_or_default();
                let got: Vec<String> =
                    chunk.strip_suffix('\n').unwrap_or(chunk).lines().map(|l| l.trim().to_string()).collect();
                let got = if got.last().is_some_and(String::is_empty) { &got[..got.len() - 1] } else { &got[..] };
                if !lines_match(want, got) {
                    return Err(format!(
                        "$ {command}\nshows:\n{}\nprints:\n{}\n{}",
                        want.join("\n"),
                        got.join("\n"),
                        shown(&out)
                    ));
                }
            }
            Ok(())
        }
        _ => unreachable!(),
    }
}

/// Run every block of `path` that runs; panic listing every one that fails.
fn snippets_run(path: &Path) {
    if !require(Capability::PidNamespaces) || !require(Capability::MountNamespaces) {
        return;
    }
    let mut failed = Vec::new();
    let mut ran = 0;
    for block in blocks(path) {
        assert!(!block.lang.is_empty(), "{}: a block without a language (sh, console, python, text, ...)", block.at);
        if SHOWN.contains(&block.lang.as_str()) {
            continue;
        }
        assert!(RUN.contains(&block.lang.as_str()), "{}: a block in {:?}, neither run nor shown", block.at, block.lang);
        if let Some(why) = block.note.as_deref().and_then(|n| n.strip_prefix("untested:")) {
            assert!(!why.trim().is_empty(), "{}: untested, but why?", block.at);
            continue;
        }
        if cfg!(feature = "posix-fallback") && block.note.as_deref().is_some_and(|n| n.starts_with("test: linux")) {
            continue;
        }
        ran += 1;
        if let Err(why) = run_block(&block) {
            failed.push(format!("{} ({}):\n{why}", block.at, block.lang));
        }
    }
    assert!(failed.is_empty(), "{} of {ran} snippets failed:\n\n{}", failed.len(), failed.join("\n\n"));
}

#[test]
fn readme_snippets_run_as_written() {
    snippets_run(&repo("README.md"));
}

#[test]
fn harness_guide_snippets_run_as_written() {
    snippets_run(&repo("docs/harness-guide.md"));
}

#[test]
fn recipes_snippets_run_as_written() {
    snippets_run(&repo("docs/recipes.md"));
}

#[test]
fn design_snippets_run_as_written() {
    snippets_run(&repo("docs/design.md"));
}

#[test]
fn every_doc_has_its_snippet_test_and_the_readme_stays_short() {
    let tested = ["design.md", "harness-guide.md", "recipes.md"];
    let names: Vec<String> = docs().iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, tested, "a file in docs/ without its test here (or a test without its file)");
    let lines = std::fs::read_to_string(repo("README.md")).unwrap().lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: at most 300, the rest goes to docs/");
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation
/// but `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn links_between_the_docs_lead_somewhere() {
    let mut files = vec![repo("README.md"), repo("bench/README.md")];
    files.extend(docs());
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (at, _) in text.match_indices("](") {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')').unwrap_or(0)];
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let linked = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            if !linked.exists() {
                broken.push(format!("{}: {target}: no such file", file.display()));
                continue;
            }
            if !fragment.is_empty() {
                let headings = std::fs::read_to_string(&linked).unwrap_or_default();
                let found = headings
                    .lines()
                    .filter_map(|l| l.strip_prefix('#'))
                    .any(|h| anchor(h.trim_start_matches('#')) == fragment);
                if !found {
                    broken.push(format!("{}: {target}: no heading #{fragment}", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_console_reader_reads_commands_output_and_wildcards() {
    let commands = console("$ echo 1 \\\n  2   # a comment\n1 2\n$          # nothing\n$ ps\n...\n");
    assert_eq!(commands.len(), 3);
    assert_eq!(commands[0], ("echo 1 \\\n  2   # a comment".to_string(), vec!["1 2".to_string()]));
    assert_eq!(commands[2], ("ps".to_string(), vec!["...".to_string()]));
    assert_eq!(commands[1], (String::new(), vec![]));
    assert!(line_matches("4242 sleep 300", "17 sleep 300") && !line_matches("4242 sleep 300", "x sleep 300"));
    let got = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(lines_match(&got(&["a", "...", "z"]), &got(&["a", "b", "c", "z"])));
    assert!(!lines_match(&got(&["a", "z"]), &got(&["a", "b", "z"])));
}
