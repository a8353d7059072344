"""Upgrades and restarts under load, counted: the driver of bench/upgrade.sh.

This process stands in for systemd: it binds the redirect and admin sockets once, as a
`couchlink.socket` unit does, and starts `couchlink serve` with them (LISTEN_FDS, LISTEN_PID,
LISTEN_FDNAMES=redirect:admin, the descriptors at 3 and 4). Meanwhile three clients run at once:
wrk with keep-alive at 64 connections, wrk with one request per connection, and connections that
stay idle for random gaps (checked before reuse, as browsers and HTTP libraries do). Between them
come upgrades (the other build moved over the binary, then SIGUSR2) and socket-activated restarts
(SIGTERM, and once the process has exited, a new one on the same sockets), then a broken binary
and one that never gets ready. Every check below must hold; the exit status says whether all did.

    python3 bench/upgrade.py --a BUILD_A --b BUILD_B --work DIR --couch URL --ids FILE \
        [--upgrades 20] [--restarts 5] [--interval 2.5] [--idle 16]
"""
import argparse
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def listen(backlog=4096):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    return s


def netstat(field):
    """A TcpExt counter of /proc/net/netstat (ListenDrops, ListenOverflows)."""
    lines = open("/proc/net/netstat").read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split()[1:], values.split()[1:]))[field])
    raise KeyError(field)


class Holder:
    """systemd's part: the sockets, and starting couchlink on them."""

    def __init__(self, args, env):
        self.redirect, self.admin = listen(), listen()
        self.port, self.admin_port = self.redirect.getsockname()[1], self.admin.getsockname()[1]
        self.exe = os.path.join(args.work, "couchlink")
        self.env = dict(env, COUCHLINK_LISTEN=f"127.0.0.1:{self.port}",
                        COUCHLINK_ADMIN_LISTEN=f"127.0.0.1:{self.admin_port}")
        self.log = open(os.path.join(args.work, "serve.log"), "ab")

    def start(self):
        pid = os.fork()
        if pid == 0:
            os.dup2(self.log.fileno(), 1)
            os.dup2(self.log.fileno(), 2)
            os.dup2(self.redirect.fileno(), 3)
            os.dup2(self.admin.fileno(), 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)
            env = dict(self.env, LISTEN_FDS="2", LISTEN_PID=str(os.getpid()), LISTEN_FDNAMES="redirect:admin")
            os.execve(self.exe, [self.exe, "serve"], env)
        return pid

    def reap(self):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours has exited.
    try:
        return open(f"/proc/{pid}/stat").read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def read_pid(path):
    try:
        return int(open(path).read().strip())
    except (FileNotFoundError, ValueError):
        return None


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit(f"FAILED: {what} within {seconds} s")


def healthy(admin_port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/healthz", timeout=2) as r:
            return r.status == 200 and json.load(r).get("cache") == "ready"
    except Exception:
        return False


class Idle:
    """Keep-alive connections that each wait a random gap (up to `gap` seconds) between
    requests, and check a connection before reusing it (a server that closed it shows as
    readable with nothing to read: urllib3's `is_connection_dropped`)."""

    def __init__(self, port, ids, connections, gap):
        self.port, self.ids, self.gap = port, ids, gap
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answered = self.failed = self.reconnects = 0
        self.failures = []
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(connections)]

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()

    def run(self):
        sock = None
        while not self.stop.is_set():
            time.sleep(random.uniform(0, self.gap))
            if sock is not None and dropped(sock):
                sock.close()
                sock = None
                with self.lock:
                    self.reconnects += 1
            try:
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                path = "/" + random.choice(self.ids)
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: idle-client\r\n\r\n".encode())
                status, close = response(sock)
                if not 300 <= status < 400:
                    raise RuntimeError(f"status {status}")
                with self.lock:
                    self.answered += 1
                if close:
                    sock.close()
                    sock = None
            except Exception as e:  # refused, reset, truncated, timed out, or not a redirect
                with self.lock:
                    self.failed += 1
                    self.failures.append(f"{time.strftime('%H:%M:%S')} {type(e).__name__}: {e}")
                if sock is not None:
                    sock.close()
                sock = None
        if sock is not None:
            sock.close()


