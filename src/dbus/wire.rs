//! The D-Bus wire format, the part pgrun speaks: messages marshalled and
//! read in little-endian byte order, with the basic types, arrays, structs
//! and variants (the D-Bus specification's "Marshaling" section). Pure
//! code on byte buffers, no I/O: [`super::Connection`] moves the bytes.

use std::fmt;

/// A value to send, with what its signature needs to be written.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Bool(bool),
    U32(u32),
    Str(String),
    ObjectPath(String),
    Signature(String),
    /// An array of values of one signature (`elem`, needed for an empty one).
    Array {
        elem: String,
        items: Vec<Arg>,
    },
    Struct(Vec<Arg>),
    Variant(Box<Arg>),
}

impl Arg {
    pub fn str(s: &str) -> Arg {
        Arg::Str(s.to_string())
    }

    /// The signature of this one value.
    pub fn signature(&self) -> String {
        match self {
            Arg::Bool(_) => "b".into(),
            Arg::U32(_) => "u".into(),
            Arg::Str(_) => "s".into(),
            Arg::ObjectPath(_) => "o".into(),
            Arg::Signature(_) => "g".into(),
            Arg::Array { elem, .. } => format!("a{elem}"),
            Arg::Struct(fields) => format!("({})", fields.iter().map(Arg::signature).collect::<String>()),
            Arg::Variant(_) => "v".into(),
        }
    }
}

/// A value read from a message.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Byte(u8),
    Bool(bool),
    I32(i32),
    U32(u32),
    U64(u64),
    I64(i64),
    U16(u16),
    I16(i16),
    Double(f64),
    Str(String),
    ObjectPath(String),
    Signature(String),
    UnixFd(u32),
    Array(Vec<Value>),
    Struct(Vec<Value>),
    Variant(Box<Value>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) | Value::ObjectPath(s) | Value::Signature(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_u32(&self) -> Option<u32> {
        match self {
            Value::U32(n) => Some(*n),
            _ => None,
        }
    }
}

/// A message that cannot be read: what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a malformed D-Bus message ({})", self.0)
    }
}

fn malformed<T>(what: impl Into<String>) -> Result<T, Malformed> {
    Err(Malformed(what.into()))
}

/// The kinds of message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    MethodCall = 1,
    MethodReturn = 2,
    Error = 3,
    Signal = 4,
}

/// The header fields pgrun reads or writes (codes of the specification).
const PATH: u8 = 1;
const INTERFACE: u8 = 2;
const MEMBER: u8 = 3;
const ERROR_NAME: u8 = 4;
const REPLY_SERIAL: u8 = 5;
const DESTINATION: u8 = 6;
const SENDER: u8 = 7;
const SIGNATURE: u8 = 8;

/// A message read off the bus.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Message {
    pub kind: Option<Kind>,
    pub serial: u32,
    pub path: Option<String>,
    pub interface: Option<String>,
    pub member: Option<String>,
    pub error_name: Option<String>,
    pub reply_serial: Option<u32>,
    pub sender: Option<String>,
    pub body: Vec<Value>,
}

/// The largest message pgrun accepts (the specification's limit is 128 MiB;
/// what pgrun receives is small).
pub const MAX_MESSAGE: usize = 1 << 20;

/// A method call, marshalled: `destination`, `path`, `interface`, `member`,
/// serial `serial`, arguments `args`.
pub fn method_call(destination: &str, path: &str, interface: &str, member: &str, serial: u32, args: &[Arg]) -> Vec<u8> {
    let mut body = Writer::default();
    for arg in args {
        body.arg(arg);
    }
    let signature: String = args.iter().map(Arg::signature).collect();
    let mut fields = vec![
        Arg::Struct(vec![Arg::U32(PATH.into()), Arg::Variant(Box::new(Arg::ObjectPath(path.into())))]),
        Arg::Struct(vec![Arg::U32(INTERFACE.into()), Arg::Variant(Box::new(Arg::str(interface)))]),
        Arg::Struct(vec![Arg::U32(MEMBER.into()), Arg::Variant(Box::new(Arg::str(member)))]),
        Arg::Struct(vec![Arg::U32(DESTINATION.into()), Arg::Variant(Box::new(Arg::str(destination)))]),
    ];
    if !signature.is_empty() {
        fields.push(Arg::Struct(vec![Arg::U32(SIGNATURE.into()), Arg::Variant(Box::new(Arg::Signature(signature)))]));
    }
    let mut out = Writer::default();
    out.buf.extend_from_slice(&[b'l', Kind::MethodCall as u8, 0, 1]);
    out.u32(body.buf.len() as u32);
    out.u32(serial);
    // The header fields are `a(yv)`: the code is a byte.
    out.header_fields(&fields);
    out.pad(8);
    out.buf.extend_from_slice(&body.buf);
    out.buf
}

