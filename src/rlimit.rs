//! `--rlimit NAME=SOFT[:HARD]`: resource limits for the command, set in
//! its own process before it execs (never in pgrun).
//!
//! The spelling is `prlimit(1)`'s: NAME is `as`, `core`, `cpu`, `data`,
//! `fsize`, `memlock`, `nofile`, `nproc` or `stack`; a single value sets
//! both limits, `SOFT:HARD` each, `SOFT:` only the soft one and `:HARD` only
//! the hard one (the other stays as pgrun has it). A value is `unlimited`, a
//! SIZE for the byte limits (`64M`, `1G`, `512KB`, plain bytes, `0`), a DUR
//! for `cpu` (rounded up to whole seconds, the kernel's unit), or a plain
//! number for `nofile` and `nproc`. The option may be repeated; a later
//! setting of the same NAME replaces an earlier one.
//!
//! Parsing is the command line's (a usage error, 125). [`resolve`] then
//! checks each limit against pgrun's own, before the spawn: a soft limit
//! above the hard one, or a hard limit raised without the privilege to
//! (`CAP_SYS_RESOURCE`), is refused there, 125, and nothing runs. What only
//! the kernel can refuse (a `nofile` above `fs.nr_open`) is refused by the
//! `setrlimit` in the child, which reports it through the exec-status pipe
//! as a set-up step: 125 too, before the command runs.

use crate::sys::rlimit::{INFINITY, Kind, Limit, Raw, Settings, Unit, get, may_raise_hard};

/// One `--rlimit` as written: the values not given are pgrun's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RlimitArg {
    pub kind: Kind,
    pub soft: Option<Raw>,
    pub hard: Option<Raw>,
}

/// Parse `NAME=SOFT[:HARD]` (see the module doc).
pub fn parse_rlimit(text: &str) -> Result<RlimitArg, String> {
    let names = || Kind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ");
    let (name, values) = text.split_once('=').ok_or_else(|| format!("'{text}' is not NAME=SOFT[:HARD]"))?;
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| format!("'{name}' is not a resource limit (one of {})", names()))?;
    let value = |v: &str| parse_value(kind, v).map_err(|why| format!("{name}: {why}"));
    let (soft, hard) = match values.split_once(':') {
        None => {
            let both = value(values)?;
            (Some(both), Some(both))
        }
        Some(("", "")) => return Err(format!("'{text}' gives no value")),
        Some((soft, hard)) => {
            ((!soft.is_empty()).then(|| value(soft)).transpose()?, (!hard.is_empty()).then(|| value(hard)).transpose()?)
        }
    };
    if let (Some(s), Some(h)) = (soft, hard)
        && s > h
    {
        return Err(format!("{name}: the soft limit {} is above the hard limit {}", show(kind, s), show(kind, h)));
    }
    Ok(RlimitArg { kind, soft, hard })
}

/// One value of a limit of `kind`.
fn parse_value(kind: Kind, text: &str) -> Result<Raw, String> {
    if text == "unlimited" {
        return Ok(INFINITY);
    }
    let n: u64 = match kind.unit() {
        Unit::Count => {
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("'{text}' is not a number (or unlimited)"));
            }
            text.parse().map_err(|_| format!("'{text}' is out of range"))?
        }
        // A SIZE, 0 included (core=0: no core dumps).
        Unit::Bytes => crate::size::parse_bytes(text).map_err(|e| format!("{e} (or unlimited)"))?,
        Unit::Seconds => {
            let d = crate::duration::parse_duration(text).map_err(|e| format!("{e} (or unlimited)"))?;
            d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
        }
    };
    // The largest value the kernel's type holds means "unlimited": a
    // number that reaches it is out of range.
    if u128::from(n) >= INFINITY as u128 {
        return Err(format!("'{text}' is out of range (the largest limit is {})", INFINITY as u128 - 1));
    }
    Ok(n as Raw)
}

