//! `--stdin-pipe` on the portable path (`--features posix-fallback`, what
//! macOS and FreeBSD build): the folder beside the pid file,
//! `.NAME.pgrun-PID.stdin`, that holds the run's FIFOs. Only the run's
//! user can enter it; a name another user made is never used, by the run
//! or by a sender; it is gone when the run ends, when pgrun is SIGKILLed
//! (its guard), and when the run never starts. (What both paths do alike
//! is `send.rs`'s.)

use crate::util::*;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The folder of the run whose supervising pgrun is `pgrun`.
fn folder_for(pidfile: &Path, pgrun: i32) -> PathBuf {
    let name = pidfile.file_name().unwrap().to_string_lossy();
    pidfile.parent().unwrap().join(format!(".{name}.pgrun-{pgrun}.stdin"))
}

/// The folder of the live run at `pidfile` (its lock holder's).
pub fn stdin_folder(pidfile: &Path) -> PathBuf {
    folder_for(pidfile, lock_holder(pidfile).expect("a live run"))
}

/// The stdin folders in `dir`, whoever made them.
fn folders_in(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".pgrun-") && n.ends_with(".stdin"))
        .collect()
}

fn send_to(pidfile: &Path, text: &str) -> std::process::Output {
    run(&mut pgrun(["send", pidfile.to_str().unwrap(), text]))
}

/// The folder is a folder of the run's user, mode 0700, holding two
/// FIFOs and a lock file, each of mode 0600; the run's end removes it.
#[test]
#[cfg_attr(not(feature = "posix-fallback"), ignore = "the portable path's folder: run with --features posix-fallback")]
fn the_folder_is_the_run_users_alone_and_goes_at_the_runs_end() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    let (index, _) = start_published(&mut guard, &pidfile, &["--stdin-pipe"], &format!("cat > {}", out.display()));
    let folder = stdin_folder(&pidfile);
    let meta = fs::symlink_metadata(&folder).expect("the run's folder");
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
    // SAFETY: geteuid has no preconditions.
    assert_eq!(meta.uid(), unsafe { libc::geteuid() });
    for fifo in ["in", "requests"] {
        let meta = fs::symlink_metadata(folder.join(fifo)).unwrap();
        assert!(meta.file_type().is_fifo(), "{fifo}");
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600, "{fifo}");
    }
    let lock = fs::symlink_metadata(folder.join("lock")).unwrap();
    assert!(lock.is_file() && lock.permissions().mode() & 0o7777 == 0o600, "{lock:?}");
    assert_status(&run(&mut pgrun(["send", "--eof", pidfile.to_str().unwrap(), "x"])), 0, "send --eof");
    assert_eq!(guard.wait(index), 0);
    assert_eq!(fs::read_to_string(&out).unwrap(), "x");
    assert_eq!(folders_in(scratch.dir()), Vec::<String>::new(), "the folder outlived the run");
}

/// pgrun SIGKILLed: its guard stops the run and removes the folder.
#[test]
#[cfg_attr(not(feature = "posix-fallback"), ignore = "the portable path's folder: run with --features posix-fallback")]
fn the_guard_removes_the_folder_after_a_sigkill_of_pgrun() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    start_published(&mut guard, &pidfile, &["--stdin-pipe"], "cat >/dev/null");
    let folder = stdin_folder(&pidfile);
    let holder = lock_holder(&pidfile).unwrap();
    let keeper = guard_of(holder);
    guard.record(keeper);
    send(holder, libc::SIGKILL);
    wait_dead(keeper);
    assert!(!folder.exists(), "the guard left {}", folder.display());
    assert_eq!(folders_in(scratch.dir()), Vec::<String>::new());
}

