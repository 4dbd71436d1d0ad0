#!/usr/bin/env python3
"""A one-process byte relay in front of a bus socket, as socat, a sandbox's or container's bus
proxy, or an ssh-forwarded socket is, for tests: it listens on LISTEN (a socket path), and for
each client connects to TARGET (a socket path) and copies bytes both ways until either side
closes. Descriptors passed with a message are not carried (a byte relay reads bytes), unless
`--pass-fds` is given: then they go on with the bytes they came with, as a bus proxy that
passes descriptors (xdg-dbus-proxy) carries them. Prints "ready" on stdout once it listens;
runs until killed.

    bus_relay.py [--pass-fds] /tmp/relay.sock /run/user/1000/bus
"""
import os
import socket
import sys
import threading


def pump(source: socket.socket, sink: socket.socket, pass_fds: bool) -> None:
    try:
        while True:
            if pass_fds:
                data, fds, _, _ = socket.recv_fds(source, 65536, 16)
            else:
                data, fds = source.recv(65536), []
            if not data:
                break
            if fds:
                sent = socket.send_fds(sink, [data], fds)
                for fd in fds:
                    os.close(fd)
                data = data[sent:]
            sink.sendall(data)
    except OSError:
        pass
    for sock in (source, sink):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main() -> None:
    args = sys.argv[1:]
    pass_fds = args[0] == "--pass-fds"
    if pass_fds:
        args = args[1:]
    listen, target = args[0], args[1]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(listen):
        os.unlink(listen)
    server.bind(listen)
    server.listen(256)
    print("ready", flush=True)
    while True:
        client, _ = server.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(target)
        except OSError:
            client.close()
            continue
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=pump, args=(source, sink, pass_fds), daemon=True).start()


if __name__ == "__main__":
    main()
