//! The one thing the run's containment must ask of, and tell, the party
//! above it: pgrun's guard. The guard is a child of pgrun that is not part
//! of the run (a `tree` walk must skip it), and it must learn when pgrun
//! has seen the run's group empty, after which the group's number may be
//! somebody else's. [`crate::guard`] implements [`Guardian`] over its
//! handle; containment calls it and knows nothing else of the guard.

use crate::sys::Pid;
use std::rc::Rc;

/// What containment asks of the guard and tells it (see the module doc).
pub trait Guardian {
    /// The guard's pid while it is an unreaped child of pgrun (so the
    /// number cannot have been reused); `None` without a guard.
    fn pid(&self) -> Option<Pid>;
    /// pgrun saw the run's group empty: gone for good, never to be
    /// signalled by its number again.
    fn group_gone(&self);
}

/// The guard as the run's scope and group hold it: shared, and a run
/// without a guard (`--no-guard`, or none forked yet) holds [`NoGuard`].
pub type SharedGuardian = Rc<dyn Guardian>;

/// No guard: nothing to skip, nobody to tell.
pub struct NoGuard;

impl Guardian for NoGuard {
    fn pid(&self) -> Option<Pid> {
        None
    }
    fn group_gone(&self) {}
}

/// A run without a guard.
pub fn none() -> SharedGuardian {
    Rc::new(NoGuard)
}
