//! The wire format's tests: what is written reads back, and what a
//! broken or hostile bus could send is malformed, said, never a panic.

use super::*;

/// A call marshalled and read back gives what was put in, header and
/// body alike: strings, a bool, a u32 array, structs and variants, and
/// an empty array.
#[test]
fn a_marshalled_call_reads_back() {
    let props = Arg::Array {
        elem: "(sv)".into(),
        items: vec![
            Arg::Struct(vec![Arg::str("Delegate"), Arg::Variant(Box::new(Arg::Bool(true)))]),
            Arg::Struct(vec![
                Arg::str("PIDs"),
                Arg::Variant(Box::new(Arg::Array { elem: "u".into(), items: vec![Arg::U32(4242)] })),
            ]),
        ],
    };
    let aux = Arg::Array { elem: "(sa(sv))".into(), items: vec![] };
    let args = [Arg::str("pgrun-1-x.scope"), Arg::str("fail"), props, aux];
    let bytes = method_call("org.example", "/org/example", "org.example.I", "Start", 7, &args);
    let fixed: [u8; 16] = bytes[..16].try_into().unwrap();
    assert_eq!(message_len(&fixed).unwrap(), bytes.len());
    let msg = parse(&bytes).unwrap();
    assert_eq!(msg.kind, Some(Kind::MethodCall));
    assert_eq!(msg.serial, 7);
    assert_eq!(msg.path.as_deref(), Some("/org/example"));
    assert_eq!(msg.member.as_deref(), Some("Start"));
    assert_eq!(msg.body[0], Value::Str("pgrun-1-x.scope".into()));
    assert_eq!(msg.body[1], Value::Str("fail".into()));
    let Value::Array(props) = &msg.body[2] else { panic!("{:?}", msg.body[2]) };
    assert_eq!(
        props[1],
        Value::Struct(vec![Value::Str("PIDs".into()), Value::Variant(Box::new(Value::Array(vec![Value::U32(4242)])))])
    );
    assert_eq!(
        props[0],
        Value::Struct(vec![Value::Str("Delegate".into()), Value::Variant(Box::new(Value::Bool(true)))])
    );
    assert_eq!(msg.body[3], Value::Array(vec![]));
}

#[test]
fn a_cut_or_lying_message_is_malformed_not_a_panic() {
    let bytes = method_call("d", "/p", "i.f", "M", 1, &[Arg::str("x"), Arg::U32(5)]);
    for len in 0..bytes.len() {
        assert!(parse(&bytes[..len]).is_err(), "{len} bytes read as a message");
    }
    let mut huge = [0u8; 16];
    huge[0] = b'l';
    huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(message_len(&huge).is_err());
    let mut wrong_order = bytes.clone();
    wrong_order[0] = b'x';
    assert!(message_len(&wrong_order[..16].try_into().unwrap()).is_err());
}

/// A reply (serial 9, to serial 1) of signature `sig` whose body is
/// `body` as it is: for bodies the writer would not make.
fn raw(sig: &str, body: &[u8]) -> Vec<u8> {
    let fields = [(REPLY_SERIAL, Arg::U32(1)), (SIGNATURE, Arg::Signature(sig.into()))];
    let mut bytes = message(Kind::MethodReturn, 9, &fields, &[]);
    bytes[4..8].copy_from_slice(&(body.len() as u32).to_le_bytes());
    bytes.extend_from_slice(body);
    bytes
}

fn why(bytes: &[u8]) -> String {
    match parse(bytes) {
        Ok(msg) => panic!("read as a message: {msg:?}"),
        Err(Malformed(why)) => why,
    }
}

#[test]
fn signatures_nest_at_most_32_arrays_and_32_structs() {
    let arrays = |n: usize| format!("{}y", "a".repeat(n));
    let structs = |n: usize| format!("{}y{}", "(".repeat(n), ")".repeat(n));
    assert_eq!(check_signature(&arrays(32)), Ok(()));
    assert!(check_signature(&arrays(33)).unwrap_err().0.contains("32 nested arrays"));
    assert_eq!(check_signature(&structs(32)), Ok(()));
    assert!(check_signature(&structs(33)).unwrap_err().0.contains("32 nested structs"));
    let both = format!("{}{}", "a".repeat(32), structs(32));
    assert_eq!(check_signature(&both), Ok(()));
    assert!(check_signature(&format!("a{both}")).is_err());
    // Dict entries are structs.
    let dicts = |n: usize| format!("{}y{}", "a{s".repeat(n), "}".repeat(n));
    assert_eq!(check_signature(&dicts(32)), Ok(()));
    assert!(check_signature(&dicts(33)).is_err());
    assert!(check_signature(&"y".repeat(256)).unwrap_err().0.contains("more than 255"));
    // In a message, the body's signature is checked as read.
    let deep = arrays(33);
    assert!(why(&raw(&deep, &[0, 0, 0, 0])).contains("32 nested arrays"));
}

#[test]
fn variants_nest_at_most_64_containers_deep() {
    // A chain of variants, each holding the next, then a byte: the
    // reader's recursion is bounded, however long the chain.
    let chain = |n: usize| {
        let mut body = b"\x01v\0".repeat(n);
        body.extend_from_slice(b"\x01y\0\x07");
        raw("v", &body)
    };
    assert!(parse(&chain(63)).is_ok());
    assert!(why(&chain(64)).contains("more than 64 containers"));
    assert!(why(&chain(200_000)).contains("more than 64 containers"));
    // Variants count with the arrays around them: `av` holding `av`...
    let nested = |n: usize| {
        let mut value = Arg::U32(7);
        for _ in 0..n {
            value = Arg::Array { elem: "v".into(), items: vec![Arg::Variant(Box::new(value))] };
        }
        message(Kind::MethodReturn, 2, &[(REPLY_SERIAL, Arg::U32(1))], &[value])
    };
    assert!(parse(&nested(32)).is_ok());
    assert!(why(&nested(33)).contains("more than 64 containers"));
}

