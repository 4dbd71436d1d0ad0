//! The D-Bus wire format, as much of it as a scope launch needs: building method calls, and
//! parsing any message a peer may send (checked against its signature, bounded in size and depth).
//! Everything here is pure; the parser is fuzzed (`fuzz/fuzz_targets/bus_message.rs`).

use std::fmt;

/// Messages larger than this are refused (the specification's own limit is 128 MiB; nothing the
/// manager says to a scope launch comes near 1 MiB).
pub(crate) const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// The header flag that asks a bus broker not to start a service for a name nobody owns: a
/// session bus the manager is not on answers at once (on Debian the session bus's own service
/// file for `org.freedesktop.systemd1` would run `/bin/false`).
pub(crate) const NO_AUTO_START: u8 = 0x2;
/// The specification's nesting limits: 32 arrays and 32 structs deep.
const MAX_DEPTH: usize = 32;

/// A message type (the second byte of the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    MethodCall,
    Return,
    Error,
    Signal,
}

/// One parsed value. Only the types a peer may send us are kept apart; the rest parse (so a
/// message is never misread) into the nearest shape. A value costs at most 16 times its wire size
/// (32 bytes for the smallest element, two bytes of an `ag` or `an`), a byte array no more than its
/// bytes; and only messages of at most 64 KiB are parsed (see `connection`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Bool(bool),
    /// Every integer type, widened (doubles keep their bits).
    Int(i128),
    Str(String),
    ObjectPath(String),
    Signature(String),
    /// A byte array (`ay`), kept as its bytes: one byte each, as on the wire.
    Bytes(Vec<u8>),
    /// Arrays of any other type, structs and dict entries alike.
    List(Vec<Value>),
    Variant(Box<Value>),
}

impl Value {
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) | Value::ObjectPath(s) | Value::Signature(s) => Some(s),
            Value::Variant(inner) => inner.as_str(),
            _ => None,
        }
    }

    /// An unsigned integer that fits 64 bits (a `t` property, for one).
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(n) => u64::try_from(*n).ok(),
            Value::Variant(inner) => inner.as_u64(),
            _ => None,
        }
    }
}

/// A parsed message.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Message {
    pub kind: Kind,
    pub serial: u32,
    pub reply_serial: Option<u32>,
    pub path: Option<String>,
    pub interface: Option<String>,
    pub member: Option<String>,
    pub error_name: Option<String>,
    /// Who sent it, as the broker names the sender (absent on a private socket, where only the
    /// manager speaks).
    pub sender: Option<String>,
    /// The body's signature.
    pub signature: String,
    /// Empty when only the header was parsed ([`parse_header`]).
    pub body: Vec<Value>,
}

impl Message {
    /// The first string of the body: an error's message, or a reply's single string.
    pub(crate) fn first_str(&self) -> Option<&str> {
        self.body.first().and_then(Value::as_str)
    }
}

/// Why bytes are not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WireError(pub &'static str);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed D-Bus message: {}", self.0)
    }
}

fn pad(len: usize, align: usize) -> usize {
    (align - len % align) % align
}

/// The total length of the message at the start of `buf` once its fixed header is there, so a
/// reader knows how much to wait for.
pub(crate) fn message_len(buf: &[u8]) -> Result<Option<usize>, WireError> {
    if buf.len() < 16 {
        return Ok(None);
    }
    let little = match buf[0] {
        b'l' => true,
        b'B' => false,
        _ => return Err(WireError("unknown byte order")),
    };
    if buf[3] != 1 {
        return Err(WireError("unknown protocol version"));
    }
    let word = |at: usize| {
        let bytes = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
        if little {
            u32::from_le_bytes(bytes)
        } else {
            u32::from_be_bytes(bytes)
        }
    };
    let body = word(4) as usize;
    let fields = word(12) as usize;
    let header = 16usize
        .checked_add(fields)
        .ok_or(WireError("header too long"))?;
    let total = header
        .checked_add(pad(header, 8))
        .and_then(|h| h.checked_add(body))
        .ok_or(WireError("message too long"))?;
    if total > MAX_MESSAGE {
        return Err(WireError("message too long"));
    }
    Ok(Some(total))
}

