//! `--detach-after`: the relay's side of the hand-off from an attached run
//! to a detached one.
//!
//! Until the hand-off, the supervising pgrun (forked by the caller's
//! process, in a session of its own) relays the command's output as any
//! run does: to the output file, and to its own fds 1 and 2, which are the
//! caller's stdout and stderr. The caller's process asks it to let go with
//! one byte ([`LET_GO`]) on a pipe (or by ending: the pipe's end), which
//! the relay polls with its other fds. The relay then stops reading the
//! command's pipes, writes what it still owes to the caller's fds (for at
//! most [`LET_GO_GRACE`]), and so knows N, the offset in the output file
//! up to which the caller got every byte and past which it got none: the
//! end of the file when nothing is owed (each byte goes to the file before
//! it goes anywhere else), else where the first byte still owed lies in the
//! file. It then points its fds 1 and 2 at `/dev/null`, drops its own
//! descriptions of the caller's pipes and answers ([`Answer`]) on a second
//! pipe: N (eight bytes, little-endian), then one byte, 1 if the caller's
//! stderr ends mid-line. From then on the output goes to the file only,
//! and nothing of the run holds an fd of the caller's.
//!
//! Whether the caller's stderr ends mid-line is the last byte its
//! destination got ([`super::dest::Dest::ends_mid_line`]): from either
//! stream where both go there (`2>&1`); under `--max-output`, the head's;
//! for bytes that went kernel to kernel (`tee`), the output file's byte
//! where the last of them lies, read back; a line of pgrun's own written to
//! fd 2 after it ends the line. The caller's process then starts the
//! hand-off line with a newline, so that it is a line of its own.
//!
//! N is exact because, until then, the caller's fds get the output in the
//! file's order ([`super::dest::Outbox::in_file_order`]): a piece goes to
//! the caller's stdout or stderr only once every byte before it in the
//! file has gone to the caller (a write that took part of it leaves the
//! rest first in line), so at every moment the caller has exactly the
//! file's first bytes, each of its fds its own stream's among them, and
//! nothing after. No byte past N reached either fd, and nothing comes
//! again: `pgrun output --since N` goes on with no gap and no repeat. The
//! price: while one reader of the caller's stalls, the other stream's
//! bytes to the caller wait behind it too (a direct pipe would let them
//! flow), and once each stream holds a piece owed, the relay stops reading
//! the command, as it does for any slow reader; the command then waits on
//! its next write. Only a run with `--detach-after` pays it, and only
//! while a reader of the caller's stalls: with nothing owed, new bytes go
//! kernel to kernel as in any run. An ordinary run's streams never wait
//! for each other (but to keep a shared destination's writes whole).
//!
//! Under `--max-output` the caller's share of the file is a cut: of the
//! file's first N bytes it got each stream's head (a stream that ended
//! already, its marker and tail too), never the bytes past a stream's head,
//! whose marker and tail would come only at the stream's end; nothing past
//! N. A stream past its head owes nothing and is read on (into its ring).
//!
//! The caller's process dying before it asked (the pipe's end, no byte:
//! a SIGKILL, a harness's own timeout) is no hand-off: the run was still
//! attached to it, and is stopped as a cancelled run, as an ordinary run's
//! guard stops it when its pgrun is killed; the relay lets go of the
//! caller's fds all the same, and says so ([`super::relay::Relay::caller_left`]).

use crate::sys::pipe;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// The byte that asks the supervising pgrun to let go.
pub const LET_GO: u8 = b'L';

/// How long the relay waits for the caller's readers to take what it still
/// owes them, at the hand-off.
pub const LET_GO_GRACE: Duration = Duration::from_millis(20);

/// The supervising pgrun's ends of the two pipes.
pub struct HandOff {
    /// Read: [`LET_GO`], or the end (the caller's process is gone).
    ask: OwnedFd,
    /// Written: N, once let go.
    answer: OwnedFd,
}

impl HandOff {
    pub fn new(ask: OwnedFd, answer: OwnedFd) -> HandOff {
        HandOff { ask, answer }
    }

    /// The fd to poll for the request.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.ask.as_fd()
    }

    /// Whether the caller's process asked (rather than ended, or failed to
    /// be read: it is let go of either way).
    pub fn asked(&self) -> bool {
        let mut byte = [0u8];
        matches!(pipe::read(self.ask.as_fd(), &mut byte), Ok(1) if byte[0] == LET_GO)
    }

    /// Tell the caller's process the answer, and close both pipes. A
    /// caller already gone changes nothing.
    pub fn answer(self, answer: Answer) {
        let _ = pipe::write(self.answer.as_fd(), &answer.to_bytes());
    }
}

/// What the relay answers at the hand-off: N (eight bytes, little-endian),
/// then one byte, 1 if the caller's stderr ends mid-line, else 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The offset in the output file up to which the caller got the output.
    pub n: u64,
    /// The last byte the caller's stderr got (from the command, on either
    /// stream where both go there, or a line of pgrun's own) is no
    /// newline: the hand-off line starts with one, to begin a line.
    pub mid_line: bool,
}

/// The answer's length on the pipe (less than `PIPE_BUF`: one write).
const ANSWER_LEN: usize = 9;

impl Answer {
    fn to_bytes(self) -> [u8; ANSWER_LEN] {
        let mut bytes = [0u8; ANSWER_LEN];
        bytes[..8].copy_from_slice(&self.n.to_le_bytes());
        bytes[8] = u8::from(self.mid_line);
        bytes
    }

    fn from_bytes(bytes: [u8; ANSWER_LEN]) -> Answer {
        let mut n = [0u8; 8];
        n.copy_from_slice(&bytes[..8]);
        Answer { n: u64::from_le_bytes(n), mid_line: bytes[8] != 0 }
    }
}

/// In the caller's process: read the [`Answer`] from `fd`, or `None` at
/// the pipe's end (the supervising pgrun ended without letting go).
pub fn read_answer(fd: BorrowedFd<'_>) -> std::io::Result<Option<Answer>> {
    let mut bytes = [0u8; ANSWER_LEN];
    let mut got = 0;
    while got < bytes.len() {
        match pipe::read(fd, &mut bytes[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(Answer::from_bytes(bytes)))
}

#[cfg(test)]
mod tests {
    use super::Answer;

    #[test]
    fn an_answer_reads_back_as_written() {
        for answer in [Answer { n: 0, mid_line: false }, Answer { n: u64::MAX - 3, mid_line: true }] {
            assert_eq!(Answer::from_bytes(answer.to_bytes()), answer);
        }
    }
}
