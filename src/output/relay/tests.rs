//! The relay's two streams driven by hand, one turn of the loop at a
//! time, through pipes of the test's own: when a source rests and when it
//! is polled again, that a rest does not reorder streams that share a
//! destination, and when a destination is widened.

use super::*;
use crate::output::dest::Outbox;
use crate::output::limit::Cut;
use crate::output::rest::{BUSY_AFTER, CAUGHT_UP, REST};
use crate::sys::spawn::cloexec_pipe;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// A relay of two whole streams, each from a fresh inner pipe into a
/// pipe of the test's own; returns it, the command's ends and the
/// destinations' read ends.
fn relay_into_pipes() -> (Relay, [OwnedFd; 2], [OwnedFd; 2]) {
    let mut parts = Vec::new();
    for name in ["stdout", "stderr"] {
        let (source, command_end, wide) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
        let (dest_read, dest_write) = cloexec_pipe().unwrap();
        // The relay borrows its destinations for good (pgrun's own fds).
        let dest: &'static OwnedFd = Box::leak(Box::new(dest_write));
        let dest = dest.as_fd();
        parts.push((Stream::new(name, source, wide, dest, Shape::Whole(0)), command_end, dest_read));
    }
    let [(out, out_cmd, out_dest), (err, err_cmd, err_dest)]: [_; 2] = parts.try_into().ok().unwrap();
    let relay =
        Relay { streams: [out, err], scratch: vec![0; READ_SIZE], file: None, hand_off: None, caller_left: false };
    (relay, [out_cmd, err_cmd], [out_dest, err_dest])
}

/// Stream 0 as if busy with a wide source, resting `rest` once caught
/// up (its destination is left as it is).
fn rests_for(relay: &mut Relay, rest: Duration) {
    let s = &mut relay.streams[0];
    (s.rest.busy, s.rest.wide, s.rest.length) = (true, true, rest);
}

/// Whether `relay` polls stream `i`'s source for reading now.
fn polls_for_reading(relay: &Relay, i: usize) -> bool {
    let fd = relay.streams[i].source.as_ref().unwrap().as_raw_fd();
    let mut set = [PollFd::read(relay.streams[0].dest.fd()); crate::sys::POLL_MAX];
    let n = relay.interest(&mut set);
    set[..n].iter().any(|p| p.fd == fd && !p.write && !p.errors)
}

/// One turn of the relay's part of the loop, waiting at most a second.
fn turn(relay: &mut Relay) -> bool {
    let mut set = [PollFd::read(relay.streams[0].dest.fd()); crate::sys::POLL_MAX];
    let n = relay.interest(&mut set);
    crate::sys::poll(&mut set[..n], Some(Duration::from_secs(1))).unwrap();
    relay.on_ready(&set[..n])
}

fn write_all(fd: &OwnedFd, len: usize) {
    let bytes = vec![b'x'; len];
    let mut done = 0;
    while done < len {
        done += pipe::write(fd.as_fd(), &bytes[done..]).unwrap();
    }
}

#[test]
fn a_source_taken_empty_rests_then_is_polled_again() {
    let (mut relay, command, dests) = relay_into_pipes();
    rests_for(&mut relay, Duration::from_secs(3600));
    assert!(relay.next_wake().is_none());
    assert!(polls_for_reading(&relay, 0));
    // The first bytes after a quiet spell go on, and nothing rests.
    write_all(&command[0], 4096);
    assert!(turn(&mut relay), "the 4 KiB were not taken");
    assert_eq!(pipe::bytes_readable(dests[0].as_fd()).unwrap(), 4096, "the 4 KiB did not go on");
    assert!(relay.next_wake().is_none(), "a source rested after a quiet spell");
    // More within a rest's length: all the source held was taken, and
    // it rests, whatever comes meanwhile.
    write_all(&command[0], 4096);
    assert!(turn(&mut relay), "the next 4 KiB were not taken");
    let wake = relay.next_wake().expect("no rest after the source was taken empty");
    assert!(wake > Instant::now() + Duration::from_secs(3000));
    write_all(&command[0], 4096);
    assert!(!polls_for_reading(&relay, 0), "a resting source was polled");
    // The other stream is not held up by this one's rest.
    assert!(polls_for_reading(&relay, 1));
    // The rest over, the source is polled again and nothing is lost.
    relay.streams[0].rest.until = Some(Instant::now());
    assert!(relay.next_wake().is_none(), "a rest that is over still wakes the loop");
    assert!(polls_for_reading(&relay, 0));
    assert!(turn(&mut relay));
    assert_eq!(pipe::bytes_readable(dests[0].as_fd()).unwrap(), 12288);
}