#[test]
fn an_empty_struct_is_malformed() {
    assert!(check_signature("()").unwrap_err().0.contains("an empty struct"));
    assert!(check_signature("(i())").is_err());
    assert!(why(&raw("()", &[])).contains("an empty struct"));
    assert!(why(&raw("v", b"\x02()\0")).contains("an empty struct"));
}

/// An array of elements that would take no bytes ends at once, as
/// malformed, instead of reading nothing forever.
#[test]
fn an_array_of_elements_of_no_bytes_ends() {
    let mut body = 16u32.to_le_bytes().to_vec();
    body.extend_from_slice(&[0; 20]);
    assert!(why(&raw("a()", &body)).contains("an empty struct"));
    let mut body = 4u32.to_le_bytes().to_vec();
    body.extend_from_slice(b"\x02()\0\0");
    assert!(why(&raw("av", &body)).contains("an empty struct"));
}

#[test]
fn arrays_and_messages_keep_the_specifications_limits() {
    let over = (MAX_ARRAY as u32 + 1).to_le_bytes();
    assert!(why(&raw("ay", &over)).contains("more than 67108864"));
    let at_most = (MAX_ARRAY as u32).to_le_bytes();
    assert!(why(&raw("ay", &at_most)).contains("an array past the end"));
    let mut fixed = [0u8; 16];
    fixed[0] = b'l';
    fixed[4..8].copy_from_slice(&((MAX_MESSAGE - 16) as u32).to_le_bytes());
    assert_eq!(message_len(&fixed), Ok(MAX_MESSAGE));
    fixed[4..8].copy_from_slice(&((MAX_MESSAGE - 15) as u32).to_le_bytes());
    assert!(message_len(&fixed).is_err());
    fixed[4..8].copy_from_slice(&[0; 4]);
    fixed[12..16].copy_from_slice(&(MAX_ARRAY as u32 + 1).to_le_bytes());
    assert!(message_len(&fixed).is_err());
}

/// Each kind of message has the header fields it needs: an error reply
/// without its error name is malformed, said so.
#[test]
fn an_error_without_its_name_is_malformed() {
    let named = message(Kind::Error, 2, &[(REPLY_SERIAL, Arg::U32(1)), (ERROR_NAME, Arg::str("a.B"))], &[]);
    assert_eq!(parse(&named).unwrap().error_name.as_deref(), Some("a.B"));
    let nameless = message(Kind::Error, 2, &[(REPLY_SERIAL, Arg::U32(1))], &[Arg::str("boom")]);
    assert_eq!(why(&nameless), "an error reply without an error name");
    let unanswering = message(Kind::MethodReturn, 2, &[], &[]);
    assert_eq!(why(&unanswering), "a method return without a reply serial");
    let pathless = message(Kind::Signal, 2, &[(INTERFACE, Arg::str("a.B")), (MEMBER, Arg::str("C"))], &[]);
    assert_eq!(why(&pathless), "a signal without a path");
    let wrong_type = message(Kind::Error, 2, &[(REPLY_SERIAL, Arg::U32(1)), (ERROR_NAME, Arg::U32(4))], &[]);
    assert!(why(&wrong_type).contains("is not a string"));
}

#[test]
fn values_are_what_the_specification_allows() {
    assert!(why(&raw("b", &2u32.to_le_bytes())).contains("a boolean of 2"));
    assert!(why(&raw("s", b"\x03\0\0\0a\0b\0")).contains("a NUL inside"));
    assert!(why(&raw("o", b"\x03\0\0\0/a/\0")).contains("an object path"));
    assert!(why(&raw("yu", &[1, 9, 0, 0, 5, 0, 0, 0])).contains("padding that is not zeros"));
    assert!(why(&raw("y", &[1, 2])).contains("bytes after the body"));
    assert!(why(&raw("{sv}", &[])).contains("type '{'"));
    assert!(why(&raw("a{vs}", &[0; 8])).contains("key is not of a basic type"));
    assert!(why(&raw("a{s}", &[0; 8])).contains("other than two types"));
    assert!(why(&raw("a{sss}", &[0; 8])).contains("other than two types"));
    assert!(parse(&raw("a{sv}", &[0; 8])).is_ok());
    let mut other_order = raw("y", &[1]);
    other_order[0] = b'x';
    assert!(why(&other_order).contains("byte order"));
}

/// Every message cut short, and every byte of a real call changed to
/// every value, reads as malformed or as a message: never a panic.
#[test]
fn every_byte_changed_is_read_without_a_panic() {
    let props = Arg::Array {
        elem: "(sv)".into(),
        items: vec![Arg::Struct(vec![
            Arg::str("PIDs"),
            Arg::Variant(Box::new(Arg::Array { elem: "u".into(), items: vec![Arg::U32(7)] })),
        ])],
    };
    let bytes = method_call("d", "/p", "i.f", "M", 1, &[Arg::str("x"), props]);
    for at in 0..bytes.len() {
        for value in 0..=255u8 {
            let mut changed = bytes.clone();
            changed[at] = value;
            let _ = parse(&changed);
            if let Some(fixed) = changed.first_chunk::<16>() {
                let _ = message_len(fixed);
            }
        }
    }
}
