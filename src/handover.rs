//! Listening sockets that outlive the process: taken from systemd (socket activation) or from
//! the process this one replaces (an in-place upgrade), and handed to the process that
//! replaces this one. A socket that stays open through the swap keeps its queue: no connection
//! is refused or reset while one process stops and the next starts (docs/operations.md,
//! "Restarts and upgrades").
//!
//! Why this shape:
//! - **systemd's sockets** are taken with `listenfd` (the one place a raw descriptor number
//!   becomes a socket, which needs `unsafe`, kept out of this crate) and told apart by their
//!   `FileDescriptorName=`.
//! - **An upgrade** passes the sockets over a Unix socket with `SCM_RIGHTS`, as HAProxy's
//!   seamless reload and pingora's `transfer_fd` do, rather than by exec inheritance: inherited
//!   descriptors would have to sit at known numbers without `FD_CLOEXEC` (an `unsafe` pre-exec
//!   hook, or every other spawned process inheriting them), while rustix sends and receives
//!   descriptors with safe calls. The socket is in Linux's abstract namespace (no file to
//!   clean up), and only the process this one started may take the listeners: the peer's pid
//!   is checked (`SO_PEERCRED`) before anything is sent.
//! - shellflip and ecdysis (Cloudflare) do the same with a restart-coordination socket and
//!   their own process model; couchlink needs only the sockets passed and one "ready" back,
//!   next to systemd's notifications, in about 300 lines it owns.
//!
//! The conversation, on a Unix stream: the new process connects to the socket named by
//! [`UPGRADE_SOCKET_VAR`]; the old one sends `couchlink-listeners <name>...\n` with one
//! descriptor per name (`redirect` or `admin`); the new one answers `ready\n` once it serves.

use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage};
use tokio::io::AsyncReadExt;

/// The environment variable naming the abstract Unix socket a new process takes its
/// listeners from (set only by the process it replaces).
pub const UPGRADE_SOCKET_VAR: &str = "COUCHLINK_UPGRADE_SOCKET";
/// The redirect listener's name (in `FileDescriptorName=` and between processes).
pub const REDIRECT: &str = "redirect";
/// The admin listener's name.
pub const ADMIN: &str = "admin";

/// Most listeners passed: one redirect socket per serving thread, and the admin one, in one
/// message: Linux passes at most this many descriptors in one `SCM_RIGHTS` (`SCM_MAX_FD`).
const MAX_SOCKETS: usize = 253;
/// How long a new process waits for the old one to send its listeners.
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new process that failed to get ready gets to stop on SIGTERM before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
const GREETING: &str = "couchlink-listeners";

