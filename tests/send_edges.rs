//! `pgrun send` at the edges a strange caller finds: a `--file` that
//! cannot be read is named in the one error line.

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
