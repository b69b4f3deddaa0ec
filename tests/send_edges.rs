//! `pgrun send` at the edges a strange caller finds: a `--file` that
//! cannot be read is named in the one error line, and a run whose command
//! is over (marked over, not yet withdrawn) is no live run (1), not a
//! command that stopped reading (125).

use crate::util::*;
use std::fs;

#[test]
fn a_file_that_cannot_be_read_is_named() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    start_published(&mut guard, &pidfile, &["--stdin-pipe"], "exec sleep 300");
    let folder = scratch.path("a-folder");
    fs::create_dir(&folder).unwrap();
    let out = run(pgrun(["send", "--file"]).arg(&folder).arg(&pidfile));
    assert_status(&out, 125, "send --file FOLDER");
    let err = stderr_of(&out);
    assert!(err.contains(&format!("--file {}", folder.display())), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_run_over_but_not_yet_withdrawn_is_no_live_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let p = pidfile.to_str().unwrap();
    let handled = Pause::new(&scratch, "marker-handled");
    let index = guard.spawn(handled.arm(&mut pgrun(["-p", p, "--stdin-pipe", "--", "true"])));
    handled.wait_reached();
    let out = run(&mut pgrun(["send", p, "x"]));
    let eof = run(&mut pgrun(["send", "--eof", "--timeout", "10", p]));
    handled.release();
    assert_eq!(guard.wait(index), 0, "the run ended on its own");
    assert_status(&out, 1, "send to a run that is over");
    assert!(stderr_of(&out).contains("no live run at"), "{}", stderr_of(&out));
    assert_status(&eof, 1, "send --eof to a run that is over");
}