/// Why listeners could not be taken over.
#[derive(Debug, thiserror::Error)]
pub enum InheritError {
    /// systemd passed a socket couchlink cannot use.
    #[error("systemd passed socket {index} ({name:?}): {reason}")]
    Systemd {
        /// Its place in `LISTEN_FDS`.
        index: usize,
        /// Its `FileDescriptorName=`.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The old process could not be reached, or said something else.
    #[error("cannot take the listeners from the process being upgraded ({UPGRADE_SOCKET_VAR}={socket}): {reason}")]
    Predecessor {
        /// The abstract socket's name.
        socket: String,
        /// What went wrong (said in the message, so no source of it).
        reason: HandoverFailed,
    },
}

/// What went wrong taking the listeners from the process being upgraded.
#[derive(Debug, thiserror::Error)]
pub enum HandoverFailed {
    /// The name is no abstract socket address.
    #[error(transparent)]
    Address(std::io::Error),
    /// Nothing listens under it.
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    /// The socket could not be set up (its receive timeout, a listener's non-blocking mode).
    #[error(transparent)]
    Socket(std::io::Error),
    /// The greeting and descriptors did not arrive.
    #[error("nothing received: {0}")]
    Receive(rustix::io::Errno),
    /// Something other than couchlink's greeting.
    #[error("unexpected greeting {0:?}")]
    Greeting(String),
    /// The greeting names another number of sockets than were passed.
    #[error("{names} names for {sockets} sockets")]
    Count {
        /// Names in the greeting.
        names: usize,
        /// Descriptors passed.
        sockets: usize,
    },
    /// A socket name couchlink does not give.
    #[error("a socket named {0:?}")]
    UnknownName(String),
    /// No redirect listener among them.
    #[error("no redirect socket passed")]
    NoRedirect,
}

/// Why an upgrade did not happen (the old process goes on serving).
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The handover socket could not be made.
    #[error("cannot open the handover socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The new binary could not be started.
    #[error("cannot start {}: {source}", exe.display())]
    Spawn {
        /// The binary.
        exe: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// The new process ended before it was ready.
    #[error("the new process (pid {pid}) exited before it was ready: {status}")]
    Exited {
        /// Its pid.
        pid: u32,
        /// How it ended.
        status: String,
    },
    /// The new process closed the handover before saying it was ready.
    #[error("the new process (pid {pid}) hung up before it was ready")]
    HungUp {
        /// Its pid.
        pid: u32,
    },
    /// The new process was not ready in time.
    #[error("the new process (pid {pid}) was not ready within {timeout:?} (COUCHLINK_UPGRADE_TIMEOUT_SECS)")]
    TimedOut {
        /// Its pid.
        pid: u32,
        /// The time it had.
        timeout: Duration,
    },
    /// The listeners could not be sent.
    #[error("cannot pass the listeners to the new process (pid {pid}): {source}")]
    Send {
        /// Its pid.
        pid: u32,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
}

/// Listeners this process was given, by systemd or by the process it replaces.
pub struct Inherited {
    /// The redirect listener's sockets (several from an upgrade: one per serving thread of the
    /// old process, all in one `SO_REUSEPORT` group).
    pub redirect: Vec<TcpListener>,
    /// The admin listener, when one was passed.
    pub admin: Option<TcpListener>,
    /// Who gave them.
    pub giver: Giver,
}

/// Who passed the listeners.
pub enum Giver {
    /// systemd (`LISTEN_FDS`): it holds the sockets through restarts.
    Systemd,
    /// The process this one replaces, waiting to hear that this one serves.
    Predecessor(Predecessor),
}

/// The process this one replaces, on the other end of the handover.
pub struct Predecessor {
    stream: UnixStream,
}

impl Predecessor {
    /// Tells the old process that this one serves: it stops accepting and drains.
    pub fn ready(mut self) -> std::io::Result<()> {
        self.stream.write_all(b"ready\n")
    }
}

/// The listeners passed to this process, if any: from the process it replaces when
/// [`UPGRADE_SOCKET_VAR`] names one, else from systemd when `LISTEN_FDS` is set for this
/// process. Either way the variables are removed, so that a process started later does not
/// read them. Call it before any thread starts (it changes the environment).
pub fn take_inherited() -> Result<Option<Inherited>, InheritError> {
    if let Some(socket) = std::env::var_os(UPGRADE_SOCKET_VAR) {
        std::env::remove_var(UPGRADE_SOCKET_VAR);
        let socket = socket.to_string_lossy().into_owned();
        return from_predecessor(&socket).map(Some).map_err(|reason| InheritError::Predecessor { socket, reason });
    }
    from_systemd()
}

fn from_systemd() -> Result<Option<Inherited>, InheritError> {
    let names = std::env::var("LISTEN_FDNAMES").unwrap_or_default();
    // Reads and removes LISTEN_PID and LISTEN_FDS (only when LISTEN_PID is this process).
    let mut fds = listenfd::ListenFd::from_env();
    std::env::remove_var("LISTEN_FDNAMES");
    if fds.len() == 0 {
        return Ok(None);
    }
    let names: Vec<&str> = names.split(':').collect();
    let mut inherited = Inherited { redirect: Vec::new(), admin: None, giver: Giver::Systemd };
    for index in 0..fds.len() {
        let name = names.get(index).copied().unwrap_or("").to_owned();
        let failed = |reason: String| InheritError::Systemd { index, name: name.clone(), reason };
        let listener = fds
            .take_tcp_listener(index)
            .map_err(|e| failed(format!("not a listening TCP socket: {e}")))?
            .ok_or_else(|| failed("already taken".into()))?;
        listener.set_nonblocking(true).map_err(|e| failed(e.to_string()))?;
        match name.as_str() {
            ADMIN if inherited.admin.is_none() => inherited.admin = Some(listener),
            REDIRECT => inherited.redirect.push(listener),
            // One socket with systemd's default name (the socket unit's): the redirect one.
            _ if fds.len() == 1 => inherited.redirect.push(listener),
            _ => {
                return Err(failed(
                    "with several sockets, name each with FileDescriptorName=redirect or FileDescriptorName=admin"
                        .into(),
                ))
            }
        }
    }
    if inherited.redirect.is_empty() {
        return Err(InheritError::Systemd { index: 0, name: names.join(":"), reason: "none is named redirect".into() });
    }
    Ok(Some(inherited))
}

fn from_predecessor(socket: &str) -> Result<Inherited, HandoverFailed> {
    let address = UnixAddr::from_abstract_name(socket.as_bytes()).map_err(HandoverFailed::Address)?;
    let stream = UnixStream::connect_addr(&address).map_err(HandoverFailed::Connect)?;
    stream.set_read_timeout(Some(RECEIVE_TIMEOUT)).map_err(HandoverFailed::Socket)?;
    let mut text = vec![0u8; 4096];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received =
        rustix::net::recvmsg(&stream, &mut [IoSliceMut::new(&mut text)], &mut control, RecvFlags::CMSG_CLOEXEC)
            .map_err(HandoverFailed::Receive)?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(passed) = message {
            fds.extend(passed);
        }
    }
    text.truncate(received.bytes);
    // The greeting is sent in one message with the descriptors; a stream may still split it.
    let mut stream = stream;
    while !text.ends_with(b"\n") && text.len() < 4096 {
        let mut more = [0u8; 512];
        match stream.read(&mut more) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.extend_from_slice(&more[..n]),
        }
    }
    let text = String::from_utf8_lossy(&text);
    let mut words = text.trim_end().split(' ');
    if words.next() != Some(GREETING) {
        return Err(HandoverFailed::Greeting(text.trim_end().to_owned()));
    }
    let names: Vec<&str> = words.collect();
    if names.len() != fds.len() {
        return Err(HandoverFailed::Count { names: names.len(), sockets: fds.len() });
    }
    let mut inherited =
        Inherited { redirect: Vec::new(), admin: None, giver: Giver::Predecessor(Predecessor { stream }) };
    for (name, fd) in names.into_iter().zip(fds) {
        let listener = TcpListener::from(fd);
        listener.set_nonblocking(true).map_err(HandoverFailed::Socket)?;
        match name {
            REDIRECT => inherited.redirect.push(listener),
            ADMIN => inherited.admin = Some(listener),
            other => return Err(HandoverFailed::UnknownName(other.to_owned())),
        }
    }
    if inherited.redirect.is_empty() {
        return Err(HandoverFailed::NoRedirect);
    }
    Ok(inherited)
}

