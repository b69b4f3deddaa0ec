//! The relay's kernel paths (on Linux: `splice(2)` of the bytes nobody
//! needs to look at, `tee(2)` with `--output-file`) give exactly the bytes
//! its reads and writes give: a head that crosses from spliced bytes to
//! read ones near its cut is cut as ever, a reader that leaves while bytes
//! are spliced stops only its stream, and a kernel that refuses a splice or
//! a tee loses nothing. Under `posix-fallback` the same streams go through
//! reads and writes, and the same outputs are checked.

use crate::util::*;
use std::fs;
use std::process::{Command, Stdio};

/// `src/output/limit.rs`'s `PASS_MARGIN`: the head is spliced up to this
/// many bytes before SIZE/2, and read from there on.
const MARGIN: usize = 16;

/// What the contract says a valid UTF-8 stream becomes under SIZE `size`.
fn expected(data: &str, size: usize) -> Vec<u8> {
    if data.len() <= size {
        return data.as_bytes().to_vec();
    }
    let half = size / 2;
    let head = (0..=half).rev().find(|&i| data.is_char_boundary(i)).unwrap();
    let tail = (data.len() - half..=data.len()).find(|&i| data.is_char_boundary(i)).unwrap();
    let mut out = data.as_bytes()[..head].to_vec();
    if head > 0 && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(format!("[pgrun: {} bytes omitted]\n", tail - head).as_bytes());
    out.extend_from_slice(&data.as_bytes()[tail..]);
    out
}

/// A payload that writes FILE to stdout `piece` bytes per write(2).
fn in_pieces(file: &std::path::Path, piece: usize) -> Vec<String> {
    let input = format!("if={}", file.display());
    ["dd", &input, &format!("bs={piece}"), "status=none"].map(String::from).to_vec()
}

#[test]
fn a_head_that_crosses_from_spliced_bytes_to_read_ones_is_cut_as_ever() {
    // SIZE 1000: the head (500 bytes) is spliced up to 484 and read after.
    // A character starts anywhere from a few bytes before 484 to the cut,
    // in a stream longer than SIZE (cut) and one shorter (whole); written
    // at once (cat) and in pieces that do not line up with 484 or 500.
    let scratch = Scratch::new();
    let size = 1000;
    let pass_end = size / 2 - MARGIN;
    let file = scratch.path("data");
    let starts = (pass_end - 4..=pass_end + 3).chain(size / 2 - 3..=size / 2);
    for (i, start) in starts.enumerate() {
        for ch in ['é', '€', '🦀'] {
            let long = format!("{}{ch}{}\n", "a".repeat(start), "m".repeat(1500));
            let short = format!("{}{ch}\nend\n", "a".repeat(start));
            for data in [long, short] {
                fs::write(&file, &data).unwrap();
                let want = expected(&data, size);
                let writer = match i % 2 {
                    0 => vec!["cat".to_string(), file.to_str().unwrap().to_string()],
                    _ => in_pieces(&file, 7),
                };
                {
                    let out = run(pgrun(["--max-output", &size.to_string(), "--"]).args(&writer));
                    assert_status(&out, 0, "pgrun");
                    assert!(
                        out.stdout == want,
                        "{ch} at {start}, {} bytes, {writer:?}:\n{}\nwant\n{}",
                        data.len(),
                        String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(600)]),
                        String::from_utf8_lossy(&want[..want.len().min(600)])
                    );
                }
            }
        }
    }
}

fn require_strace() {
    let ok = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(ok.is_ok_and(|s| s.success()), "this test needs strace (6.1 or later) to trace or inject syscalls");
}

