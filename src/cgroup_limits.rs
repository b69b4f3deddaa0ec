//! `--memory-max`, `--pids-max`, `--cpus`: limits on the run's cgroup leaf,
//! all its members together. They need `--contain cgroup` (and make it the
//! default); the leaf gets them before the command is born in it (see
//! [`crate::contain::cgroup`]).

/// The cgroup limits asked for; all `None`: none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupLimits {
    /// `memory.max`, in bytes (with `memory.swap.max` 0 and
    /// `memory.oom.group` 1).
    pub memory_max: Option<u64>,
    /// `pids.max`.
    pub pids_max: Option<u64>,
    /// `cpu.max`'s quota in µs per [`CPU_PERIOD_US`].
    pub cpu_quota_us: Option<u64>,
}

/// The `cpu.max` period: 100 ms.
pub const CPU_PERIOD_US: u64 = 100_000;

impl CgroupLimits {
    pub fn any(&self) -> bool {
        self.memory_max.is_some() || self.pids_max.is_some() || self.cpu_quota_us.is_some()
    }

    /// The controllers these limits need, as `cgroup.controllers` names
    /// them.
    pub fn controllers(&self) -> Vec<&'static str> {
        let mut needed = Vec::new();
        if self.memory_max.is_some() {
            needed.push("memory");
        }
        if self.pids_max.is_some() {
            needed.push("pids");
        }
        if self.cpu_quota_us.is_some() {
            needed.push("cpu");
        }
        needed
    }

    /// The files to write in the leaf, in order, and whether a missing
    /// file is fine (`memory.swap.max` where the kernel accounts no swap).
    pub fn files(&self) -> Vec<(&'static str, String, bool)> {
        let mut files = Vec::new();
        if let Some(bytes) = self.memory_max {
            files.push(("memory.max", bytes.to_string(), false));
            files.push(("memory.swap.max", "0".to_string(), true));
            files.push(("memory.oom.group", "1".to_string(), false));
        }
        if let Some(n) = self.pids_max {
            files.push(("pids.max", n.to_string(), false));
        }
        if let Some(quota) = self.cpu_quota_us {
            files.push(("cpu.max", format!("{quota} {CPU_PERIOD_US}"), false));
        }
        files
    }
}

/// What the user can do where the run's leaf cannot be had, or cannot get
/// the controllers `limits` need, for the end of that error line: where a
/// cgroup of one's own with controllers is had (a systemd scope or unit
/// with `Delegate=yes`, in which pgrun is alone), and what works without
/// one (`--rlimit as=SIZE` bounds each process's memory; `--contain auto`
/// falls back to `tree`).
pub fn what_to_do(limits: &CgroupLimits) -> String {
    let delegated = "run pgrun in a cgroup delegated to you (systemd-run --user --scope -p Delegate=yes pgrun ..., \
                     or a unit with Delegate=yes)";
    let without = if limits.memory_max.is_some() {
        ", or bound each process's memory without cgroups: --rlimit as=SIZE"
    } else if limits.any() {
        ""
    } else {
        ", or use --contain auto, which falls back to tree where no cgroup can be had"
    };
    format!("{delegated}{without}")
}

/// The error of a run whose leaf cannot be had (`why`), as the user
/// should read it: named after what they typed. A limit implies `--contain
/// cgroup`, so with limits the line names the first limit (where `why`
/// does not already), never `--contain cgroup`.
pub fn no_leaf(limits: &CgroupLimits, why: &str) -> String {
    let option = [("--memory-max", limits.memory_max.is_some()), ("--pids-max", limits.pids_max.is_some())]
        .into_iter()
        .find_map(|(option, given)| given.then_some(option))
        .or(limits.cpu_quota_us.map(|_| "--cpus"));
    match option {
        None => format!("--contain cgroup: {why}"),
        Some(_) if why.starts_with("--") => why.to_string(),
        Some(option) => format!("{option} needs a cgroup of its own: {why}"),
    }
}

