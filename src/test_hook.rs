//! Test-only hooks: pauses at named steps, so that the test suite can hold
//! pgrun inside a race window and act there, deterministically; and ways to
//! make pgrun misbehave on purpose, so that the suite can prove what happens
//! then.
//!
//! `PGRUN_TEST_PAUSE=STEP=FILE[,STEP=FILE...]`: on reaching STEP, pgrun
//! creates `FILE.reached` and waits until FILE exists (at most two minutes),
//! then goes on. Only debug builds (the ones `cargo test` runs) read the
//! variable; in release builds [`pause`] is empty and compiles away.
//!
//! Steps: `report-looked` (no other run's mark on the report path was
//! found, this run's own not yet taken), `report-cleared` (the report path is accepted, its
//! old report removed, nothing else prepared yet), `claim-opened` (a stale pid file is open, not yet claimed; the
//! guard is forked already), `claimed` (the claim is held, the record not prepared yet), `starting` (the
//! starting name is held too, the path not yet checked again), `marker-checked`
//! (no marker was found before the start), `guard-started` (all is
//! prepared, the guard forked, the command not yet), `child-created` (in the command's process,
//! first thing after it exists, before it hands itself to the guard: pgrun
//! goes on meanwhile to `forked` and `created`, then waits for the exec),
//! `forked` (pgrun has the command's pid and has told the guard nothing
//! itself), `created` (the guard was told the group id; the exec may not
//! have happened yet), `spawned` (the command runs, its group is not published
//! yet), `placed` (the pid file is in place, pgrun has not yet said it is
//! published), `ending-note` (the note pgrun will hold at the marker path at
//! its end is written and locked under its temporary name, not yet
//! renamed into place), `ending-note-placed` (that note is renamed into
//! place, its guard told its identity before, nothing else done yet),
//! `temp-named:NAME` (a temporary file for the file
//! named NAME, e.g. `temp-named:r.json`, has just taken its temporary name:
//! created under it, or, if it had none, linked there to be renamed over
//! what is at NAME; the first such moment for NAME pauses), `draining-census` (with `--wait-group`, the command has exited and
//! the supervisor is about to ask whether only zombies it cannot reap are
//! left), `leader-step` (the supervisor is about to decide whether a `leader:` step
//! can still be sent), `tree-listed` (a stop step's walk of `--contain
//! tree` has read pgrun's own children list and not yet walked below it),
//! `zombies-left` (a guard whose pgrun died found nothing left of the run
//! but zombies of another parent, and is about to wait for their reaping),
//! `dying` (such a guard's final KILL's grace has passed with what is left
//! of the run dying of it, and it is about to wait for that to be gone),
//! `let-go-asked` (`--detach-after`'s caller process has asked the relay to let go at DUR, and not yet looked for its answer or a signal), `run-gone` (the supervisor is done: the run is gone, nothing is
//! withdrawn or released yet), `marker-handled` (the run is marked over in
//! its pid file and the marker handled, its note held if it took one; the
//! pid file still published), `withdrawn` (the run's files are removed and
//! its report written, the pid file last; the guard not yet released),
//! `exit` (all is done and written, pgrun is about to exit: its peak memory
//! can be read; the run is withdrawn, its lock let go of, the note at the
//! marker path still held), `note-removed` (pgrun's last steps: that note
//! is removed from the marker path, its lock not let go of yet, the guard
//! not yet reaped). With `--detach-after`, in the caller's process:
//! `let-go` (DUR has passed, the supervising pgrun is not asked yet to let
//! go of the caller's fds). In the readers (`cancel`, `status`, `wait`):
//! `record-read` (a pid file is open and its record read, its locks not
//! looked at yet). In `pgrun output --pidfile`: `output-found` (the run
//! at the pid file is found, live or over, and nothing is watched yet). And in `pgrun cancel`: `cancel-marked` (the marker is
//! made, the pid file not looked at since), `cancel-found` (a live run was
//! found, its lock holder not yet held by a handle), `cancel-signalled` (the
//! TERM is sent to the pgrun holding the lock, the wait for it has not
//! begun), `cancel-timed-out` (--timeout has passed with that pgrun still
//! holding the lock, nothing is decided yet).
//!
//! `PGRUN_TEST_HOOK=NAME[,NAME...]`: [`PANIC_ON_USR1`] makes the supervise
//! loop panic when it reads SIGUSR1; [`PANIC_BEFORE_SPAWN`] panics with
//! everything prepared, right before the spawn; [`PEAK_BEFORE_SPAWN`]
//! raises pgrun's own peak memory right before the spawn; [`KEEP_SIGCHLD_IGNORED`]
//! leaves a SIGCHLD ignored by the caller ignored in pgrun itself;
//! [`GUARD_WAIT_FAILS`] makes the guard's first wait for pgrun fail with
//! EIO; [`PUBLISH_FAILS`] makes publishing the run fail after the spawn;
//! [`SUPERVISE_FAILS`] makes the supervise loop's first wait fail with EIO; [`LONG_REST`] makes the output relay's rest two seconds long;
//! [`OWN_CGROUP_REFUSED`] makes `--contain cgroup` find no leaf under
//! pgrun's own cgroup, so that it asks the user's systemd;
//! [`SHORT_BUS_PATIENCE`] gives that conversation half a second instead of
//! its ten seconds (`contain::user_scope::PATIENCE`). Also
//! read by debug builds only.
//!
//! `PGRUN_TEST_LEAF_NAME=NAME`: the first name `--contain cgroup` tries
//! for its leaf (then random ones, if it is taken), so that a test can name
//! the leaf's files in advance or make two runs' names collide. Debug
//! builds only.