/// Whether the message at the start of `buf` (its fixed header there) is a signal.
pub(crate) fn is_signal(buf: &[u8]) -> bool {
    buf.get(1) == Some(&4)
}

/// Reads values of a signature out of a message's bytes.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    little: bool,
}

impl<'a> Reader<'a> {
    fn align(&mut self, align: usize) -> Result<(), WireError> {
        let to = self.pos + pad(self.pos, align);
        if to > self.buf.len() {
            return Err(WireError("truncated"));
        }
        if self.buf[self.pos..to].iter().any(|&b| b != 0) {
            return Err(WireError("non-zero padding"));
        }
        self.pos = to;
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError("truncated"))?;
        let bytes = self.buf.get(self.pos..end).ok_or(WireError("truncated"))?;
        self.pos = end;
        Ok(bytes)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        self.align(N)?;
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        if self.little {
            out.reverse();
        }
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.fixed::<4>()?))
    }

    fn text(&mut self, len: usize) -> Result<String, WireError> {
        let bytes = self.take(len)?;
        if self.take(1)? != [0] {
            return Err(WireError("string without its NUL"));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| WireError("string is not UTF-8"))?;
        if text.contains('\0') {
            return Err(WireError("string contains NUL"));
        }
        Ok(text.to_owned())
    }

    /// One complete type at the start of `sig`, returned with the rest of the signature.
    fn value<'s>(&mut self, sig: &'s [u8], depth: usize) -> Result<(Value, &'s [u8]), WireError> {
        if depth > MAX_DEPTH * 2 {
            return Err(WireError("nested too deep"));
        }
        let (&code, rest) = sig.split_first().ok_or(WireError("empty signature"))?;
        let value = match code {
            b'y' => Value::Int(i128::from(self.take(1)?[0])),
            b'b' => match self.u32()? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                _ => return Err(WireError("boolean other than 0 or 1")),
            },
            b'n' => Value::Int(i128::from(i16::from_be_bytes(self.fixed::<2>()?))),
            b'q' => Value::Int(i128::from(u16::from_be_bytes(self.fixed::<2>()?))),
            b'i' => Value::Int(i128::from(i32::from_be_bytes(self.fixed::<4>()?))),
            b'u' | b'h' => Value::Int(i128::from(self.u32()?)),
            b'x' => Value::Int(i128::from(i64::from_be_bytes(self.fixed::<8>()?))),
            b't' | b'd' => Value::Int(i128::from(u64::from_be_bytes(self.fixed::<8>()?))),
            b's' | b'o' => {
                let len = self.u32()? as usize;
                let text = self.text(len)?;
                if code == b'o' {
                    Value::ObjectPath(text)
                } else {
                    Value::Str(text)
                }
            }
            b'g' => {
                let len = usize::from(self.take(1)?[0]);
                Value::Signature(self.text(len)?)
            }
            b'v' => {
                let len = usize::from(self.take(1)?[0]);
                let inner_sig = self.text(len)?;
                let (inner, left) = self.value(inner_sig.as_bytes(), depth + 1)?;
                if !left.is_empty() {
                    return Err(WireError("variant holds more than one type"));
                }
                Value::Variant(Box::new(inner))
            }
            b'a' => {
                let len = self.u32()? as usize;
                if len > 64 * 1024 * 1024 {
                    return Err(WireError("array too long"));
                }
                let element_end = complete_type(rest, 0)?;
                let element = &rest[..element_end];
                self.align(alignment(element[0]))?;
                let end = self.pos.checked_add(len).ok_or(WireError("truncated"))?;
                if end > self.buf.len() {
                    return Err(WireError("truncated"));
                }
                if element == b"y" {
                    let bytes = self.take(len)?.to_vec();
                    return Ok((Value::Bytes(bytes), &rest[element_end..]));
                }
                let mut items = Vec::new();
                while self.pos < end {
                    items.push(self.value(element, depth + 1)?.0);
                }
                if self.pos != end {
                    return Err(WireError("array length mismatch"));
                }
                return Ok((Value::List(items), &rest[element_end..]));
            }
            b'(' | b'{' => {
                self.align(8)?;
                let close = if code == b'(' { b')' } else { b'}' };
                let mut items = Vec::new();
                let mut inner = rest;
                loop {
                    match inner.first() {
                        Some(&c) if c == close => break,
                        Some(_) => {
                            let (item, left) = self.value(inner, depth + 1)?;
                            items.push(item);
                            inner = left;
                        }
                        None => return Err(WireError("unclosed container in signature")),
                    }
                }
                if items.is_empty() || (code == b'{' && items.len() != 2) {
                    return Err(WireError("empty struct or malformed dict entry"));
                }
                return Ok((Value::List(items), &inner[1..]));
            }
            _ => return Err(WireError("unknown type code")),
        };
        Ok((value, rest))
    }
}

