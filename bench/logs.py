"""Access-log bench helpers: write a realistic couchlink access log, and run a command while
measuring its wall time and peak RSS.

    python3 bench/logs.py generate FILE LINES      # 30 UTC days, in time order
    python3 bench/logs.py measure CMD...           # prints "seconds max_rss_kib"
"""
import random
import resource
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

from helpers import ids

BROWSERS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.81 Mobile Safari/537.36",
    "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
    "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
]
BOTS = [
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
    "Twitterbot/1.0",
    "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
    "curl/8.5.0",
    "python-requests/2.31.0",
]
PROBES = ["/wp-login.php", "/.env", "/admin", "/favicon.ico", "/robots.txt", "/xmlrpc.php", "/.git/config"]
CAMPAIGNS = [
    "?utm_source=newsletter&utm_medium=email&utm_campaign=autumn",
    "?utm_source=twitter&utm_medium=social",
    "?utm_source=facebook&utm_medium=social&utm_campaign=autumn&utm_content=video",
    "?utm_source=print",
    "?utm_source=google&utm_medium=cpc&utm_campaign=brand&utm_term=short+links",
]
SAFE = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()")


def encode_ua(ua):
    """The log's User-Agent encoding (JavaScript's encodeURIComponent)."""
    return "".join(chr(b) if b in SAFE else "%%%02X" % b for b in ua.encode())


def address(rng):
    roll = rng.random()
    if roll < 0.7:
        a = rng.choice([a for a in range(2, 201, 2) if a not in (10, 127)])
        last = 0 if rng.random() < 0.3 else rng.randrange(1, 255)
        return "%d.%d.%d.%d" % (a, rng.randrange(256), rng.randrange(256), last)
    if roll < 0.95:
        if rng.random() < 0.3:
            return "2a00:%x:%x::" % (rng.randrange(65536), rng.randrange(65536))
        return "2a00:%x:%x:%x::%x" % (rng.randrange(65536), rng.randrange(65536), rng.randrange(65536), rng.randrange(1, 65536))
    return "192.168.%d.%d" % (rng.randrange(256), rng.randrange(1, 255))


def generate(path, lines, seed=7):
    rng = random.Random(seed)
    links = ids(5000, seed=11)
    # A few links take most clicks; a fifth were re-pointed half-way through.
    weights = [1 / (i + 1) ** 0.9 for i in range(len(links))]
    repointed = set(rng.sample(links, len(links) // 5))
    browsers = [encode_ua(u) for u in BROWSERS]
    bots = [encode_ua(u) for u in BOTS]
    start = datetime(2026, 10, 24, tzinfo=timezone.utc)
    span = 30 * 86400
    visitors = []
    # Each visitor keeps its address: IPv4 in bench/geoip_db.rs's /8s, IPv6 in its 2a00::/16, a
    # few private ones no database places; some anonymised as couchlink logs them.
    homes = {}
    # A fifth of the links carry a printed tag's campaign in their Location.
    tagged = set(rng.sample(links, len(links) // 5))
    picks = rng.choices(links, weights, k=lines)
    with open(path, "w") as out:
        for n, link in enumerate(picks):
            t = start + timedelta(seconds=span * n / lines)
            stamp = t.strftime("%Y%m%d%H%M%S")
            roll = rng.random()
            if roll < 0.04 or not visitors:
                tracking = "-" if roll < 0.01 else stamp + "%016x" % rng.getrandbits(64)
                if tracking != "-":
                    visitors.append(tracking)
            else:
                tracking = visitors[min(len(visitors) - 1, int(rng.paretovariate(1.2)) - 1)] if rng.random() < 0.3 else rng.choice(visitors)
            ua = rng.choice(bots) if rng.random() < 0.15 else rng.choice(browsers)
            ip = homes.get(tracking) or address(rng)
            if tracking != "-":
                homes[tracking] = ip
            tenth = t.microsecond // 100000
            kind = rng.random()
            if kind < 0.05:
                out.write(f"{stamp}.{tenth} {ip} {tracking} {ua} {rng.choice(PROBES)} 404\n")
            elif kind < 0.06:
                out.write(f"{stamp}.{tenth} {ip} {tracking} {ua} /{link} 501\n")
            else:
                version = "v2" if link in repointed and n > lines // 2 else "v1"
                query = rng.choice(CAMPAIGNS) if kind > 0.9 else ""
                base = f"https://example.com/{link}/{version}"
                if link in tagged:
                    base += f"?utm_source=qr&utm_medium=print&utm_campaign={link[:2].lower()}"
                    location = base + query.replace("?", "&")
                else:
                    location = base + query
                out.write(f"{stamp}.{tenth} {ip} {tracking} {ua} /{link}{query} 302 {location}\n")


def measure(command):
    began = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - began
    print(f"{elapsed:.4f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "measure":
        measure(sys.argv[2:])
