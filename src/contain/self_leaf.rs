//! The controllers a run's limits need, made available to its leaf: and
//! where pgrun was alone in its cgroup, the leaf of its own it moves into
//! so that controllers can be handed down ([`SelfLeaf`]), left again when
//! pgrun's work is over. Used by [`super::cgroup::Leaf::create`].

use crate::backoff::Backoff;
use crate::cgroup_limits::CgroupLimits;
use crate::sys::{self, cgroup};
use crate::{say, verbose};
use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the leaf's removal refused with EBUSY (pgrun's own exit being
/// freed) is tried again: as long as the run's leaf's.
const REMOVE_PATIENCE: Duration = Duration::from_secs(1);

/// The option that needs `controller`, for messages.
fn option_needing(controller: &str) -> &'static str {
    match controller {
        "memory" => "--memory-max",
        "pids" => "--pids-max",
        _ => "--cpus",
    }
}

/// Make the controllers `limits` need available to a leaf made under
/// `parent` (pgrun's own cgroup): each must be in its
/// `cgroup.controllers`, and is enabled in its `cgroup.subtree_control`
/// if it is not already. cgroup v2 hands controllers down only from a
/// cgroup with no process of its own (the root excepted): if pgrun is the
/// only process of `parent` (a container's PID 1 in its own cgroup
/// namespace; the guard is not forked yet), pgrun first moves itself into
/// a leaf of its own beside the run's, `pgrun-PID-self-RANDOM` (left in
/// place: it holds pgrun until pgrun exits); if other processes share
/// it, the limits cannot be had. pgrun never moves any other process.
pub(super) fn enable_controllers(parent: &Path, limits: &CgroupLimits) -> Result<Option<SelfLeaf>, String> {
    let needed = limits.controllers();
    let offered = cgroup::read_words(parent, "cgroup.controllers")
        .map_err(|e| format!("cannot read {}/cgroup.controllers: {e}", parent.display()))?;
    if let Some(missing) = needed.iter().find(|c| !offered.iter().any(|o| o == *c)) {
        return Err(format!(
            "{} needs the {missing} controller, which cgroup {} does not offer ({} in its cgroup.controllers); {}",
            option_needing(missing),
            parent.display(),
            if offered.is_empty() { "none".to_string() } else { format!("only {}", offered.join(" ")) },
            crate::cgroup_limits::what_to_do(limits)
        ));
    }
    let enabled = cgroup::read_words(parent, "cgroup.subtree_control")
        .map_err(|e| format!("cannot read {}/cgroup.subtree_control: {e}", parent.display()))?;
    let to_enable: Vec<&str> = needed.into_iter().filter(|c| !enabled.iter().any(|e| e == c)).collect();
    if to_enable.is_empty() {
        return Ok(None);
    }
    let request = to_enable.iter().map(|c| format!("+{c}")).collect::<Vec<_>>().join(" ");
    let cannot = |e: &io::Error| {
        format!(
            "{} needs the {} controller, which cannot be enabled in {}/cgroup.subtree_control: {e}; {}",
            option_needing(to_enable[0]),
            to_enable.join(" and "),
            parent.display(),
            crate::cgroup_limits::what_to_do(limits)
        )
    };
    // Checked before anything is written: the kernel refuses a domain
    // controller (memory) in a cgroup with processes (EBUSY), but takes a
    // threaded one (pids, cpu) and then refuses every process in the new
    // leaf. The root cgroup (it has no cgroup.type) may have processes.
    if parent.join("cgroup.type").exists() {
        let members =
            cgroup::procs_here(parent).map_err(|e| format!("cannot read {}/cgroup.procs: {e}", parent.display()))?;
        let me = sys::getpid();
        let others = members.iter().filter(|&&p| p != me).count();
        if others > 0 {
            return Err(format!(
                "{} needs the {} controller, which cannot be enabled in cgroup {}: {others} other process(es) share it \
                 with pgrun, and cgroup v2 hands controllers down only from a cgroup with no process of its own; {}",
                option_needing(to_enable[0]),
                to_enable.join(" and "),
                parent.display(),
                crate::cgroup_limits::what_to_do(limits)
            ));
        }
        if members.contains(&me) {
            let own = parent.join(format!("pgrun-{me}-self-{:016x}", sys::random_bits()));
            cgroup::create(&own)
                .map_err(|e| format!("cannot create cgroup {} for pgrun itself: {e}", own.display()))?;
            if let Err(e) = cgroup::write_file(&own, "cgroup.procs", "0") {
                let _ = cgroup::remove_one(&own);
                return Err(format!("cannot move pgrun into cgroup {}: {e}", own.display()));
            }
            verbose!("moved pgrun into {} to enable {request} in {}", own.display(), parent.display());
            // Left on every way out from here, an error below included.
            let mut self_leaf = SelfLeaf {
                dir: own,
                parent: parent.to_path_buf(),
                enabled: Vec::new(),
                left: Cell::new(false),
                leave_on_drop: true,
            };
            cgroup::write_file(parent, "cgroup.subtree_control", &request).map_err(|e| cannot(&e))?;
            verbose!("enabled {request} in {}/cgroup.subtree_control", parent.display());
            self_leaf.enabled = to_enable.iter().map(|c| c.to_string()).collect();
            return Ok(Some(self_leaf));
        }
    }
    cgroup::write_file(parent, "cgroup.subtree_control", &request).map_err(|e| cannot(&e))?;
    verbose!("enabled {request} in {}/cgroup.subtree_control", parent.display());
    Ok(None)
}