/// The length of the one complete type at the start of `sig`.
fn complete_type(sig: &[u8], depth: usize) -> Result<usize, WireError> {
    if depth > MAX_DEPTH * 2 {
        return Err(WireError("nested too deep"));
    }
    match sig.first() {
        Some(b'a') => Ok(1 + complete_type(&sig[1..], depth + 1)?),
        Some(&open @ (b'(' | b'{')) => {
            let close = if open == b'(' { b')' } else { b'}' };
            let mut at = 1;
            while sig.get(at).is_some_and(|&c| c != close) {
                at += complete_type(&sig[at..], depth + 1)?;
            }
            if at >= sig.len() {
                return Err(WireError("unclosed container in signature"));
            }
            Ok(at + 1)
        }
        Some(_) => Ok(1),
        None => Err(WireError("empty signature")),
    }
}

fn alignment(code: u8) -> usize {
    match code {
        b'n' | b'q' => 2,
        b'b' | b'i' | b'u' | b'h' | b's' | b'o' | b'a' => 4,
        b'x' | b't' | b'd' | b'(' | b'{' => 8,
        _ => 1,
    }
}

/// Parses one whole message (exactly `message_len` bytes).
pub(crate) fn parse(buf: &[u8]) -> Result<Message, WireError> {
    let (mut message, mut reader) = header(buf)?;
    let mut sig = message.signature.as_bytes();
    let mut body = Vec::new();
    while !sig.is_empty() {
        let (value, rest) = reader.value(sig, 0)?;
        body.push(value);
        sig = rest;
    }
    if reader.pos != buf.len() {
        return Err(WireError("body longer than its signature"));
    }
    message.body = body;
    Ok(message)
}

/// Parses the header of one whole message (exactly `message_len` bytes), not its body: enough to
/// tell whether the message is worth more (a signal the client does not wait for is not).
pub(crate) fn parse_header(buf: &[u8]) -> Result<Message, WireError> {
    header(buf).map(|(message, _)| message)
}

/// The header of a whole message, and a reader at the start of its body.
fn header(buf: &[u8]) -> Result<(Message, Reader<'_>), WireError> {
    let total = message_len(buf)?.ok_or(WireError("truncated"))?;
    if buf.len() != total {
        return Err(WireError("length mismatch"));
    }
    let kind = match buf[1] {
        1 => Kind::MethodCall,
        2 => Kind::Return,
        3 => Kind::Error,
        4 => Kind::Signal,
        _ => return Err(WireError("unknown message type")),
    };
    let mut reader = Reader {
        buf,
        pos: 8,
        little: buf[0] == b'l',
    };
    let serial = reader.u32()?;
    let (fields, _) = reader.value(b"a(yv)", 0)?;
    let mut message = Message {
        kind,
        serial,
        reply_serial: None,
        path: None,
        interface: None,
        member: None,
        error_name: None,
        sender: None,
        signature: String::new(),
        body: Vec::new(),
    };
    let Value::List(fields) = fields else {
        return Err(WireError("header fields"));
    };
    for field in fields {
        let Value::List(pair) = field else {
            return Err(WireError("header field"));
        };
        let (Some(Value::Int(code)), Some(Value::Variant(value))) = (pair.first(), pair.get(1))
        else {
            return Err(WireError("header field"));
        };
        let text = value.as_str().map(str::to_owned);
        match (code, value.as_ref()) {
            (1, Value::ObjectPath(_)) => message.path = text,
            (2, Value::Str(_)) => message.interface = text,
            (3, Value::Str(_)) => message.member = text,
            (4, Value::Str(_)) => message.error_name = text,
            (5, Value::Int(n)) => message.reply_serial = u32::try_from(*n).ok(),
            (7, Value::Str(_)) => message.sender = text,
            (8, Value::Signature(_)) => message.signature = text.unwrap_or_default(),
            (1..=5 | 7 | 8, _) => return Err(WireError("header field of the wrong type")),
            _ => {}
        }
    }
    reader.align(8)?;
    Ok((message, reader))
}

