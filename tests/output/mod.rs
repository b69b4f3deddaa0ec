//! `--max-output SIZE`: byte-identical short streams, head + marker + tail
//! for long ones, cuts on character boundaries, bounded memory, nothing read
//! ever lost, and a caller never held up by a process outside the run.
//! By topic: `cuts` (what a stream becomes, its memory), `lossless`
//! (nothing read lost, however the run ends), `readers` (readers that
//! leave, an escaped holder of the pipe, what passes through untouched),
//! `stalls` (a reader or terminal that takes nothing, and pgrun's
//! wake-ups) and `errors` (a failed read or last write said and reported).
//! Neighbours: `output_file`, `output_shared`, `output_splice`,
//! `output_window`.

mod cuts;
mod errors;
mod lossless;
mod readers;
mod stalls;

use crate::util::*;
use std::process::{Command, Stdio};

/// What the contract says a stream becomes, for valid UTF-8 input: the head
/// is the longest whole-character prefix of SIZE/2 bytes, the tail starts at
/// the first character boundary of the last SIZE/2 bytes.
pub(super) fn expected_text(data: &str, size: usize) -> Vec<u8> {
    if data.len() <= size {
        return data.as_bytes().to_vec();
    }
    let half = size / 2;
    let head = (0..=half).rev().find(|&i| data.is_char_boundary(i)).unwrap();
    let tail = (data.len() - half..=data.len()).find(|&i| data.is_char_boundary(i)).unwrap();
    with_marker(&data.as_bytes()[..head], tail - head, &data.as_bytes()[tail..])
}

pub(super) fn with_marker(head: &[u8], omitted: usize, tail: &[u8]) -> Vec<u8> {
    let mut out = head.to_vec();
    if !head.is_empty() && !head.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(format!("[pgrun: {omitted} bytes omitted]\n").as_bytes());
    out.extend_from_slice(tail);
    out
}

pub(super) fn pgrun_output(args: &[String]) -> (Vec<u8>, Vec<u8>) {
    let out = run(&mut pgrun(args));
    assert_status(&out, 0, &format!("{args:?}"));
    (out.stdout, out.stderr)
}

pub(super) fn args(size: &str, report: Option<&std::path::Path>, command: &[String]) -> Vec<String> {
    let mut a = vec!["--max-output".to_string(), size.to_string()];
    if let Some(r) = report {
        a.extend(["--report".to_string(), r.to_str().unwrap().to_string()]);
    }
    a.push("--".into());
    a.extend_from_slice(command);
    a
}

pub(super) fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i:06}\n")).collect()
}

/// strace, for the tests that inject syscall failures; a clear failure if
/// the machine lacks it.
pub(super) fn require_strace() {
    let ok = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(ok.is_ok_and(|s| s.success()), "this test needs strace (6.1 or later) to inject a syscall failure");
}
