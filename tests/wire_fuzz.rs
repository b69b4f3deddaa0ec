//! The D-Bus reader (`pgrun::dbus::wire`) fed what a broken or hostile bus
//! could send: random bytes, and real messages (a call like pgrun's, the
//! user manager's `JobRemoved`, an error reply, a reply of nested
//! dictionaries and variants) with bytes overwritten, cut short or added.
//! Every case must read as a message or as malformed: never a panic (nor
//! a stack overflow, nor a hang). Seeded, so every run tries the same
//! cases: a few hundred in the default suite, ten times more in the long
//! target.

use crate::util::rounds;
use pgrun::dbus::wire::{self, Arg, Kind};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// Real messages, as the writer makes them.
fn samples() -> Vec<Vec<u8>> {
    let variant = |a: Arg| Arg::Variant(Box::new(a));
    let property = |name: &str, value: Arg| Arg::Struct(vec![Arg::str(name), variant(value)]);
    let properties = Arg::Array {
        elem: "(sv)".into(),
        items: vec![
            property("Delegate", Arg::Bool(true)),
            property("PIDs", Arg::Array { elem: "u".into(), items: vec![Arg::U32(4242)] }),
            property("Slice", Arg::str("app.slice")),
        ],
    };
    let aux = Arg::Array { elem: "(sa(sv))".into(), items: vec![] };
    let call = wire::method_call(
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
        "StartTransientUnit",
        3,
        &[Arg::str("pgrun-1-x.scope"), Arg::str("fail"), properties.clone(), aux],
    );
    let job_removed = wire::message(
        Kind::Signal,
        7,
        &[
            (wire::PATH, Arg::ObjectPath("/org/freedesktop/systemd1".into())),
            (wire::INTERFACE, Arg::str("org.freedesktop.systemd1.Manager")),
            (wire::MEMBER, Arg::str("JobRemoved")),
            (wire::SENDER, Arg::str(":1.2")),
        ],
        &[
            Arg::U32(9),
            Arg::ObjectPath("/org/freedesktop/systemd1/job/9".into()),
            Arg::str("u.scope"),
            Arg::str("done"),
        ],
    );
    let error = wire::message(
        Kind::Error,
        8,
        &[(wire::REPLY_SERIAL, Arg::U32(3)), (wire::ERROR_NAME, Arg::str("org.freedesktop.DBus.Error.AccessDenied"))],
        &[Arg::str("denied")],
    );
    let nested = wire::message(
        Kind::MethodReturn,
        9,
        &[(wire::REPLY_SERIAL, Arg::U32(3))],
        &[Arg::Struct(vec![variant(variant(properties)), Arg::Signature("a(sv)".into())])],
    );
    vec![call, job_removed, error, nested]
}

/// Read `bytes` as the client does: its length from the fixed header, then
/// the whole message; neither may panic.
fn read(bytes: &[u8]) -> Result<wire::Message, wire::Malformed> {
    if let Some(fixed) = bytes.first_chunk::<16>() {
        let _ = wire::message_len(fixed);
    }
    wire::parse(bytes)
}

/// What happens to a sample: bytes overwritten (at positions taken modulo
/// its length), then cut at or grown by some bytes.
#[derive(Debug, Clone)]
struct Mutation {
    sample: usize,
    overwrites: Vec<(usize, u8)>,
    cut: Option<usize>,
    added: Vec<u8>,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    (
        0..4usize,
        prop::collection::vec(
            (any::<usize>(), prop_oneof![any::<u8>(), Just(0u8), Just(0xff), Just(b'('), Just(b'v')]),
            0..6,
        ),
        prop::option::weighted(0.2, any::<usize>()),
        prop::collection::vec(any::<u8>(), 0..3),
    )
        .prop_map(|(sample, overwrites, cut, added)| Mutation { sample, overwrites, cut, added })
}

fn config() -> ProptestConfig {
    ProptestConfig { rng_seed: RngSeed::Fixed(0xd_b05), ..ProptestConfig::with_cases(rounds(500, 5000) as u32) }
}

#[test]
fn the_samples_read_back() {
    for (i, bytes) in samples().iter().enumerate() {
        assert!(wire::parse(bytes).is_ok(), "sample {i}: {:?}", wire::parse(bytes));
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_changed_message_reads_without_a_panic(m in mutation()) {
        let mut bytes = samples().swap_remove(m.sample);
        let len = bytes.len();
        for &(at, value) in &m.overwrites {
            bytes[at % len] = value;
        }
        if let Some(cut) = m.cut {
            bytes.truncate(cut % (len + 1));
        }
        bytes.extend_from_slice(&m.added);
        let _ = read(&bytes);
    }

    #[test]
    fn random_bytes_read_without_a_panic(
        head in prop_oneof![Just(b"l\x01\x00\x01".to_vec()), Just(b"B\x04\x00\x01".to_vec()), Just(Vec::new())],
        tail in prop::collection::vec(any::<u8>(), 0..400),
        fields in any::<usize>(),
    ) {
        let mut bytes = [head, tail].concat();
        let _ = read(&bytes);
        // The same with lengths that agree with the size, so that the
        // reader goes past the first check.
        let len = bytes.len();
        if len >= 16 {
            let fields = fields % (len - 15);
            let header = (16 + fields).next_multiple_of(8);
            if header <= len {
                bytes[4..8].copy_from_slice(&((len - header) as u32).to_le_bytes());
                bytes[12..16].copy_from_slice(&(fields as u32).to_le_bytes());
                bytes[0] = b'l';
                let _ = read(&bytes);
            }
        }
    }
}
