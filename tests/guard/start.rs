//! pgrun SIGKILLed while the command starts: as its process is created,
//! before its exec is confirmed, while the spawn waits for the exec, before
//! pgrun tells the guard of it, before it hands itself to the guard. The
//! guard holds the command from before its exec: nothing is left running.

use super::strace;
use crate::util::*;
use std::fs;
use std::process::Stdio;

/// Run `extra` pgrun options with a command that writes its pid and
/// sleeps; pause pgrun right after the command's process exists, SIGKILL
/// pgrun there, and check that the guard stops the command.
fn kill_pgrun_as_the_command_is_created(extra: &[&str]) {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let pause = Pause::new(&scratch, "created");
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    args.extend(["--", "sh", "-c", &format!("echo $$ > {dir}/cmd.pid; exec sleep 300")].map(String::from));
    let mut cmd = pgrun(args);
    pause.arm(&mut cmd);
    let index = guard.spawn(&mut cmd);
    pause.wait_reached();
    let pgrun_pid = guard.child(index).id() as i32;
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    let command = wait_pid(&scratch.path("cmd.pid"), &mut guard);
    guard.record_group(command);
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(command);
    wait_dead(keeper);
}

#[test]
fn pgrun_killed_as_the_command_is_created_leaves_nothing_running() {
    // posix_spawn: pgrun learns the pid once the exec is done.
    kill_pgrun_as_the_command_is_created(&[]);
}

#[test]
fn pgrun_killed_before_the_commands_exec_is_confirmed_leaves_nothing_running() {
    // fork and exec (--setsid): pgrun pauses right after the fork, before
    // it reads how the exec went.
    kill_pgrun_as_the_command_is_created(&["--setsid"]);
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no pidfds nor /proc: the guard learns the group once the spawn returns"
)]
fn pgrun_killed_while_the_spawn_waits_for_the_exec_leaves_nothing_running() {
    // The spawn holds pgrun (vfork, or its wait on the exec-status pipe)
    // until the command's exec, so pgrun cannot hand the process to its guard before
    // then (the process hands itself over). strace holds the child's execve
    // there for a second; pgrun is SIGKILLed meanwhile.
    let mut strace = strace();
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    strace
        .args(["-f", "-qq", "-e", "trace=execve", "-e", "inject=execve:delay_enter=300000", "-o"])
        .arg(scratch.path("trace"))
        .arg(pgrun_path())
        .args(["-k", "1", "--", "sh", "-c", &format!("echo $$ > {dir}/cmd.pid; exec sleep 300")])
        .stdin(Stdio::null());
    default_signals(&mut strace);
    let index = guard.spawn(&mut strace);
    let strace_pid = guard.child(index).id() as i32;
    let comm = |p: i32| fs::read_to_string(format!("/proc/{p}/comm")).map(|c| c.trim_end().to_string()).ok();
    let mut pgrun_pid = 0;
    eventually("strace to start pgrun", || {
        pgrun_pid = descendants(strace_pid).into_iter().find(|&p| comm(p).as_deref() == Some("pgrun")).unwrap_or(0);
        pgrun_pid != 0
    });
    guard.record(pgrun_pid);
    let mut child = 0;
    eventually("the command's process to wait in its execve", || {
        child = descendants(pgrun_pid)
            .into_iter()
            .find(|&p| comm(p).as_deref() == Some("pgrun") && state(p).as_deref() == Some("t"))
            .unwrap_or(0);
        child != 0
    });
    guard.record(child);
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    // Waiting in the spawn: held by vfork (state D) where the child shares
    // its memory, or asleep in the kernel's pipe read (`pipe_read`,
    // `anon_pipe_read` in newer kernels) on the exec-status pipe.
    eventually("pgrun to wait in the spawn", || {
        state(pgrun_pid).as_deref() == Some("D")
            || fs::read_to_string(format!("/proc/{pgrun_pid}/wchan")).is_ok_and(|w| w.ends_with("pipe_read"))
    });
    send(pgrun_pid, libc::SIGKILL);
    wait_dead(child);
    wait_dead(keeper);
    // The command's process, after its exec, is the same process.
    guard.wait(index);
}

