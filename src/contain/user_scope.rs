//! A cgroup from the user's own systemd, without root: where pgrun's own
//! cgroup offers no leaf (an ordinary user on a systemd host: the login
//! session's cgroup is not delegated), pgrun asks the user manager for a
//! transient scope holding pgrun itself, as `systemd-run --user --scope -p
//! Delegate=yes` does, and makes the run's leaf there ([`super::cgroup`]).
//!
//! One D-Bus conversation on the session bus ([`crate::dbus`]):
//! `StartTransientUnit("pgrun-PID-RANDOM.scope", "fail", [PIDs=[pgrun],
//! Delegate=yes, CollectMode=inactive-or-failed, Slice=app.slice], [])`,
//! then the wait for that job's `JobRemoved` (the manager sends it to the
//! client that asked for the job), all within [`PATIENCE`]. The scope is
//! the user's: once pgrun and its run have left it empty, the manager
//! stops it and, with that collect mode, forgets it even if it failed.
//! Nothing here runs unless a cgroup is needed and pgrun's own cgroup
//! could not give one: `tree`, the default, never talks to D-Bus.

use crate::dbus::{self, Arg, BusError, Connection, Value};
use crate::sys;
use crate::verbose;
use std::time::{Duration, Instant};

/// How long the whole conversation may take: connecting, the call, and
/// the job's end.
pub const PATIENCE: Duration = Duration::from_secs(10);

const SYSTEMD: &str = "org.freedesktop.systemd1";
const SYSTEMD_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";

/// The scope pgrun now sits in.
#[derive(Debug)]
pub struct UserScope {
    /// The unit's name, `pgrun-PID-RANDOM.scope`.
    pub unit: String,
}

/// Ask the user's systemd for a scope holding pgrun, and wait until pgrun
/// is in it. `Err` says, in words for the user, why the user manager could
/// not help: no bus, no user manager on it, a refusal, the job's failure,
/// or no answer in time.
pub fn enter() -> Result<UserScope, String> {
    let address = dbus::session_bus_address().map_err(|why| format!("no session bus: {why}"))?;
    let patience = if crate::test_hook::active(crate::test_hook::SHORT_BUS_PATIENCE) {
        Duration::from_millis(500)
    } else {
        PATIENCE
    };
    let deadline = Instant::now() + patience;
    let on_bus = |e: BusError| format!("the user's systemd on the session bus {address}: {e}");
    let mut bus = Connection::open(&address, sys::geteuid(), deadline).map_err(on_bus)?;
    bus.add_match(&format!(
        "type='signal',sender='{SYSTEMD}',interface='{MANAGER}',member='JobRemoved',path='{SYSTEMD_PATH}'"
    ))
    .map_err(on_bus)?;
    let pid = sys::getpid();
    let unit = format!("pgrun-{pid}-{:016x}.scope", sys::random_bits());
    let property = |name: &str, value: Arg| Arg::Struct(vec![Arg::str(name), Arg::Variant(Box::new(value))]);
    let properties = Arg::Array {
        elem: "(sv)".into(),
        items: vec![
            property("Description", Arg::Str(format!("pgrun {pid}"))),
            property("Slice", Arg::str("app.slice")),
            property("Delegate", Arg::Bool(true)),
            property("CollectMode", Arg::str("inactive-or-failed")),
            property("PIDs", Arg::Array { elem: "u".into(), items: vec![Arg::U32(pid as u32)] }),
        ],
    };
    let aux = Arg::Array { elem: "(sa(sv))".into(), items: vec![] };
    let reply = bus
        .call(
            SYSTEMD,
            SYSTEMD_PATH,
            MANAGER,
            "StartTransientUnit",
            &[Arg::str(&unit), Arg::str("fail"), properties, aux],
        )
        .map_err(|e| match e {
            BusError::Refused { .. } => format!("the user's systemd refused scope {unit}: {e}"),
            BusError::Io(_) => on_bus(e),
        })?;
    let Some(job) = reply.first().and_then(Value::as_str).map(str::to_string) else {
        return Err(format!("the user's systemd answered StartTransientUnit without a job: {reply:?}"));
    };
    verbose!("asked the user's systemd for scope {unit} (job {job})");
    let removed = bus
        .wait_signal("JobRemoved", |m| m.body.get(1).and_then(Value::as_str) == Some(job.as_str()))
        .map_err(|e| format!("the user's systemd did not finish starting scope {unit}: {e}"))?;
    let result = removed.body.get(3).and_then(Value::as_str).unwrap_or_default();
    if result != "done" {
        return Err(format!("the user's systemd could not start scope {unit}: its job ended \"{result}\""));
    }
    // The scope holds pgrun now, or systemd says what it does not do.
    let own =
        sys::proc::read_cgroup_path(0).map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?.unwrap_or_default();
    if !own.ends_with(&format!("/{unit}")) {
        return Err(format!("the user's systemd started scope {unit} but pgrun is in cgroup {own}, not in it"));
    }
    verbose!("pgrun is in {own}");
    Ok(UserScope { unit })
}
