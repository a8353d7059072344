//! The `couchlink` binary as a separate process, as operators run it: started with environment
//! variables only, its addresses read from its start-up message, stopped with SIGTERM.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::couch::{TestDb, READER};
use super::eventually::{eventually, holds};

/// A running `couchlink serve`.
pub struct ServeProcess {
    child: Child,
    /// Where it serves redirects.
    pub addr: SocketAddr,
    /// Where it serves `/healthz` and `/metrics`.
    pub admin_addr: SocketAddr,
    /// Its access log directory.
    pub log_dir: TempDir,
    /// Its cache snapshot's directory, unless the test named another.
    pub state_dir: TempDir,
    /// Responses received from it through [`ServeProcess::get`] (each must be logged).
    pub responses: Arc<AtomicU64>,
    /// Every line it has written to stderr so far.
    pub stderr: Arc<Mutex<Vec<String>>>,
    /// The thread reading its stderr, which ends once the pipe closes (the process exited).
    reader: Option<std::thread::JoinHandle<()>>,
    http: reqwest::Client,
    name: String,
}

/// A Debian tool a test drives, failing the test at once, saying which package to install,
/// when the machine lacks it (a test never passes by skipping).
pub fn tool(name: &str, package: &str) -> Command {
    let probe = Command::new(name).arg("--version").output();
    assert!(probe.is_ok(), "this test needs {name} (apt-get install {package})");
    Command::new(name)
}

/// The environment for `couchlink serve` as the test reader on `db`.
pub fn reader_env(db: &TestDb) -> Vec<(&'static str, String)> {
    vec![
        ("COUCHLINK_COUCHDB_URL", db.couch.url.clone()),
        ("COUCHLINK_COUCHDB_USER", READER.0.to_owned()),
        ("COUCHLINK_COUCHDB_PASSWORD", READER.1.to_owned()),
        ("COUCHLINK_DB", db.name.clone()),
    ]
}

/// The `couchlink` binary with a clean environment: only what a test sets reaches it.
pub fn couchlink_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_couchlink"));
    command.env_clear();
    if let Ok(filter) = std::env::var("RUST_LOG") {
        command.env("RUST_LOG", filter);
    }
    command
}

