//! The man pages, completions and help: generated from the flags, current,
//! and loadable.

use crate::util::*;
use std::path::Path;
use std::process::Command;

const ARTIFACTS: [(&str, &str); 12] = [
    ("man", "man/pgrun.1"),
    ("man-cancel", "man/pgrun-cancel.1"),
    ("man-status", "man/pgrun-status.1"),
    ("man-wait", "man/pgrun-wait.1"),
    ("man-output", "man/pgrun-output.1"),
    ("man-ls", "man/pgrun-ls.1"),
    ("man-send", "man/pgrun-send.1"),
    ("bash", "completions/pgrun.bash"),
    ("zsh", "completions/_pgrun"),
    ("fish", "completions/pgrun.fish"),
    ("elvish", "completions/pgrun.elv"),
    ("powershell", "completions/_pgrun.ps1"),
];

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

#[test]
fn committed_man_pages_and_completions_are_current() {
    for (what, path) in ARTIFACTS {
        let out = run(&mut pgrun(["--generate", what]));
        assert_status(&out, 0, what);
        let committed = std::fs::read(repo(path)).unwrap_or_default();
        assert!(
            committed == out.stdout,
            "{path} is stale: run scripts/regenerate-docs to regenerate it, and commit it"
        );
    }
}

/// The block of `file` between `<!-- NAME: ... -->` and `<!-- end NAME
/// -->` is what `pgrun --generate WHAT` prints.
fn assert_block_current(file: &str, name: &str, what: &str) {
    let out = run(&mut pgrun(["--generate", what]));
    assert_status(&out, 0, what);
    let text = std::fs::read_to_string(repo(file)).unwrap();
    let start = text.find(&format!("<!-- {name}:")).unwrap_or_else(|| panic!("{file} has no {name} marker"));
    let body_start = start + text[start..].find('\n').unwrap() + 1;
    let end = text.find(&format!("<!-- end {name} -->")).unwrap_or_else(|| panic!("{file} has no end {name} marker"));
    assert!(
        &text.as_bytes()[body_start..end] == out.stdout.as_slice(),
        "{file}'s {name} is stale: run scripts/regenerate-docs, and commit it"
    );
}

#[test]
fn readme_exit_status_tables_are_current() {
    assert_block_current("README.md", "exit-status", "readme-exit-status");
}

#[test]
fn design_signal_table_is_current() {
    assert_block_current("docs/design.md", "signals", "design-signals");
}

#[test]
fn bash_completion_registers_and_completes_subcommands_and_signals() {
    let script = format!(
        "source {}; complete -p pgrun; \
         COMP_WORDS=(pgrun -s T); COMP_CWORD=2; _pgrun pgrun T -s; echo \"sig: ${{COMPREPLY[*]}}\"; \
         COMP_WORDS=(pgrun ca); COMP_CWORD=1; _pgrun pgrun ca pgrun; echo \"sub: ${{COMPREPLY[*]}}\"",
        repo("completions/pgrun.bash").display()
    );
    let out = run(Command::new("bash").args(["-c", &script]));
    assert_status(&out, 0, "bash");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("-F _pgrun pgrun"), "{text}");
    assert!(text.contains("sig: TERM\n"), "{text}");
    // The first word may be a mode or COMMAND's name: both are offered.
    assert!(text.lines().any(|l| l.starts_with("sub: ") && l.split(' ').any(|w| w == "cancel")), "{text}");
}

