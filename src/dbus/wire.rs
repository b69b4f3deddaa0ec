//! The D-Bus wire format, the part pgrun speaks: messages marshalled and
//! read in little-endian byte order, with the basic types, arrays, structs
//! and variants (the D-Bus specification's "Marshaling" section). Pure
//! code on byte buffers, no I/O: [`super::Connection`] moves the bytes.
//!
//! What comes off the bus is read as hostile: every read is bounds-checked
//! and every failure is a [`Malformed`] naming it, never a panic. The
//! specification's limits are enforced: a message of at most
//! [`MAX_MESSAGE`] bytes, an array of at most [`MAX_ARRAY`], signatures of
//! at most 255 bytes with at most 32 nested arrays and 32 nested structs,
//! no empty struct, dict entries of a basic key and one value inside an
//! array only, and at most 64 containers nested in a value, variants
//! included (which bounds the reader's recursion); padding is zeros, a
//! boolean is 0 or 1, a string has no NUL, every array element takes
//! bytes, and each kind of message has the header fields it needs (an
//! error its error name).

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
pub const PATH: u8 = 1;
pub const INTERFACE: u8 = 2;
pub const MEMBER: u8 = 3;
pub const ERROR_NAME: u8 = 4;
pub const REPLY_SERIAL: u8 = 5;
pub const DESTINATION: u8 = 6;
pub const SENDER: u8 = 7;
pub const SIGNATURE: u8 = 8;

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

/// The largest message the specification allows: 128 MiB.
pub const MAX_MESSAGE: usize = 128 << 20;

/// The largest array the specification allows: 64 MiB.
pub const MAX_ARRAY: usize = 64 << 20;

/// Nested arrays, and nested structs, one signature may have.
const MAX_NESTED: usize = 32;

/// Containers (arrays, structs, variants) a value may be nested in.
const MAX_DEPTH: usize = 64;

/// A method call, marshalled: `destination`, `path`, `interface`, `member`,
/// serial `serial`, arguments `args`.
pub fn method_call(destination: &str, path: &str, interface: &str, member: &str, serial: u32, args: &[Arg]) -> Vec<u8> {
    let fields = [
        (PATH, Arg::ObjectPath(path.into())),
        (INTERFACE, Arg::str(interface)),
        (MEMBER, Arg::str(member)),
        (DESTINATION, Arg::str(destination)),
    ];
    message(Kind::MethodCall, serial, &fields, args)
}

/// A message of `kind`, marshalled: serial `serial`, the header fields
/// `fields` (code and value; the signature field is added for `args`),
/// arguments `args`. The client sends method calls only; the others are
/// for tests, which play the bus.
pub fn message(kind: Kind, serial: u32, fields: &[(u8, Arg)], args: &[Arg]) -> Vec<u8> {
    let mut body = Writer::default();
    for arg in args {
        body.arg(arg);
    }
    let signature: String = args.iter().map(Arg::signature).collect();
    let mut fields: Vec<(u8, Arg)> = fields.to_vec();
    if !signature.is_empty() {
        fields.push((SIGNATURE, Arg::Signature(signature)));
    }
    let mut out = Writer::default();
    out.buf.extend_from_slice(&[b'l', kind as u8, 0, 1]);
    out.u32(body.buf.len() as u32);
    out.u32(serial);
    // The header fields are `a(yv)`: the code is a byte.
    out.header_fields(&fields);
    out.pad(8);
    out.buf.extend_from_slice(&body.buf);
    out.buf
}

/// The length of the message whose first 16 bytes are `fixed`: header,
/// padding and body; at most [`MAX_MESSAGE`].
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
    if fields > MAX_ARRAY {
        return malformed(format!("{fields} bytes of header fields, more than an array may have"));
    }
    let total = (16 + fields).next_multiple_of(8).checked_add(body).filter(|&n| n <= MAX_MESSAGE);
    match total {
        Some(n) => Ok(n),
        None => malformed(format!("{body} bytes of body and {fields} of header fields, more than a message may have")),
    }
}