def dropped(sock):
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def response(sock):
    """(status, whether the server closes) of one response read whole from `sock`."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} bytes of a response")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed in the body")
        body += chunk
    return status, headers.get("connection", "").lower() == "close"


def wrk(port, connections, seconds, extra, out):
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "-s", "bench/random.lua"]
    cmd += extra + [f"http://127.0.0.1:{port}"]
    return subprocess.Popen(cmd, stdout=open(out, "w"), stderr=subprocess.STDOUT)


def wrk_result(path):
    text = open(path).read()
    m = re.search(r"RESULT requests=(\d+) .* errors=(\d+)", text)
    if not m:
        raise SystemExit(f"FAILED: no wrk summary in {path}:\n{text}")
    return int(m.group(1)), int(m.group(2)), text


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--a", required=True)
    p.add_argument("--b", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--couch", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--upgrades", type=int, default=20)
    p.add_argument("--restarts", type=int, default=5)
    p.add_argument("--interval", type=float, default=2.5)
    p.add_argument("--idle", type=int, default=16)
    p.add_argument("--gap", type=float, default=3.0)
    args = p.parse_args()
    ids = [l.strip() for l in open(args.ids) if l.strip()]
    builds = [args.a, args.b]
    pid_file = os.path.join(args.work, "couchlink.pid")
    logs = os.path.join(args.work, "logs")
    env = dict(os.environ, COUCHLINK_COUCHDB_URL=args.couch, COUCHLINK_COUCHDB_USER="couchlink-reader",
               COUCHLINK_COUCHDB_PASSWORD="reader", COUCHLINK_LOG_DIR=logs, COUCHLINK_PID_FILE=pid_file,
               COUCHLINK_CLICKS_INTERVAL_SECS="10", COUCHLINK_WORKERS="2", COUCHLINK_UPGRADE_TIMEOUT_SECS="5")
    holder = Holder(args, env)
    shutil.copy(builds[0], holder.exe)
    drops = (netstat("ListenDrops"), netstat("ListenOverflows"))
    holder.start()
    first = wait_for(lambda: read_pid(pid_file), 30, "the first process writes its pid")
    wait_for(lambda: healthy(holder.admin_port), 60, "the first process is healthy")
    events = args.upgrades + args.restarts
    seconds = int(events * args.interval + 20)
    print(f"== {events} events ({args.upgrades} upgrades, {args.restarts} socket-activated restarts), "
          f"one every {args.interval} s, under three loads for {seconds} s", flush=True)
    keep = wrk(holder.port, 64, seconds, [], os.path.join(args.work, "keepalive.out"))
    close = wrk(holder.port, 16, seconds, ["-H", "Connection: close"], os.path.join(args.work, "close.out"))
    idle = Idle(holder.port, ids, args.idle, args.gap)
    idle.start()
    time.sleep(2)
    pids, current, which = [first], first, 0
    restart_every = events // args.restarts if args.restarts else events + 1
    upgrades = restarts = 0
    for n in range(1, events + 1):
        time.sleep(args.interval)
        holder.reap()
        if n % restart_every == 0 and restarts < args.restarts:
            os.kill(current, signal.SIGTERM)
            wait_for(lambda: not alive(current) or holder.reap() or not alive(current), 60, f"pid {current} exits")
            holder.start()
            current = wait_for(lambda: (lambda p: p if p and p != current else None)(read_pid(pid_file)), 30,
                               "the restarted process writes its pid")
            restarts += 1
            print(f"   {n:2}: restart  -> pid {current}", flush=True)
        else:
            which = 1 - which
            tmp = holder.exe + ".new"
            shutil.copy(builds[which], tmp)
            os.rename(tmp, holder.exe)
            os.kill(current, signal.SIGUSR2)
            current = wait_for(lambda: (lambda p: p if p and p != current else None)(read_pid(pid_file)), 30,
                               "the upgraded process writes its pid")
            upgrades += 1
            print(f"   {n:2}: upgrade  -> pid {current} ({'ab'[which]})", flush=True)
        pids.append(current)
    # A new binary that fails at once, then one that never gets ready: neither may cost a request.
    broken = []
    for name, script in [("exits", "#!/bin/sh\necho 'broken build' >&2\nexit 3\n"),
                         ("hangs", "#!/bin/sh\nexec sleep 60\n")]:
        time.sleep(args.interval)
        good = holder.exe + ".good"
        os.rename(holder.exe, good)
        with open(holder.exe + ".new", "w") as f:
            f.write(script)
        os.chmod(holder.exe + ".new", 0o755)
        os.rename(holder.exe + ".new", holder.exe)
        log_size = os.path.getsize(os.path.join(args.work, "serve.log"))
        os.kill(current, signal.SIGUSR2)
        def failed_said():
            with open(os.path.join(args.work, "serve.log"), "rb") as f:
                f.seek(log_size)
                return b"upgrade failed, still serving" in f.read()
        wait_for(failed_said, 30, f"the upgrade to a binary that {name} is refused")
        still = read_pid(pid_file) == current and alive(current) and healthy(holder.admin_port)
        broken.append((name, still))
        print(f"   broken binary that {name}: upgrade refused, pid {current} still serving: {still}", flush=True)
        os.rename(good, holder.exe)
    keep.wait()
    close.wait()
    idle.finish()
    # Old processes finish their drains (the cap is COUCHLINK_DRAIN_SECS, 10 s).
    wait_for(lambda: not any(alive(p) for p in pids if p != current) or holder.reap(), 30,
             "every replaced process exits")
    holder.reap()
    ss = subprocess.run(["ss", "-Hltnp", f"sport = :{holder.port}"], capture_output=True, text=True).stdout
    listening = sorted({int(m) for m in re.findall(r'"couchlink",pid=(\d+)', ss)})
    drops_after = (netstat("ListenDrops"), netstat("ListenOverflows"))
    # The last process stops: it writes its log lines and its counts.
    os.kill(current, signal.SIGTERM)
    wait_for(lambda: not alive(current) or holder.reap() or not alive(current), 60, "the last process exits")

    keep_n, keep_err, keep_text = wrk_result(os.path.join(args.work, "keepalive.out"))
    close_n, close_err, close_text = wrk_result(os.path.join(args.work, "close.out"))
    lines, redirects, bad = 0, 0, 0
    for name in sorted(os.listdir(logs)):
        if not name.startswith("access."):
            continue
        for line in open(os.path.join(logs, name), "rb"):
            lines += 1
            # Seven fields, the contract's: time, address, tracking ID, User-Agent, path, status, target.
            whole = re.fullmatch(rb"\d{14}\.\d \S+ \S+ \S+ /\S* (\d{3}) \S+\n", line)
            if not whole:
                bad += 1
            elif whole.group(1) == b"302":
                redirects += 1
    answered = keep_n + close_n + idle.answered
    counted = json.loads(subprocess.run(
        [args.a, "clicks", "--format", "json"], capture_output=True, text=True, check=True,
        env=dict(env, COUCHLINK_COUCHDB_URL=args.couch)).stdout)
    counted = sum(c["redirects"] for c in counted["clicks"])
    log = open(os.path.join(args.work, "serve.log"), encoding="utf-8", errors="replace").read()
    served = {}
    for n, build in re.findall(r"(\d+) requests served since start \(build ([^,]+),", log):
        served[build] = served.get(build, 0) + int(n)

    checks = [
        (f"{upgrades} upgrades and {restarts} socket-activated restarts", upgrades == args.upgrades and restarts == args.restarts),
        (f"keep-alive, 64 connections: {keep_n:,} answered, {keep_err} failed", keep_err == 0),
        (f"one request per connection, 16 at once: {close_n:,} answered, {close_err} failed", close_err == 0),
        (f"idle for up to {args.gap:g} s between requests, {args.idle} connections: {idle.answered:,} answered, "
         f"{idle.failed} failed ({idle.reconnects} connections found closed before reuse)", idle.failed == 0),
        (f"both builds answered: {served}", len(served) == 2 and all(v > 0 for v in served.values())),
        (f"exactly one process listening at the end: {listening}", listening == [current]),
        (f"ListenDrops, ListenOverflows unchanged: {drops} -> {drops_after}", drops == drops_after),
        (f"broken binaries refused, the old process serving on: {broken}", all(ok for _, ok in broken)),
        (f"access log: {lines:,} whole lines ({bad} not), {redirects:,} redirects for {answered:,} answered "
         f"(the rest were in flight when the clients stopped)", bad == 0 and 0 <= redirects - answered <= 64 + 16 + args.idle),
        (f"live counts: {counted:,} redirects counted, {redirects:,} in the access log", counted == redirects),
    ]
    print()
    for what, ok in checks:
        print(f"{'ok    ' if ok else 'FAILED'} {what}")
    if idle.failures:
        print("idle client failures:", *idle.failures[:10], sep="\n  ")
    if keep_err or close_err:
        print(keep_text, close_text)
    sys.exit(0 if all(ok for _, ok in checks) else 1)


if __name__ == "__main__":
    main()
