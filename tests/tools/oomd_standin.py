#!/usr/bin/env python3
"""A stand-in for systemd-oomd on a bus, for tests (the real one is in the virtual machine): it
connects to the bus at ADDRESS (a unix:path= address), takes the name org.freedesktop.oom1,
answers Introspect on /org/freedesktop/oom1 as oomd 252 and later does (listing its Killed
signal; with --before-252, as older oomd, without it), prints "ready UNIQUE-NAME" on stdout, and
then, for each line "kill CGROUP REASON" on stdin, sends Killed(CGROUP, REASON) as oomd does after a
kill and prints "sent". For "oomd-kill DIRECTORY CGROUP REASON [BUSY_MS]" it does all that oomd
does in one turn of its loop, reading nothing from the bus meanwhile: its mark on the cgroup
(user.oomd_ooms), the kill (cgroup.kill), BUSY_MS of other work, the count of the kill
(user.oomd_kill), the signal, and prints "sent" ("gone" where the cgroup was). It answers Peer.Ping as sd-bus does, and every other call with
UnknownMethod.

With --hand-over it gives the name up (ReleaseName) as it answers its first Introspect, as an
oomd being replaced does while a subscriber sets up; with --queue it asks for the name in the
bus's queue, and so owns it once the owner before it gives it up.

With --forger it plays a tool that forges the signal instead: it takes no name and, for each
"kill CGROUP REASON" line, sends Killed(CGROUP, REASON) from its own connection both as a broadcast
and to every other connection on the bus by name (ListNames), then prints "sent".

    oomd_standin.py ADDRESS [--before-252 | --hand-over | --queue | --forger]
"""
import os
import select
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True  # nothing left behind in the repository's tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from name_squatter import call, header_fields, message, put_str, put_u32, read_message, unknown_method  # noqa: E402

NAME = "org.freedesktop.oom1"
PATH = "/org/freedesktop/oom1"
INTERFACE = "org.freedesktop.oom1.Manager"
SIGNAL = (
    '  <signal name="Killed">\n   <arg type="s" name="cgroup"/>\n   <arg type="s" name="reason"/>\n  </signal>\n'
)


def introspection(with_signal: bool) -> str:
    return (
        "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n"
        "\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<node>\n"
        f' <interface name="{INTERFACE}">\n'
        '  <method name="DumpByFileDescriptor">\n   <arg type="h" direction="out"/>\n  </method>\n'
        + (SIGNAL if with_signal else "")
        + " </interface>\n</node>\n"
    )


def killed(serial: int, cgroup: str, reason: str, destination: "str | None") -> bytes:
    body = bytearray()
    put_str(body, cgroup)
    put_str(body, reason)
    fields = [(1, "o", PATH), (2, "s", INTERFACE), (3, "s", "Killed")]
    if destination:
        fields.append((6, "s", destination))
    return message(4, serial, fields, "ss", bytes(body))


def strings(body: bytes) -> list:
    """An `as` body."""
    length = struct.unpack("<I", body[:4])[0]
    pos, end, out = 4, 4 + length, []
    while pos < end:
        pos += -pos % 4
        n = struct.unpack("<I", body[pos : pos + 4])[0]
        out.append(body[pos + 4 : pos + 4 + n].decode())
        pos += n + 5
    return out


def body_of(whole: bytes) -> bytes:
    fields_len = struct.unpack("<I", whole[12:16])[0]
    return whole[16 + fields_len + (-fields_len % 8) :]