#[test]
fn bytes_read_rather_than_spliced_do_not_rest() {
    let (mut relay, command, dests) = relay_into_pipes();
    rests_for(&mut relay, Duration::from_secs(3600));
    relay.streams[0].dest.splice = false;
    for _ in 0..2 {
        write_all(&command[0], 4096);
        assert!(turn(&mut relay), "the 4 KiB were not taken");
    }
    assert_eq!(pipe::bytes_readable(dests[0].as_fd()).unwrap(), 8192, "the bytes did not go on");
    assert!(relay.next_wake().is_none(), "bytes read and copied rested");
}

#[test]
fn a_writer_slower_than_a_rest_is_not_rested_for() {
    let (mut relay, command, _dests) = relay_into_pipes();
    // As if busy: a source that is not never rests, whatever the writer.
    rests_for(&mut relay, REST);
    for _ in 0..3 {
        write_all(&command[0], 4096);
        assert!(turn(&mut relay));
        assert!(relay.next_wake().is_none(), "a slow writer's source rested");
        // The writer comes back only after a rest would have ended.
        relay.streams[0].rest.watched_since = Some(Instant::now() - 2 * REST);
    }
}

/// What the pipe `read_end` holds now (at most 64 KiB).
fn held(read_end: &OwnedFd) -> Vec<u8> {
    let mut buf = vec![0; 65536];
    let n = pipe::bytes_readable(read_end.as_fd()).unwrap();
    let got = if n == 0 { 0 } else { pipe::read(read_end.as_fd(), &mut buf).unwrap() };
    buf.truncate(got);
    buf
}

#[test]
fn a_rest_does_not_reorder_streams_that_share_a_destination() {
    // 2>&1: both streams into one pipe of the test's own.
    let (source_out, command_out, _) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
    let (source_err, command_err, _) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
    let (dest_read, dest_write) = cloexec_pipe().unwrap();
    let dest: &'static OwnedFd = Box::leak(Box::new(dest_write));
    let streams = [
        Stream::new("stdout", source_out, true, dest.as_fd(), Shape::Whole(0)),
        Stream::new("stderr", source_err, true, dest.as_fd(), Shape::Whole(0)),
    ];
    let mut relay = Relay { streams, scratch: vec![0; READ_SIZE], file: None, hand_off: None, caller_left: false };
    pipe::write(command_out.as_fd(), b"A\n").unwrap();
    assert!(turn(&mut relay));
    assert_eq!(held(&dest_read), b"A\n");
    // stdout rests; the command writes C to it, then B to stderr.
    relay.streams[0].rest.until = Some(Instant::now() + Duration::from_secs(3600));
    pipe::write(command_out.as_fd(), b"C\n").unwrap();
    pipe::write(command_err.as_fd(), b"B\n").unwrap();
    assert!(turn(&mut relay));
    assert_eq!(String::from_utf8(held(&dest_read)).unwrap(), "C\nB\n", "stderr overtook stdout's rest");
    // A rest that ends while the loop waits for the other stream: the
    // source was not polled, and its bytes still go first.
    relay.streams[1].rest.until = None;
    relay.streams[0].rest.until = Some(Instant::now() + Duration::from_secs(3600));
    let mut set = [PollFd::read(dest.as_fd()); crate::sys::POLL_MAX];
    let n = relay.interest(&mut set);
    relay.streams[0].rest.until = Some(Instant::now());
    pipe::write(command_out.as_fd(), b"E\n").unwrap();
    pipe::write(command_err.as_fd(), b"D\n").unwrap();
    crate::sys::poll(&mut set[..n], Some(Duration::from_secs(1))).unwrap();
    assert!(relay.on_ready(&set[..n]));
    assert_eq!(String::from_utf8(held(&dest_read)).unwrap(), "E\nD\n", "stderr overtook a rest just over");
}

