"""Bench helpers: load and edit links in CouchDB, measure edit-to-served latency, read RSS."""
import base64
import http.client
import json
import os
import random
import string
import sys
import time

ALPHABET = string.ascii_letters + string.digits


def ids(n, seed=42):
    """n distinct 5-character link IDs, the same every run."""
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < n:
        i = "".join(rng.choice(ALPHABET) for _ in range(5))
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def auth_header(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def couch_caller(port, user, password):
    """call(method, path, body=None) -> (status, JSON answer) on the CouchDB at port."""
    headers = {"Authorization": auth_header(user, password), "Content-Type": "application/json",
               "Accept": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)

    def call(method, path, body=None):
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    return call


def compact_and_wait(call, db, design):
    """Compacts design document `design`'s views, then database `db`, one at a time (CouchDB 3.5
    compacting both at once after many deletions left the views' files as they were), each
    waited for until neither file changes for 5 s. Returns (database info, views' info)."""
    for path in (f"/{db}/_compact/{design}", f"/{db}/_compact"):
        call("POST", path, {})
        last, stable = None, 0
        for _ in range(600):
            time.sleep(1)
            info, views = call("GET", f"/{db}")[1], call("GET", f"/{db}/_design/{design}/_info")[1]
            running = info.get("compact_running") or views["view_index"].get("compact_running")
            sizes = (info["sizes"]["file"], views["view_index"]["sizes"]["file"])
            if not running and sizes == last:
                stable += 1
                if stable >= 5:
                    break
            else:
                stable = 0
            last = sizes
    return call("GET", f"/{db}")[1], call("GET", f"/{db}/_design/{design}/_info")[1]["view_index"]


def load(couch_port, db, user, password, id_file, n):
    """Writes n links through _bulk_docs and their IDs to id_file."""
    all_ids = ids(n)
    with open(id_file, "w") as f:
        f.write("\n".join(all_ids) + "\n")
    conn = http.client.HTTPConnection("127.0.0.1", couch_port)
    headers = {"Authorization": auth_header(user, password), "Content-Type": "application/json", "Accept": "application/json"}
    for start in range(0, n, 5000):
        docs = [{"_id": i, "url": f"https://example.com/landing/{i}?utm_source=qr", "inactive": False} for i in all_ids[start:start + 5000]]
        conn.request("POST", f"/{db}/_bulk_docs", json.dumps({"docs": docs}), headers)
        r = conn.getresponse()
        body = json.loads(r.read())
        bad = [row for row in body if "error" in row]
        if r.status >= 300 or bad:
            sys.exit(f"bulk load failed: {r.status} {bad[:3] or body}")


def edit_latency(couch_port, db, user, password, proxy_port, edits):
    """Edits a link `edits` times. For each edit, from CouchDB's answer to the PUT: when a plain
    client following CouchDB's own continuous _changes feed sees it (the reference), and when
    couchlink first serves the new target. Prints p50 and p99 of both in milliseconds."""
    import socket
    import threading
    headers = {"Authorization": auth_header(user, password), "Content-Type": "application/json", "Accept": "application/json"}
    seen = {}  # rev -> perf_counter when the reference feed delivered it
    feed = socket.create_connection(("127.0.0.1", couch_port))
    feed.sendall((f"GET /{db}/_changes?feed=continuous&include_docs=true&heartbeat=1000&since=now HTTP/1.1\r\n"
                  f"Host: bench\r\nAuthorization: {headers['Authorization']}\r\nAccept: application/json\r\n\r\n").encode())

    def follow():
        buffered = b""
        while True:
            data = feed.recv(65536)
            if not data:
                return
            now = time.perf_counter()
            buffered += data
            for rev in set(part.split(b'"')[0] for part in buffered.split(b'"rev":"')[1:]):
                seen.setdefault(rev.decode(), now)
            buffered = buffered[-200:]

    threading.Thread(target=follow, daemon=True).start()
    couch = http.client.HTTPConnection("127.0.0.1", couch_port)
    proxy = http.client.HTTPConnection("127.0.0.1", proxy_port)
    link = "EdIt0"
    couch.request("PUT", f"/{db}/{link}", json.dumps({"url": "https://example.com/edit/0"}), headers)
    rev = json.loads(couch.getresponse().read())["rev"]
    proxy.request("GET", f"/{link}")  # cache it, so each edit must arrive through the feed
    proxy.getresponse().read()
    time.sleep(0.5)
    served, reference = [], []
    for k in range(1, edits + 1):
        target = f"https://example.com/edit/{k}"
        couch.request("PUT", f"/{db}/{link}", json.dumps({"_rev": rev, "url": target}), headers)
        rev = json.loads(couch.getresponse().read())["rev"]
        written = time.perf_counter()
        while True:
            proxy.request("GET", f"/{link}")
            resp = proxy.getresponse()
            resp.read()
            if resp.getheader("Location") == target:
                served.append((time.perf_counter() - written) * 1000)
                break
            if time.perf_counter() - written > 5:
                sys.exit(f"edit {k} not served after 5 s")
        deadline = time.perf_counter() + 5
        while rev not in seen and time.perf_counter() < deadline:
            time.sleep(0.0005)
        reference.append(max(0.0, (seen.get(rev, deadline) - written) * 1000))
    def pick(samples, q):
        samples = sorted(samples)
        return samples[min(len(samples) - 1, int(q * len(samples)))]
    print(f"RESULT edits={edits} p50_ms={pick(served, 0.5):.2f} p99_ms={pick(served, 0.99):.2f} "
          f"ref_p50_ms={pick(reference, 0.5):.2f} ref_p99_ms={pick(reference, 0.99):.2f}")


def load_rules(couch_port, db, user, password, id_file, n, countries=False):
    """Writes n links with five rules each (targets) through _bulk_docs, their IDs to id_file;
    with countries, a sixth asking for a country, and a country condition on the third."""
    rule_ids = ids(n, seed=7)
    with open(id_file, "w") as f:
        f.write("\n".join(rule_ids) + "\n")
    conn = http.client.HTTPConnection("127.0.0.1", couch_port)
    headers = {"Authorization": auth_header(user, password), "Content-Type": "application/json", "Accept": "application/json"}
    targets = [
        {"when": {"os": ["ios"], "device": ["mobile"]}, "url": "https://apps.apple.com/app/id1"},
        {"when": {"os": ["android"]}, "url": "https://play.google.com/store/apps/details?id=ie.example"},
        {"when": {"device": ["tablet"]}, "url": "https://example.com/tablet"},
        {"when": {"device": ["desktop"], "lang": ["fr"]}, "url": "https://example.com/fr/"},
        {"when": {"lang": ["de"]}, "url": "https://example.com/de/"},
    ]
    if countries:
        targets[2]["when"]["country"] = ["FR", "DE", "IE"]
        targets.append({"when": {"country": ["US", "GB"], "lang": ["en"]}, "url": "https://example.com/en/"})
    docs = [{"_id": i, "url": f"https://example.com/landing/{i}", "targets": targets} for i in rule_ids]
    for start in range(0, n, 5000):
        conn.request("POST", f"/{db}/_bulk_docs", json.dumps({"docs": docs[start:start + 5000]}), headers)
        r = conn.getresponse()
        bad = [row for row in json.loads(r.read()) if "error" in row]
        if r.status >= 300 or bad:
            sys.exit(f"rules load failed: {r.status} {bad[:3]}")


def load_protected(couch_port, db, user, password, id_file, n, hash_from):
    """Writes n links (IDs of their own) with the password hash link hash_from holds, their IDs to
    id_file: one hash for all, so the load takes no n hashes; each link is still checked once."""
    call = couch_caller(couch_port, user, password)
    status, doc = call("GET", f"/{db}/{hash_from}")
    if status != 200 or "password" not in doc:
        sys.exit(f"no password hash in {hash_from}: {status} {doc}")
    protected_ids = ids(n, seed=11)
    with open(id_file, "w") as f:
        f.write("\n".join(protected_ids) + "\n")
    docs = [{"_id": i, "url": f"https://example.com/landing/{i}", "password": doc["password"]} for i in protected_ids]
    for start in range(0, n, 5000):
        status, rows = call("POST", f"/{db}/_bulk_docs", {"docs": docs[start:start + 5000]})
        bad = [row for row in rows if "error" in row] if isinstance(rows, list) else rows
        if status >= 300 or bad:
            sys.exit(f"protected load failed: {status} {bad[:3]}")


def edit_many(couch_port, db, user, password, id_file, n, out_file):
    """Points n of the links in id_file (spread over them) at new targets with _bulk_docs, and
    writes "ID TARGET" lines to out_file."""
    with open(id_file) as f:
        all_ids = f.read().split()
    chosen = all_ids[:: max(1, len(all_ids) // n)][:n]
    conn = http.client.HTTPConnection("127.0.0.1", couch_port)
    headers = {"Authorization": auth_header(user, password), "Content-Type": "application/json", "Accept": "application/json"}
    conn.request("POST", f"/{db}/_all_docs?include_docs=true", json.dumps({"keys": chosen}), headers)
    docs = [row["doc"] for row in json.loads(conn.getresponse().read())["rows"]]
    stamp = int(time.time())
    for doc in docs:
        doc["url"] = f"https://example.com/edited/{stamp}/{doc['_id']}"
    conn.request("POST", f"/{db}/_bulk_docs", json.dumps({"docs": docs}), headers)
    r = conn.getresponse()
    bad = [row for row in json.loads(r.read()) if "error" in row]
    if r.status >= 300 or bad:
        sys.exit(f"edits failed: {r.status} {bad[:3]}")
    with open(out_file, "w") as f:
        f.writelines(f"{doc['_id']} {doc['url']}\n" for doc in docs)


def all_served(proxy_port, edits_file, started, limit):
    """Asks for every edited link until each answers with its new target; prints the seconds
    from `started` (a time.time()) until the last did. Connections refused (not listening yet)
    are retried."""
    with open(edits_file) as f:
        pending = dict(line.split() for line in f if line.strip())
    conn = None
    while pending:
        if time.time() - started > limit:
            sys.exit(f"{len(pending)} edits still not served after {limit} s")
        try:
            conn = conn or http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=5)
            for link, target in list(pending.items()):
                conn.request("GET", f"/{link}")
                resp = conn.getresponse()
                resp.read()
                if resp.getheader("Location") == target:
                    del pending[link]
        except OSError:
            conn = None
            time.sleep(0.005)
    print(f"{time.time() - started:.3f}")


def import_csv(path, n):
    """A CSV of n links as another shortener exports them: half with a 5-character code
    couchlink keeps, half with a longer one that gets a fresh ID; a title and tags each."""
    rng = random.Random(7)
    codes = ids(n // 2, seed=11)
    with open(path, "w") as f:
        f.write("url,code,title,tags,created\n")
        for k in range(n):
            code = codes[k // 2] if k % 2 == 0 else f"legacy-{k}"
            f.write(f"https://example.com/landing/{k}?utm_source=qr&v={rng.randrange(10**6)},{code},Link {k},print|spring,2024-05-06T07:08:09Z\n")


def bulk_post(couch_port, db, user, password, jsonl, batch):
    """Posts the documents of jsonl (one a line) through _bulk_docs, batch at a time, as user;
    prints the seconds it took. The bodies are built before the clock starts."""
    docs = [json.loads(line) for line in open(jsonl)]
    bodies = [json.dumps({"docs": docs[i:i + batch]}) for i in range(0, len(docs), batch)]
    conn = http.client.HTTPConnection("127.0.0.1", couch_port)
    headers = {"Authorization": auth_header(user, password), "Content-Type": "application/json", "Accept": "application/json"}
    started = time.monotonic()
    for body in bodies:
        conn.request("POST", f"/{db}/_bulk_docs", body, headers)
        r = conn.getresponse()
        rows = json.loads(r.read())
        failed = [row for row in rows if "error" in row]
        if r.status >= 300 or failed:
            sys.exit(f"_bulk_docs failed: {r.status} {failed[:3]}")
    print(f"{time.monotonic() - started:.3f}")


def relay(listen_port, upstream_port, stats_file):
    """A TCP relay to CouchDB that counts what passes: requests sent (request lines) and bytes
    answered, written to stats_file as "requests bytes" every 0.1 s. Runs until killed."""
    import socket
    import threading
    counts = {"requests": 0, "bytes": 0}
    lock = threading.Lock()

    def pump(src, dst, upward):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with lock:
                    if upward:
                        counts["requests"] += data.count(b" HTTP/1.1\r\n")
                    else:
                        counts["bytes"] += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve():
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", listen_port))
        server.listen(64)
        while True:
            client, _ = server.accept()
            upstream = socket.create_connection(("127.0.0.1", upstream_port))
            threading.Thread(target=pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    while True:
        with lock:
            line = f"{counts['requests']} {counts['bytes']}\n"
        with open(stats_file + ".tmp", "w") as f:
            f.write(line)
        os.replace(stats_file + ".tmp", stats_file)
        time.sleep(0.1)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "import-csv":
        import_csv(sys.argv[2], int(sys.argv[3]))
    elif command == "bulk-post":
        bulk_post(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]))
    elif command == "load":
        load(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]))
    elif command == "edits":
        edit_latency(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), int(sys.argv[7]))
    elif command == "rules":
        load_rules(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]))
    elif command == "country-rules":
        load_rules(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]), countries=True)
    elif command == "protected":
        load_protected(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]), sys.argv[8])
    elif command == "edit":
        edit_many(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]), sys.argv[8])
    elif command == "served":
        all_served(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
    elif command == "relay":
        relay(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif command == "rss":
        print(rss_kib(int(sys.argv[2])))
    elif command == "auth":
        print(auth_header(sys.argv[2], sys.argv[3]))


def spread(rng, total, values):
    """`total` spread over a few of `values` (the first most), as a breakdown of live counts."""
    out, left = {}, total
    for value in values[:-1]:
        n = rng.randint(0, left)
        if n:
            out[value] = n
        left -= n
    if left:
        out[values[-1]] = left
    return out


def breakdowns(rng, total):
    """A link's live-count breakdowns (`by`) for `total` redirects, of the shape a printed tag's
    traffic gives: a few countries, phones mostly, one or two referrers, the campaign its target
    carries, no split."""
    return {"country": spread(rng, total, rng.sample(["IE", "GB", "FR", "DE", "US", "(unknown)"], 3)),
            "device": spread(rng, total, ["mobile", "desktop", "tablet", "bot"]),
            "os": spread(rng, total, ["ios", "android", "windows", "other"]),
            "browser": spread(rng, total, ["safari", "chrome", "samsung", "other"]),
            "referrer": spread(rng, total, ["(none)", "l.instagram.com"]),
            "utm_source": {"qr": total}, "utm_medium": {"print": total}, "utm_campaign": {"(none)": total},
            "variant": {"(none)": total}}
