//! stdout and stderr sharing a destination (`2>&1`, the output file)
//! through the relay: a write of at most `PIPE_BUF` bytes by the command
//! arrives whole, as on a direct pipe; the two streams' writes may be
//! reordered, never torn.

use crate::util::*;
use std::fs;
use std::io::Read;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

/// A payload that, once told to (`DIR/go`), writes 3,000-byte stdout lines
/// with one write(2) each, and between them short stderr lines, as many as
/// its stdout pipe holds at once (200 when pgrun widened it): more than the
/// relay's 256 KiB read. It then says how many bytes it wrote
/// (`DIR/written`) and exits once told to (`DIR/exit`). The waits poll for
/// the files with a deadline (exit 3 past it).
const WRITER: &str = r#"import fcntl, os, sys, time
d = sys.argv[1]
def wait_for(name):
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(d, name)):
        if time.time() > deadline:
            sys.exit(3)
        time.sleep(0.005)
open(os.path.join(d, 'ready'), 'w').close()
wait_for('go')
# Each line takes a page of the pipe: write no more than it holds.
lines = min(200, fcntl.fcntl(1, fcntl.F_GETPIPE_SZ) // 4096 - 8)
total = 0
for i in range(lines):
    total += os.write(1, b'%05d' % i + b'o' * 2994 + b'\n')
    if i % 7 == 3:
        total += os.write(2, b'e%05d\n' % i)
with open(os.path.join(d, 'written.tmp'), 'w') as f:
    f.write('%d %d\n' % (lines, total))
os.rename(os.path.join(d, 'written.tmp'), os.path.join(d, 'written'))
wait_for('exit')
"#;

/// Every line of `data` is one the payload wrote whole, and each stream's
/// lines come in the order written, all of them (`lines` stdout lines).
fn assert_whole_lines(data: &[u8], lines: usize, what: &str) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    for line in data.split_inclusive(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let number = |l: &[u8]| std::str::from_utf8(&l[1..6]).ok().and_then(|n| n.parse::<usize>().ok());
        match line.first() {
            Some(b'e') if line.len() == 7 && line.ends_with(b"\n") => err.push(number(line).unwrap()),
            Some(b'0') if line.len() == 3000 && line[5..2999].iter().all(|&b| b == b'o') && line.ends_with(b"\n") => {
                out.push(std::str::from_utf8(&line[..5]).unwrap().parse::<usize>().unwrap())
            }
            _ => panic!("{what}: a torn line of {} bytes: {:?}...", line.len(), &text[..text.len().min(40)]),
        }
    }
    assert_eq!(out, (0..lines).collect::<Vec<_>>(), "{what}: stdout's lines");
    assert_eq!(err, (0..lines).filter(|i| i % 7 == 3).collect::<Vec<_>>(), "{what}: stderr's lines");
}

/// Where pgrun's stdout and stderr both go: one regular file, one pipe
/// the test reads (widened to 1 MiB where it can be: the relay may then
/// move more than one read into it at once), or one terminal (raw, so its
/// bytes come out as they went in) the test reads.
#[derive(Clone, Copy, Debug)]
enum Shared {
    File,
    Pipe,
    Terminal,
}

/// Read `from` into `into` until its end (a terminal's master: EIO once
/// the last slave is closed).
fn collect(mut from: impl Read + Send + 'static, into: &Arc<Mutex<Vec<u8>>>) -> std::thread::JoinHandle<()> {
    let into = Arc::clone(into);
    std::thread::spawn(move || {
        let mut buf = vec![0; 65536];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    })
}

/// Run [`WRITER`] through pgrun with `options`, both of pgrun's streams
/// into one `dest`, and stop pgrun while the payload writes, so that on
/// resuming it finds both pipes holding bytes, stdout more than one read's
/// worth. Checks the destination and (if given) the output file.
fn shared_destination(options: &[&str], dest: Shared) {
    let scratch = Scratch::new();
    let dir = scratch.path("d");
    fs::create_dir(&dir).unwrap();
    let file = scratch.path("out.log");
    let mut args: Vec<String> = options.iter().map(|o| o.replace("FILE", file.to_str().unwrap())).collect();
    args.extend(["--".into(), python3().into(), "-c".into(), WRITER.into(), dir.to_str().unwrap().into()]);
    let what = format!("{options:?} into one {dest:?}");
    let mut cmd = pgrun(&args);
    cmd.stdin(Stdio::null());
    let collected = Arc::new(Mutex::new(Vec::new()));
    let dest_file = scratch.path("dest");
    let reader = match dest {
        Shared::File => {
            let f = fs::File::create(&dest_file).unwrap();
            cmd.stdout(f.try_clone().unwrap()).stderr(f);
            None
        }
        Shared::Pipe => {
            let (r, w) = widened_pipe();
            cmd.stdout(w.try_clone().unwrap()).stderr(w);
            Some(collect(r, &collected))
        }
        Shared::Terminal => {
            use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
            let pty = openpty_cloexec(None);
            let mut raw = tcgetattr(&pty.slave).unwrap();
            cfmakeraw(&mut raw);
            tcsetattr(&pty.slave, SetArg::TCSANOW, &raw).unwrap();
            cmd.stdout(pty.slave.try_clone().unwrap()).stderr(pty.slave);
            Some(collect(fs::File::from(pty.master), &collected))
        }
    };
    let mut guard = Guard::new();
    let index = guard.spawn(&mut cmd);
    // The pipe's write ends are the child's now.
    drop(cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    eventually("the payload ready", || dir.join("ready").exists());
    send(pgrun_pid, libc::SIGSTOP);
    eventually("pgrun stopped", || state(pgrun_pid).as_deref() == Some("T"));
    fs::write(dir.join("go"), b"").unwrap();
    let written = wait_line(&dir.join("written"));
    let (lines, total) = written.split_once(' ').unwrap();
    let (lines, total): (usize, usize) = (lines.parse().unwrap(), total.parse().unwrap());
    send(pgrun_pid, libc::SIGCONT);
    let received = || match dest {
        Shared::File => fs::read(&dest_file).unwrap(),
        Shared::Pipe | Shared::Terminal => collected.lock().unwrap().clone(),
    };
    eventually(&format!("{what}: {total} bytes at the destination"), || received().len() >= total);
    fs::write(dir.join("exit"), b"").unwrap();
    assert_eq!(guard.wait(index), 0, "{what}");
    if let Some(reader) = reader {
        reader.join().unwrap();
    }
    assert_whole_lines(&received(), lines, &what);
    if options.contains(&"--output-file") {
        assert_whole_lines(&fs::read(&file).unwrap(), lines, &format!("{what}: the output file"));
    }
}

#[test]
fn writes_of_at_most_pipe_buf_reach_a_shared_destination_whole() {
    let mut torn = Vec::new();
    for dest in [Shared::File, Shared::Pipe, Shared::Terminal] {
        for options in [
            &["--output-file", "FILE"][..],
            &["--output-file", "FILE", "--max-output", "100M"],
            &["--max-output", "100M"],
            &["--idle-timeout", "1h"],
        ] {
            // Every case runs: the message says which of them tore.
            if let Err(e) = std::panic::catch_unwind(|| shared_destination(options, dest)) {
                torn.push(e.downcast_ref::<String>().cloned().unwrap_or_default());
            }
        }
    }
    assert!(torn.is_empty(), "{}", torn.join("\n"));
}
