//! What a stream's [`Limit`] makes of its bytes on their way to the
//! destination: under `--max-output` the head-and-tail [`Cut`], else the
//! whole stream, counted. Pure: it is fed bytes and says what to write.

use super::Limit;
use super::limit::{Cut, StreamStats};
use anyhow::{Context, Result};

/// What a stream's bytes become on their way to its destination.
pub enum Shape {
    /// `--max-output`: head, marker, tail.
    Cut(Cut),
    /// Every byte as it comes; how many so far.
    Whole(u64),
}

impl Shape {
    /// The shape for `limit`: under [`Limit::Bytes`] the ring is reserved
    /// now, so that a SIZE too large for memory fails before the start.
    pub fn for_limit(limit: Limit) -> Result<Shape> {
        match limit {
            Limit::None => Ok(Shape::Whole(0)),
            Limit::Bytes(size) => Cut::new(size)
                .map(Shape::Cut)
                .with_context(|| format!("cannot reserve memory for --max-output {size} (2 x {size} bytes)")),
        }
    }

    /// The bytes to write now for `bytes` read, appended to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        match self {
            Shape::Cut(cut) => cut.feed(bytes, out),
            Shape::Whole(count) => {
                *count += bytes.len() as u64;
                out.extend_from_slice(bytes);
            }
        }
    }

    /// How many of the next bytes may go to the destination without being
    /// looked at, at most `len`: a whole stream's next `len`; a cut
    /// stream's head up to [`Cut::may_pass`]; nothing past the head.
    pub fn may_pass(&self, len: usize) -> usize {
        match self {
            Shape::Whole(_) => len,
            Shape::Cut(cut) => usize::try_from(cut.may_pass()).unwrap_or(usize::MAX).min(len),
        }
    }

    /// `n` bytes (at most [`Shape::may_pass`]) went to the destination
    /// kernel to kernel: count them.
    pub fn passed(&mut self, n: usize) {
        match self {
            Shape::Whole(count) => *count += n as u64,
            Shape::Cut(cut) => cut.passed(n as u64),
        }
    }

    /// Whether what is read from now on is only kept, not written (so
    /// reading need not wait for the reader).
    pub fn past_head(&self) -> bool {
        matches!(self, Shape::Cut(cut) if cut.past_head())
    }

    /// The stream has ended: what is still to write, and the stats.
    pub fn finish(self, out: &mut Vec<u8>) -> (Vec<u8>, StreamStats) {
        match self {
            Shape::Cut(cut) => cut.finish(out),
            Shape::Whole(bytes) => (Vec::new(), StreamStats { bytes, omitted: 0 }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_stream_passes_everything_and_counts_it() {
        let mut shape = Shape::for_limit(Limit::None).unwrap();
        assert_eq!(shape.may_pass(1 << 20), 1 << 20);
        shape.passed(10);
        let mut out = Vec::new();
        shape.feed(b"abc", &mut out);
        assert_eq!(out, b"abc");
        assert!(!shape.past_head());
        let (rest, stats) = shape.finish(&mut Vec::new());
        assert!(rest.is_empty());
        assert_eq!(stats, StreamStats { bytes: 13, omitted: 0 });
    }

    #[test]
    fn a_cut_stream_passes_only_its_head_far_from_the_cut() {
        let mut shape = Shape::for_limit(Limit::Bytes(1000)).unwrap();
        let pass = 500 - super::super::limit::PASS_MARGIN as usize;
        assert_eq!(shape.may_pass(1 << 20), pass);
        assert_eq!(shape.may_pass(7), 7);
        shape.passed(pass);
        assert_eq!(shape.may_pass(1 << 20), 0);
        let mut out = Vec::new();
        shape.feed(&[b'x'; 600], &mut out);
        assert_eq!(out.len(), 500 - pass, "the head's end was not written");
        assert!(shape.past_head());
        let (_, stats) = shape.finish(&mut Vec::new());
        assert_eq!(stats.bytes, pass as u64 + 600);
    }
}
