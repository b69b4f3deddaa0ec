//! `pgrun cancel`: every exit status, every refusal, and the start/cancel
//! race, one file for each: `stops` (a live run stopped and waited for,
//! escalation, a late or stale run, `--timeout`'s 0 and 2, `--no-wait`),
//! `refusals` (pid files and groups cancel must not act on, usage errors),
//! `fallbacks` (the run found and reached when pgrun died, a pidfd fails, or
//! a children file shifts or cannot be read) and `races` (a run that ends,
//! or is withdrawn, while cancel looks at it). Edges short of fds and
//! requests across runs are in `cancel_edges`.

mod fallbacks;
mod races;
mod refusals;
mod stops;

use crate::util::*;

pub(super) fn cancel(args: &[&str]) -> std::process::Output {
    let mut all = vec!["cancel"];
    all.extend_from_slice(args);
    run(&mut pgrun(&all))
}