/// Stream 0's source gets `len` bytes while its destination has room
/// for 4 KiB only, and one turn takes them: returns what the source
/// holds after it.
fn take_with_4k_of_room(relay: &mut Relay, command: &OwnedFd, len: usize) -> usize {
    use nix::fcntl::{FcntlArg, fcntl};
    let source = relay.streams[0].source.as_ref().unwrap().as_fd();
    assert!(usize::try_from(fcntl(source, FcntlArg::F_GETPIPE_SZ).unwrap()).unwrap() >= len);
    let capacity = fcntl(relay.streams[0].dest.fd(), FcntlArg::F_GETPIPE_SZ).unwrap();
    let filler = vec![0u8; usize::try_from(capacity).unwrap() - 4096];
    assert_eq!(pipe::write(relay.streams[0].dest.fd(), &filler).unwrap(), filler.len());
    write_all(command, len);
    assert!(turn(relay));
    pipe::bytes_readable(relay.streams[0].source.as_ref().unwrap().as_fd()).unwrap()
}

#[test]
fn a_source_that_still_holds_more_than_a_few_pieces_does_not_rest() {
    let (mut relay, command, _dests) = relay_into_pipes();
    rests_for(&mut relay, Duration::from_secs(3600));
    relay.streams[0].rest.watched_since = Some(Instant::now());
    let held = take_with_4k_of_room(&mut relay, &command[0], CAUGHT_UP + 8192);
    assert_eq!(held, CAUGHT_UP + 4096);
    assert!(relay.next_wake().is_none(), "a source still holding {held} bytes rested");
}

#[test]
fn a_source_left_with_a_few_pieces_rests() {
    let (mut relay, command, _dests) = relay_into_pipes();
    rests_for(&mut relay, Duration::from_secs(3600));
    relay.streams[0].rest.watched_since = Some(Instant::now());
    let held = take_with_4k_of_room(&mut relay, &command[0], 16384);
    assert_eq!(held, 12288);
    assert!(relay.next_wake().is_some(), "a source left with {held} bytes did not rest");
    assert!(!polls_for_reading(&relay, 0), "a resting source was polled");
}

/// Pass `len` bytes from stream 0's command end through the relay to
/// `dest`, 4 KiB at a time (each taken before the next is written),
/// reading them there.
fn pass(relay: &mut Relay, command: &OwnedFd, dest: &OwnedFd, len: usize) {
    let mut sink = [0u8; 4096];
    for _ in 0..len / 4096 {
        write_all(command, 4096);
        relay.streams[0].rest.until = None;
        assert!(turn(relay), "4 KiB were not taken");
        let mut got = 0;
        while got < 4096 {
            got += pipe::read(dest.as_fd(), &mut sink[got..]).unwrap();
        }
    }
}