def main() -> None:
    address = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    assert address.startswith("unix:path="), address
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address[len("unix:path=") :])
    sock.sendall(b"\0AUTH EXTERNAL " + str(os.geteuid()).encode().hex().encode() + b"\r\n")
    line = b""
    while not line.endswith(b"\r\n"):
        line += sock.recv(1)
    assert line.startswith(b"OK "), line
    sock.sendall(b"BEGIN\r\n")
    sock.sendall(call(1, "Hello"))
    buf = bytearray()
    unique = None
    while unique is None:
        whole = read_message(sock, buf)
        if whole[1] == 2 and header_fields(whole).get(5) == 1:
            unique = body_of(whole)[4:].split(b"\0", 1)[0].decode()
    serial = 2
    if mode != "--forger":
        request = bytearray()
        put_str(request, NAME)
        put_u32(request, 0 if mode == "--queue" else 4)  # 4: DBUS_NAME_FLAG_DO_NOT_QUEUE
        sock.sendall(call(serial, "RequestName", "su", bytes(request)))
        while True:
            whole = read_message(sock, buf)
            if whole[1] == 3:
                sys.exit(f"the bus refused: {header_fields(whole).get(4)}")
            if whole[1] == 2 and header_fields(whole).get(5) == serial:
                result = struct.unpack("<I", whole[-4:])[0]
                # 1: the primary owner; 2: in the queue (--queue).
                if result != 1 and not (mode == "--queue" and result == 2):
                    sys.exit(f"RequestName answered {result}, not 1 (primary owner)")
                break
        serial += 1
    print(f"ready {unique}", flush=True)
    pending_kill = None
    stdin = sys.stdin.buffer
    while True:
        readable, _, _ = select.select([sock, stdin], [], [])
        if stdin in readable:
            command = stdin.readline()
            if not command:
                return
            verb, *words = command.decode().split()
            if verb == "oomd-kill":
                directory, cgroup, reason, *busy = words
                try:
                    os.setxattr(directory, "user.oomd_ooms", b"1")
                except FileNotFoundError:
                    print("gone", flush=True)  # nothing to kill
                    continue
                try:
                    with open(os.path.join(directory, "cgroup.kill"), "w") as kill:
                        kill.write("1")
                except OSError:
                    pass  # emptied and removed already
                time.sleep(int(busy[0]) / 1000 if busy else 0)
                try:
                    os.setxattr(directory, "user.oomd_kill", b"1")
                except OSError:
                    pass
                sock.sendall(killed(serial, cgroup, reason, None))
                serial += 1
                print("sent", flush=True)
                continue
            cgroup, reason = words
            if mode == "--forger":
                sock.sendall(killed(serial, cgroup, reason, None))
                serial += 1
                sock.sendall(call(serial, "ListNames"))
                pending_kill = (serial, cgroup, reason)
                serial += 1
            else:
                sock.sendall(killed(serial, cgroup, reason, None))
                serial += 1
                print("sent", flush=True)
        if sock in readable:
            chunk = sock.recv(65536)
            if not chunk:
                return
            buf.extend(chunk)
            while len(buf) >= 16:
                body_len, _, fields_len = struct.unpack("<III", bytes(buf[4:16]))
                total = 16 + fields_len + (-fields_len % 8) + body_len
                if len(buf) < total:
                    break
                whole = bytes(buf[:total])
                del buf[:total]
                fields = header_fields(whole)
                if whole[1] == 2 and pending_kill and fields.get(5) == pending_kill[0]:
                    _, cgroup, reason = pending_kill
                    for name in strings(body_of(whole)):
                        if name.startswith(":") and name != unique:
                            sock.sendall(killed(serial, cgroup, reason, name))
                            serial += 1
                    pending_kill = None
                    print("sent", flush=True)
                    continue
                if whole[1] != 1 or whole[2] & 1:  # not a call, or no reply expected
                    continue
                caller_serial = struct.unpack("<I", whole[8:12])[0]
                if fields.get(3) == "Introspect" and fields.get(1) == PATH and mode == "--hand-over":
                    # The name goes to the next in the queue before this answer goes out.
                    release = bytearray()
                    put_str(release, NAME)
                    sock.sendall(call(serial, "ReleaseName", "s", bytes(release)))
                    serial += 1
                    mode = "handed-over"
                if fields.get(3) == "Ping" and fields.get(2) == "org.freedesktop.DBus.Peer":
                    reply = message(2, serial, [(5, "u", caller_serial), (6, "s", fields[7])], "", b"")
                elif fields.get(3) == "Introspect" and fields.get(1) == PATH and mode != "--forger":
                    text = bytearray()
                    put_str(text, introspection(mode != "--before-252"))
                    reply = message(2, serial, [(5, "u", caller_serial), (6, "s", fields[7])], "s", bytes(text))
                else:
                    reply = unknown_method(serial, whole, f"no method {fields.get(3)} here")
                serial += 1
                sock.sendall(reply)


if __name__ == "__main__":
    main()
