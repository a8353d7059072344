"""Hostile clients against one server, on loopback: a well-behaved client's latency alone, then
while IDLE connections that never send a byte and SLOW slowloris connections (a header byte every
2 s, reconnecting when cut off, as an attacker would) are held.

    python3 bench/hostile.py HOST:PORT PATH PID [IDLE SLOW REQUESTS]

Prints one line: p50/p99 in microseconds and failed requests, unloaded and loaded, the p99 ratio,
and the server's RSS (of PID) before and during.
"""
import asyncio
import resource
import statistics
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])


async def well_behaved(host, port, path, n):
    """n GETs, one after another, each on a new connection, as people scanning a tag arrive
    (a connection opened before the attack would hide whether new ones get in)."""
    latencies, failed = [], 0
    reader = writer = None
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
    for _ in range(n):
        began = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
            writer.write(request)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.decode("latin-1").lower().split("\r\n")
            length = next((int(l.split(":")[1]) for l in lines if l.startswith("content-length:")), 0)
            await asyncio.wait_for(reader.readexactly(length), 10)
            if " 302 " not in lines[0] + " ":
                failed += 1
            if "connection: close" in lines:
                writer.close()
                writer = None
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
            failed += 1
            writer = None
        latencies.append(time.perf_counter() - began)
    if writer is not None:
        writer.close()
    latencies.sort()
    return latencies[len(latencies) // 2] * 1e6, latencies[int(len(latencies) * 0.99)] * 1e6, failed


async def idle(host, port, held, stop):
    try:
        _, writer = await asyncio.open_connection(host, port)
    except OSError:
        return
    held.append(writer)
    await stop.wait()
    writer.close()


async def slowloris(host, port, stop):
    head = b"GET / HTTP/1.1\r\nHost: bench\r\nX-Slow: "
    while not stop.is_set():
        try:
            _, writer = await asyncio.open_connection(host, port)
            i = 0
            while not stop.is_set():
                writer.write(head[i % len(head):][:1])
                await writer.drain()
                i += 1
                try:
                    await asyncio.wait_for(stop.wait(), 2)
                except asyncio.TimeoutError:
                    pass
            writer.close()
        except OSError:
            await asyncio.sleep(0.5)


async def main():
    host, port = sys.argv[1].rsplit(":", 1)
    path, pid = sys.argv[2], int(sys.argv[3])
    n_idle, n_slow, n = (int(a) for a in (sys.argv[4:7] or ["3000", "1000", "2000"]))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    await well_behaved(host, port, path, 200)
    unloaded = await well_behaved(host, port, path, n)
    rss_before = rss_kib(pid)
    stop, held = asyncio.Event(), []
    tasks = []
    for i in range(0, n_idle, 250):
        batch = [asyncio.create_task(idle(host, port, held, stop)) for _ in range(min(250, n_idle - i))]
        tasks += batch
        await asyncio.sleep(0.05)
    tasks += [asyncio.create_task(slowloris(host, port, stop)) for _ in range(n_slow)]
    await asyncio.sleep(3)
    loaded = await well_behaved(host, port, path, n)
    rss_during = rss_kib(pid)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(
        f"unloaded p50 {unloaded[0]:.0f} us p99 {unloaded[1]:.0f} us failed {unloaded[2]} | "
        f"{len(held)} idle + {n_slow} slowloris: p50 {loaded[0]:.0f} us p99 {loaded[1]:.0f} us failed {loaded[2]}/{n} | "
        f"p99 ratio {loaded[1] / unloaded[1]:.2f} | RSS {rss_before / 1024:.1f} -> {rss_during / 1024:.1f} MiB"
    )


asyncio.run(main())
