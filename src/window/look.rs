//! One look at the output file: the window its options ask for, read
//! where it lies. Every read is positioned (`pread`): a window of a large
//! file costs what the window holds, never a read from the file's start.

use super::cut::{self, LOOK_PAST};
use crate::output::utf8::tail_skip;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// What a window holds, as `--max` or `--tail` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// At most SIZE bytes from N on.
    Head(u64),
    /// The last SIZE bytes past N.
    Tail(u64),
}

impl Shape {
    /// SIZE.
    pub fn size(self) -> u64 {
        match self {
            Shape::Head(size) | Shape::Tail(size) => size,
        }
    }
}

/// A window of the file.
#[derive(Debug, PartialEq, Eq)]
pub struct Window {
    /// N: where the caller asked it to start.
    pub since: u64,
    /// How many bytes past N were left out before it (`--tail`, or an
    /// `--until` line further than SIZE past N).
    pub skipped: u64,
    pub bytes: Vec<u8>,
    /// Nothing more is in the file now (see [`cut::End::eof`]).
    pub eof: bool,
}

impl Window {
    /// Where the next window starts: the `--since` of the next call.
    pub fn next(&self) -> u64 {
        self.since + self.skipped + self.bytes.len() as u64
    }

    /// End the window just after its last newline; empty if it holds
    /// none.
    pub fn end_after_last_line(&mut self) {
        let keep = self.bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if keep < self.bytes.len() {
            self.bytes.truncate(keep);
            self.eof = false;
        }
    }
}

/// The window of `file` (`len` bytes long when looked at) from `since`,
/// shaped by `shape`. `over`: the run writing it is over (a character the
/// file ends inside is then passed, not held back).
pub fn window(file: &File, len: u64, since: u64, shape: Shape, over: bool) -> io::Result<Window> {
    let size = shape.size();
    let start = match shape {
        Shape::Tail(_) if len - since > size => len - size,
        _ => since,
    };
    // Up to the end the file had when looked at (and the few bytes a
    // character past it may take): a SIZE larger than the file costs no
    // more than the file.
    let seen = size.min(len - start);
    let want = seen.saturating_add(LOOK_PAST as u64);
    let read = read_at_most(file, start, want)?;
    let to_end = (read.len() as u64) < want;
    // A tail cut inside a character starts past its continuation bytes.
    let skip = if start > since { tail_skip(&read) } else { 0 };
    let limit = usize::try_from(seen).unwrap_or(usize::MAX).saturating_sub(skip);
    let end = cut::end(&read[skip..], limit, to_end, over);
    let mut bytes = read;
    bytes.truncate(skip + end.len);
    bytes.drain(..skip);
    Ok(Window { since, skipped: start + skip as u64 - since, bytes, eof: end.eof })
}

/// The window that ends just after a line ending at `line_end`: all of
/// the file from `since` if that is at most `size` bytes, else its last
/// `size` bytes (starting on a character), the rest counted as skipped.
pub fn window_to(file: &File, len: u64, since: u64, line_end: u64, size: u64) -> io::Result<Window> {
    let start = if line_end - since > size { line_end - size } else { since };
    let mut bytes = read_at_most(file, start, line_end - start)?;
    let skip = if start > since { tail_skip(&bytes) } else { 0 };
    bytes.drain(..skip);
    let eof = line_end >= len;
    Ok(Window { since, skipped: start + skip as u64 - since, bytes, eof })
}

/// Up to `want` bytes of `file` from `offset`: fewer only where the file
/// ends.
fn read_at_most(file: &File, offset: u64, want: u64) -> io::Result<Vec<u8>> {
    let want = usize::try_from(want).map_err(|_| io::Error::other("a window larger than memory"))?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(want).map_err(|_| io::Error::other(format!("no memory for a window of {want} bytes")))?;
    buf.resize(want, 0);
    let mut got = 0;
    while got < want {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(bytes: &[u8]) -> File {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        file
    }

    #[test]
    fn a_tail_starts_on_a_character_and_says_what_it_skipped() {
        // 10 x, then "é" (C3 A9), then "abc": the last 4 bytes start
        // inside the é, the last 5 with it.
        let text = [&b"xxxxxxxxxx"[..], "é".as_bytes(), b"abc"].concat();
        let file = file_with(&text);
        let w = window(&file, text.len() as u64, 0, Shape::Tail(4), false).unwrap();
        assert_eq!(w, Window { since: 0, skipped: 12, bytes: b"abc".to_vec(), eof: true });
        let w = window(&file, text.len() as u64, 0, Shape::Tail(5), false).unwrap();
        assert_eq!((w.skipped, w.bytes.as_slice()), (10, "éabc".as_bytes()));
        // A tail that fits starts at N.
        let w = window(&file, text.len() as u64, 12, Shape::Tail(64), false).unwrap();
        assert_eq!((w.skipped, w.bytes.as_slice(), w.next()), (0, &b"abc"[..], 15));
    }

    #[test]
    fn a_head_window_ends_before_a_split_character() {
        let text = "ab€cd".as_bytes();
        let file = file_with(text);
        let w = window(&file, text.len() as u64, 0, Shape::Head(4), false).unwrap();
        assert_eq!((w.bytes.as_slice(), w.next(), w.eof), (&b"ab"[..], 2, false));
        let w = window(&file, text.len() as u64, 2, Shape::Head(4), false).unwrap();
        assert_eq!((w.bytes.as_slice(), w.eof), ("€c".as_bytes(), false));
    }

    #[test]
    fn the_window_to_a_line_keeps_the_lines_end() {
        let text = b"0123456789ready\nmore";
        let file = file_with(text);
        let w = window_to(&file, text.len() as u64, 0, 16, 64).unwrap();
        assert_eq!((w.skipped, w.bytes.as_slice(), w.eof), (0, &text[..16], false));
        let w = window_to(&file, text.len() as u64, 0, 16, 6).unwrap();
        assert_eq!((w.skipped, w.bytes.as_slice(), w.next()), (10, &b"ready\n"[..], 16));
    }
}