/// A run that never starts leaves no folder: its command not found, or
/// pgrun SIGKILLed after it made the folder and before the spawn.
#[test]
#[cfg_attr(not(feature = "posix-fallback"), ignore = "the portable path's folder: run with --features posix-fallback")]
fn a_run_that_never_starts_leaves_no_folder() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let missing = run(pgrun(["-p"]).arg(&pidfile).args(["--stdin-pipe", "--", "/nonexistent/command"]));
    assert_status(&missing, 127, "a command that does not exist");
    assert_eq!(folders_in(scratch.dir()), Vec::<String>::new(), "a run that never started left its folder");
    let ran = scratch.path("ran");
    let pause = Pause::new(&scratch, "guard-started");
    let mut cmd = pgrun(["-p"]);
    cmd.arg(&pidfile).args(["--stdin-pipe", "--", "sh", "-c", &format!("echo > {}", ran.display())]);
    let index = guard.spawn(pause.arm(&mut cmd));
    pause.wait_reached();
    let pgrun_pid = guard.child(index).id() as i32;
    let folder = folder_for(&pidfile, pgrun_pid);
    assert!(folder.is_dir(), "no folder at {}", folder.display());
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    send(pgrun_pid, libc::SIGKILL);
    wait_dead(keeper);
    assert_eq!(
        folders_in(scratch.dir()),
        Vec::<String>::new(),
        "the guard left the folder of a run that never started"
    );
    assert!(!ran.exists(), "the command ran");
}

/// Another user made the run's folder's name first (in a sticky folder,
/// as /tmp is): the run never uses it, and fails before its command
/// starts.
#[test]
#[cfg_attr(not(feature = "posix-fallback"), ignore = "the portable path's folder: run with --features posix-fallback")]
fn a_name_another_user_made_is_never_used() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    open_up(scratch.dir(), true);
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let ran = scratch.path("ran");
    let pause = Pause::new(&scratch, "marker-checked");
    let mut cmd = pgrun(["-p"]);
    cmd.arg(&pidfile).args(["--stdin-pipe", "--", "sh", "-c", &format!("echo > {}", ran.display())]);
    cmd.stderr(Stdio::piped());
    let index = guard.spawn(pause.arm(&mut cmd));
    pause.wait_reached();
    let folder = folder_for(&pidfile, guard.child(index).id() as i32);
    let made = run(&mut as_nobody("mkdir", &["-m", "700", folder.to_str().unwrap()]));
    assert_status(&made, 0, "nobody's mkdir");
    pause.release();
    assert_eq!(guard.wait(index), 125, "a run on a name another user made");
    let mut err = String::new();
    guard.child(index).stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("exists already"), "{err}");
    assert!(!ran.exists(), "the command ran");
    let meta = fs::symlink_metadata(&folder).unwrap();
    assert_eq!(meta.uid(), 65534, "nobody's folder was replaced");
    assert_eq!(fs::read_dir(&folder).unwrap().count(), 0, "the run put something in nobody's folder");
    assert!(!pidfile.exists());
}

/// A sender never writes into a folder that is not the run's: a symlink
/// to it, another user's folder in its place, the run user's own of
/// another mode; once the run's is back, it sends.
#[test]
#[cfg_attr(not(feature = "posix-fallback"), ignore = "the portable path's folder: run with --features posix-fallback")]
fn a_sender_refuses_a_folder_that_is_not_the_runs() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    open_up(scratch.dir(), true);
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    start_published(&mut guard, &pidfile, &["--stdin-pipe"], &format!("cat > {}", out.display()));
    let folder = stdin_folder(&pidfile);
    let aside = scratch.path("aside");
    fs::rename(&folder, &aside).unwrap();
    std::os::unix::fs::symlink(&aside, &folder).unwrap();
    let refused = send_to(&pidfile, "via a symlink");
    assert_status(&refused, 125, "send through a symlink");
    assert!(stderr_of(&refused).contains("not a folder"), "{}", stderr_of(&refused));
    fs::remove_file(&folder).unwrap();
    // Nobody's folder, with a FIFO nobody reads from.
    let theirs = format!("mkdir -m 700 {0} && mkfifo -m 666 {0}/in", folder.display());
    assert_status(&run(&mut as_nobody("sh", &["-c", &theirs])), 0, "nobody's folder");
    let refused = send_to(&pidfile, "to nobody");
    assert_status(&refused, 125, "send into nobody's folder");
    assert!(stderr_of(&refused).contains("is not the run's"), "{}", stderr_of(&refused));
    fs::remove_dir_all(&folder).unwrap();
    fs::create_dir(&folder).unwrap();
    fs::set_permissions(&folder, fs::Permissions::from_mode(0o755)).unwrap();
    let refused = send_to(&pidfile, "to 755");
    assert_status(&refused, 125, "send into a folder of mode 755");
    assert!(stderr_of(&refused).contains("is not the run's"), "{}", stderr_of(&refused));
    fs::remove_dir(&folder).unwrap();
    fs::rename(&aside, &folder).unwrap();
    assert_status(&send_to(&pidfile, "mine"), 0, "send once the run's folder is back");
    eventually("the owner's send", || fs::read_to_string(&out).unwrap_or_default() == "mine");
}