/// The length of the message whose first 16 bytes are `fixed`: header,
/// padding and body.
pub fn message_len(fixed: &[u8; 16]) -> Result<usize, Malformed> {
    if fixed[0] != b'l' && fixed[0] != b'B' {
        return malformed(format!("byte order {:#x}", fixed[0]));
    }
    let read = |at: usize| {
        let bytes = [fixed[at], fixed[at + 1], fixed[at + 2], fixed[at + 3]];
        if fixed[0] == b'l' { u32::from_le_bytes(bytes) } else { u32::from_be_bytes(bytes) }
    };
    let body = read(4) as usize;
    let fields = read(12) as usize;
    let header = (16 + fields).next_multiple_of(8);
    let total = header.checked_add(body).filter(|&n| n <= MAX_MESSAGE);
    match total {
        Some(n) => Ok(n),
        None => malformed(format!("{body} bytes of body and {fields} of header fields")),
    }
}

/// Read one whole message (as [`message_len`] measured it).
pub fn parse(bytes: &[u8]) -> Result<Message, Malformed> {
    if bytes.len() < 16 {
        return malformed("shorter than its fixed header");
    }
    let mut r = Reader { buf: bytes, at: 0, big_endian: bytes[0] == b'B' };
    let _order = r.byte()?;
    let kind = match r.byte()? {
        1 => Some(Kind::MethodCall),
        2 => Some(Kind::MethodReturn),
        3 => Some(Kind::Error),
        4 => Some(Kind::Signal),
        _ => None,
    };
    let _flags = r.byte()?;
    if r.byte()? != 1 {
        return malformed("protocol version");
    }
    let body_len = r.u32()? as usize;
    let serial = r.u32()?;
    let mut msg = Message { kind, serial, ..Message::default() };
    let mut signature = String::new();
    let Value::Array(fields) = r.value(&mut "a(yv)".chars().peekable())? else {
        return malformed("header fields");
    };
    for field in fields {
        let Value::Struct(pair) = field else { return malformed("a header field") };
        let (Some(Value::Byte(code)), Some(Value::Variant(value))) = (pair.first(), pair.get(1)) else {
            return malformed("a header field");
        };
        let text = value.as_str().map(str::to_string);
        match *code {
            PATH => msg.path = text,
            INTERFACE => msg.interface = text,
            MEMBER => msg.member = text,
            ERROR_NAME => msg.error_name = text,
            REPLY_SERIAL => msg.reply_serial = value.as_u32(),
            SENDER => msg.sender = text,
            SIGNATURE => match &**value {
                Value::Signature(sig) => signature = sig.clone(),
                _ => return malformed("a signature field that is not a signature"),
            },
            _ => {}
        }
    }
    r.align(8)?;
    if r.buf.len() - r.at != body_len {
        return malformed("body length");
    }
    let mut types = signature.chars().peekable();
    while types.peek().is_some() {
        msg.body.push(r.value(&mut types)?);
    }
    Ok(msg)
}

