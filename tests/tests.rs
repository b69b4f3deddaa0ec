//! Integration tests of the built `pgrun` binary, one module per area.

mod util;

mod cancel;
mod cgroup;
mod cgroup_limits;
mod containment;
mod docs;
mod exit_status;
mod faults_sys;
mod fuzz;
mod guard;
mod inheritance;
mod limits;
mod output;
mod parent_death;
mod properties;
mod protocol;
mod publish;
mod resources;
mod robustness;
mod status;
mod stopping;
mod terminal;