/// What starting a successor needs: the binary on disk and this process's arguments.
#[derive(Debug, Clone)]
pub struct Upgrade {
    /// The binary to start (the path this process was started from, which an upgrade replaced).
    pub exe: PathBuf,
    /// Its arguments, this process's own.
    pub args: Vec<OsString>,
    /// How long the new process has to say it is ready.
    pub timeout: Duration,
    /// Variables of this process's environment the new one must not inherit (those it read
    /// from its settings file, which the new one reads afresh).
    pub env_remove: Vec<String>,
}

impl Upgrade {
    /// This process's own binary path and arguments, read at start.
    pub fn of_this_process(timeout: Duration, env_remove: &[String]) -> Option<Upgrade> {
        let exe = started_from()?;
        Some(Upgrade { exe, args: std::env::args_os().skip(1).collect(), timeout, env_remove: env_remove.to_vec() })
    }

    /// Starts the new process, passes it `listeners` (each with its name, [`REDIRECT`] or
    /// [`ADMIN`]) and waits until it says it serves: its pid. A process that fails to start,
    /// exits, hangs up or is not ready within the timeout is stopped (SIGTERM, then SIGKILL),
    /// and the error says why; this process's listeners are untouched either way.
    pub async fn start_successor(&self, listeners: &[(BorrowedFd<'_>, &str)]) -> Result<u32, UpgradeError> {
        let name = format!("couchlink-upgrade-{}-{:016x}", std::process::id(), rand::random::<u64>());
        let address = UnixAddr::from_abstract_name(name.as_bytes()).map_err(UpgradeError::Socket)?;
        let socket = std::os::unix::net::UnixListener::bind_addr(&address).map_err(UpgradeError::Socket)?;
        socket.set_nonblocking(true).map_err(UpgradeError::Socket)?;
        let socket = tokio::net::UnixListener::from_std(socket).map_err(UpgradeError::Socket)?;
        let mut command = tokio::process::Command::new(&self.exe);
        for key in &self.env_remove {
            command.env_remove(key);
        }
        let child = command
            .args(&self.args)
            .env(UPGRADE_SOCKET_VAR, &name)
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env_remove("LISTEN_FDNAMES")
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|source| UpgradeError::Spawn { exe: self.exe.clone(), source })?;
        let mut child = Stopper(Some(child));
        let pid = child.0.as_ref().and_then(|c| c.id()).unwrap_or(0);
        let outcome = tokio::time::timeout(self.timeout, async {
            let child = child.0.as_mut().expect("held until the end");
            let mut stream = tokio::select! {
                stream = accept_from(&socket, pid) => stream,
                status = child.wait() => return Err(exited(pid, status)),
            };
            send_listeners(&mut stream, listeners).await.map_err(|source| UpgradeError::Send { pid, source })?;
            tokio::select! {
                answer = read_line(&mut stream) => {
                    if answer == b"ready\n" { Ok(()) } else { Err(UpgradeError::HungUp { pid }) }
                }
                status = child.wait() => Err(exited(pid, status)),
            }
        })
        .await
        .unwrap_or(Err(UpgradeError::TimedOut { pid, timeout: self.timeout }));
        match outcome {
            Ok(()) => {
                // Ready: it lives on, beyond this process.
                child.0.take();
                Ok(pid)
            }
            Err(error) => {
                child.stop().await;
                Err(error)
            }
        }
    }
}

/// The path this process was started from, as it was named (`argv[0]`, found in `PATH` when it
/// names no folder), not where it leads: an operator who points a symlink at a new build, or
/// installs one over the path, upgrades to that. `/proc/self/exe` would name the old file.
fn started_from() -> Option<PathBuf> {
    let named = PathBuf::from(std::env::args_os().next()?);
    if named.components().count() > 1 {
        return std::path::absolute(named).ok();
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path).map(|dir| dir.join(&named)).find(|candidate| candidate.is_file())
    });
    found.or_else(|| std::env::current_exe().ok())
}

