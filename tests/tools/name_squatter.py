#!/usr/bin/env python3
"""A program that is not a systemd manager but owns the name org.freedesktop.systemd1 on a bus, for
tests: it connects to the bus at ADDRESS (a unix:path= address), takes the name, prints "ready" on
stdout, and answers every method call made to it with org.freedesktop.DBus.Error.UnknownMethod, as
a program that implements none of the manager's interfaces would. Runs until killed.

With --unit-path=P1:P2:..., it answers Get(..., "UnitPath") with that list, as a program that
copies the real manager's answer would; with --says-done as well, it answers every other call
with a job path and then a JobRemoved signal saying that job is "done", as a program that says a
scope was made when nothing was.

With --silent, it answers nothing at all, as a manager that hangs would.

    name_squatter.py unix:path=/run/user/1000/bus [--unit-path=P1:P2 [--says-done] | --silent]
"""
import os
import socket
import struct
import sys

NAME = "org.freedesktop.systemd1"


def pad(buf: bytearray, align: int) -> None:
    buf.extend(b"\0" * (-len(buf) % align))


def put_u32(buf: bytearray, value: int) -> None:
    pad(buf, 4)
    buf.extend(struct.pack("<I", value))


def put_str(buf: bytearray, text: str) -> None:
    data = text.encode()
    put_u32(buf, len(data))
    buf.extend(data + b"\0")


def put_sig(buf: bytearray, text: str) -> None:
    buf.append(len(text))
    buf.extend(text.encode() + b"\0")


def message(kind: int, serial: int, fields: list, signature: str, body: bytes) -> bytes:
    """A little-endian message; fields are (code, signature, value)."""
    out = bytearray(b"l" + bytes([kind, 0, 1]))
    put_u32(out, len(body))
    put_u32(out, serial)
    put_u32(out, 0)
    start = len(out)
    if signature:
        fields = fields + [(8, "g", signature)]
    for code, sig, value in fields:
        pad(out, 8)
        out.append(code)
        put_sig(out, sig)
        if sig == "u":
            put_u32(out, value)
        elif sig == "g":
            put_sig(out, value)
        else:
            put_str(out, value)
    out[12:16] = struct.pack("<I", len(out) - start)
    pad(out, 8)
    return bytes(out) + body


def call(serial: int, member: str, signature: str = "", body: bytes = b"") -> bytes:
    return message(
        1,
        serial,
        [
            (1, "o", "/org/freedesktop/DBus"),
            (2, "s", "org.freedesktop.DBus"),
            (3, "s", member),
            (6, "s", "org.freedesktop.DBus"),
        ],
        signature,
        body,
    )


def read_message(sock: socket.socket, buf: bytearray) -> bytes:
    """The next whole message (little-endian, as brokers send to a little-endian client)."""
    while True:
        if len(buf) >= 16:
            body_len, _, fields_len = struct.unpack("<III", bytes(buf[4:16]))
            total = 16 + fields_len + (-fields_len % 8) + body_len
            if len(buf) >= total:
                whole = bytes(buf[:total])
                del buf[:total]
                return whole
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit(0)
        buf.extend(chunk)


def header_fields(whole: bytes) -> dict:
    """The header fields of a message that carry a string or a u32, by code."""
    fields_len = struct.unpack("<I", whole[12:16])[0]
    pos, end, out = 16, 16 + fields_len, {}
    while pos < end:
        pos += -pos % 8
        code, sig_len = whole[pos], whole[pos + 1]
        sig = whole[pos + 2 : pos + 2 + sig_len].decode()
        pos += 3 + sig_len
        if sig == "u":
            pos += -pos % 4
            out[code] = struct.unpack("<I", whole[pos : pos + 4])[0]
            pos += 4
        elif sig == "g":
            n = whole[pos]
            out[code] = whole[pos + 1 : pos + 1 + n].decode()
            pos += n + 2
        else:
            pos += -pos % 4
            n = struct.unpack("<I", whole[pos : pos + 4])[0]
            out[code] = whole[pos + 4 : pos + 4 + n].decode()
            pos += n + 5
    return out


