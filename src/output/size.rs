//! Parsing `--max-output SIZE`: bytes, with the suffixes `head -c` takes.

/// Parse SIZE: decimal digits with an optional suffix `K`, `M`, `G`
/// (1024-based) or `KB`, `MB`, `GB` (1000-based). No sign, no spaces, no
/// fraction; 0 and values past 2^64 - 1 are refused.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, suffix) = text.split_at(digits);
    let unit: u64 = match suffix {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(format!("'{text}' is not a size (bytes, with an optional K, M, G, KB, MB or GB)")),
    };
    if number.is_empty() {
        return Err(format!("'{text}' is not a size (bytes, with an optional K, M, G, KB, MB or GB)"));
    }
    let n: u64 = number.parse().map_err(|_| format!("'{text}' is too large"))?;
    let size = n.checked_mul(unit).ok_or_else(|| format!("'{text}' is too large"))?;
    if size == 0 {
        return Err("the size must be at least 1 byte".to_string());
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_head_takes_them() {
        assert_eq!(parse_size("1"), Ok(1));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1KB"), Ok(1000));
        assert_eq!(parse_size("3MB"), Ok(3_000_000));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("007"), Ok(7));
    }

    #[test]
    fn everything_else_is_refused() {
        for bad in [
            "",
            "0",
            "0K",
            "00",
            "K",
            "-1",
            "+1",
            " 1",
            "1 ",
            "1.5M",
            "1k",
            "1KiB",
            "1T",
            "1b",
            "0x10",
            "1MM",
            "18446744073709551616",
            "17179869184G",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
    }
}
