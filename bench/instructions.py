"""The client of bench/instructions.sh: exactly N requests of one mix, one at a time on
keep-alive connections, so that every request costs the server the same wake-ups on every run
and build (a pipelined or concurrent client would batch them differently each time).

    python3 bench/instructions.py PORT IDS_FILE N MIX

MIX is `plain` (what wrk sends: a random link, no User-Agent, no cookie), `browser` (a
phone's User-Agent, Accept-Language, and the tracking cookie the first answer set), or
`pipelined` (plain requests sent 16 at a time, as bench/pipelined.lua does: what a request
costs once the wake-ups and system calls are shared). Every
answer is read whole and checked (302 with a Location), so a build that fails the mix is an
error, not a cheap figure.
"""
import random
import socket
import sys

PHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
         "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1")


def read_response(sock, buffered):
    """One response from sock (bytes already read first): (status, headers, rest)."""
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit("the server closed the connection")
        buffered += chunk
    head, rest = buffered.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, value = line.split(":", 1)
        headers.setdefault(name.strip().lower(), value.strip())
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit("the server closed the connection mid-body")
        rest += chunk
    return status, headers, rest[length:]


def main():
    port, ids_file, n, mix = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    ids = open(ids_file).read().split()
    rng = random.Random(42)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    host = f"127.0.0.1:{port}"
    cookie = None
    buffered = b""
    depth = 16 if mix == "pipelined" else 1
    if n % depth:
        sys.exit(f"{n} requests are not whole batches of {depth}")
    for _ in range(n // depth):
        if depth > 1:
            paths = ["/" + rng.choice(ids) for _ in range(depth)]
            sock.sendall("".join(f"GET {p} HTTP/1.1\r\nHost: {host}\r\n\r\n" for p in paths).encode())
            for p in paths:
                status, headers, buffered = read_response(sock, buffered)
                if status != 302 or "location" not in headers:
                    sys.exit(f"{p}: {status}, not a redirect")
            continue
        path = "/" + rng.choice(ids)
        if mix == "plain":
            request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n"
        elif mix == "browser":
            request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {PHONE}\r\n"
                       "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
                       "Accept-Language: en-GB,en;q=0.9\r\nAccept-Encoding: gzip, deflate, br\r\n"
                       + (f"Cookie: {cookie}\r\n" if cookie else "") + "\r\n")
        else:
            sys.exit(f"unknown mix {mix!r}: plain or browser")
        sock.sendall(request.encode())
        status, headers, buffered = read_response(sock, buffered)
        if status != 302 or "location" not in headers:
            sys.exit(f"{path}: {status}, not a redirect")
        if cookie is None and "set-cookie" in headers:
            cookie = headers["set-cookie"].split(";", 1)[0]
    sock.close()


if __name__ == "__main__":
    main()