#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn pad(&mut self, align: usize) {
        while !self.buf.len().is_multiple_of(align) {
            self.buf.push(0);
        }
    }

    fn u32(&mut self, n: u32) {
        self.pad(4);
        self.buf.extend_from_slice(&n.to_le_bytes());
    }

    fn string(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    fn signature(&mut self, s: &str) {
        self.buf.push(s.len() as u8);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    fn arg(&mut self, arg: &Arg) {
        match arg {
            Arg::Bool(b) => self.u32(u32::from(*b)),
            Arg::U32(n) => self.u32(*n),
            Arg::Str(s) | Arg::ObjectPath(s) => self.string(s),
            Arg::Signature(s) => self.signature(s),
            Arg::Array { elem, items } => {
                self.pad(4);
                let len_at = self.buf.len();
                self.buf.extend_from_slice(&[0; 4]);
                self.pad(alignment(elem));
                let start = self.buf.len();
                for item in items {
                    self.arg(item);
                }
                let len = (self.buf.len() - start) as u32;
                self.buf[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
            }
            Arg::Struct(fields) => {
                self.pad(8);
                for field in fields {
                    self.arg(field);
                }
            }
            Arg::Variant(inner) => {
                self.signature(&inner.signature());
                self.arg(inner);
            }
        }
    }

    /// The header fields, `a(yv)`: each a code byte and a variant.
    fn header_fields(&mut self, fields: &[Arg]) {
        self.pad(4);
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        self.pad(8);
        let start = self.buf.len();
        for field in fields {
            let Arg::Struct(pair) = field else { unreachable!("header fields are pairs") };
            let (Arg::U32(code), variant) = (&pair[0], &pair[1]) else { unreachable!("a code first") };
            self.pad(8);
            self.buf.push(*code as u8);
            self.arg(variant);
        }
        let len = (self.buf.len() - start) as u32;
        self.buf[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
    }
}

/// The alignment of a value whose signature starts `sig`.
fn alignment(sig: &str) -> usize {
    match sig.as_bytes().first() {
        Some(b'y' | b'g' | b'v') => 1,
        Some(b'n' | b'q') => 2,
        Some(b'b' | b'i' | b'u' | b's' | b'o' | b'a' | b'h') => 4,
        _ => 8,
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    big_endian: bool,
}

type Types<'s> = std::iter::Peekable<std::str::Chars<'s>>;

impl Reader<'_> {
    fn align(&mut self, n: usize) -> Result<(), Malformed> {
        let to = self.at.next_multiple_of(n);
        if to > self.buf.len() {
            return malformed("padding past the end");
        }
        self.at = to;
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&[u8], Malformed> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else { return malformed("a value past the end") };
        let bytes = &self.buf[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        self.align(N)?;
        let mut bytes: [u8; N] = self.take(N)?.try_into().expect("N bytes");
        if self.big_endian {
            bytes.reverse();
        }
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, Malformed> {
        self.fixed::<4>().map(u32::from_le_bytes)
    }

    fn text(&mut self, len: usize) -> Result<String, Malformed> {
        let bytes = self.take(len)?.to_vec();
        if self.take(1)? != [0] {
            return malformed("a string without its NUL");
        }
        String::from_utf8(bytes).or_else(|_| malformed("a string that is not UTF-8"))
    }

    /// One complete type off `types`, and its value.
    fn value(&mut self, types: &mut Types<'_>) -> Result<Value, Malformed> {
        let Some(t) = types.next() else { return malformed("a signature cut short") };
        Ok(match t {
            'y' => Value::Byte(self.byte()?),
            'b' => Value::Bool(self.u32()? != 0),
            'n' => Value::I16(self.fixed::<2>().map(i16::from_le_bytes)?),
            'q' => Value::U16(self.fixed::<2>().map(u16::from_le_bytes)?),
            'i' => Value::I32(self.fixed::<4>().map(i32::from_le_bytes)?),
            'u' => Value::U32(self.u32()?),
            'h' => Value::UnixFd(self.u32()?),
            'x' => Value::I64(self.fixed::<8>().map(i64::from_le_bytes)?),
            't' => Value::U64(self.fixed::<8>().map(u64::from_le_bytes)?),
            'd' => Value::Double(self.fixed::<8>().map(f64::from_le_bytes)?),
            's' => {
                let len = self.u32()? as usize;
                Value::Str(self.text(len)?)
            }
            'o' => {
                let len = self.u32()? as usize;
                Value::ObjectPath(self.text(len)?)
            }
            'g' => {
                let len = self.byte()? as usize;
                Value::Signature(self.text(len)?)
            }
            'v' => {
                let len = self.byte()? as usize;
                let sig = self.text(len)?;
                let mut inner = sig.chars().peekable();
                let value = self.value(&mut inner)?;
                if inner.next().is_some() {
                    return malformed("a variant of more than one type");
                }
                Value::Variant(Box::new(value))
            }
            'a' => {
                let len = self.u32()? as usize;
                let elem = element_signature(types)?;
                self.align(alignment(&elem))?;
                let end = self.at.checked_add(len).filter(|&e| e <= self.buf.len());
                let Some(end) = end else { return malformed("an array past the end") };
                let mut items = Vec::new();
                while self.at < end {
                    items.push(self.value(&mut elem.chars().peekable())?);
                }
                if self.at != end {
                    return malformed("an array's length");
                }
                Value::Array(items)
            }
            '(' | '{' => {
                self.align(8)?;
                let close = if t == '(' { ')' } else { '}' };
                let mut fields = Vec::new();
                while types.peek().is_some_and(|&c| c != close) {
                    fields.push(self.value(types)?);
                }
                if types.next() != Some(close) {
                    return malformed("a struct not closed");
                }
                Value::Struct(fields)
            }
            other => return malformed(format!("type {other:?}")),
        })
    }
}

/// The complete type that follows an `a` in `types`, consumed from it.
fn element_signature(types: &mut Types<'_>) -> Result<String, Malformed> {
    let mut sig = String::new();
    let mut depth = 0usize;
    loop {
        let Some(c) = types.next() else { return malformed("an array without its element type") };
        sig.push(c);
        match c {
            'a' => continue,
            '(' | '{' => depth += 1,
            ')' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 {
            return Ok(sig);
        }
    }
}

#[cfg(test)]
mod tests {
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
            Value::Struct(vec![
                Value::Str("PIDs".into()),
                Value::Variant(Box::new(Value::Array(vec![Value::U32(4242)])))
            ])
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
}