def unknown_method(serial: int, call_message: bytes, text: str) -> bytes:
    """The UnknownMethod error answering the method call `call_message`."""
    body = bytearray()
    put_str(body, text)
    return message(
        3,
        serial,
        [
            (4, "s", "org.freedesktop.DBus.Error.UnknownMethod"),
            (5, "u", struct.unpack("<I", call_message[8:12])[0]),
            (6, "s", header_fields(call_message)[7]),
        ],
        "s",
        bytes(body),
    )


def put_variant_strings(body: bytearray, items: list) -> None:
    """A variant holding the string array `items` (`v` of `as`)."""
    put_sig(body, "as")
    pad(body, 4)
    at = len(body)
    put_u32(body, 0)
    start = len(body)
    for item in items:
        put_str(body, item)
    body[at : at + 4] = struct.pack("<I", len(body) - start)


def unit_path_return(serial: int, call_message: bytes, paths: list) -> bytes:
    body = bytearray()
    put_variant_strings(body, paths)
    return message(
        2,
        serial,
        [(5, "u", struct.unpack("<I", call_message[8:12])[0]), (6, "s", header_fields(call_message)[7])],
        "v",
        bytes(body),
    )


def job_done(serial: int, call_message: bytes) -> bytes:
    """A job path answering `call_message`, then JobRemoved saying that job is done."""
    job = f"/org/freedesktop/systemd1/job/{serial}"
    body = bytearray()
    put_str(body, job)
    answer = message(
        2,
        serial,
        [(5, "u", struct.unpack("<I", call_message[8:12])[0]), (6, "s", header_fields(call_message)[7])],
        "o",
        bytes(body),
    )
    removed = bytearray()
    put_u32(removed, serial)
    put_str(removed, job)
    put_str(removed, "x.scope")
    put_str(removed, "done")
    signal = message(
        4,
        serial + 1,
        [
            (1, "o", "/org/freedesktop/systemd1"),
            (2, "s", "org.freedesktop.systemd1.Manager"),
            (3, "s", "JobRemoved"),
        ],
        "uoss",
        bytes(removed),
    )
    return answer + signal


def main() -> None:
    address = sys.argv[1]
    options = dict(arg.split("=", 1) if "=" in arg else (arg, "") for arg in sys.argv[2:])
    unit_path = options.get("--unit-path")
    says_done = "--says-done" in options
    silent = "--silent" in options
    assert address.startswith("unix:path="), address
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address[len("unix:path=") :])
    uid = str(os.geteuid()).encode().hex()
    sock.sendall(b"\0AUTH EXTERNAL " + uid.encode() + b"\r\n")
    line = b""
    while not line.endswith(b"\r\n"):
        line += sock.recv(1)
    assert line.startswith(b"OK "), line
    sock.sendall(b"BEGIN\r\n")
    name_request = bytearray()
    put_str(name_request, NAME)
    put_u32(name_request, 4)  # DBUS_NAME_FLAG_DO_NOT_QUEUE
    sock.sendall(call(1, "Hello") + call(2, "RequestName", "su", bytes(name_request)))
    buf = bytearray()
    replied = 0
    while replied < 2:
        whole = read_message(sock, buf)
        fields = header_fields(whole)
        if whole[1] == 3:
            sys.exit(f"the bus refused: {fields.get(4)}")
        if whole[1] == 2 and fields.get(5) == 2:
            result = struct.unpack("<I", whole[-4:])[0]
            if result != 1:
                sys.exit(f"RequestName answered {result}, not 1 (primary owner)")
        if whole[1] == 2:
            replied += 1
    print("ready", flush=True)
    serial = 3
    while True:
        whole = read_message(sock, buf)
        if whole[1] != 1 or whole[2] & 1 or silent:  # not a call, no reply expected, or asked to hang
            continue
        fields = header_fields(whole)
        if unit_path is not None and fields.get(3) == "Get" and b"UnitPath" in whole:
            sock.sendall(unit_path_return(serial, whole, unit_path.split(":")))
        elif says_done and fields.get(3) != "Get":
            sock.sendall(job_done(serial, whole))
            serial += 1
        else:
            sock.sendall(unknown_method(serial, whole, f"{NAME} here implements no method {fields.get(3)}"))
        serial += 1


if __name__ == "__main__":
    main()
