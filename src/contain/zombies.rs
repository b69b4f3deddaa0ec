//! Zombies pgrun cannot reap: a member of the group whose parent is
//! outside pgrun's reach (it left the group in `group` mode, or there is no
//! subreaper off Linux) holds the group open until that parent reaps it,
//! which may be never. The rule, in every mode: after the final KILL and
//! one more grace, a group that is nothing but zombies is reported
//! (`unreaped`) with one warning line, not waited for.

use crate::sys::Pid;

/// If every member left in group `pgid` is a zombie, how many there are.
/// Where `/proc` cannot tell, `after_kill` says whether to take a group
/// that survived the final KILL and a grace for one such zombie (`None`
/// otherwise: a draining group may well be alive).
pub fn only_zombies_left(pgid: Pid, after_kill: bool) -> Option<usize> {
    #[cfg(linux_strengths)]
    {
        let _ = after_kill; // /proc can tell
        let mut members = 0;
        let mut zombies = 0;
        for (_, stat) in crate::sys::proc::scan() {
            if stat.pgrp == pgid {
                members += 1;
                zombies += usize::from(stat.state == b'Z');
            }
        }
        (members > 0 && zombies == members).then_some(zombies)
    }
    #[cfg(not(linux_strengths))]
    {
        (after_kill && crate::sys::process::group_exists(pgid)).then_some(1)
    }
}