/// What bash offers for `line` (the word being completed last; an empty
/// last word for a line that ends in a space), with pgrun's completion
/// loaded and nothing else (no bash-completion package: its
/// `_command_offset`, where loaded, completes COMMAND's arguments too).
fn bash_offers(line: &str) -> Vec<String> {
    let script = format!(
        "source {}; read -ra COMP_WORDS <<< \"$LINE\"; [[ $LINE == *' ' ]] && COMP_WORDS+=(''); \
         COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); \
         _pgrun pgrun \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        repo("completions/pgrun.bash").display()
    );
    let out = run(Command::new("bash").args(["-c", &script]).env("LINE", line));
    assert_status(&out, 0, line);
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn bash_completes_the_command_after_pgruns_options() {
    let has = |line: &str, word: &str| bash_offers(line).iter().any(|w| w == word);
    // COMMAND's name: after `--`, or where it may stand.
    assert!(has("pgrun -- sle", "sleep"), "{:?}", bash_offers("pgrun -- sle"));
    assert!(has("pgrun -t 5 -s INT sle", "sleep"), "{:?}", bash_offers("pgrun -t 5 -s INT sle"));
    // COMMAND's own arguments are not pgrun's options.
    assert!(!has("pgrun -- ls --ti", "--timeout"), "{:?}", bash_offers("pgrun -- ls --ti"));
    assert!(!has("pgrun -t 5 ls --ti", "--timeout"));
    // pgrun's own words as before: options, values, subcommands.
    assert!(has("pgrun --ti", "--timeout"));
    assert!(has("pgrun --contain ", "cgroup"), "{:?}", bash_offers("pgrun --contain "));
    assert!(!has("pgrun --contain ", "sleep"));
    assert!(has("pgrun ca", "cancel"));
    assert!(has("pgrun cancel --wa", "--wait-start"));
    assert!(!has("pgrun cancel sle", "sleep"));
    // With bash-completion loaded (Debian's bash-completion package, which
    // .ci/packaging installs), COMMAND's arguments get its own completion.
    let loader = "/usr/share/bash-completion/bash_completion";
    if Path::new(loader).exists() {
        let script = format!(
            "source {loader}; source {}; COMP_WORDS=(pgrun -t 5 -- ls --al); COMP_CWORD=5; \
             COMP_LINE='pgrun -t 5 -- ls --al'; COMP_POINT=${{#COMP_LINE}}; _pgrun pgrun --al ls 2>/dev/null; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            repo("completions/pgrun.bash").display()
        );
        let out = run(Command::new("bash").args(["-c", &script]));
        assert!(String::from_utf8_lossy(&out.stdout).lines().any(|l| l == "--all"), "{out:?}");
    }
}

/// What fish offers for `line`, with pgrun's completion loaded.
fn fish_offers(line: &str) -> Vec<String> {
    let script = format!("source {}; complete -C $argv[1]", repo("completions/pgrun.fish").display());
    let out = run(Command::new("fish").args(["--no-config", "-c", &script, line]));
    assert_status(&out, 0, line);
    // "WORD\tdescription" per line.
    String::from_utf8(out.stdout).unwrap().lines().map(|l| l.split('\t').next().unwrap().to_string()).collect()
}

#[test]
fn fish_completes_contain_modes_and_the_command() {
    if !Command::new("fish").arg("--version").output().is_ok_and(|o| o.status.success()) {
        // .ci/run installs fish; a developer without it skips this.
        eprintln!("skipped: no fish here; CI installs it");
        return;
    }
    let has = |line: &str, word: &str| fish_offers(line).iter().any(|w| w == word);
    for mode in ["group", "tree", "cgroup", "auto"] {
        assert!(has("pgrun --contain ", mode), "{:?}", fish_offers("pgrun --contain "));
    }
    assert!(has("pgrun -s ", "TERM"), "{:?}", fish_offers("pgrun -s "));
    assert!(has("pgrun -- sle", "sleep"), "{:?}", fish_offers("pgrun -- sle"));
    assert!(has("pgrun -t 5 sle", "sleep"), "{:?}", fish_offers("pgrun -t 5 sle"));
    assert!(!has("pgrun -- ls --ti", "--timeout"), "{:?}", fish_offers("pgrun -- ls --ti"));
    assert!(has("pgrun --ti", "--timeout"));
    assert!(has("pgrun ca", "cancel"));
    assert!(has("pgrun cancel --wa", "--wait-start"));
    assert!(!has("pgrun cancel sle", "sleep"));
}

#[test]
fn zsh_and_fish_completions_load() {
    // .ci/run installs both shells; a developer without them skips this.
    let zsh = Command::new("zsh").arg("--version").output().is_ok_and(|o| o.status.success());
    if zsh {
        let script = format!(
            "fpath=({} $fpath); autoload -U compinit; compinit -u -D; whence -v _pgrun >/dev/null && echo ok",
            repo("completions").display()
        );
        let out = run(Command::new("zsh").args(["-f", "-c", &script]));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n", "zsh: {}", stderr_of(&out));
    }
    let fish = Command::new("fish").arg("--version").output().is_ok_and(|o| o.status.success());
    if fish {
        let script = format!("source {}; complete -C 'pgrun --sig'", repo("completions/pgrun.fish").display());
        let out = run(Command::new("fish").args(["--no-config", "-c", &script]));
        assert!(String::from_utf8_lossy(&out.stdout).contains("--signal"), "fish: {}", stderr_of(&out));
    }
    if !zsh || !fish {
        eprintln!("zsh present: {zsh}, fish present: {fish}; CI installs both");
    }
}

#[test]
fn long_help_answers_the_2am_questions_and_short_help_stays_short() {
    let long = String::from_utf8(run(&mut pgrun(["--help"])).stdout).unwrap();
    for needle in [
        "ESRCH",
        "Stop sequence:",
        "Signals sent to pgrun:",
        "Exit status:",
        "124",
        "Pid file:",
        "F_SETLK",
        "Cancel marker:",
        "Cancel and status:",
        "Report:",
        "stragglers",
        "Terminal:",
        "Examples:",
        "subprocess.run",
        "ENTRYPOINT",
        "[default: TERM]",
        "[default: 10s]",
        "[default: PIDFILE.cancel]",
    ] {
        assert!(long.contains(needle), "--help lacks {needle:?}");
    }
    let short = String::from_utf8(run(&mut pgrun(["-h"])).stdout).unwrap();
    // One line per option and per mode, and no more.
    assert!(short.lines().count() < 42 && !short.contains("Examples:"), "-h is not short:\n{short}");
    for sub in ["cancel", "status", "wait", "output", "ls", "send"] {
        let help = String::from_utf8(run(&mut pgrun([sub, "--help"])).stdout).unwrap();
        assert!(help.contains("Exit status:"), "{sub} --help lacks its exit statuses");
    }
}

#[test]
fn contain_is_described_once_in_help_and_man_page() {
    let long = String::from_utf8(run(&mut pgrun(["--help"])).stdout).unwrap();
    let man = String::from_utf8(run(&mut pgrun(["--generate", "man"])).stdout).unwrap();
    for (what, text) in [("--help", &long), ("man page", &man)] {
        let times = text.matches("What is stopped and waited for").count();
        assert_eq!(times, 1, "{what} describes --contain {times} times");
    }
    let short = String::from_utf8(run(&mut pgrun(["-h"])).stdout).unwrap();
    assert!(short.contains("What is stopped: group, tree, cgroup or auto"), "{short}");
}

#[test]
fn generate_is_documented_and_a_bad_value_lists_the_valid_ones() {
    let long = String::from_utf8(run(&mut pgrun(["--help"])).stdout).unwrap();
    assert!(long.contains("--generate <WHAT>") && long.contains("Man pages and shell completions:"), "{long}");
    let man = String::from_utf8(run(&mut pgrun(["--generate", "man"])).stdout).unwrap();
    assert!(man.contains("\\-\\-generate") && man.contains("MAN PAGES AND SHELL COMPLETIONS"), "man page");
    let out = run(&mut pgrun(["--generate", "mann"]));
    assert_status(&out, 125, "--generate mann");
    let first = stderr_of(&out).lines().next().unwrap_or_default().to_string();
    assert_eq!(
        first,
        "pgrun: invalid value 'mann' for '--generate <WHAT>' (valid values: man, man-cancel, man-status, \
         man-wait, man-output, man-ls, man-send, bash, zsh, fish, elvish, powershell)"
    );
}

/// scripts/install puts the zsh completion where zsh looks: for PREFIX=/usr
/// Debian's vendor-completions (as the .deb does), else PREFIX's
/// site-functions; every file with the binary's own content.
#[test]
fn scripts_install_puts_the_zsh_completion_where_zsh_looks() {
    for (prefix, zsh_dir, not) in [
        ("/usr", "share/zsh/vendor-completions", "share/zsh/site-functions"),
        ("/usr/local", "share/zsh/site-functions", "share/zsh/vendor-completions"),
    ] {
        let scratch = Scratch::new();
        let out = run(Command::new(repo("scripts/install"))
            .env("PGRUN_BIN", pgrun_path())
            .env("DESTDIR", scratch.dir())
            .env("PREFIX", prefix));
        assert_status(&out, 0, &format!("scripts/install, PREFIX={prefix}"));
        let root = scratch.dir().join(prefix.trim_start_matches('/'));
        let zsh = std::fs::read(root.join(zsh_dir).join("_pgrun")).unwrap_or_default();
        assert!(zsh == std::fs::read(repo("completions/_pgrun")).unwrap(), "PREFIX={prefix}: no {zsh_dir}/_pgrun");
        assert!(!root.join(not).exists(), "PREFIX={prefix}: {not} was made");
        for file in ["bin/pgrun", "share/man/man1/pgrun.1", "share/bash-completion/completions/pgrun"] {
            assert!(root.join(file).is_file(), "PREFIX={prefix}: no {file}");
        }
    }
}