#[test]
fn a_busy_streams_destination_is_widened_and_only_then_may_it_rest() {
    use nix::fcntl::{FcntlArg, fcntl};
    let (mut relay, command, dests) = relay_into_pipes();
    let size = |fd: BorrowedFd<'_>| usize::try_from(fcntl(fd, FcntlArg::F_GETPIPE_SZ).unwrap()).unwrap();
    let small = size(dests[0].as_fd());
    assert!(small < PIPE_CAPACITY, "the system's pipes are already wide");
    // Short of BUSY_AFTER: the destination is as it was, nothing rests.
    pass(&mut relay, &command[0], &dests[0], BUSY_AFTER as usize - 4096);
    assert_eq!(size(dests[0].as_fd()), small);
    assert!(relay.streams[0].rest.length().is_none() && relay.next_wake().is_none());
    // Past it: the destination holds PIPE_CAPACITY and the source may
    // rest (where this process may widen a pipe at all).
    pass(&mut relay, &command[0], &dests[0], 8192);
    if relay.streams[0].rest.wide {
        assert!(size(dests[0].as_fd()) >= PIPE_CAPACITY, "{} bytes", size(dests[0].as_fd()));
        assert_eq!(relay.streams[0].rest.length(), Some(REST), "a busy stream may not rest");
    }
    // The other stream, which took nothing, is left as it was.
    assert_eq!(size(dests[1].as_fd()), small);
}

#[test]
fn a_cut_streams_destination_is_not_widened_past_its_head() {
    use nix::fcntl::{FcntlArg, fcntl};
    // --max-output 1K: a head of 512 bytes, then only the ring; the
    // command writes more than BUSY_AFTER, the caller's pipe gets 1 KiB.
    let (source, command, wide) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
    let (dest_read, dest_write) = cloexec_pipe().unwrap();
    let dest: &'static OwnedFd = Box::leak(Box::new(dest_write));
    let (other, _other_command, _) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
    let streams = [
        Stream::new("stdout", source, wide, dest.as_fd(), Shape::Cut(Cut::new(1024).unwrap())),
        Stream::new("stderr", other, wide, dest.as_fd(), Shape::Whole(0)),
    ];
    let mut relay = Relay { streams, scratch: vec![0; READ_SIZE], file: None, hand_off: None, caller_left: false };
    let size = || fcntl(&dest_read, FcntlArg::F_GETPIPE_SZ).unwrap();
    let small = size();
    assert!(usize::try_from(small).unwrap() < PIPE_CAPACITY, "the system's pipes are already wide");
    while relay.streams[0].taken <= 2 * BUSY_AFTER {
        write_all(&command, 65536);
        assert!(turn(&mut relay), "64 KiB were not taken");
    }
    assert!(relay.streams[0].rest.busy);
    assert_eq!(size(), small, "a pipe that gets only a cut's tail was widened");
}

#[test]
fn a_pipe_already_wider_is_never_narrowed() {
    use nix::fcntl::{FcntlArg, fcntl};
    let (wide_read, wide_write) = cloexec_pipe().unwrap();
    if fcntl(&wide_read, FcntlArg::F_SETPIPE_SZ(4 * PIPE_CAPACITY as libc::c_int)).is_ok() {
        let before = fcntl(&wide_read, FcntlArg::F_GETPIPE_SZ).unwrap();
        assert!(pipe::widen(wide_write.as_fd(), PIPE_CAPACITY));
        assert_eq!(fcntl(&wide_read, FcntlArg::F_GETPIPE_SZ).unwrap(), before);
    }
}