/// A value as the user would write it back.
fn show(kind: Kind, v: Raw) -> String {
    match (v == INFINITY, kind.unit()) {
        (true, _) => "unlimited".to_string(),
        (false, Unit::Seconds) => format!("{v}s"),
        (false, _) => v.to_string(),
    }
}

/// Check every `--rlimit` against pgrun's own limits, before the spawn,
/// and settle what the command's process sets: `Err` says, in one line,
/// which limit cannot be set and why.
pub fn resolve(args: &[RlimitArg]) -> Result<Settings, String> {
    let mut settings = Settings::default();
    for arg in args {
        let name = arg.kind.name();
        let current = get(arg.kind).map_err(|e| format!("--rlimit {name}: cannot read pgrun's own limit: {e}"))?;
        let limit = Limit { soft: arg.soft.unwrap_or(current.soft), hard: arg.hard.unwrap_or(current.hard) };
        if limit.soft > limit.hard {
            return Err(format!(
                "--rlimit {name}: the soft limit {} is above the hard limit {}",
                show(arg.kind, limit.soft),
                show(arg.kind, limit.hard)
            ));
        }
        if limit.hard > current.hard && !may_raise_hard() {
            return Err(format!(
                "--rlimit {name}: cannot raise the hard limit from {} to {} without privilege (CAP_SYS_RESOURCE)",
                show(arg.kind, current.hard),
                show(arg.kind, limit.hard)
            ));
        }
        settings.set(arg.kind, limit);
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(kind: Kind, v: Raw) -> RlimitArg {
        RlimitArg { kind, soft: Some(v), hard: Some(v) }
    }

    #[test]
    fn names_and_values_as_prlimit_takes_them() {
        assert_eq!(parse_rlimit("nofile=64"), Ok(both(Kind::Nofile, 64)));
        assert_eq!(
            parse_rlimit("nofile=64:128"),
            Ok(RlimitArg { kind: Kind::Nofile, soft: Some(64), hard: Some(128) })
        );
        assert_eq!(parse_rlimit("nofile=64:"), Ok(RlimitArg { kind: Kind::Nofile, soft: Some(64), hard: None }));
        assert_eq!(parse_rlimit("nofile=:128"), Ok(RlimitArg { kind: Kind::Nofile, soft: None, hard: Some(128) }));
        assert_eq!(parse_rlimit("core=0"), Ok(both(Kind::Core, 0)));
        assert_eq!(parse_rlimit("core=0K"), Ok(both(Kind::Core, 0)));
        assert_eq!(parse_rlimit("as=64M"), Ok(both(Kind::As, 64 << 20)));
        assert_eq!(
            parse_rlimit("fsize=1KB:unlimited"),
            Ok(RlimitArg { kind: Kind::Fsize, soft: Some(1000), hard: Some(INFINITY) })
        );
        assert_eq!(parse_rlimit("cpu=1"), Ok(both(Kind::Cpu, 1)));
        assert_eq!(parse_rlimit("cpu=1.5"), Ok(both(Kind::Cpu, 2)));
        assert_eq!(parse_rlimit("cpu=250ms"), Ok(both(Kind::Cpu, 1)));
        assert_eq!(parse_rlimit("cpu=2m"), Ok(both(Kind::Cpu, 120)));
        assert_eq!(parse_rlimit("stack=unlimited"), Ok(both(Kind::Stack, INFINITY)));
    }

    #[test]
    fn everything_else_is_refused() {
        for bad in [
            "nofile",
            "nofile=",
            "nofile=:",
            "NOFILE=1",
            "files=1",
            "rss=1",
            "=1",
            "nofile=1K",
            "nofile=-1",
            "nofile=1.5",
            "nofile=x",
            "nofile=2:1",
            "nofile=1:2:3",
            "core=1T",
            "core=-1",
            "core=0x10",
            "cpu=1x",
            "cpu=-1",
            "nproc=18446744073709551615",
            "nproc=99999999999999999999",
            "stack=infinity",
        ] {
            assert!(parse_rlimit(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