/// Builds a little-endian method call.
pub(crate) struct Call {
    buf: Vec<u8>,
    signature: String,
    /// How many descriptors go with the message (its `UNIX_FDS` header field).
    unix_fds: u32,
}

impl Call {
    pub(crate) fn new() -> Self {
        Call {
            buf: Vec::with_capacity(256),
            signature: String::new(),
            unix_fds: 0,
        }
    }

    fn align(&mut self, align: usize) {
        let n = pad(self.buf.len(), align);
        self.buf.extend(std::iter::repeat(0).take(n));
    }

    fn u32_raw(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn str_raw(&mut self, s: &str) {
        self.u32_raw(u32::try_from(s.len()).unwrap_or(u32::MAX));
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    fn sig_raw(&mut self, s: &str) {
        self.buf.push(u8::try_from(s.len()).unwrap_or(u8::MAX));
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    /// A string argument. D-Bus strings are UTF-8 without NUL; callers pass only such text
    /// (unit names and descriptions are made safe before they get here).
    pub(crate) fn string(mut self, s: &str) -> Self {
        self.signature.push('s');
        self.str_raw(s);
        self
    }

    /// A `u` argument.
    pub(crate) fn uint32(mut self, value: u32) -> Self {
        self.signature.push('u');
        self.u32_raw(value);
        self
    }

    /// A property list `a(sv)` of unit properties.
    pub(crate) fn properties(mut self, props: &[(&str, Property<'_>)]) -> Self {
        self.signature.push_str("a(sv)");
        self.u32_raw(0);
        let len_at = self.buf.len() - 4;
        self.align(8);
        let start = self.buf.len();
        for (name, value) in props {
            self.align(8);
            self.str_raw(name);
            match value {
                Property::Str(s) => {
                    self.sig_raw("s");
                    self.str_raw(s);
                }
                Property::Pids(pids) => {
                    self.sig_raw("au");
                    self.u32_raw(u32::try_from(pids.len() * 4).unwrap_or(u32::MAX));
                    for pid in pids.iter() {
                        self.u32_raw(*pid);
                    }
                }
                Property::U64(value) => {
                    self.sig_raw("t");
                    self.align(8);
                    self.buf.extend_from_slice(&value.to_le_bytes());
                }
                Property::U32(value) => {
                    self.sig_raw("u");
                    self.u32_raw(*value);
                }
                Property::OnePidFd => {
                    self.sig_raw("ah");
                    self.u32_raw(4);
                    self.u32_raw(self.unix_fds);
                    self.unix_fds += 1;
                }
            }
        }
        let len = u32::try_from(self.buf.len() - start).unwrap_or(u32::MAX);
        self.buf[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        self
    }

    /// The call with one descriptor attached that its body does not name: sent along to show
    /// that descriptors reach the peer.
    pub(crate) fn with_an_unnamed_fd(mut self) -> Self {
        self.unix_fds += 1;
        self
    }

    /// How many descriptors go with the message, in the order its body names them.
    pub(crate) fn unix_fds(&self) -> u32 {
        self.unix_fds
    }

    /// An empty array of auxiliary units `a(sa(sv))`.
    pub(crate) fn no_aux_units(mut self) -> Self {
        self.signature.push_str("a(sa(sv))");
        self.u32_raw(0);
        self.align(8);
        self
    }

    /// The whole message: header fields for `path`, `interface`, `member` and `destination`, and
    /// the header `flags` (such as [`NO_AUTO_START`]).
    pub(crate) fn finish(
        self,
        serial: u32,
        flags: u8,
        destination: Option<&str>,
        path: &str,
        interface: &str,
        member: &str,
    ) -> Vec<u8> {
        let mut header = Call::new();
        header.buf.extend_from_slice(&[b'l', 1, flags, 1]);
        header.u32_raw(u32::try_from(self.buf.len()).unwrap_or(u32::MAX));
        header.u32_raw(serial);
        header.u32_raw(0);
        let fields_start = header.buf.len();
        let field = |h: &mut Call, code: u8, sig: &str, text: &str| {
            h.align(8);
            h.buf.push(code);
            h.sig_raw(sig);
            if sig == "g" {
                h.sig_raw(text);
            } else {
                h.str_raw(text);
            }
        };
        field(&mut header, 1, "o", path);
        field(&mut header, 2, "s", interface);
        field(&mut header, 3, "s", member);
        if let Some(destination) = destination {
            field(&mut header, 6, "s", destination);
        }
        if !self.signature.is_empty() {
            field(&mut header, 8, "g", &self.signature);
        }
        if self.unix_fds > 0 {
            header.align(8);
            header.buf.push(9);
            header.sig_raw("u");
            header.u32_raw(self.unix_fds);
        }
        let fields_len = u32::try_from(header.buf.len() - fields_start).unwrap_or(u32::MAX);
        header.buf[12..16].copy_from_slice(&fields_len.to_le_bytes());
        header.align(8);
        header.buf.extend_from_slice(&self.buf);
        header.buf
    }
}

/// A unit property value, as a scope launch sends them.
pub(crate) enum Property<'a> {
    Str(&'a str),
    /// A `t`: bytes, tasks, a weight, microseconds.
    U64(u64),
    /// A `u`: a share scaled to `u32::MAX`.
    U32(u32),
    Pids(&'a [u32]),
    /// `PIDFDs`: one process descriptor, the next one attached to the message.
    OnePidFd,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Vec<u8> {
        Call::new()
            .string("synaps-tool-x.scope")
            .string("fail")
            .properties(&[
                ("Description", Property::Str("d")),
                ("CollectMode", Property::Str("inactive-or-failed")),
                ("PIDs", Property::Pids(&[42])),
            ])
            .no_aux_units()
            .finish(
                7,
                NO_AUTO_START,
                Some("org.freedesktop.systemd1"),
                "/org/freedesktop/systemd1",
                "org.freedesktop.systemd1.Manager",
                "StartTransientUnit",
            )
    }

    #[test]
    fn a_built_call_parses_back_whole() {
        let bytes = call();
        assert_eq!(message_len(&bytes), Ok(Some(bytes.len())));
        let message = parse(&bytes).unwrap();
        assert_eq!(message.kind, Kind::MethodCall);
        assert_eq!(message.serial, 7);
        assert_eq!(bytes[2], NO_AUTO_START, "the header's flags");
        assert_eq!(message.member.as_deref(), Some("StartTransientUnit"));
        assert_eq!(message.path.as_deref(), Some("/org/freedesktop/systemd1"));
        let str = |s: &str| Value::Str(s.into());
        let prop = |name: &str, v: Value| Value::List(vec![str(name), Value::Variant(Box::new(v))]);
        assert_eq!(
            message.body,
            vec![
                str("synaps-tool-x.scope"),
                str("fail"),
                Value::List(vec![
                    prop("Description", str("d")),
                    prop("CollectMode", str("inactive-or-failed")),
                    prop("PIDs", Value::List(vec![Value::Int(42)])),
                ]),
                Value::List(vec![]),
            ]
        );
    }

    #[test]
    fn a_pidfd_is_named_by_its_index_and_counted_in_the_header() {
        let bytes = Call::new()
            .string("synaps-tool-x.scope")
            .properties(&[("PIDFDs", Property::OnePidFd)])
            .finish(3, 0, None, "/", "i.f", "M");
        let message = parse(&bytes).unwrap();
        let prop = Value::List(vec![
            Value::Str("PIDFDs".into()),
            Value::Variant(Box::new(Value::List(vec![Value::Int(0)]))),
        ]);
        assert_eq!(message.body[1], Value::List(vec![prop]));
        // The UNIX_FDS field (9, "u", 1) follows the signature's.
        let field = [9, 1, b'u', 0, 1, 0, 0, 0];
        assert!(bytes.windows(8).any(|w| w == field), "{bytes:?}");
        let ping = Call::new().with_an_unnamed_fd();
        assert_eq!(ping.unix_fds(), 1);
    }

    #[test]
    fn every_truncation_and_corruption_is_an_error_not_a_panic() {
        let bytes = call();
        for cut in 0..bytes.len() {
            assert!(parse(&bytes[..cut]).is_err(), "{cut}");
        }
        for at in 0..bytes.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[at] ^= flip;
                let _ = parse(&bad);
            }
        }
    }

    #[test]
    fn big_endian_messages_parse_too() {
        // A method return, serial 2, reply to 1, signature "s", body "ok" (hand-assembled).
        let mut m = vec![b'B', 2, 0, 1, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 0x0f];
        m.extend_from_slice(&[5, 1, b'u', 0, 0, 0, 0, 1]);
        m.extend_from_slice(&[8, 1, b'g', 0, 1, b's', 0]);
        m.push(0);
        m.extend_from_slice(&[0, 0, 0, 2, b'o', b'k', 0]);
        let message = parse(&m).unwrap();
        assert_eq!(message.kind, Kind::Return);
        assert_eq!(message.reply_serial, Some(1));
        assert_eq!(message.first_str(), Some("ok"));
    }

    #[test]
    fn real_replies_of_the_manager_parse() {
        // Captured from systemd 252's private socket (fuzz/seeds/bus_message): a Get of Version,
        // LoadUnit's object path, an error, and a GetAll of a unit with every type it uses.
        let replies: [&[u8]; 4] = [
            include_bytes!("../../../fuzz/seeds/bus_message/reply-0"),
            include_bytes!("../../../fuzz/seeds/bus_message/reply-1"),
            include_bytes!("../../../fuzz/seeds/bus_message/reply-2"),
            include_bytes!("../../../fuzz/seeds/bus_message/reply-3"),
        ];
        let parsed: Vec<Message> = replies.iter().map(|r| parse(r).unwrap()).collect();
        assert!(parsed[0].first_str().unwrap().starts_with("252"));
        assert_eq!(
            parsed[1].first_str(),
            Some("/org/freedesktop/systemd1/unit/app_2eslice")
        );
        assert_eq!(parsed[2].kind, Kind::Error);
        assert_eq!(
            parsed[2].error_name.as_deref(),
            Some("org.freedesktop.DBus.Error.InvalidArgs")
        );
        let Value::List(properties) = &parsed[3].body[0] else {
            panic!("GetAll returns a{{sv}}")
        };
        assert!(properties.len() > 50, "{}", properties.len());
    }

    #[test]
    fn a_byte_array_costs_its_bytes_and_a_header_alone_parses_no_body() {
        // A signal, serial 3, signature "ay", body: 5 bytes (hand-assembled, little-endian).
        let mut m = vec![b'l', 4, 0, 1, 9, 0, 0, 0, 3, 0, 0, 0, 8, 0, 0, 0];
        m.extend_from_slice(&[8, 1, b'g', 0, 2, b'a', b'y', 0]);
        m.extend_from_slice(&[5, 0, 0, 0, 1, 2, 3, 4, 5]);
        let message = parse(&m).unwrap();
        assert_eq!(message.body, vec![Value::Bytes(vec![1, 2, 3, 4, 5])]);
        let header = parse_header(&m).unwrap();
        assert_eq!(
            (header.kind, header.signature.as_str()),
            (Kind::Signal, "ay")
        );
        assert!(header.body.is_empty());
    }

    #[test]
    fn deep_nesting_and_huge_lengths_are_refused() {
        let deep = "a".repeat(100) + "y";
        assert!(complete_type(deep.as_bytes(), 0).is_err());
        let mut huge = vec![b'l', 2, 0, 1];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        assert!(message_len(&huge).is_err());
    }
}