#[test]
fn a_take_ends_where_a_write_of_the_command_ended() {
    // 2>&1 into one regular file of the test's own; stdout's pipe holds
    // more than one read's worth (READ_SIZE) in writes of 3000 bytes, and
    // stderr a line: one turn takes all of stdout's, then stderr's, spliced
    // or read.
    let dir = tempfile::tempdir().unwrap();
    for splice in [true, false] {
        let path = dir.path().join(format!("dest-{splice}"));
        let dest: &'static std::fs::File = Box::leak(Box::new(std::fs::File::create(&path).unwrap()));
        let (source_out, command_out, wide) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
        let (source_err, command_err, _) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
        assert!(wide, "the inner pipe holds less than {PIPE_CAPACITY} bytes");
        let streams = [
            Stream::new("stdout", source_out, wide, dest.as_fd(), Shape::Whole(0)),
            Stream::new("stderr", source_err, wide, dest.as_fd(), Shape::Whole(0)),
        ];
        let mut relay = Relay { streams, scratch: vec![0; READ_SIZE], file: None, hand_off: None, caller_left: false };
        relay.streams[0].dest.splice &= splice;
        let line = [vec![b'o'; 2999], vec![b'\n']].concat();
        let lines = 200;
        assert!(lines * line.len() > READ_SIZE);
        for _ in 0..lines {
            assert_eq!(pipe::write(command_out.as_fd(), &line).unwrap(), line.len());
        }
        pipe::write(command_err.as_fd(), b"e\n").unwrap();
        assert!(turn(&mut relay));
        let got = std::fs::read(&path).unwrap();
        let want = [line.repeat(lines), b"e\n".to_vec()].concat();
        assert!(
            got == want,
            "splice {splice}: {} bytes, a stderr line at {:?}",
            got.len(),
            got.iter().position(|&b| b == b'e')
        );
    }
}

#[test]
fn the_rest_of_a_take_spliced_up_to_near_its_cut_goes_on_before_the_other_stream() {
    use nix::fcntl::{FcntlArg, fcntl};
    // 2>&1 into one pipe of the test's own with room for one more buffer;
    // stdout under --max-output 1000 (spliced up to 484 bytes, then read),
    // stderr whole. The command writes 601 bytes to stdout, then a line to
    // stderr: the splice fills the pipe with the first 484, the rest of
    // that write waits in stdout's outbox, and the stderr line behind it.
    let (source_out, command_out, _) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
    let (source_err, command_err, _) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
    let (dest_read, dest_write) = cloexec_pipe().unwrap();
    let dest: &'static OwnedFd = Box::leak(Box::new(dest_write));
    let capacity = usize::try_from(fcntl(&dest_read, FcntlArg::F_GETPIPE_SZ).unwrap()).unwrap();
    let filler = vec![b'.'; capacity - 4096];
    assert_eq!(pipe::write(dest.as_fd(), &filler).unwrap(), filler.len());
    let streams = [
        Stream::new("stdout", source_out, true, dest.as_fd(), Shape::Cut(Cut::new(1000).unwrap())),
        Stream::new("stderr", source_err, true, dest.as_fd(), Shape::Whole(0)),
    ];
    let mut relay = Relay { streams, scratch: vec![0; READ_SIZE], file: None, hand_off: None, caller_left: false };
    let [out, err] = &mut relay.streams;
    Outbox::share(&mut out.outbox, &mut err.outbox);
    let write = [vec![b'o'; 600], vec![b'\n']].concat();
    pipe::write(command_out.as_fd(), &write).unwrap();
    pipe::write(command_err.as_fd(), b"e\n").unwrap();
    assert!(turn(&mut relay));
    assert!(!relay.streams[0].outbox.is_empty(), "the pipe had room for all of stdout's write");
    // The reader reads; stderr's turn comes first (taken if it was not).
    let mut got = Vec::new();
    let mut buf = vec![0; 65536];
    while pipe::bytes_readable(dest_read.as_fd()).unwrap() > 0 {
        let n = pipe::read(dest_read.as_fd(), &mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
    }
    relay.streams[1].wants_room = false;
    relay.streams[1].take(&mut vec![0; READ_SIZE], &mut None);
    relay.streams[1].flush();
    relay.streams[0].flush();
    relay.streams[1].flush();
    while pipe::bytes_readable(dest_read.as_fd()).unwrap() > 0 {
        let n = pipe::read(dest_read.as_fd(), &mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
    }
    let ours = String::from_utf8(got[filler.len()..].to_vec()).unwrap();
    assert_eq!(ours, format!("{}e\n", "o".repeat(500)), "stderr's line went inside stdout's write");
}
