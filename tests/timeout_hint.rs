//! `pgrun 30 make test`: a first word that is a duration and names no
//! command is still 127, with a hint that says how to write the timeout;
//! never otherwise.

use crate::util::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;

#[test]
fn a_duration_that_names_no_command_gets_the_hint() {
    for (word, rest, shown) in [
        ("30", vec!["make", "test"], "pgrun --timeout 30 -- make test"),
        ("1.5", vec!["sh", "-c", "echo it's here"], "pgrun --timeout 1.5 -- sh -c 'echo it'\\''s here'"),
        ("250ms", vec!["sleep", "1"], "pgrun --timeout 250ms -- sleep 1"),
        // `timeout`'s own end of options, where the hint puts its `--`.
        ("30", vec!["--", "true"], "pgrun --timeout 30 -- true"),
    ] {
        let mut args = vec![word];
        args.extend(&rest);
        let out = run(&mut pgrun(&args));
        assert_status(&out, 127, word);
        let err = stderr_of(&out);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{word}: {err}");
        assert!(lines[0].starts_with(&format!("pgrun: cannot run '{word}'")), "{word}: {err}");
        assert_eq!(lines[1], format!("pgrun: for a timeout, write: {shown}"), "{word}");
    }
}

#[test]
fn no_hint_for_a_program_or_a_word_that_is_no_duration() {
    let scratch = Scratch::new();
    let script = scratch.path("30");
    fs::write(&script, "#!/bin/sh\nexit 7\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    // ./30 exists: it runs.
    let out = run(pgrun(["./30", "x"]).current_dir(scratch.dir()));
    assert_status(&out, 7, "./30");
    assert_eq!(stderr_of(&out), "");
    // 30 found in PATH: it runs.
    let path = format!("{}:{}", scratch.sh(), std::env::var("PATH").unwrap_or_default());
    let out = run(pgrun(["30", "x"]).env("PATH", path));
    assert_status(&out, 7, "30 in PATH");
    assert_eq!(stderr_of(&out), "");
    // Not a duration: the plain error only.
    for word in ["foo", "./31", "30x"] {
        let out = run(pgrun([word, "make"]).current_dir(scratch.dir()));
        assert_status(&out, 127, word);
        assert_eq!(stderr_of(&out).lines().count(), 1, "{word}: {}", stderr_of(&out));
        assert!(!stderr_of(&out).contains("--timeout"), "{word}: {}", stderr_of(&out));
    }
}
