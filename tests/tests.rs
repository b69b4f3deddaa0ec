//! Integration tests of the built `pgrun` binary, one module per area.
//! The fuzz test, the properties and the loops of stress.rs run quick here;
//! the long target (tests/long.rs) runs the same code at full size.

mod util;

mod cancel;
mod cgroup;
mod cgroup_limits;
mod containment;
mod detach;
mod docs;
mod end_path;
mod exit_status;
mod faults_sys;
mod fuzz;
mod guard;
mod idle;
mod inheritance;
mod leader;
mod limits;
mod load;
mod ls;
mod number_reuse;
mod outcome;
mod output;
mod output_file;
mod output_shared;
mod output_splice;
mod output_window;
mod parent_death;
mod properties;
mod protocol;
mod publish;
mod resources;
mod robustness;
mod send;
mod snippets;
mod status;
mod stopping;
mod stress;
mod terminal;
mod timeout_hint;
mod usage;
mod user_scope;
mod user_systemd;
mod wait;
