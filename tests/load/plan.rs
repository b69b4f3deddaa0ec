//! What is drawn from the seed: the generator, each run's shape and
//! ending, and the plans of all runs.

use super::*;

/// splitmix64: a small deterministic generator (no rand crate).
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(super) fn ms(&mut self, max: u64) -> Duration {
        Duration::from_millis(self.below(max + 1))
    }
    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub(super) fn pick<T: Copy>(&mut self, weighted: &[(T, u64)]) -> T {
        let total: u64 = weighted.iter().map(|(_, w)| w).sum();
        let mut at = self.below(total);
        for &(item, weight) in weighted {
            if at < weight {
                return item;
            }
            at -= weight;
        }
        unreachable!("the weights add up to {total}")
    }
}

/// What the command of a run is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Shape {
    /// Exits on its own at once with a code of its own.
    Short,
    /// `exec sleep 300`.
    #[default]
    Plain,
    /// `exec sleep 300` with TERM ignored from its first instruction.
    IgnoresTerm,
    /// A `sleep 300 &` child, and the shell waits.
    BackgroundChild,
    /// A `setsid sleep 300 &` child (it leaves the group), in tree mode.
    Escapee,
}

/// How a run is ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Action {
    /// The command exits by itself (the short shape).
    EndsOnItsOwn,
    /// One `pgrun cancel`.
    #[default]
    Cancel,
    /// Two `pgrun cancel` started together.
    DoubleCancel,
    /// SIGKILL to pgrun: the guard finishes the job.
    Kill,
    /// A cancel, then SIGKILL to pgrun once the cancel has signalled it,
    /// while it waits.
    CancelThenKill,
    /// `--timeout`.
    Timeout,
}

/// Everything drawn from the seed for one run.
#[derive(Clone, Debug, Default)]
pub(super) struct Plan {
    pub(super) index: usize,
    pub(super) shape: Shape,
    pub(super) action: Action,
    /// Before pgrun starts: spreads the starts a little.
    pub(super) start_delay: Duration,
    /// From the run's readiness to its ending action.
    pub(super) action_delay: Duration,
    /// From the cancel to the SIGKILL (`CancelThenKill`).
    pub(super) kill_delay: Duration,
    /// `--timeout`, in ms (`Timeout`).
    pub(super) timeout_ms: u64,
    /// The short command's exit code.
    pub(super) exit_code: i32,
    /// A status call before the action.
    pub(super) status_before: bool,
    /// Status calls after the action starts, at these offsets.
    pub(super) status_during: Vec<Duration>,
    /// A `pgrun wait` started before the action.
    pub(super) wait: bool,
}

/// The plans of `n` runs: every shape with every ending it can have first
/// (so that even the quick version has each), then random ones.
pub(super) fn plans(seed: u64, n: usize, tree: bool) -> Vec<Plan> {
    use Action::*;
    use Shape::*;
    let mut rng = Rng(seed);
    let endings = |shape: Shape| -> Vec<(Action, u64)> {
        match shape {
            Short => vec![(EndsOnItsOwn, 1)],
            // Out of the guard's reach once pgrun is dead (the contract's
            // tree mode): no SIGKILL of pgrun for a run with an escapee.
            Escapee => vec![(Cancel, 40), (DoubleCancel, 25), (Timeout, 20)],
            _ => vec![(Cancel, 35), (DoubleCancel, 20), (Kill, 15), (CancelThenKill, 15), (Timeout, 15)],
        }
    };
    let mut shapes = vec![(Short, 15), (Plain, 25), (IgnoresTerm, 20), (BackgroundChild, 20)];
    if tree {
        shapes.push((Escapee, 20));
    }
    let mut combos: Vec<(Shape, Action)> =
        shapes.iter().flat_map(|&(s, _)| endings(s).into_iter().map(move |(a, _)| (s, a))).collect();
    combos.truncate(n);
    while combos.len() < n {
        let shape = rng.pick(&shapes);
        combos.push((shape, rng.pick(&endings(shape))));
    }
    combos
        .into_iter()
        .enumerate()
        .map(|(index, (shape, action))| Plan {
            index,
            shape,
            action,
            start_delay: rng.ms(200),
            action_delay: rng.ms(300),
            kill_delay: rng.ms(150),
            timeout_ms: 4000 + rng.below(3001),
            exit_code: [0, 1, 3, 42][rng.below(4) as usize],
            status_before: rng.chance(50),
            status_during: (0..rng.below(3)).map(|_| rng.ms(100)).collect(),
            wait: rng.chance(50),
        })
        .collect()
}
