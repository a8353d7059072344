//! Restarts and upgrades under load, shorter than `bench/upgrade.sh`: three in-place upgrades
//! (SIGUSR2) and a broken new binary, then socket-activated restarts with the test holding the
//! socket as systemd does. Not one request may fail, and the access log holds one whole line
//! per answered request.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::support::couch::TestDb;
use crate::support::process::{reader_env, ServeProcess};
use crate::support::{eventually, holds};

/// Requests answered between two steps of a test under load (an upgrade, a restart): each
/// process serves the load a while before the next step, counted rather than timed.
const LOAD_BETWEEN: u64 = 200;

/// Short timeouts, so that a replaced process drains within seconds: idle keep-alive
/// connections are left to their own idle timeout during an upgrade's drain.
const QUICK: [(&str, &str); 3] =
    [("COUCHLINK_HEADER_TIMEOUT_SECS", "2"), ("COUCHLINK_DRAIN_SECS", "3"), ("COUCHLINK_WORKERS", "2")];

/// Light load on `addr`: keep-alive clients (whose pools notice a closed idle connection, as
/// browsers do) and clients opening a connection per request, each request answered `expect`
/// (a redirect's 302, the console page's 200) or a failure.
struct Load {
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicU64>,
    failures: Arc<std::sync::Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(addr: std::net::SocketAddr, path: &'static str, expect: u16) -> Load {
        let (stop, answered) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
        let tasks = (0..6)
            .map(|n| {
                let mut builder = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(Duration::from_secs(30));
                if n % 2 == 1 {
                    builder = builder.pool_max_idle_per_host(0);
                }
                let client = builder.build().unwrap();
                let (stop, answered, failures) = (stop.clone(), answered.clone(), failures.clone());
                tokio::spawn(async move {
                    while !stop.load(Relaxed) {
                        match client.get(format!("http://{addr}{path}")).send().await {
                            Ok(r) if r.status() == expect => {
                                answered.fetch_add(1, Relaxed);
                            }
                            Ok(r) => failures.lock().unwrap().push(format!("status {}", r.status())),
                            Err(e) => failures
                                .lock()
                                .unwrap()
                                .push(format!("client {n} at {:?}: {e:?}", std::time::SystemTime::now())),
                        }
                        // Keep-alive clients pause now and then, so their connections sit idle.
                        let pause = if n % 3 == 0 { 150 } else { 5 };
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                    }
                })
            })
            .collect();
        Load { stop, answered, failures, tasks }
    }

    /// Waits until the clients have had `n` more answers than now: the load went on meanwhile
    /// (in place of a fixed time under load).
    async fn goes_on(&self, n: u64) {
        let from = self.answered.load(Relaxed);
        let what = format!("{n} more requests answered");
        eventually(&what, Duration::from_secs(20), || async {
            let more = self.answered.load(Relaxed) - from;
            holds(more >= n, more)
        })
        .await
    }

    /// Stops the clients, checks that not one request failed and that more than a hundred were
    /// answered (`said` adds to the message), and says how many were.
    async fn finish(self, said: impl FnOnce() -> String) -> u64 {
        self.stop.store(true, Relaxed);
        for task in self.tasks {
            task.await.unwrap();
        }
        let (answered, failures) = (self.answered.load(Relaxed), self.failures.lock().unwrap().clone());
        let asked = answered + failures.len() as u64;
        assert!(failures.is_empty(), "{} of {asked} requests failed: {failures:?}\n{}", failures.len(), said());
        assert!(answered > 100, "only {answered} requests answered");
        answered
    }
}

/// `exe serve` for `db` on ports of its own, as an upgradable process: its pid in `pid_file`,
/// its access log in `dir/logs`, its stderr in `stderr`; the rest of its settings in `env`.
fn serve(exe: &Path, db: &TestDb, dir: &Path, pid_file: &Path, stderr: &Path, env: &[(&str, &Path)]) -> Child {
    Command::new(exe)
        .env_clear()
        .arg("serve")
        .envs(reader_env(db))
        .envs(QUICK)
        .env("COUCHLINK_LISTEN", "127.0.0.1:0")
        .env("COUCHLINK_ADMIN_LISTEN", "127.0.0.1:0")
        .env("COUCHLINK_LOG_DIR", dir.join("logs"))
        .env("COUCHLINK_PID_FILE", pid_file)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap()
}

fn pid_in(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.rsplit(") ").next().unwrap_or("").starts_with('Z'))
}

fn signal(pid: u32, name: &str) {
    assert!(Command::new("kill").args([name, &pid.to_string()]).status().unwrap().success());
}