/// Pause here if the environment asks for `step`.
#[inline]
pub fn pause(step: &str) {
    #[cfg(debug_assertions)]
    pause_for_tests(step);
    #[cfg(not(debug_assertions))]
    let _ = step;
}

/// Pause here if the environment asks for `step` done for the file
/// `target`: the step named `STEP:NAME`, NAME being `target`'s file name
/// (so a test picks one file among those pgrun writes).
#[inline]
pub fn pause_at(step: &str, target: &std::path::Path) {
    #[cfg(debug_assertions)]
    pause_for_tests(&format!("{step}:{}", target.file_name().unwrap_or_default().to_string_lossy()));
    #[cfg(not(debug_assertions))]
    let _ = (step, target);
}

#[cfg(debug_assertions)]
fn pause_for_tests(step: &str) {
    use std::time::{Duration, Instant};
    let Some(spec) = std::env::var_os("PGRUN_TEST_PAUSE") else { return };
    let spec = spec.to_string_lossy().into_owned();
    for entry in spec.split(',') {
        let Some((name, file)) = entry.split_once('=') else { continue };
        if name != step {
            continue;
        }
        let _ = std::fs::write(format!("{file}.reached"), b"");
        let until = Instant::now() + Duration::from_secs(120);
        while std::fs::symlink_metadata(file).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// The pause of `step` for the command's process, between its creation
/// and its exec, made before the process exists (the child only makes raw
/// calls, allocates nothing and reads no environment): `None` unless asked
/// for (debug builds only).
pub fn child_pause(step: &str) -> Option<crate::sys::spawn::ChildPause> {
    #[cfg(debug_assertions)]
    {
        let spec = std::env::var_os("PGRUN_TEST_PAUSE")?;
        let spec = spec.to_string_lossy().into_owned();
        let gate = spec.split(',').find_map(|entry| entry.split_once('=').filter(|(name, _)| *name == step))?.1;
        crate::sys::spawn::ChildPause::new(std::path::Path::new(gate))
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = step;
        None
    }
}

/// Make the supervise loop panic when it reads SIGUSR1.
pub const PANIC_ON_USR1: &str = "panic-on-usr1";
/// Panic right before the spawn, with the pid file claimed (its temporary
/// file made) and the report prepared.
pub const PANIC_BEFORE_SPAWN: &str = "panic-before-spawn";
/// Raise pgrun's own peak resident set by [`RAISED_PEAK`] bytes right
/// before the spawn and give the memory back, so that a test can tell
/// pgrun's peak from the command's: the kernel keeps the high-water mark.
pub const PEAK_BEFORE_SPAWN: &str = "peak-before-spawn";

/// How far [`PEAK_BEFORE_SPAWN`] raises pgrun's peak: 64 MiB, far above
/// pgrun's own size and what the tests run.
pub const RAISED_PEAK: usize = 64 << 20;

/// [`PEAK_BEFORE_SPAWN`], if asked for: every page of a block written,
/// then the block unmapped (it is far above the C library's threshold for
/// a mapping of its own), so none of it is left for a fork to copy.
pub fn raise_peak_if_asked() {
    if active(PEAK_BEFORE_SPAWN) {
        let mut block = vec![0u8; RAISED_PEAK];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        std::hint::black_box(&block);
    }
}

/// Leave a SIGCHLD ignored by the caller ignored in pgrun itself.
pub const KEEP_SIGCHLD_IGNORED: &str = "keep-sigchld-ignored";
/// Make publishing the run fail, after the spawn (the run is then stopped
/// unpublished).
pub const PUBLISH_FAILS: &str = "publish-fails";
/// Make the supervise loop's first wait for events fail with EIO.
pub const SUPERVISE_FAILS: &str = "supervise-fails";
/// Make the guard's first wait for pgrun's end fail with EIO.
pub const GUARD_WAIT_FAILS: &str = "guard-wait-fails";

/// Make the output relay's rest (see `output::relay`) two seconds long, so
/// that a test can act while a source rests.
pub const LONG_REST: &str = "long-rest";

/// Make `--contain cgroup` find no leaf under pgrun's own cgroup, so that
/// it asks the user's systemd for one (see `contain::user_scope`).
pub const OWN_CGROUP_REFUSED: &str = "own-cgroup-refused";

/// Give the conversation with the user's systemd half a second instead of
/// its whole patience, so that a test of a bus that never answers (or
/// never takes the connection) ends soon.
pub const SHORT_BUS_PATIENCE: &str = "short-bus-patience";

/// Two more pause steps, of the supervising pgrun's stop:
/// `straggler-count` (the command has exited and left members, which pgrun
/// is about to count for the report and `--verbose`), and `full-scan`
/// (pgrun is about to list all of `/proc`, a read that costs what the
/// whole machine runs: with thousands of processes on the host, seconds
/// under load). `full-scan` is installed by [`pause_full_scans`] as the
/// supervisor starts, as a hook of `sys::proc` (a floor that cannot call
/// up here), so that it holds every such listing the supervisor makes,
/// whoever calls it: a test arms it to prove a stop never waits on one.
pub const FULL_SCAN: &str = "full-scan";

/// Pause at [`FULL_SCAN`] before each listing of all of `/proc` from now
/// on, if the environment asks (debug builds; see [`pause`]).
pub fn pause_full_scans() {
    crate::sys::proc::on_full_scan(|| pause(FULL_SCAN));
}

/// Whether the hook `name` is asked for in `PGRUN_TEST_HOOK`.
pub fn active(name: &str) -> bool {
    #[cfg(debug_assertions)]
    {
        std::env::var_os("PGRUN_TEST_HOOK")
            .is_some_and(|hooks| hooks.as_encoded_bytes().split(|&b| b == b',').any(|h| h == name.as_bytes()))
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = name;
        false
    }
}

/// The first leaf name to try, from `PGRUN_TEST_LEAF_NAME` (debug builds).
pub fn leaf_name() -> Option<String> {
    #[cfg(debug_assertions)]
    {
        std::env::var("PGRUN_TEST_LEAF_NAME").ok().filter(|n| !n.is_empty())
    }
    #[cfg(not(debug_assertions))]
    {
        None
    }
}