/// Read one whole message (as [`message_len`] measured it).
pub fn parse(bytes: &[u8]) -> Result<Message, Malformed> {
    let Some(fixed) = bytes.first_chunk::<16>() else { return malformed("shorter than its fixed header") };
    if message_len(fixed)? != bytes.len() {
        return malformed("its length is not what its header says");
    }
    let mut r = Reader { buf: bytes, at: 0, big_endian: bytes[0] == b'B', depth: 0 };
    let _order = r.byte()?;
    let kind = match r.byte()? {
        1 => Some(Kind::MethodCall),
        2 => Some(Kind::MethodReturn),
        3 => Some(Kind::Error),
        4 => Some(Kind::Signal),
        // Unknown kinds are to be ignored, not refused.
        _ => None,
    };
    let _flags = r.byte()?;
    if r.byte()? != 1 {
        return malformed("protocol version");
    }
    let body_len = r.u32()? as usize;
    let serial = r.u32()?;
    if serial == 0 {
        return malformed("serial 0");
    }
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
        let string = || match &**value {
            Value::Str(s) => Ok(Some(s.clone())),
            _ => malformed(format!("header field {code} is not a string")),
        };
        match *code {
            PATH => match &**value {
                Value::ObjectPath(p) => msg.path = Some(p.clone()),
                _ => return malformed("a path field that is not an object path"),
            },
            INTERFACE => msg.interface = string()?,
            MEMBER => msg.member = string()?,
            ERROR_NAME => msg.error_name = string()?,
            REPLY_SERIAL => match &**value {
                Value::U32(n) if *n != 0 => msg.reply_serial = Some(*n),
                _ => return malformed("a reply serial that is not a nonzero u32"),
            },
            DESTINATION => drop(string()?),
            SENDER => msg.sender = string()?,
            SIGNATURE => match &**value {
                Value::Signature(sig) => signature = sig.clone(),
                _ => return malformed("a signature field that is not a signature"),
            },
            _ => {}
        }
    }
    let needed: &[(bool, &str)] = match kind {
        Some(Kind::MethodCall) => &[(msg.path.is_some(), "a path"), (msg.member.is_some(), "a member")],
        Some(Kind::MethodReturn) => &[(msg.reply_serial.is_some(), "a reply serial")],
        Some(Kind::Error) => {
            &[(msg.error_name.is_some(), "an error name"), (msg.reply_serial.is_some(), "a reply serial")]
        }
        Some(Kind::Signal) => &[
            (msg.path.is_some(), "a path"),
            (msg.interface.is_some(), "an interface"),
            (msg.member.is_some(), "a member"),
        ],
        None => &[],
    };
    if let Some((_, what)) = needed.iter().find(|(has, _)| !has) {
        let kind = match kind {
            Some(Kind::MethodCall) => "a method call",
            Some(Kind::MethodReturn) => "a method return",
            Some(Kind::Error) => "an error reply",
            _ => "a signal",
        };
        return malformed(format!("{kind} without {what}"));
    }
    r.align(8)?;
    if r.buf.len() - r.at != body_len {
        return malformed("body length");
    }
    let mut types = signature.chars().peekable();
    while types.peek().is_some() {
        msg.body.push(r.value(&mut types)?);
    }
    if r.at != r.buf.len() {
        return malformed("bytes after the body its signature says");
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
    fn header_fields(&mut self, fields: &[(u8, Arg)]) {
        self.pad(4);
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        self.pad(8);
        let start = self.buf.len();
        for (code, value) in fields {
            self.pad(8);
            self.buf.push(*code);
            self.arg(&Arg::Variant(Box::new(value.clone())));
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
    /// Containers the value being read is nested in (at most [`MAX_DEPTH`]).
    depth: usize,
}

type Types<'s> = std::iter::Peekable<std::str::Chars<'s>>;

impl Reader<'_> {
    /// Skip the padding to a multiple of `n`: zero bytes, within the buffer.
    fn align(&mut self, n: usize) -> Result<(), Malformed> {
        let to = self.at.next_multiple_of(n);
        let Some(padding) = self.buf.get(self.at..to) else { return malformed("padding past the end") };
        if padding.iter().any(|&b| b != 0) {
            return malformed("padding that is not zeros");
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
        let Some(&(mut bytes)) = self.take(N)?.first_chunk::<N>() else { return malformed("a value past the end") };
        if self.big_endian {
            bytes.reverse();
        }
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8, Malformed> {
        match self.take(1)? {
            [b] => Ok(*b),
            _ => malformed("a value past the end"),
        }
    }

    fn u32(&mut self) -> Result<u32, Malformed> {
        self.fixed::<4>().map(u32::from_le_bytes)
    }

    /// A string of `len` bytes and its NUL: UTF-8, with no NUL inside.
    fn text(&mut self, len: usize) -> Result<String, Malformed> {
        let bytes = self.take(len)?.to_vec();
        if self.take(1)? != [0] {
            return malformed("a string without its NUL");
        }
        if bytes.contains(&0) {
            return malformed("a string with a NUL inside");
        }
        String::from_utf8(bytes).or_else(|_| malformed("a string that is not UTF-8"))
    }

    /// A signature: its length byte, its text, checked ([`check_signature`]).
    fn signature(&mut self) -> Result<String, Malformed> {
        let len = self.byte()? as usize;
        let sig = self.text(len)?;
        check_signature(&sig)?;
        Ok(sig)
    }

    /// One container more around what is read next.
    fn enter(&mut self) -> Result<(), Malformed> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return malformed(format!("values nested in more than {MAX_DEPTH} containers"));
        }
        Ok(())
    }

    /// One complete type off `types` (a checked signature), and its value.
    fn value(&mut self, types: &mut Types<'_>) -> Result<Value, Malformed> {
        let Some(t) = types.next() else { return malformed("a signature cut short") };
        Ok(match t {
            'y' => Value::Byte(self.byte()?),
            'b' => match self.u32()? {
                n @ (0 | 1) => Value::Bool(n == 1),
                n => return malformed(format!("a boolean of {n}")),
            },
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
                let path = self.text(len)?;
                if !is_object_path(&path) {
                    return malformed(format!("an object path {path:?}"));
                }
                Value::ObjectPath(path)
            }
            'g' => Value::Signature(self.signature()?),
            'v' => {
                let sig = self.signature()?;
                let mut inner = sig.chars().peekable();
                self.enter()?;
                let value = self.value(&mut inner)?;
                self.depth -= 1;
                if inner.next().is_some() {
                    return malformed("a variant of more than one type");
                }
                Value::Variant(Box::new(value))
            }
            'a' => {
                let len = self.u32()? as usize;
                if len > MAX_ARRAY {
                    return malformed(format!("an array of {len} bytes, more than {MAX_ARRAY}"));
                }
                let elem = element_signature(types)?;
                self.align(alignment(&elem))?;
                let end = self.at.checked_add(len).filter(|&e| e <= self.buf.len());
                let Some(end) = end else { return malformed("an array past the end") };
                self.enter()?;
                let mut items = Vec::new();
                while self.at < end {
                    let before = self.at;
                    items.push(self.value(&mut elem.chars().peekable())?);
                    if self.at == before {
                        return malformed("an array element of no bytes");
                    }
                }
                self.depth -= 1;
                if self.at != end {
                    return malformed("an array's length");
                }
                Value::Array(items)
            }
            '(' | '{' => {
                self.align(8)?;
                self.enter()?;
                let close = if t == '(' { ')' } else { '}' };
                let mut fields = Vec::new();
                while types.peek().is_some_and(|&c| c != close) {
                    fields.push(self.value(types)?);
                }
                if types.next() != Some(close) {
                    return malformed("a struct not closed");
                }
                if fields.is_empty() {
                    return malformed("an empty struct");
                }
                self.depth -= 1;
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

/// A signature as the specification allows it: at most 255 bytes of
/// complete types ([`complete_type`]).
pub fn check_signature(sig: &str) -> Result<(), Malformed> {
    if sig.len() > 255 {
        return malformed(format!("a signature of {} bytes, more than 255", sig.len()));
    }
    let bytes = sig.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        at = complete_type(bytes, at, 0, 0)?;
    }
    Ok(())
}

/// Check the complete type that starts at `at` in `sig`, inside `arrays`
/// arrays and `structs` structs; where it ends. At most [`MAX_NESTED`]
/// of each; no empty struct; a dict entry (`{KV}`) only as an array's
/// element, with a basic type for key and one complete type for value.
fn complete_type(sig: &[u8], at: usize, arrays: usize, structs: usize) -> Result<usize, Malformed> {
    let Some(&c) = sig.get(at) else { return malformed("a signature cut short") };
    match c {
        b'y' | b'b' | b'n' | b'q' | b'i' | b'u' | b'x' | b't' | b'd' | b's' | b'o' | b'g' | b'h' | b'v' => Ok(at + 1),
        b'a' if arrays >= MAX_NESTED => malformed(format!("a signature of more than {MAX_NESTED} nested arrays")),
        b'a' if sig.get(at + 1) == Some(&b'{') => {
            if structs >= MAX_NESTED {
                return malformed(format!("a signature of more than {MAX_NESTED} nested structs"));
            }
            if !sig.get(at + 2).is_some_and(|k| b"ybnqiuxtdsogh".contains(k)) {
                return malformed("a dict entry whose key is not of a basic type");
            }
            if sig.get(at + 3) == Some(&b'}') {
                return malformed("a dict entry of other than two types");
            }
            let end = complete_type(sig, at + 3, arrays + 1, structs + 1)?;
            if sig.get(end) != Some(&b'}') {
                return malformed("a dict entry of other than two types");
            }
            Ok(end + 1)
        }
        b'a' => complete_type(sig, at + 1, arrays + 1, structs),
        b'(' if structs >= MAX_NESTED => malformed(format!("a signature of more than {MAX_NESTED} nested structs")),
        b'(' => {
            let mut end = at + 1;
            if sig.get(end) == Some(&b')') {
                return malformed("an empty struct");
            }
            while sig.get(end) != Some(&b')') {
                end = complete_type(sig, end, arrays, structs + 1)?;
            }
            Ok(end + 1)
        }
        other => malformed(format!("type {:?} in a signature", char::from(other))),
    }
}

/// An object path: `/`, or `/` followed by `/`-separated nonempty
/// elements of `[A-Za-z0-9_]`.
fn is_object_path(path: &str) -> bool {
    path == "/"
        || path.strip_prefix('/').is_some_and(|rest| {
            rest.split('/').all(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        })
}

#[cfg(test)]
mod tests;
