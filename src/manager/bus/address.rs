//! D-Bus server addresses (`unix:path=/run/user/1000/bus;unix:abstract=…`): the `unix` transport,
//! which is the only one a user manager or session bus is reached by on one machine.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// Where to connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Address {
    /// A socket file.
    Path(OsString),
    /// A socket in the abstract namespace.
    Abstract(Vec<u8>),
}

/// The `unix` addresses of a `;`-separated address list, in order; other transports are skipped.
/// Err when no usable address is left, saying why.
pub(crate) fn parse(list: &[u8]) -> Result<Vec<Address>, String> {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for entry in list.split(|&b| b == b';').filter(|e| !e.is_empty()) {
        let text = String::from_utf8_lossy(entry);
        let Some(params) = entry.strip_prefix(b"unix:") else {
            skipped.push(format!("{text:?}: only unix: addresses are supported"));
            continue;
        };
        let mut address = None;
        for param in params.split(|&b| b == b',') {
            let Some(eq) = param.iter().position(|&b| b == b'=') else {
                continue;
            };
            let value = match unescape(&param[eq + 1..]) {
                Some(v) if !v.is_empty() => v,
                _ => {
                    address = None;
                    break;
                }
            };
            match &param[..eq] {
                b"path" => address = Some(Address::Path(OsString::from_vec(value))),
                b"abstract" => address = Some(Address::Abstract(value)),
                _ => {}
            }
        }
        match address {
            Some(a) => found.push(a),
            None => skipped.push(format!("{text:?}: no usable path= or abstract=")),
        }
    }
    if found.is_empty() {
        return Err(if skipped.is_empty() {
            "the address is empty".to_owned()
        } else {
            skipped.join("; ")
        });
    }
    Ok(found)
}

/// Undoes the `%xx` escaping of an address value; None for a broken escape.
fn unescape(value: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(value.len());
    let mut bytes = value.iter();
    while let Some(&b) = bytes.next() {
        if b == b'%' {
            let hi = char::from(*bytes.next()?).to_digit(16)?;
            let lo = char::from(*bytes.next()?).to_digit(16)?;
            out.push(u8::try_from(hi * 16 + lo).ok()?);
        } else {
            out.push(b);
        }
    }
    Some(out)
}

/// `%xx`-escapes the bytes an address value may not hold as they are.
pub(super) fn escape_address_value(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    for &b in value {
        if b.is_ascii_alphanumeric() || b"-_/.\\*".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(format!("%{b:02x}").as_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_addresses_parse_in_order_and_others_are_skipped() {
        assert_eq!(
            parse(b"tcp:host=x,port=1;unix:path=/run/user/1000/b%20us,guid=00;unix:abstract=/tmp/dbus-x"),
            Ok(vec![
                Address::Path("/run/user/1000/b us".into()),
                Address::Abstract(b"/tmp/dbus-x".to_vec()),
            ])
        );
        assert!(parse(b"tcp:host=x").unwrap_err().contains("only unix"));
        assert!(parse(b"").is_err());
        assert!(parse(b"unix:path=%zz").is_err());
        assert!(parse(b"unix:tmpdir=/tmp").is_err());
    }

    #[test]
    fn an_escaped_value_unescapes_to_itself() {
        let dir = b"/run/user/1000/a b;c,d=e%\xff";
        let mut address = b"unix:path=".to_vec();
        address.extend(escape_address_value(dir));
        assert_eq!(
            parse(&address),
            Ok(vec![Address::Path(OsString::from_vec(dir.to_vec()))])
        );
    }
}