impl ServeProcess {
    /// Starts `couchlink serve` on loopback ports chosen by the kernel, with the variables
    /// `env` (`COUCHLINK_COUCHDB_URL` and the rest), and waits until it says it serves. Its
    /// stderr is copied to the test's, each line prefixed with `name`.
    pub fn start(name: &str, env: &[(&str, &str)]) -> ServeProcess {
        let log_dir = tempfile::tempdir().unwrap();
        let state_dir = tempfile::tempdir().unwrap();
        let mut command = couchlink_command();
        command
            .arg("serve")
            .env("COUCHLINK_LISTEN", "127.0.0.1:0")
            .env("COUCHLINK_ADMIN_LISTEN", "127.0.0.1:0")
            .env("COUCHLINK_LOG_DIR", log_dir.path())
            .env("COUCHLINK_STATE_DIR", state_dir.path())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // The process dies with the test's, even when the test is killed.
        super::dies_with_its_spawner(&mut command);
        let mut child = command.spawn().expect("couchlink starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let prefix = name.to_owned();
        let said = Arc::new(Mutex::new(Vec::new()));
        let saying = said.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{prefix}] {line}");
                if let Some(addrs) = serving_addresses(&line) {
                    let _ = tx.send(addrs);
                }
                saying.lock().unwrap().push(line);
            }
        });
        let (addr, admin_addr) = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{name} never said it serves (see its stderr above)"));
        ServeProcess {
            child,
            addr,
            admin_addr,
            log_dir,
            state_dir,
            responses: Arc::default(),
            stderr: said,
            reader: Some(reader),
            http: super::couch::http(),
            name: name.to_owned(),
        }
    }

    /// `GET path`, counted; `None` when no response came (a failed request).
    pub async fn get(&self, path: &str) -> Option<reqwest::Response> {
        let response = self.http.get(format!("http://{}{path}", self.addr)).send().await.ok()?;
        self.responses.fetch_add(1, Relaxed);
        Some(response)
    }

    /// `GET path` on the admin listener: its status.
    pub async fn admin_status(&self, path: &str) -> u16 {
        let url = format!("http://{}{path}", self.admin_addr);
        self.http.get(url).send().await.map_or(0, |r| r.status().as_u16())
    }

    /// Polls `path` until it answers `status` with `location` (for a 302); how long it took.
    /// Panics after `limit`.
    pub async fn wait_until_served(
        &self,
        path: &str,
        status: u16,
        location: Option<&str>,
        limit: Duration,
    ) -> Duration {
        let started = Instant::now();
        let what = format!("{}: {path} answers {status} {location:?}", self.name);
        eventually(&what, limit, || async {
            let Some(r) = self.get(path).await else { return Err(None) };
            let got = r.headers().get("location").map(|v| v.to_str().unwrap().to_owned());
            holds(r.status() == status && got.as_deref() == location, Some((r.status(), got)))
        })
        .await;
        started.elapsed()
    }

    /// Its process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGHUP (read the password file again).
    pub fn hang_up(&self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-HUP", &pid]).status().expect("kill runs").success());
    }

    /// Kills it with SIGKILL (no chance to flush anything) and waits for the exit.
    pub fn kill_hard(&mut self) -> ExitStatus {
        self.child.kill().expect("SIGKILL is sent");
        self.child.wait().expect("the child can be waited for")
    }

    /// Sends SIGTERM and waits (at most 30 s) for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
        wait_within(&mut self.child, Duration::from_secs(30))
            .unwrap_or_else(|()| panic!("{} ignored SIGTERM", self.name))
    }

    /// Its resident memory (VmRSS), in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS in /proc/PID/status");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// The CPU time (user and system) it has used so far, in seconds, from `/proc/PID/stat`:
    /// its own, unlike `getrusage` in the test process, which counts every test running beside it.
    pub fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // The command name, field 2, may hold spaces: count fields after its closing parenthesis,
        // where utime and stime are the 12th and 13th.
        let rest = &stat[stat.rfind(')').expect("comm in /proc/PID/stat") + 2..];
        let ticks: u64 = rest.split(' ').skip(11).take(2).map(|f| f.parse::<u64>().unwrap()).sum();
        // SAFETY: sysconf only reads a configuration value.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        ticks as f64 / per_second as f64
    }

    /// Limits the size of the files it writes (RLIMIT_FSIZE, as a full disk does for its log),
    /// or lifts the limit (`None`).
    pub fn limit_file_size(&self, bytes: Option<u64>) {
        let limit = bytes.unwrap_or(libc::RLIM_INFINITY);
        let limit = libc::rlimit { rlim_cur: limit, rlim_max: libc::RLIM_INFINITY };
        // SAFETY: prlimit reads `limit` and writes nothing back (the old limit is not asked for).
        let done = unsafe { libc::prlimit(self.child.id() as i32, libc::RLIMIT_FSIZE, &limit, std::ptr::null_mut()) };
        assert_eq!(done, 0, "prlimit: {}", std::io::Error::last_os_error());
    }

    /// The lines it has written to stderr that contain `text`.
    pub fn said(&self, text: &str) -> Vec<String> {
        self.stderr.lock().unwrap().iter().filter(|l| l.contains(text)).cloned().collect()
    }

    /// The lines it has written to stderr that contain `text`, once there is one (they are read
    /// from its pipe by another thread); panics when none comes within 10 s.
    pub async fn said_eventually(&self, text: &str) -> Vec<String> {
        let what = format!("{} says {text:?}", self.name);
        eventually(&what, Duration::from_secs(10), || async {
            let said = self.said(text);
            if said.is_empty() {
                Err(self.stderr.lock().unwrap().last().cloned())
            } else {
                Ok(said)
            }
        })
        .await
    }

    /// The lines containing `text` of all it wrote to stderr, once it has exited (after
    /// [`ServeProcess::terminate`] or [`ServeProcess::kill_hard`]): what it said once is then
    /// known to have been said only once, with no wait for a second line that might come.
    pub fn said_in_all(&mut self, text: &str) -> Vec<String> {
        assert!(self.child.try_wait().expect("the child can be waited for").is_some(), "{} still runs", self.name);
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the stderr reader did not panic");
        }
        self.said(text)
    }

    /// Lines in its access log files.
    pub fn log_line_count(&self) -> usize {
        std::fs::read_dir(self.log_dir.path())
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .map(|text| text.lines().count())
            .sum()
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for `child` to exit, at most `limit`; past it the child is killed and `Err` returned.
/// The kernel says when it exits (its pidfd turns readable): nothing is polled.
pub fn wait_within(child: &mut Child, limit: Duration) -> Result<ExitStatus, ()> {
    if let Some(status) = child.try_wait().expect("the child can be waited for") {
        return Ok(status);
    }
    // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor, closed below.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) } as libc::c_int;
    assert!(pidfd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
    let deadline = Instant::now() + limit;
    let exited = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut ready = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; the timeout is bounded to an int's milliseconds.
        let n = unsafe { libc::poll(&mut ready, 1, left.as_millis().min(i32::MAX as u128) as libc::c_int) };
        if n >= 0 {
            break n > 0;
        }
        // Only a signal handled by the test process ends poll early: wait on.
        assert_eq!(std::io::Error::last_os_error().kind(), std::io::ErrorKind::Interrupted, "poll of a pidfd");
    };
    // SAFETY: the descriptor was opened above and is closed once.
    unsafe { libc::close(pidfd) };
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
        return Err(());
    }
    Ok(child.wait().expect("the child can be waited for"))
}

/// The redirect and admin addresses in `couchlink serve`'s start-up message.
fn serving_addresses(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line.split("serving redirects on http://").nth(1)?;
    let addr = rest.split([' ', '/']).next()?.parse().ok()?;
    let admin = rest.split("health and metrics on http://").nth(1)?;
    let admin = admin.split([')', ';']).next()?.parse().ok()?;
    Some((addr, admin))
}
