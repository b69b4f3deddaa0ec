//! What `--max-output SIZE` makes of a stream: identical up to SIZE, head +
//! marker + tail beyond, cut on character boundaries (bytes that start no
//! character passed as they are), the head written as it comes, stdout and
//! stderr each with its own budget, bad sizes refused; and a long stream
//! relayed in bounded memory.

use super::{args, expected_text, lines, pgrun_output, with_marker};
use crate::util::*;
use std::fs;
use std::io::Read;
use std::process::Stdio;

/// A payload that writes FILE to stdout one byte per write(2) (dd's block
/// of one byte: a read and a write each; a tenth of python3's start-up).
fn byte_by_byte(file: &std::path::Path) -> Vec<String> {
    vec!["dd".into(), format!("if={}", file.display()), "bs=1".into(), "status=none".into()]
}

#[test]
fn exactly_size_is_identical_and_longer_streams_keep_head_marker_and_tail() {
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let size = 1200; // 100 lines of 12 bytes
    for (n, what) in [(100, "exactly SIZE"), (0, "SIZE+1"), (1000, "10xSIZE")] {
        let mut data = lines(n);
        if n == 0 {
            data = lines(100) + "x";
        }
        let file = scratch.path("data");
        fs::write(&file, &data).unwrap();
        let cat = vec!["cat".to_string(), file.to_str().unwrap().to_string()];
        let (stdout, stderr) = pgrun_output(&args(&size.to_string(), Some(&report), &cat));
        assert!(stderr.is_empty(), "{what}: stderr {}", String::from_utf8_lossy(&stderr));
        let want = expected_text(&data, size);
        assert_eq!(String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&want), "{what}");
        let r = json(&report);
        assert_eq!(r["output"]["stdout"]["bytes"], data.len(), "{what}");
        let omitted = data.len().saturating_sub(stdout.len()) as u64;
        let omitted = if data.len() > size { (data.len() - 2 * (size / 2)) as u64 } else { omitted };
        assert_eq!(r["output"]["stdout"]["omitted"], omitted, "{what}");
        assert_eq!(r["output"]["stderr"]["bytes"], 0);
        if data.len() > size {
            let text = String::from_utf8(stdout).unwrap();
            let last_line = &data[data[..data.len() - 1].rfind('\n').map_or(0, |i| i + 1)..];
            assert!(text.ends_with(last_line), "{what}: last line cut");
            assert!(text.contains(&format!("\n[pgrun: {omitted} bytes omitted]\n")));
        }
    }
    // Without the flag the report says nothing about output.
    let out = run(&mut pgrun(["--report", report.to_str().unwrap(), "--", "true"]));
    assert_status(&out, 0, "no flag");
    assert!(json(&report)["output"].is_null());
}

#[test]
fn multibyte_characters_across_either_cut_are_never_split() {
    let scratch = Scratch::new();
    let size = 40; // head and tail 20 bytes
    for ch in ['é', '€', '🦀'] {
        let w = ch.len_utf8();
        for at in 0..w {
            // The character starts `at` bytes before the head's end, and
            // another `at` bytes before the tail's nominal start.
            let head = format!("{}{ch}", "a".repeat(20 - at));
            let middle = "m".repeat(30);
            let tail = format!("{ch}{}\n", "z".repeat(19 + at - w));
            let data = format!("{head}{middle}{tail}");
            assert_eq!(data.len() - 20 - at, head.len() + middle.len(), "the tail's character is placed");
            let file = scratch.path("data");
            fs::write(&file, &data).unwrap();
            let (stdout, _) = pgrun_output(&args(&size.to_string(), None, &byte_by_byte(&file)));
            let want = expected_text(&data, size);
            assert_eq!(String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&want), "{ch} at {at}");
            assert!(std::str::from_utf8(&stdout).is_ok(), "{ch} at {at}: invalid UTF-8 out");
        }
    }
}

#[test]
fn bytes_that_start_no_character_pass_as_they_are_at_both_cuts() {
    let scratch = Scratch::new();
    let size = 40;
    let never: Vec<Vec<u8>> = vec![
        vec![0x01],
        vec![0x85],
        vec![0xC0],
        vec![0xC1],
        vec![0xF5],
        vec![0xFF],
        vec![0xE0, 0x80],
        vec![0xF0, 0x80],
        vec![0xED, 0xA0],
        vec![0xF4, 0x90],
    ];
    for bad in never {
        // At the end of the head: written as is, the head is 20 bytes.
        let mut data = vec![b'a'; 20 - bad.len()];
        data.extend_from_slice(&bad);
        data.extend(std::iter::repeat_n(b'm', 30));
        // At the start of the tail (a continuation byte there is skipped,
        // by the contract's tail rule; the others start the tail).
        let tail_start = data.len();
        data.extend_from_slice(&bad);
        data.extend(std::iter::repeat_n(b'z', 20 - bad.len()));
        let file = scratch.path("data");
        fs::write(&file, &data).unwrap();
        let (stdout, _) = pgrun_output(&args(&size.to_string(), None, &byte_by_byte(&file)));
        let skip = if bad[0] & 0xC0 == 0x80 { 1 } else { 0 };
        let want = with_marker(&data[..20], tail_start + skip - 20, &data[tail_start + skip..]);
        assert_eq!(stdout, want, "{bad:02X?}");
    }
    // A prefix that can still become a character, at the very end of a
    // stream, is written when the stream ends: short and long streams.
    for data in [b"ab\xF0\x9F\x98".to_vec(), [vec![b'x'; 100], b"\xE2\x82".to_vec()].concat()] {
        let file = scratch.path("data");
        fs::write(&file, &data).unwrap();
        let (stdout, _) = pgrun_output(&args(&size.to_string(), None, &byte_by_byte(&file)));
        assert!(stdout.ends_with(&data[data.len() - 2..]), "held prefix lost: {stdout:02X?}");
    }
}