/// The guard's pid, once pgrun (paused at `pause`'s step) has forked it.
fn stopped_guard_of(guard: &mut Guard, pgrun_pid: i32) -> i32 {
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    send(keeper, libc::SIGSTOP);
    eventually("the guard to stop", || state(keeper).as_deref() == Some("T"));
    keeper
}

/// pgrun is SIGKILLed the moment the command's process exists, before
/// pgrun itself has told the guard anything, and the guard has not run
/// since before the spawn (SIGSTOPped: a loaded machine that does not
/// schedule it). The command must still be stopped: the guard holds it
/// from before its exec (issue 18 item 7's residual window).
fn kill_pgrun_before_it_tells_the_guard(extra: &[&str]) {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let started = Pause::new(&scratch, "guard-started");
    let forked = Pause::new(&scratch, "forked");
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    args.extend(["--", "sh", "-c", &format!("echo $$ > {dir}/cmd.pid; exec sleep 300")].map(String::from));
    let mut cmd = pgrun(args);
    cmd.env("PGRUN_TEST_PAUSE", format!("guard-started={dir}/gate-guard-started,forked={dir}/gate-forked"));
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    started.wait_reached();
    let keeper = stopped_guard_of(&mut guard, pgrun_pid);
    started.release();
    forked.wait_reached();
    let command = wait_pid(&scratch.path("cmd.pid"), &mut guard);
    guard.record_group(command);
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    send(keeper, libc::SIGCONT);
    wait_dead(command);
    wait_dead(keeper);
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no pidfds: the guard learns the group from pgrun, after the spawn"
)]
fn pgrun_killed_before_it_tells_the_guard_of_the_command_leaves_nothing_running() {
    kill_pgrun_before_it_tells_the_guard(&[]);
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no pidfds: the guard learns the group from pgrun, after the spawn"
)]
fn pgrun_killed_before_it_tells_the_guard_of_a_forked_command_leaves_nothing_running() {
    // --setsid: the path that can set up more before the exec.
    kill_pgrun_before_it_tells_the_guard(&["--setsid"]);
}

/// pgrun is SIGKILLed while the command's process, just created, has not
/// yet handed itself to the guard (paused there; pgrun waits for its exec
/// meanwhile). The guard cannot hear of pgrun's
/// death before that process has exec'd (it holds a copy of pgrun's end of
/// the guard's channel until then), so it still holds and stops it.
fn kill_pgrun_before_the_child_hands_itself_over(extra: &[&str]) {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let pause = Pause::new(&scratch, "child-created");
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    args.extend(["--", "sh", "-c", &format!("echo $$ > {dir}/cmd.pid; exec sleep 300")].map(String::from));
    let mut cmd = pgrun(args);
    pause.arm(&mut cmd);
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    pause.wait_reached();
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    // The command's process, paused: pgrun's other child.
    let children: Vec<i32> = descendants(pgrun_pid).into_iter().filter(|&p| p != keeper).collect();
    assert_eq!(children.len(), 1, "pgrun's children besides its guard: {children:?}");
    let command = children[0];
    guard.record(command);
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    pause.release();
    // The guard may stop the command before its shell writes its pid (it
    // acts once the exec is done), or between the shell's creating the
    // file and its write (an empty file): it is the same process either way.
    wait_dead(command);
    wait_dead(keeper);
    if let Ok(pid) = fs::read_to_string(scratch.path("cmd.pid"))
        && !pid.is_empty()
    {
        assert_eq!(pid.trim(), command.to_string(), "the command is not the process that paused");
    }
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no pidfds: nothing is handed over")]
fn pgrun_killed_before_the_command_hands_itself_to_the_guard_leaves_nothing_running() {
    kill_pgrun_before_the_child_hands_itself_over(&[]);
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no pidfds: nothing is handed over")]
fn pgrun_killed_before_a_session_leader_hands_itself_to_the_guard_leaves_nothing_running() {
    kill_pgrun_before_the_child_hands_itself_over(&["--setsid"]);
}
