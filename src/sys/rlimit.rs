//! Resource limits for `--rlimit`: `getrlimit(2)` in pgrun, to check a
//! limit before the spawn, and `setrlimit(2)` in the forked child, before
//! its exec. pgrun never changes its own limits.

use std::io;

/// A limit's value as the kernel takes it.
pub type Raw = libc::rlim_t;

/// "No limit".
pub const INFINITY: Raw = libc::RLIM_INFINITY;

/// The resource number's type: glibc declares its own enum type for it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type Resource = libc::c_int;

/// The limits `--rlimit` can set, named as `prlimit(1)` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    As,
    Core,
    Cpu,
    Data,
    Fsize,
    Memlock,
    Nofile,
    Nproc,
    Stack,
}

/// What a limit counts, which says how its value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Bytes,
    Seconds,
    Count,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::As,
        Kind::Core,
        Kind::Cpu,
        Kind::Data,
        Kind::Fsize,
        Kind::Memlock,
        Kind::Nofile,
        Kind::Nproc,
        Kind::Stack,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::As => "as",
            Kind::Core => "core",
            Kind::Cpu => "cpu",
            Kind::Data => "data",
            Kind::Fsize => "fsize",
            Kind::Memlock => "memlock",
            Kind::Nofile => "nofile",
            Kind::Nproc => "nproc",
            Kind::Stack => "stack",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Kind::Cpu => Unit::Seconds,
            Kind::Nofile | Kind::Nproc => Unit::Count,
            _ => Unit::Bytes,
        }
    }

    fn resource(self) -> Resource {
        match self {
            Kind::As => libc::RLIMIT_AS,
            Kind::Core => libc::RLIMIT_CORE,
            Kind::Cpu => libc::RLIMIT_CPU,
            Kind::Data => libc::RLIMIT_DATA,
            Kind::Fsize => libc::RLIMIT_FSIZE,
            Kind::Memlock => libc::RLIMIT_MEMLOCK,
            Kind::Nofile => libc::RLIMIT_NOFILE,
            Kind::Nproc => libc::RLIMIT_NPROC,
            Kind::Stack => libc::RLIMIT_STACK,
        }
    }

    fn index(self) -> usize {
        Kind::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// A soft and a hard limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub soft: Raw,
    pub hard: Raw,
}

/// `getrlimit(2)`: pgrun's own limit of `kind` (which the command
/// inherits unless told otherwise).
pub fn get(kind: Kind) -> io::Result<Limit> {
    // SAFETY: a zeroed rlimit is a valid buffer for getrlimit to fill.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a valid resource number and a writable rlimit.
    if unsafe { libc::getrlimit(kind.resource(), &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Limit { soft: limit.rlim_cur, hard: limit.rlim_max })
}

/// Whether pgrun may raise a hard limit: `CAP_SYS_RESOURCE` in its
/// effective set where `/proc/self/status` says (Linux's capabilities, a
/// fact of the kernel whichever path pgrun takes), else being root.
pub fn may_raise_hard() -> bool {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status")
        && let Some(caps) = status.lines().find_map(|l| l.strip_prefix("CapEff:"))
        && let Ok(caps) = u64::from_str_radix(caps.trim(), 16)
    {
        const CAP_SYS_RESOURCE: u32 = 24;
        return caps & (1 << CAP_SYS_RESOURCE) != 0;
    }
    super::ids::geteuid() == 0
}

/// The limits to set in the command's process before exec, one slot per
/// [`Kind`]: plain data, copied into the forked child as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    slots: [Option<Limit>; 9],
}

impl Settings {
    /// Set `kind` to `limit` (a later setting of the same kind wins).
    pub fn set(&mut self, kind: Kind, limit: Limit) {
        self.slots[kind.index()] = Some(limit);
    }

    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }

    /// The settings, with each one's slot number.
    pub fn iter(&self) -> impl Iterator<Item = (usize, Kind, Limit)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.map(|limit| (i, Kind::ALL[i], limit)))
    }

    /// The kind in slot `index`, for an error the child reports.
    pub fn kind_at(index: usize) -> Option<Kind> {
        Kind::ALL.get(index).copied()
    }

    /// In the forked child: `setrlimit(2)` for each setting, in slot
    /// order; the slot number of the first that fails (errno is left set).
    /// Allocates nothing and makes only `setrlimit` calls, a plain system
    /// call in every C library (not on POSIX's list of async-signal-safe
    /// functions, but it takes no lock and touches no shared state).
    ///
    /// # Safety
    /// Only to be called in the forked child, before exec.
    pub unsafe fn apply_in_child(&self) -> Result<(), usize> {
        for (index, slot) in self.slots.iter().enumerate() {
            let Some(limit) = slot else { continue };
            let raw = libc::rlimit { rlim_cur: limit.soft, rlim_max: limit.hard };
            // SAFETY: a valid resource number and rlimit.
            if unsafe { libc::setrlimit(Kind::ALL[index].resource(), &raw) } != 0 {
                return Err(index);
            }
        }
        Ok(())
    }
}