/// The first connection on `socket` from process `pid` (anyone else is turned away: the
/// abstract namespace has no file permissions).
async fn accept_from(socket: &tokio::net::UnixListener, pid: u32) -> tokio::net::UnixStream {
    let mut backoff = crate::http::accept::Backoff::default();
    loop {
        let stream = match socket.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                let (say, pause) = backoff.failed();
                if say {
                    tracing::warn!("upgrade: cannot accept on the handover socket ({e}): trying again, backing off");
                }
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        backoff.succeeded();
        match rustix::net::sockopt::socket_peercred(&stream) {
            Ok(cred) if rustix::process::Pid::as_raw(Some(cred.pid)) as u32 == pid => return stream,
            Ok(cred) => tracing::warn!(
                "upgrade: refused a connection to the handover socket from pid {} (expected {pid})",
                rustix::process::Pid::as_raw(Some(cred.pid))
            ),
            Err(e) => tracing::warn!("upgrade: cannot tell who connected to the handover socket: {e}"),
        }
    }
}

/// What `stream` says up to its first newline (or its end, or 64 bytes).
async fn read_line(stream: &mut tokio::net::UnixStream) -> Vec<u8> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 64 && !line.ends_with(b"\n") {
        match stream.read(&mut byte).await {
            Ok(1) => line.push(byte[0]),
            _ => break,
        }
    }
    line
}

