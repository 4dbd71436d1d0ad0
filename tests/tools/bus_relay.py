#!/usr/bin/env python3
"""A one-process byte relay in front of a bus socket, as socat, a sandbox's or container's bus
proxy, or an ssh-forwarded socket is, for tests: it listens on LISTEN (a socket path), and for
each client connects to TARGET (a socket path) and copies bytes both ways until either side
closes. Descriptors passed with a message are not carried (a byte relay reads bytes). Prints
"ready" on stdout once it listens; runs until killed.

    bus_relay.py /tmp/relay.sock /run/user/1000/bus
"""
import os
import socket
import sys
import threading


def pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    for sock in (source, sink):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main() -> None:
    listen, target = sys.argv[1], sys.argv[2]
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
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


if __name__ == "__main__":
    main()