/// Waits for `child` to exit (at most 30 s) without blocking the runtime the load runs on: a
/// client stalled between connecting and sending would look like one that never sends.
async fn exits(child: &mut Child) -> std::process::ExitStatus {
    let what = format!("pid {} exits", child.id());
    eventually(&what, Duration::from_secs(30), || {
        let exited = child.try_wait().unwrap();
        async move { exited.ok_or("still running") }
    })
    .await
}

/// Once `pid_file` names the process serving: the address `out` says it serves on, after `marker`.
async fn serving_at(pid_file: &Path, out: &Path, marker: &str) -> std::net::SocketAddr {
    wait_until("the process serves", Duration::from_secs(20), || pid_in(pid_file).is_some()).await;
    let said = std::fs::read_to_string(out).unwrap();
    let after = said.split(marker).nth(1).unwrap_or_else(|| panic!("{marker:?} is not in {said}"));
    after.split([' ', '/']).next().unwrap().parse().unwrap()
}

/// SIGUSR2 to `current`, the `n`th upgrade: once the new process has written its pid and the
/// old one has said it hands over (after the pid file: once it has heard from the new one), the
/// new process's pid. `said` counts a text in what the processes wrote.
async fn upgrade(current: u32, pid_file: &Path, n: usize, said: impl Fn(&str) -> usize) -> u32 {
    signal(current, "-USR2");
    wait_until("the new process serves", Duration::from_secs(20), || {
        pid_in(pid_file).is_some_and(|pid| pid != current)
    })
    .await;
    wait_until("the old process hands over", Duration::from_secs(20), || {
        said("serves now; this process stops accepting and drains") == n
    })
    .await;
    pid_in(pid_file).unwrap()
}

async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    eventually(what, limit, || {
        let done = done();
        async move { holds(done, "not yet") }
    })
    .await
}

/// Every process started as the test's couchlink, killed when the test ends however it ends
/// (an upgrade's processes are not the test's children).
struct Processes {
    pid_file: PathBuf,
    seen: Vec<u32>,
}

impl Drop for Processes {
    fn drop(&mut self) {
        for pid in self.seen.iter().copied().chain(pid_in(&self.pid_file)) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).stderr(Stdio::null()).status();
        }
    }
}

fn access_log_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(text.is_empty() || text.ends_with('\n'), "a log file ends in a partial line");
        lines.extend(text.lines().map(str::to_owned));
    }
    lines
}

#[tokio::test]
async fn upgrades_under_load_fail_no_request_and_a_broken_binary_leaves_the_old_one_serving() {
    let db = TestDb::new().await;
    db.put_link("Upgr1", json!({"url": "https://upgraded.example/"})).await;
    let dir = tempfile::tempdir().unwrap();
    // Started through a symlink the test points elsewhere, as an operator switches builds.
    let build = dir.path().join("couchlink-build");
    std::fs::copy(env!("CARGO_BIN_EXE_couchlink"), &build).unwrap();
    let exe = dir.path().join("couchlink");
    std::os::unix::fs::symlink(&build, &exe).unwrap();
    let (pid_file, log_dir, stderr) = (dir.path().join("pid"), dir.path().join("logs"), dir.path().join("stderr"));
    // A setting from COUCHLINK_ENV_FILE, changed before the last upgrade: the new process reads
    // the file afresh instead of inheriting the old value.
    let settings = dir.path().join("couchlink.env");
    std::fs::write(&settings, "# the tracking cookie\nCOUCHLINK_COOKIE_NAME=tid\n").unwrap();
    let env = [("COUCHLINK_UPGRADE_TIMEOUT_SECS", Path::new("3")), ("COUCHLINK_ENV_FILE", &settings)];
    let mut first = serve(&exe, &db, dir.path(), &pid_file, &stderr, &env);
    let mut processes = Processes { pid_file: pid_file.clone(), seen: vec![first.id()] };
    let said = |text: &str| std::fs::read_to_string(&stderr).unwrap_or_default().matches(text).count();
    let addr = serving_at(&pid_file, &stderr, "serving redirects on http://").await;

    let load = Load::start(addr, "/Upgr1", 302);
    let mut current = first.id();
    for n in 1..=3 {
        load.goes_on(LOAD_BETWEEN).await;
        if n == 3 {
            std::fs::write(&settings, "COUCHLINK_COOKIE_NAME=visitor\n").unwrap();
        }
        current = upgrade(current, &pid_file, n, said).await;
        processes.seen.push(current);
    }
    let fresh = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let answer = fresh.get(format!("http://{addr}/Upgr1")).send().await.unwrap();
    let cookie = answer.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("visitor="), "the changed setting took effect: {cookie}");
    // A new binary that fails at once: the upgrade is refused and the old process serves on.
    load.goes_on(LOAD_BETWEEN).await;
    let broken = dir.path().join("broken");
    std::fs::write(&broken, "#!/bin/sh\necho 'a broken build' >&2\nexit 3\n").unwrap();
    Command::new("chmod").args(["+x", broken.to_str().unwrap()]).status().unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&broken, &link).unwrap();
    std::fs::rename(&link, &exe).unwrap();
    signal(current, "-USR2");
    wait_until("the failed upgrade is said", Duration::from_secs(20), || said("upgrade failed, still serving") == 1)
        .await;
    assert!(said("exited before it was ready: exit status: 3") == 1, "{}", std::fs::read_to_string(&stderr).unwrap());
    // The old process answers on after the failure, and is still the one named.
    load.goes_on(LOAD_BETWEEN).await;
    assert_eq!(pid_in(&pid_file), Some(current), "the old process still serves");
    let answered = load.finish(|| std::fs::read_to_string(&stderr).unwrap_or_default()).await;

    // Every replaced process finishes its drain and exits; one listens at the end.
    assert!(exits(&mut first).await.success());
    let replaced: Vec<u32> = processes.seen.iter().copied().filter(|&pid| pid != current).collect();
    wait_until("every replaced process exits", Duration::from_secs(15), || !replaced.iter().any(|&p| alive(p))).await;
    signal(current, "-TERM");
    wait_until("the last process exits", Duration::from_secs(30), || !alive(current)).await;
    let lines = access_log_lines(&log_dir);
    assert_eq!(lines.len() as u64, answered + 1, "one access log line per answered request");
    assert!(lines.iter().all(|l| l.split(' ').count() == 7 && l.ends_with("https://upgraded.example/")), "whole lines");
    assert_eq!(said("requests served since start"), 4, "four processes served and stopped");
}