/// `--pids-max N`: a whole number of tasks, at least 1.
pub fn parse_pids_max(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n >= 1 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(format!("'{text}' is not a number of tasks (1 or more)")),
    }
}

/// `--cpus X`: a decimal number of CPUs (`0.5`, `2`), as `cpu.max`'s quota
/// per 100 ms period in µs, rounded up; at least 0.01 (the kernel's
/// smallest quota is 1 ms).
pub fn parse_cpus(text: &str) -> Result<u64, String> {
    let bad = || format!("'{text}' is not a number of CPUs (e.g. 0.5, 2)");
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) || (whole.is_empty() && fraction.is_empty()) {
        return Err(bad());
    }
    let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| bad())? };
    // CPU_PERIOD_US is 10^5: five digits of the fraction are whole µs, any
    // further non-zero digit rounds up.
    let (head, tail) = fraction.split_at(fraction.len().min(5));
    let mut micros: u64 = format!("{head:0<5}").parse().map_err(|_| bad())?;
    if tail.bytes().any(|b| b != b'0') {
        micros += 1;
    }
    let quota = whole.checked_mul(CPU_PERIOD_US).and_then(|q| q.checked_add(micros)).ok_or_else(bad)?;
    if quota < 1000 {
        return Err(format!("'{text}' is below the smallest share of CPU, 0.01"));
    }
    Ok(quota)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_as_quota() {
        assert_eq!(parse_cpus("0.5"), Ok(50_000));
        assert_eq!(parse_cpus("2"), Ok(200_000));
        assert_eq!(parse_cpus(".25"), Ok(25_000));
        assert_eq!(parse_cpus("1."), Ok(100_000));
        assert_eq!(parse_cpus("0.01"), Ok(1000));
        assert_eq!(parse_cpus("0.000011"), Err("'0.000011' is below the smallest share of CPU, 0.01".into()));
        assert_eq!(parse_cpus("0.123456"), Ok(12_346));
        for bad in ["", ".", "0", "0.0", "-1", "1e3", "x", "1.5.2", " 1", "0.001"] {
            assert!(parse_cpus(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn pids() {
        assert_eq!(parse_pids_max("5"), Ok(5));
        for bad in ["0", "", "-1", "+5", "5x", "max"] {
            assert!(parse_pids_max(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn errors_name_what_was_typed_and_say_what_to_do() {
        let none = CgroupLimits::default();
        let memory = CgroupLimits { memory_max: Some(1 << 20), ..none };
        let pids = CgroupLimits { pids_max: Some(5), ..none };
        let cpus = CgroupLimits { cpu_quota_us: Some(50_000), ..none };
        assert_eq!(no_leaf(&none, "read-only"), "--contain cgroup: read-only");
        assert_eq!(no_leaf(&memory, "read-only"), "--memory-max needs a cgroup of its own: read-only");
        assert_eq!(no_leaf(&cpus, "read-only"), "--cpus needs a cgroup of its own: read-only");
        assert_eq!(no_leaf(&pids, "--pids-max needs the pids controller"), "--pids-max needs the pids controller");
        for limits in [none, memory, pids, cpus] {
            assert!(what_to_do(&limits).contains("systemd-run --user --scope -p Delegate=yes pgrun"));
        }
        assert!(what_to_do(&memory).ends_with("--rlimit as=SIZE"));
        assert!(what_to_do(&none).contains("--contain auto"));
        assert!(!what_to_do(&pids).contains("--rlimit") && !what_to_do(&pids).contains("--contain"));
    }

    #[test]
    fn files_to_write() {
        let limits = CgroupLimits { memory_max: Some(64 << 20), pids_max: Some(5), cpu_quota_us: Some(20_000) };
        assert_eq!(limits.controllers(), ["memory", "pids", "cpu"]);
        let names: Vec<_> = limits.files().into_iter().map(|(f, v, _)| format!("{f}={v}")).collect();
        assert_eq!(
            names,
            ["memory.max=67108864", "memory.swap.max=0", "memory.oom.group=1", "pids.max=5", "cpu.max=20000 100000"]
        );
    }
}