/// The sum of what pgrun's own (not its children's) successful `syscall`s
/// returned, and how many there were, running `pgrun ARGS` with stdout a
/// pipe; and pgrun's stdout.
fn traced(syscall: &str, args: &[&str]) -> (u64, usize, Vec<u8>) {
    let scratch = Scratch::new();
    let trace = scratch.path("trace");
    let out = run(Command::new("strace")
        .args(["-qq", "-e", &format!("trace={syscall}"), "-o", trace.to_str().unwrap(), pgrun_path()])
        .args(args)
        .stdin(Stdio::null()));
    assert_status(&out, 0, "traced pgrun");
    let text = fs::read_to_string(&trace).unwrap();
    let returns: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{syscall}(")))
        .filter_map(|l| l.rsplit(" = ").next()?.trim().parse().ok())
        .collect();
    (returns.iter().sum(), returns.len(), out.stdout)
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path reads and writes")]
fn the_head_is_spliced_up_to_the_margin_before_its_cut_and_read_from_there() {
    require_strace();
    let data = "a".repeat(3000);
    let (spliced, calls, stdout) =
        traced("splice", &["--max-output", "1000", "--", python3(), "-c", &format!("print('{data}', end='')")]);
    assert_eq!(spliced, 500 - MARGIN as u64, "{calls} splices");
    assert_eq!(stdout, expected(&data, 1000));
    // A whole stream, and a head it fits in: spliced throughout.
    let (spliced, _, stdout) =
        traced("splice", &["--max-output", "1M", "--", python3(), "-c", &format!("print('{data}', end='')")]);
    assert_eq!((spliced, stdout.len()), (3000, 3000));
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path reads and writes")]
fn with_an_output_file_the_bytes_are_teed_on_and_spliced_into_the_file() {
    require_strace();
    let scratch = Scratch::new();
    let file = scratch.path("out.log");
    let f = file.to_str().unwrap();
    let data = "b".repeat(5000);
    let print = format!("print('{data}', end='')");
    let (teed, calls, stdout) = traced("tee", &["--output-file", f, "--", python3(), "-c", &print]);
    assert_eq!(teed, 5000, "{calls} tees");
    assert_eq!(stdout, data.as_bytes());
    assert_eq!(fs::read(&file).unwrap(), data.as_bytes());
    // Under a SIZE: tee'd up to the margin before the cut only.
    let (teed, _, stdout) = traced("tee", &["--output-file", f, "--max-output", "1000", "--", python3(), "-c", &print]);
    assert_eq!(teed, 500 - MARGIN as u64);
    assert_eq!(stdout, expected(&data, 1000));
    assert_eq!(fs::read(&file).unwrap(), data.as_bytes());
}

#[test]
fn a_reader_that_leaves_while_bytes_are_spliced_stops_the_relay_not_the_run() {
    // `yes` through a head of 1G (spliced), a whole stream, and either
    // with an output file (tee'd): `head -c 10` leaves, yes gets SIGPIPE
    // (141) as without pgrun, stderr is still relayed, the run goes on; the
    // file has every byte pgrun took from stdout, as many as the report
    // says, then stderr's line.
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    let file = scratch.path("out.log");
    let f = file.to_str().unwrap();
    let cases: [&[&str]; 4] = [
        &["--max-output", "2G"],
        &["--idle-timeout", "1h"],
        &["--max-output", "2G", "--output-file", f],
        &["--output-file", f],
    ];
    for case in cases {
        let _ = fs::remove_file(&file);
        let script = format!(
            "{} {} --report {} -- sh -c 'yes; echo $? > {dir}/status; echo after >&2' | head -c 10 >/dev/null",
            pgrun_path(),
            case.join(" "),
            report.display()
        );
        let out = run(Command::new("sh").args(["-c", &script]).stdin(Stdio::null()));
        assert_status(&out, 0, "pipeline");
        assert_eq!(fs::read_to_string(scratch.path("status")).unwrap(), "141\n", "{case:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "after\n", "{case:?}");
        let r = json(&report);
        assert_eq!(r["exit_code"], 0, "{case:?}");
        let bytes = r["output"]["stdout"]["bytes"].as_u64().unwrap();
        assert!(bytes >= 10, "{case:?}: {r}");
        if case.contains(&f) {
            let copied = fs::read(&file).unwrap();
            let stdout = copied.strip_suffix(b"after\n").expect("stderr's line last in the file");
            assert_eq!(stdout.len() as u64, bytes, "{case:?}: the file has every byte read");
            assert!(stdout.chunks(2).all(|c| c == b"y\n" || c == b"y"), "{case:?}");
        }
    }
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path never splices")]
fn a_splice_or_tee_the_kernel_refuses_falls_back_to_reads_and_loses_nothing() {
    // EINVAL on pgrun's first splice (or tee): it reads and writes from
    // then on, and every byte arrives as it would have.
    require_strace();
    let scratch = Scratch::new();
    let file = scratch.path("out.log");
    let f = file.to_str().unwrap();
    let data: String = "0123456789€\n".repeat(400);
    let print = format!("import sys; sys.stdout.write({data:?}); sys.stdout.flush()");
    let cases: [(&str, &[&str], usize); 3] = [
        ("splice", &["--max-output", "1000"], 1000),
        ("splice", &["--idle-timeout", "1h"], usize::MAX),
        ("tee", &["--output-file", f, "--max-output", "2000"], 2000),
    ];
    for (syscall, args, size) in cases {
        let _ = fs::remove_file(&file);
        let out = run(Command::new("strace")
            .args(["-qq", "-o", "/dev/null", "-e", &format!("trace={syscall}")])
            .args(["-e", &format!("inject={syscall}:error=EINVAL:when=1"), pgrun_path()])
            .args(args)
            .args(["--", python3(), "-c", &print])
            .stdin(Stdio::null()));
        assert_status(&out, 0, &format!("{syscall} {args:?}: {}", stderr_of(&out)));
        assert!(out.stdout == expected(&data, size), "{syscall} {args:?}: {}", String::from_utf8_lossy(&out.stdout));
        assert_eq!(stderr_of(&out), "", "{syscall} {args:?}");
        if args.contains(&f) {
            assert!(fs::read(&file).unwrap() == data.as_bytes(), "{syscall} {args:?}: the file");
        }
    }
}

#[test]
fn a_head_spliced_into_a_regular_file_or_appended_to_one_is_cut_as_ever() {
    // stdout a regular file: spliced at its offset as a write would put
    // the bytes; opened for appending (`>>`, which splice refuses): read
    // and written. Either way the file gets what a pipe would.
    let scratch = Scratch::new();
    let size = 1000;
    // "€" across the end of the spliced part (484), "🦀" across the cut (500).
    let data = format!("{}€{}🦀{}\n", "a".repeat(size / 2 - MARGIN - 1), "b".repeat(MARGIN - 4), "m".repeat(1500));
    let input = scratch.path("data");
    fs::write(&input, &data).unwrap();
    let stdout = scratch.path("stdout");
    for (redirect, before) in [(">", ""), (">>", "already here\n")] {
        fs::write(&stdout, before).unwrap();
        let script = format!("exec \"$@\" {redirect} {}", stdout.display());
        let out = run(Command::new("sh")
            .args(["-c", &script, "sh", pgrun_path(), "--max-output", &size.to_string(), "--", "cat"])
            .arg(&input)
            .stdin(Stdio::null()));
        assert_status(&out, 0, redirect);
        let mut want = before.as_bytes().to_vec();
        want.extend_from_slice(&expected(&data, size));
        assert!(
            fs::read(&stdout).unwrap() == want,
            "{redirect}: {}",
            String::from_utf8_lossy(&fs::read(&stdout).unwrap())
        );
    }
}