/// The folder is 0700 and its FIFOs 0600 whatever the umask took away
/// from them (277: no write for the user), and the owner's send works.
#[test]
#[cfg_attr(not(feature = "posix-fallback"), ignore = "the portable path's folder: run with --features posix-fallback")]
fn the_modes_are_exact_whatever_the_umask() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "umask 277; exec \"$0\" \"$@\"", pgrun_path(), "-p", pidfile.to_str().unwrap()]);
    cmd.args(["--stdin-pipe", "--", "sh", "-c", &format!("cat > {}", out.display())]).stdin(Stdio::null());
    let index = guard.spawn(&mut cmd);
    let pgid: i32 = wait_line(&pidfile).parse().unwrap();
    guard.record_group(pgid);
    let folder = stdin_folder(&pidfile);
    assert_eq!(fs::symlink_metadata(&folder).unwrap().permissions().mode() & 0o7777, 0o700);
    for fifo in ["in", "requests"] {
        assert_eq!(fs::symlink_metadata(folder.join(fifo)).unwrap().permissions().mode() & 0o7777, 0o600, "{fifo}");
    }
    assert_status(&run(&mut pgrun(["send", "--eof", pidfile.to_str().unwrap(), "y"])), 0, "send --eof");
    assert_eq!(guard.wait(index), 0);
    assert_eq!(fs::read_to_string(&out).unwrap(), "y");
}

/// A sender writes a block only holding the folder's lock (byte 0 of
/// `lock`, an fcntl write lock): while another holds it, the send waits,
/// and with `--timeout` gives up having written nothing, though the pipe
/// has room; once it is let go, the send goes in.
#[test]
#[cfg_attr(not(feature = "posix-fallback"), ignore = "the portable path's folder: run with --features posix-fallback")]
fn a_sender_writes_a_block_only_holding_the_folders_lock() {
    use std::os::fd::AsRawFd;
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    start_published(&mut guard, &pidfile, &["--stdin-pipe"], &format!("cat > {}", out.display()));
    let lock = fs::OpenOptions::new().read(true).write(true).open(stdin_folder(&pidfile).join("lock")).unwrap();
    // SAFETY: a zeroed flock is a valid value; the fields set say byte 0.
    let mut byte0: libc::flock = unsafe { std::mem::zeroed() };
    byte0.l_type = libc::F_WRLCK as _;
    byte0.l_whence = libc::SEEK_SET as _;
    byte0.l_len = 1;
    // SAFETY: an open fd and a valid flock.
    assert_eq!(unsafe { libc::fcntl(lock.as_raw_fd(), libc::F_SETLK, &byte0) }, 0);
    let waited = run(&mut pgrun(["send", "--timeout", "0.5", pidfile.to_str().unwrap(), "held"]));
    assert_status(&waited, 124, "send while another holds the lock");
    assert!(stderr_of(&waited).contains(": 0 bytes written"), "{}", stderr_of(&waited));
    drop(lock);
    assert_status(&send_to(&pidfile, "free"), 0, "send once the lock is let go");
    eventually("the send after the lock", || fs::read_to_string(&out).unwrap_or_default() == "free");
}
