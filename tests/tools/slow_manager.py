#!/usr/bin/env python3
"""A stand-in for a user manager's private socket, for tests: every byte is forwarded both ways
to the real manager's socket at once, except that a client's call whose bytes mention NEEDLE is
held back DELAY seconds from its arrival (only the first such call of the proxy's life with --first-only).
So a test can make the manager slow to answer one question (the slice check's, say) while it
answers every other at once, with no stand-in for systemd itself.

    slow_manager.py --listen RUNTIME/systemd/private --to REAL/systemd/private \
        --needle org.freedesktop.systemd1.Slice --delay 5 [--first-only]

Prints "ready" on stdout once listening; runs until killed.
"""
import argparse
import queue
import socket
import sys
import threading
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    parser.add_argument("--to", required=True)
    parser.add_argument("--needle", required=True)
    parser.add_argument("--delay", type=float, required=True)
    parser.add_argument("--first-only", action="store_true")
    args = parser.parse_args()
    needle = args.needle.encode()
    held_once = threading.Event()

    def pump(source: socket.socket, sink: socket.socket, hold: bool) -> None:
        """Forwards source to sink. With ``hold``, a chunk that mentions the needle is due DELAY
        seconds after it arrived, and chunks keep their order; so each held call is late by
        DELAY, however many chunks it arrives in, rather than by DELAY once per chunk."""
        due_chunks: "queue.Queue[tuple[float, bytes] | None]" = queue.Queue()

        def send_when_due() -> None:
            try:
                while (item := due_chunks.get()) is not None:
                    due, chunk = item
                    time.sleep(max(0.0, due - time.monotonic()))
                    sink.sendall(chunk)
            except OSError:
                pass
            hang_up(source, sink)

        threading.Thread(target=send_when_due, daemon=True).start()
        tail = b""
        try:
            while chunk := source.recv(65536):
                seen = tail + chunk
                due = time.monotonic()
                if hold and needle in seen and not (args.first_only and held_once.is_set()):
                    held_once.set()
                    due += args.delay
                tail = seen[-len(needle):]
                due_chunks.put((due, chunk))
        except OSError:
            pass
        due_chunks.put(None)

    def hang_up(*ends: socket.socket) -> None:
        for end in ends:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def serve(client: socket.socket) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(args.to)
        except OSError:
            client.close()
            return
        threading.Thread(target=pump, args=(client, upstream, True), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(args.listen)
    listener.listen(128)
    print("ready", flush=True)
    while True:
        client, _ = listener.accept()
        serve(client)


if __name__ == "__main__":
    sys.exit(main())