async fn send_listeners(
    stream: &mut tokio::net::UnixStream,
    listeners: &[(BorrowedFd<'_>, &str)],
) -> std::io::Result<()> {
    let mut greeting = GREETING.to_owned();
    for (_, name) in listeners {
        greeting.push(' ');
        greeting.push_str(name);
    }
    greeting.push('\n');
    if listeners.len() > MAX_SOCKETS {
        return Err(std::io::Error::other(format!(
            "{} listeners: Linux passes at most {MAX_SOCKETS} descriptors in one message (SCM_MAX_FD); serve on \
             fewer threads (COUCHLINK_THREADS) to upgrade in place",
            listeners.len()
        )));
    }
    let fds: Vec<BorrowedFd<'_>> = listeners.iter().map(|(fd, _)| *fd).collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("too many sockets for one message"));
    }
    loop {
        stream.writable().await?;
        match rustix::net::sendmsg(
            stream.as_fd(),
            &[IoSlice::new(greeting.as_bytes())],
            &mut control,
            rustix::net::SendFlags::NOSIGNAL,
        ) {
            Ok(sent) if sent == greeting.len() => return Ok(()),
            Ok(sent) => return Err(std::io::Error::other(format!("sent {sent} of {} bytes", greeting.len()))),
            Err(rustix::io::Errno::AGAIN) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

fn exited(pid: u32, status: std::io::Result<std::process::ExitStatus>) -> UpgradeError {
    let status = match status {
        Ok(status) => status.to_string(),
        Err(e) => format!("cannot tell ({e})"),
    };
    UpgradeError::Exited { pid, status }
}

/// A new process that is not (yet) the one serving: stopped when the upgrade fails, or when
/// the upgrade itself is abandoned (this process stopping meanwhile).
struct Stopper(Option<tokio::process::Child>);

impl Stopper {
    /// SIGTERM, so that whatever it accepted is answered; SIGKILL if it does not end in time.
    async fn stop(&mut self) {
        let Some(mut child) = self.0.take() else { return };
        if let Some(pid) = child.id().and_then(|id| rustix::process::Pid::from_raw(id as i32)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        if tokio::time::timeout(STOP_TIMEOUT, child.wait()).await.is_err() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.start_kill();
        }
    }
}

/// Tells systemd (when it started this process with `NOTIFY_SOCKET`) how the service stands;
/// nothing without it. A failure is only logged: serving never depends on it.
pub fn notify(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!("cannot notify systemd: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The descriptors one message from `stream` carries.
    fn received(stream: &UnixStream) -> usize {
        let mut text = vec![0u8; 8192];
        let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        rustix::net::recvmsg(stream, &mut [IoSliceMut::new(&mut text)], &mut control, RecvFlags::CMSG_CLOEXEC).unwrap();
        control.drain().map(|m| if let RecvAncillaryMessage::ScmRights(fds) = m { fds.count() } else { 0 }).sum()
    }

    #[tokio::test]
    async fn as_many_listeners_as_linux_passes_in_one_message_are_handed_over_and_no_more() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (ours, theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let mut ours = tokio::net::UnixStream::from_std(ours).unwrap();
        let all: Vec<(BorrowedFd<'_>, &str)> = (0..MAX_SOCKETS).map(|_| (listener.as_fd(), REDIRECT)).collect();
        send_listeners(&mut ours, &all).await.unwrap();
        assert_eq!(received(&theirs), 253, "Linux's SCM_MAX_FD");
        let one_more: Vec<_> = all.iter().copied().chain([(listener.as_fd(), ADMIN)]).collect();
        let refused = send_listeners(&mut ours, &one_more).await.unwrap_err();
        assert!(refused.to_string().contains("at most 253 descriptors"), "{refused}");
    }
}
