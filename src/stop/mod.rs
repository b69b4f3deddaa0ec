//! How a run is stopped, whoever stops it: [`sequence`] (the steps the
//! command line asked for: `-s`/`-k`, `--escalate`, `leader:` steps),
//! [`plan`] (a pure value that says, at each moment, which step to send,
//! when to repeat the final KILL and when to give up, driven by a clock it
//! is given, so the unit tests drive it with a fake one), and
//! [`unsupervised`] (a blocking driver of the plan for a run no pgrun
//! supervises: `pgrun cancel`'s fallback and the guard). The supervising
//! pgrun drives the same plan from its event loop
//! ([`crate::run::supervisor`]), and says, with [`straggler_note`], when
//! what COMMAND left behind outlives the first signal.

pub mod plan;
pub mod sequence;
pub mod straggler_note;
pub mod unsupervised;