/// pgrun's own leaf, `pgrun-PID-self-RANDOM`, made when pgrun was alone
/// in its cgroup and a limit needed a controller enabled there (see
/// [`enable_controllers`]). It is left when pgrun's work is over, by pgrun
/// once its guard is reaped (when dropped) or by the guard once pgrun is
/// dead ([`SelfLeaf::leave`]): the controllers pgrun enabled are disabled
/// again in the parent's `cgroup.subtree_control` (a cgroup with domain
/// controllers enabled there may hold no process), the leaving process
/// moves back into the parent, and the leaf is removed. So the harness's
/// cgroup is as pgrun found it, and can be removed.
#[derive(Debug)]
pub struct SelfLeaf {
    dir: PathBuf,
    parent: PathBuf,
    /// The controllers pgrun enabled in the parent's subtree_control.
    enabled: Vec<String>,
    /// Left already (or tried): dropping it does nothing more.
    left: Cell<bool>,
    /// pgrun's own copy, left when dropped; the guard's copy is left only
    /// when the guard says so ([`SelfLeaf::leave`]).
    leave_on_drop: bool,
}

impl SelfLeaf {
    /// The guard's copy, for it to leave the leaf should pgrun die.
    pub fn handed(&self) -> SelfLeaf {
        SelfLeaf {
            dir: self.dir.clone(),
            parent: self.parent.clone(),
            enabled: self.enabled.clone(),
            left: Cell::new(false),
            leave_on_drop: false,
        }
    }

    /// Leave the leaf (see the type's doc): the calling process must be
    /// the last in it. A step that fails is said (one warning line) and
    /// the rest is not tried: the leaf is then left in place.
    pub fn leave(&self) {
        if self.left.replace(true) {
            return;
        }
        if let Err(e) = self.try_leave() {
            say::line(format_args!("warning: cannot remove pgrun's own cgroup {}: {e}", self.dir.display()));
        }
    }

    fn try_leave(&self) -> Result<(), String> {
        let parent = self.parent.display();
        if !self.enabled.is_empty() {
            let request = self.enabled.iter().map(|c| format!("-{c}")).collect::<Vec<_>>().join(" ");
            cgroup::write_file(&self.parent, "cgroup.subtree_control", &request)
                .map_err(|e| format!("cannot disable {request} again in {parent}/cgroup.subtree_control: {e}"))?;
        }
        cgroup::write_file(&self.parent, "cgroup.procs", "0")
            .map_err(|e| format!("cannot move back into cgroup {parent}: {e}"))?;
        let until = Instant::now() + REMOVE_PATIENCE;
        let mut backoff = Backoff::default();
        loop {
            match cgroup::remove_one(&self.dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && backoff.pause_until(Some(until)) => {}
                Err(e) => return Err(format!("{e}")),
            }
        }
    }
}

impl Drop for SelfLeaf {
    fn drop(&mut self) {
        if self.leave_on_drop {
            self.leave();
        }
    }
}
