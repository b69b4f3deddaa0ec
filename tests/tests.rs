//! Integration tests of the built `pgrun` binary, one module per area.

mod util;

mod cancel;
mod containment;
mod docs;
mod exit_status;
mod guard;
mod inheritance;
mod output;
mod parent_death;
mod protocol;
mod publish;
mod status;
mod stopping;
mod terminal;