/// `couchlink serve` as systemd starts it: the test's listening socket at descriptor 3, named in
/// `LISTEN_FDNAMES`, and `LISTEN_PID` the process's own (the shell's, which execs couchlink).
fn socket_activated(listener: &std::net::TcpListener, env: &[(&'static str, String)], stderr: &Path) -> Child {
    let socket: OwnedFd = listener.try_clone().unwrap().into();
    Command::new("sh")
        .env_clear()
        .args([
            "-c",
            r#"exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=redirect exec "$0" serve"#,
            env!("CARGO_BIN_EXE_couchlink"),
        ])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::from(socket))
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(stderr).unwrap())
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn socket_activated_restarts_refuse_no_connection() {
    let db = TestDb::new().await;
    db.put_link("Sock1", json!({"url": "https://activated.example/"})).await;
    let dir = tempfile::tempdir().unwrap();
    let (log_dir, stderr) = (dir.path().join("logs"), dir.path().join("stderr"));
    // systemd's part: the socket, bound once and held through every restart.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut env = reader_env(&db);
    env.extend(QUICK.iter().map(|(k, v)| (*k, v.to_string())));
    env.push(("COUCHLINK_LISTEN", "127.0.0.1:1".into()));
    env.push(("COUCHLINK_ADMIN_LISTEN", "127.0.0.1:0".into()));
    env.push(("COUCHLINK_LOG_DIR", log_dir.display().to_string()));
    let serving = |n| std::fs::read_to_string(&stderr).unwrap_or_default().matches("sockets from systemd").count() == n;
    let mut child = socket_activated(&listener, &env, &stderr);
    wait_until("it serves on systemd's socket", Duration::from_secs(20), || serving(1)).await;

    let load = Load::start(addr, "/Sock1", 302);
    for n in 2..=3 {
        load.goes_on(LOAD_BETWEEN).await;
        signal(child.id(), "-TERM");
        assert!(exits(&mut child).await.success());
        // Nobody accepts now: connections wait in the socket's queue. Time is what is tested
        // (a gap with no process), so this pause stays.
        tokio::time::sleep(Duration::from_millis(200)).await;
        child = socket_activated(&listener, &env, &stderr);
        wait_until("the restarted process serves", Duration::from_secs(20), || serving(n)).await;
    }
    load.goes_on(LOAD_BETWEEN).await;
    let answered = load.finish(|| std::fs::read_to_string(&stderr).unwrap_or_default()).await;
    signal(child.id(), "-TERM");
    assert!(exits(&mut child).await.success());
    assert_eq!(access_log_lines(&log_dir).len() as u64, answered, "one access log line per answered request");
    let text = std::fs::read_to_string(&stderr).unwrap();
    let on_the_socket = format!("serving redirects on http://{addr} ");
    assert_eq!(text.matches(&on_the_socket).count(), 3, "served on systemd's socket, not COUCHLINK_LISTEN: {text}");
}

/// One whole response read from `stream`: its head, then as many body bytes as it says.
async fn one_response(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "the connection ended in a response head");
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got).to_lowercase();
    let length: usize =
        head.split("\r\ncontent-length: ").nth(1).and_then(|l| l.split("\r\n").next()?.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    got.extend(body);
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn a_stopping_proxy_says_draining_on_healthz_until_its_connections_are_done() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let db = TestDb::new().await;
    db.put_link("Drain", json!({"url": "https://draining.example/"})).await;
    let env = reader_env(&db);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut proxy = ServeProcess::start("draining", &env);
    eventually("healthy", Duration::from_secs(20), || async {
        let status = proxy.admin_status("/healthz").await;
        holds(status == 200, status)
    })
    .await;
    // A keep-alive connection in use: the drain's lame-duck second waits for it.
    let mut open = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    open.write_all(b"GET /Drain HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    assert!(one_response(&mut open).await.starts_with("HTTP/1.1 302"));
    let mut buf = [0u8; 64];
    signal(proxy.pid(), "-TERM");
    eventually("a load balancer is told to stop sending (503)", Duration::from_secs(5), || async {
        let seen = proxy.admin_status("/healthz").await;
        holds(seen == 503, seen)
    })
    .await;
    let body = reqwest::get(format!("http://{}/healthz", proxy.admin_addr)).await.unwrap().text().await.unwrap();
    assert!(body.contains(r#""status":"draining""#), "{body}");
    // The connection in use goes on being answered: keep-alive while the last cache snapshot
    // is written (the proxy still accepts then), and once it stops accepting, an answer with
    // `Connection: close`, after which the connection ends.
    let open = tokio::sync::Mutex::new(open);
    eventually("an answer with Connection: close", Duration::from_secs(10), || async {
        let mut open = open.lock().await;
        open.write_all(b"GET /Drain HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let answer = one_response(&mut open).await;
        assert!(answer.starts_with("HTTP/1.1 302"), "{answer}");
        holds(answer.to_lowercase().contains("\r\nconnection: close\r\n"), answer)
    })
    .await;
    let mut open = open.into_inner();
    assert_eq!(open.read(&mut buf).await.unwrap(), 0, "the connection ends after its last answer");
    assert!(proxy.terminate().success());
}

/// A country database placing 203.0.113.0/24 in `country`.
fn countries(path: &Path, country: &str) {
    let mut writer = mmdb_writer::Writer::new("GeoLite2-Country");
    let record = json!({"country": {"iso_code": country, "names": {"en": country}}});
    writer.insert("203.0.113.0/24".parse::<ipnet::IpNet>().unwrap(), &record).unwrap();
    std::fs::write(path, writer.to_bytes().unwrap()).unwrap();
}

#[tokio::test]
async fn a_replaced_geoip_database_takes_effect_at_an_upgrade() {
    let db = TestDb::new().await;
    let targets = json!([{"when": {"country": ["FR"]}, "url": "https://example.com/fr"}]);
    db.put_link("GeoUp", json!({"url": "https://example.com/", "targets": targets})).await;
    let dir = tempfile::tempdir().unwrap();
    let (geoip, pid_file, stderr) = (dir.path().join("geo.mmdb"), dir.path().join("pid"), dir.path().join("stderr"));
    countries(&geoip, "FR");
    let env = [("COUCHLINK_GEOIP", geoip.as_path()), ("COUCHLINK_TRUSTED_PROXIES", Path::new("127.0.0.1"))];
    let exe = Path::new(env!("CARGO_BIN_EXE_couchlink"));
    let mut first = serve(exe, &db, dir.path(), &pid_file, &stderr, &env);
    let mut processes = Processes { pid_file: pid_file.clone(), seen: vec![first.id()] };
    wait_until("it serves", Duration::from_secs(20), || pid_in(&pid_file).is_some()).await;
    let said = std::fs::read_to_string(&stderr).unwrap();
    let addr: std::net::SocketAddr =
        said.split("serving redirects on http://").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let location = || async {
        let r = http.get(format!("http://{addr}/GeoUp")).header("X-Forwarded-For", "203.0.113.7").send().await.unwrap();
        r.headers()["location"].to_str().unwrap().to_owned()
    };
    assert_eq!(location().await, "https://example.com/fr");
    // The file is replaced (a monthly GeoLite2 update): the running process keeps what it read.
    countries(&geoip, "DE");
    assert_eq!(location().await, "https://example.com/fr");
    let before = first.id();
    signal(before, "-USR2");
    wait_until("the new process serves", Duration::from_secs(20), || pid_in(&pid_file).is_some_and(|p| p != before))
        .await;
    processes.seen.push(pid_in(&pid_file).unwrap());
    assert!(exits(&mut first).await.success());
    assert_eq!(location().await, "https://example.com/", "the new database places the address in Germany");
    signal(pid_in(&pid_file).unwrap(), "-TERM");
}

/// `file`, opened to append: what the console prints and logs, and its successors', kept whole.
fn appending(file: &Path) -> std::fs::File {
    std::fs::OpenOptions::new().create(true).append(true).open(file).unwrap()
}

/// `couchlink console` for `db`, holding no account, as an upgradable process: its pid in
/// `pid_file`, what it says in `out`.
fn console(exe: &Path, db: &TestDb, pid_file: &Path, out: &Path) -> Child {
    let mut couchdb = url::Url::parse(&db.couch.url).unwrap();
    couchdb.set_username("").unwrap();
    couchdb.set_password(None).unwrap();
    Command::new(exe)
        .env_clear()
        .arg("console")
        .env("COUCHLINK_CONSOLE_LISTEN", "127.0.0.1:0")
        .env("COUCHLINK_COUCHDB_URL", couchdb.as_str())
        .env("COUCHLINK_DB", &db.name)
        .env("COUCHLINK_CONSOLE_PID_FILE", pid_file)
        .stdin(Stdio::null())
        .stdout(appending(out))
        .stderr(appending(out))
        .spawn()
        .unwrap()
}

/// The console upgrades in place as `serve` does (SIGUSR2: the binary on disk takes its socket,
/// then it drains), failing no request, and takes its listener from systemd.
#[tokio::test]
async fn the_console_upgrades_in_place_failing_no_request_and_takes_systemds_socket() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("couchlink");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_couchlink"), &exe).unwrap();
    let (pid_file, out) = (dir.path().join("console.pid"), dir.path().join("console.out"));
    let mut first = console(&exe, &db, &pid_file, &out);
    let mut processes = Processes { pid_file: pid_file.clone(), seen: vec![first.id()] };
    let said = |text: &str| std::fs::read_to_string(&out).unwrap_or_default().matches(text).count();
    let addr = serving_at(&pid_file, &out, "couchlink console on http://").await;

    let load = Load::start(addr, "/", 200);
    let mut current = first.id();
    for n in 1..=2 {
        load.goes_on(LOAD_BETWEEN).await;
        current = upgrade(current, &pid_file, n, said).await;
        processes.seen.push(current);
    }
    load.goes_on(LOAD_BETWEEN).await;
    let answered = load.finish(|| std::fs::read_to_string(&out).unwrap_or_default()).await;
    assert!(exits(&mut first).await.success());
    assert_eq!(said("(socket taken over from the process upgraded)"), 2, "{}", std::fs::read_to_string(&out).unwrap());
    signal(current, "-TERM");
    wait_until("the last console exits", Duration::from_secs(30), || !alive(current)).await;
    assert!(!pid_file.exists(), "the last console removes its pid file");
    eprintln!("{answered} requests answered through two console upgrades");

    // systemd's socket, held by the test: the console serves on it, not on its own address.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let socket: OwnedFd = listener.try_clone().unwrap().into();
    let mut couchdb = url::Url::parse(&db.couch.url).unwrap();
    couchdb.set_username("").unwrap();
    couchdb.set_password(None).unwrap();
    let mut activated = Command::new("sh")
        .env_clear()
        .args([
            "-c",
            r#"exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" console"#,
            env!("CARGO_BIN_EXE_couchlink"),
        ])
        .env("COUCHLINK_CONSOLE_LISTEN", "127.0.0.1:1")
        .env("COUCHLINK_COUCHDB_URL", couchdb.as_str())
        .env("COUCHLINK_DB", &db.name)
        .stdin(Stdio::from(socket))
        .stdout(appending(&out))
        .stderr(appending(&out))
        .spawn()
        .unwrap();
    wait_until("the console serves on systemd's socket", Duration::from_secs(20), || {
        said("(socket from systemd)") == 1
    })
    .await;
    let page = reqwest::get(format!("http://{}/", listener.local_addr().unwrap())).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("couchlink console"));
    signal(activated.id(), "-TERM");
    assert!(exits(&mut activated).await.success());
}