#[test]
fn head_bytes_are_written_before_the_stream_ends_invalid_ones_included() {
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let mut guard = Guard::new();
    // The head ends in FF, which starts nothing: it must come out while
    // the command still runs (it waits for the test's go file).
    let payload = format!("printf 'abcdefghi\\377'; while [ ! -e {dir}/go ]; do sleep 0.01; done; printf 'later'");
    let index = guard.spawn(pgrun(["--max-output", "20", "--", "sh", "-c", &payload]).stdout(Stdio::piped()));
    let mut stdout = guard.child(index).stdout.take().unwrap();
    let mut got = vec![0u8; 10];
    stdout.read_exact(&mut got).unwrap();
    assert_eq!(got, b"abcdefghi\xFF");
    fs::write(scratch.path("go"), "").unwrap();
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"later");
    assert_eq!(guard.wait(index), 0);
}

#[test]
fn stdout_and_stderr_have_their_own_budgets() {
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let payload = "i=0; while [ $i -lt 200 ]; do i=$((i+1)); echo \"out $i\"; echo \"err $i\" >&2; done";
    let (stdout, stderr) = pgrun_output(&args("100", Some(&report), &["sh".into(), "-c".into(), payload.into()]));
    let all_out: String = (1..=200).map(|i| format!("out {i}\n")).collect();
    let all_err: String = (1..=200).map(|i| format!("err {i}\n")).collect();
    assert_eq!(String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&expected_text(&all_out, 100)));
    assert_eq!(String::from_utf8_lossy(&stderr), String::from_utf8_lossy(&expected_text(&all_err, 100)));
    let r = json(&report);
    assert_eq!(r["output"]["stdout"]["bytes"], all_out.len());
    assert_eq!(r["output"]["stderr"]["bytes"], all_err.len());
}

#[test]
fn size_zero_and_bad_sizes_are_usage_errors() {
    for bad in ["0", "1kb", "1.5M", "-1", "M"] {
        let scratch = Scratch::new();
        let marker = scratch.path("ran");
        let out = run(&mut pgrun(["--max-output", bad, "--", "touch", marker.to_str().unwrap()]));
        assert_status(&out, 125, bad);
        assert!(!marker.exists(), "{bad}: the command ran");
        assert!(stderr_of(&out).starts_with("pgrun: "));
    }
}

/// Run pgrun with `args`, stdout read into memory (handed to `take`), and
/// return its peak resident memory (VmHWM: this process alone, reset at
/// exec), read while pgrun waits at its test-only pause right before it
/// exits, after everything is written.
fn peak_memory_at_exit(scratch: &Scratch, guard: &mut Guard, args: &[&str], take: impl FnOnce(Vec<u8>)) -> u64 {
    let at_exit = Pause::new(scratch, "exit");
    let _ = fs::remove_file(scratch.path("gate-exit"));
    let _ = fs::remove_file(scratch.path("gate-exit.reached"));
    let index = guard.spawn(at_exit.arm(&mut pgrun(args)).stdout(Stdio::piped()).stderr(Stdio::null()));
    let pid = guard.child(index).id() as i32;
    let mut stdout = guard.child(index).stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        stdout.read_to_end(&mut all).unwrap();
        all
    });
    at_exit.wait_reached();
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    at_exit.release();
    assert_eq!(guard.wait(index), 0, "pgrun {args:?}");
    take(reader.join().unwrap());
    hwm_kib * 1024
}

#[test]
fn a_long_stream_passes_in_bounded_memory() {
    // 64 MiB: 32 times the bound below (a gigabyte proved no more and cost
    // 1.5 s of CPU); pgrun's own buffers (one 256 KiB read, the ring) are
    // far smaller, and kept everything would be far larger.
    const STREAM: u64 = 64 << 20;
    const SIZE: u64 = 1 << 20;
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let payload = format!("yes 'the quick brown fox jumps over the lazy dog' | head -c {STREAM}");
    // The same binary relaying nothing: what pgrun itself takes (a debug
    // build maps several MiB of code), so that the bound is on what the
    // stream adds.
    let baseline = peak_memory_at_exit(&scratch, &mut guard, &["--", "true"], |_| {});
    let mut out = Vec::new();
    let peak =
        peak_memory_at_exit(&scratch, &mut guard, &["--max-output", "1M", "--", "sh", "-c", &payload], |stdout| {
            out = stdout
        });
    assert!(
        peak < baseline + SIZE + (1 << 20),
        "peak RSS {peak} bytes, {} over pgrun's own {baseline}: more than SIZE + 1 MiB",
        peak - baseline
    );
    assert!(peak < SIZE + 8 * (1 << 20), "peak RSS {peak} bytes");
    let text = String::from_utf8(out).unwrap();
    let line = "the quick brown fox jumps over the lazy dog\n";
    // 64 MiB is not a whole number of lines: the stream ends mid-line.
    let (head, tail) = text.split_once("[pgrun: ").unwrap();
    assert_eq!(head.len(), (SIZE / 2) as usize + 1, "head plus the added newline");
    assert!(line.repeat(20000).starts_with(&head[..head.len() - 1]));
    let (count, tail) = tail.split_once(" bytes omitted]\n").unwrap();
    assert_eq!(count.parse::<u64>().unwrap(), STREAM - SIZE);
    assert_eq!(tail.len(), (SIZE / 2) as usize);
    let cut = STREAM as usize % line.len();
    assert!(tail.ends_with(&line[..cut]), "last (partial) line intact");
}
