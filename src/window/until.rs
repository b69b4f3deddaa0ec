//! `--until REGEX`: the first line past N that matches, found as the file
//! grows. Lines start at N (a caller that pages from `next` has seen what
//! came before) and end with a newline; the line the file ends inside is
//! not matched until its newline comes, unless the run is over, when it
//! can grow no more. A line is matched without its newline; bytes that
//! are not UTF-8 are matched as U+FFFD. A line longer than [`LINE_MAX`]
//! is matched on its first [`LINE_MAX`] bytes (a regex needs the line in
//! memory; what a harness waits for is a short line). Each look reads on
//! from where the last one stopped, so a long wait reads the file once.

use regex_lite::Regex;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The most of one line that is kept to be matched.
pub const LINE_MAX: usize = 1 << 20;

/// How much of the file one read takes.
const CHUNK: usize = 64 << 10;

/// The search for a matching line, as far as the file has been read.
pub struct Until {
    regex: Regex,
    /// The file has been read up to here.
    read_to: u64,
    /// Where the line being read starts.
    line_start: u64,
    /// Its first bytes (at most [`LINE_MAX`]).
    line: Vec<u8>,
    /// The end of the first matching line (just past its newline), once
    /// found.
    found: Option<u64>,
}

impl Until {
    /// A search for `regex` in the lines from offset `since` on.
    pub fn new(regex: Regex, since: u64) -> Until {
        Until { regex, read_to: since, line_start: since, line: Vec::new(), found: None }
    }

    /// Read `file` on up to `len` (its size now), line by line, until a
    /// line matches; with `over` (nothing more will come), the line the
    /// file ends inside counts as whole. The end of the matching line, if
    /// one has matched.
    pub fn look(&mut self, file: &File, len: u64, over: bool) -> io::Result<Option<u64>> {
        let mut chunk = vec![0u8; CHUNK];
        while self.found.is_none() && self.read_to < len {
            let want = usize::try_from(len - self.read_to).unwrap_or(CHUNK).min(CHUNK);
            let got = match file.read_at(&mut chunk[..want], self.read_to) {
                Ok(0) => break, // the file shrank meanwhile: the caller sees it
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.take(&chunk[..got]);
        }
        if over && self.found.is_none() && self.read_to == len && self.line_start < len && self.matches() {
            self.found = Some(len);
        }
        Ok(self.found)
    }

    /// Take the next bytes of the file, which start at `read_to`.
    fn take(&mut self, bytes: &[u8]) {
        let mut at = 0;
        while at < bytes.len() {
            let rest = &bytes[at..];
            match rest.iter().position(|&b| b == b'\n') {
                Some(newline) => {
                    self.keep(&rest[..newline]);
                    let end = self.read_to + (at + newline + 1) as u64;
                    if self.matches() {
                        self.found = Some(end);
                        self.read_to = end;
                        return;
                    }
                    self.line_start = end;
                    self.line.clear();
                    at += newline + 1;
                }
                None => {
                    self.keep(rest);
                    at = bytes.len();
                }
            }
        }
        self.read_to += bytes.len() as u64;
    }

    /// Keep `bytes` of the line being read, up to [`LINE_MAX`] in all.
    fn keep(&mut self, bytes: &[u8]) {
        let room = LINE_MAX.saturating_sub(self.line.len());
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Whether the line kept so far matches.
    fn matches(&self) -> bool {
        self.regex.is_match(&String::from_utf8_lossy(&self.line))
    }
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
    fn the_first_matching_whole_line_past_since_ends_the_search() {
        let text = b"ready? no\nstill starting\nready on 8000\nready again\n";
        let file = file_with(text);
        let mut until = Until::new(Regex::new("^ready on").unwrap(), 0);
        let end = until.look(&file, text.len() as u64, false).unwrap();
        assert_eq!(end, Some(("ready? no\nstill starting\nready on 8000\n".len()) as u64));
        // From past that line, the next one.
        let mut until = Until::new(Regex::new("^ready").unwrap(), end.unwrap());
        assert_eq!(until.look(&file, text.len() as u64, false).unwrap(), Some(text.len() as u64));
    }

    #[test]
    fn a_line_without_its_newline_waits_for_it_or_for_the_runs_end() {
        let file = file_with(b"one\nready");
        let mut until = Until::new(Regex::new("^ready$").unwrap(), 0);
        assert_eq!(until.look(&file, 9, false).unwrap(), None);
        assert_eq!(until.look(&file, 9, true).unwrap(), Some(9));
    }

    #[test]
    fn the_search_goes_on_where_it_stopped() {
        let mut file = file_with(b"rea");
        let mut until = Until::new(Regex::new("^ready$").unwrap(), 0);
        assert_eq!(until.look(&file, 3, false).unwrap(), None);
        file.write_all(b"dy\n").unwrap();
        assert_eq!(until.look(&file, 6, false).unwrap(), Some(6));
    }

    #[test]
    fn a_long_line_is_matched_on_its_first_line_max_bytes() {
        let mut text = b"x".repeat(LINE_MAX + 10);
        text.extend_from_slice(b"tail\n");
        let file = file_with(&text);
        let mut until = Until::new(Regex::new("tail").unwrap(), 0);
        assert_eq!(until.look(&file, text.len() as u64, false).unwrap(), None);
        let mut until = Until::new(Regex::new("^x+$").unwrap(), 0);
        assert_eq!(until.look(&file, text.len() as u64, false).unwrap(), Some(text.len() as u64));
    }
}
