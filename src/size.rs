//! Parsing SIZE arguments: `--max-output`, `--memory-max` and the byte
//! limits of `--rlimit` all read sizes here, so that one spelling works
//! everywhere.
//!
//! A SIZE is decimal digits with an optional unit, as `head -c` reads it
//! and as Docker's `--memory` is commonly written: `K`, `M` or `G`, in
//! either case, alone or followed by `iB`, is 1024-based (`1k`, `512m`,
//! `2G`, `1KiB`, `1MiB`); followed by `B` it is 1000-based (`1kB`, `1KB`,
//! `10MB`), which keeps what the contract fixes for `--max-output` (`K`,
//! `M`, `G` 1024-based, `KB`, `MB`, `GB` 1000-based). Nothing else: no
//! fraction, sign or space, no `b` alone (512-byte blocks to `head`, bytes
//! to Docker), no `kb` (kilobits to some), no `T`.

/// Parse a SIZE of at least one byte (`--max-output`, `--memory-max`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    match parse_bytes(text)? {
        0 => Err("the size must be at least 1 byte".to_string()),
        size => Ok(size),
    }
}

/// Parse a SIZE that may be 0 (a byte limit of `--rlimit`: `core=0`).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let bad = || format!("'{text}' is not a size (e.g. 4096, 64K, 512m, 2G, 1MiB, 1kB)");
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return Err(bad());
    }
    let mut letters = unit.chars();
    let power = match letters.next() {
        None => 0,
        Some('k' | 'K') => 1,
        Some('m' | 'M') => 2,
        Some('g' | 'G') => 3,
        Some(_) => return Err(bad()),
    };
    let base: u64 = match letters.as_str() {
        "" | "iB" => 1024,
        "B" => 1000,
        _ => return Err(bad()),
    };
    let too_large = || format!("'{text}' is too large");
    let n: u64 = number.parse().map_err(|_| too_large())?;
    n.checked_mul(base.pow(power)).ok_or_else(too_large)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_head_and_docker_take_them() {
        for (text, want) in [
            ("1", 1),
            ("4096", 4096),
            ("007", 7),
            ("1K", 1 << 10),
            ("1k", 1 << 10),
            ("1KiB", 1 << 10),
            ("1kiB", 1 << 10),
            ("1M", 1 << 20),
            ("512m", 512 << 20),
            ("1MiB", 1 << 20),
            ("2G", 2 << 30),
            ("2g", 2 << 30),
            ("1GiB", 1 << 30),
            ("1KB", 1_000),
            ("1kB", 1_000),
            ("3MB", 3_000_000),
            ("1GB", 1_000_000_000),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(parse_size(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn everything_else_is_refused() {
        for bad in [
            "",
            "K",
            "-1",
            "+1",
            " 1",
            "1 ",
            "1 K",
            "1.5M",
            "1T",
            "1b",
            "1B",
            "1kb",
            "1KIB",
            "1Ki",
            "1iB",
            "0x10",
            "1MM",
            "1e3",
            "18446744073709551616",
            "17179869184G",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} was accepted");
            assert!(parse_bytes(bad).is_err(), "{bad:?} was accepted as bytes");
        }
    }

    #[test]
    fn zero_is_bytes_but_not_a_size() {
        for zero in ["0", "00", "0K", "0MiB"] {
            assert_eq!(parse_bytes(zero), Ok(0), "{zero}");
            assert_eq!(parse_size(zero), Err("the size must be at least 1 byte".to_string()), "{zero}");
        }
    }
}
