//! A serving process's life, one place for `serve`, `console` and `agent`: its listeners taken
//! from systemd or from the process it replaces (else bound), the signals it answers (SIGTERM
//! and SIGINT: stop; SIGUSR2: upgrade in place), the hand-over to its successor, how its
//! listeners stop (an [`Ending`], turned into what the accept loop does), its pid file and
//! systemd's notifications (docs/operations.md, "Restarts and upgrades"). The sockets' transport
//! is [`crate::handover`]; [`crate::http`] knows only "stop accepting" and "close after this
//! response".

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::oneshot;

use crate::errors::Causes;
use crate::handover::{self, Giver, Predecessor, Upgrade};
use crate::http::accept::{self, Limits, Service, Stop};

/// How a process's listeners stop, and its connections end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The socket closes with this process: connections the kernel already completed are
    /// accepted and answered first, since closing a listener resets what waits in its queue.
    /// Then the lame-duck second, and idle connections are closed.
    Close,
    /// systemd holds the socket, and starts the next process once this one has exited: the
    /// queue is left to it, and the drain is as short as with `Close`.
    Restart,
    /// A successor serves from the same socket already: the queue is left to it, and no
    /// connection is closed earlier than it would have been anyway. Each ends after its next
    /// response (`Connection: close`) or at its own idle timeout, within the drain.
    Upgrade,
}

impl Ending {
    /// A stop, as systemd holds this process's sockets or not.
    pub fn stopping(socket_activated: bool) -> Ending {
        if socket_activated {
            Ending::Restart
        } else {
            Ending::Close
        }
    }

    /// What the accept loop does. With a successor serving, waiting costs nobody anything:
    /// idle connections are left to their own idle timeout, which clients already live with
    /// (closing one early would race a request its client may be sending; browsers retry such
    /// a request, wrk and many scripts do not). Without one, nobody accepts until this process
    /// exits, so idle connections are closed after the lame-duck second.
    pub fn stop(self) -> Stop {
        match self {
            Ending::Close => Stop { answer_queue: true, lame_duck: accept::LAME_DUCK },
            Ending::Restart => Stop { answer_queue: false, lame_duck: accept::LAME_DUCK },
            Ending::Upgrade => Stop { answer_queue: false, lame_duck: Duration::MAX },
        }
    }
}

impl From<Ending> for Stop {
    fn from(ending: Ending) -> Stop {
        ending.stop()
    }
}

/// Completes at SIGTERM or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    let term = signal(SignalKind::terminate());
    let Ok(mut term) = term else {
        // Without a SIGTERM handler, Ctrl-C still works.
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// [`shutdown_signal`], caught from now on (call it within a runtime): a SIGTERM that comes
/// before the wait is first polled, while a first round of work runs, completes it instead of
/// ending the process by its default action (seen: `couchlink clicks --every` killed by a
/// SIGTERM sent while its first round still ran, exit "signal 15" instead of 0).
pub fn shutdown_signal_caught() -> impl Future<Output = ()> {
    let caught = [SignalKind::terminate(), SignalKind::interrupt()].map(|kind| signal(kind).ok());
    async move {
        let [term, int] = caught;
        let wait = |s: Option<Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                // Not caught: that signal's default action stands, and this waits for the other.
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = wait(term) => {}
            () = wait(int) => {}
        }
    }
}

/// SIGUSR2 (an upgrade), caught from the start: its default is to end the process.
pub fn catch_upgrades() -> Option<Signal> {
    signal(SignalKind::user_defined2()).ok()
}

/// Copies of `listeners` (each with its hand-over name) for a successor, made only when one
/// can be started: a copy left open keeps a closed listener's queue filling until exit.
pub fn copies_for_successor<'a>(
    can_upgrade: bool,
    listeners: impl IntoIterator<Item = (std::os::fd::BorrowedFd<'a>, &'static str)>,
) -> Vec<(OwnedFd, &'static str)> {
    if !can_upgrade {
        return Vec::new();
    }
    listeners.into_iter().filter_map(|(fd, name)| fd.try_clone_to_owned().ok().map(|fd| (fd, name))).collect()
}

/// On each SIGUSR2, one upgrade: `prepare` awaited (`serve` writes its cache snapshot, which the
/// new process starts from), the binary on disk started with `sockets`, and `upgraded` told its
/// pid once it serves. A failed upgrade leaves this process serving, and says why (log, and
/// systemd's status).
pub async fn upgrade_on_signal<F: Future<Output = ()>>(
    mut signals: Signal,
    upgrade: Option<Upgrade>,
    sockets: Vec<(OwnedFd, &'static str)>,
    prepare: impl Fn() -> F,
    upgraded: oneshot::Sender<u32>,
) {
    loop {
        if signals.recv().await.is_none() {
            return;
        }
        let Some(upgrade) = &upgrade else {
            tracing::warn!("SIGUSR2: this process cannot upgrade itself (its binary's path is unknown)");
            continue;
        };
        tracing::info!("SIGUSR2: upgrading to {}", upgrade.exe.display());
        handover::notify(&[sd_notify::NotifyState::Status("upgrading")]);
        prepare().await;
        let passed: Vec<_> = sockets.iter().map(|(fd, name)| (fd.as_fd(), *name)).collect();
        match upgrade.start_successor(&passed).await {
            Ok(pid) => {
                tracing::info!("upgrade: pid {pid} serves now; this process stops accepting and drains");
                let status = format!("upgraded: pid {pid} serves");
                handover::notify(&[sd_notify::NotifyState::MainPid(pid), sd_notify::NotifyState::Status(&status)]);
                let _ = upgraded.send(pid);
                return;
            }
            Err(e) => {
                let why = Causes(&e).to_string();
                tracing::error!("upgrade failed, still serving as pid {}: {why}", std::process::id());
                let status = format!("serving; the last upgrade failed: {why}");
                handover::notify(&[sd_notify::NotifyState::Status(&status)]);
            }
        }
        // One upgrade at a time: a SIGUSR2 that came during this one is not a second one.
        while let Some(Some(())) = signals.recv().now_or_never() {
            tracing::warn!("SIGUSR2 during an upgrade: ignored");
        }
    }
}

/// This process serves: its pid file written, the process it replaces told (which then stops
/// accepting and drains), systemd told.
pub fn serving(pid_file: Option<&Path>, predecessor: Option<Predecessor>) {
    if let Some(pid_file) = pid_file {
        if let Err(e) = write_pid_file(pid_file) {
            tracing::warn!("cannot write the pid file {}: {e}", pid_file.display());
        }
    }
    if let Some(predecessor) = predecessor {
        if let Err(e) = predecessor.ready() {
            tracing::warn!("cannot tell the process upgraded that this one serves: {e}");
        }
    }
    handover::notify(&[sd_notify::NotifyState::Ready, sd_notify::NotifyState::Status("serving")]);
}

/// This process has stopped: its pid file removed, unless a successor wrote its own meanwhile.
pub fn stopped(pid_file: Option<&Path>) {
    if let Some(pid_file) = pid_file {
        if std::fs::read_to_string(pid_file).is_ok_and(|pid| pid.trim() == std::process::id().to_string()) {
            let _ = std::fs::remove_file(pid_file);
        }
    }
}

/// Writes this process's pid to `path`, whole or not at all (a new file renamed over it).
fn write_pid_file(path: &Path) -> std::io::Result<()> {
    let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&temporary, format!("{}\n", std::process::id()))?;
    std::fs::rename(&temporary, path)
}

/// Why a process with one listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The sockets passed by systemd or the process replaced cannot be used.
    #[error(transparent)]
    Inherit(#[from] handover::InheritError),
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
}

/// A serving process with one listener (the console, the DIDComm agent): taken over or bound,
/// served until SIGTERM or SIGINT, or handed to the process a SIGUSR2 starts, as `serve` does
/// with its own.
pub struct OneListener {
    listener: std::net::TcpListener,
    giver: Option<Giver>,
    upgrade: Option<Upgrade>,
    pid_file: Option<PathBuf>,
}

impl OneListener {
    /// The listener passed by the process this one upgrades or by systemd (its one socket),
    /// else `addr` bound. `upgrade` says how to start a successor (none: SIGUSR2 is refused).
    /// Call it before any thread starts (taking the listener changes the environment).
    pub fn take_or_bind(
        addr: SocketAddr,
        upgrade: Option<Upgrade>,
        pid_file: Option<PathBuf>,
    ) -> Result<OneListener, ListenError> {
        if let Some(inherited) = handover::take_inherited()? {
            let listener = inherited.redirect.into_iter().next().expect("at least one socket is passed");
            return Ok(OneListener { listener, giver: Some(inherited.giver), upgrade, pid_file });
        }
        let listener = std::net::TcpListener::bind(addr).map_err(|source| ListenError::Bind { addr, source })?;
        listener.set_nonblocking(true).map_err(|source| ListenError::Bind { addr, source })?;
        Ok(OneListener { listener, giver: None, upgrade, pid_file })
    }

    /// `listener` as it is: no upgrade, no pid file (tests, and embedding).
    pub fn plain(listener: std::net::TcpListener) -> OneListener {
        OneListener { listener, giver: None, upgrade: None, pid_file: None }
    }

    /// Where it listens.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// How it was come by, for the start's message: `""`, or where the socket came from.
    pub fn origin(&self) -> &'static str {
        match self.giver {
            Some(Giver::Predecessor(_)) => " (socket taken over from the process upgraded)",
            Some(Giver::Systemd) => " (socket from systemd)",
            None => "",
        }
    }

    /// Serves `service` until `shutdown` completes (then stops as systemd holds the socket or
    /// not) or a successor serves (then leaves it the queue and drains).
    pub async fn serve<S: Service>(
        self,
        service: Arc<S>,
        limits: Limits,
        drain: Duration,
        shutdown: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let OneListener { listener, giver, upgrade, pid_file } = self;
        // Caught before this process says it serves, so no upgrade is asked of it sooner.
        let upgrades = catch_upgrades();
        let (predecessor, socket_activated) = match giver {
            Some(Giver::Predecessor(p)) => (Some(p), false),
            Some(Giver::Systemd) => (None, true),
            None => (None, false),
        };
        let copies =
            copies_for_successor(upgrade.is_some() && upgrades.is_some(), [(listener.as_fd(), handover::REDIRECT)]);
        let (upgraded, upgraded_rx) = oneshot::channel();
        let upgrading =
            upgrades.map(|signals| tokio::spawn(upgrade_on_signal(signals, upgrade, copies, || async {}, upgraded)));
        let ending = async move {
            tokio::select! {
                () = shutdown => {
                    // A stop during an upgrade abandons it (the new process is stopped).
                    if let Some(upgrading) = upgrading {
                        upgrading.abort();
                    }
                    handover::notify(&[sd_notify::NotifyState::Stopping]);
                    Ending::stopping(socket_activated)
                }
                Ok(_) = upgraded_rx => Ending::Upgrade,
            }
        };
        let listener = tokio::net::TcpListener::from_std(listener)?;
        // The socket listens already: what arrives meanwhile waits in its queue.
        serving(pid_file.as_deref(), predecessor);
        accept::run(listener, service, limits, ending, drain).await;
        stopped(pid_file.as_deref());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stop_without_systemd_answers_the_queue_and_only_an_upgrade_waits_out_the_drain() {
        assert_eq!(Ending::Close.stop(), Stop { answer_queue: true, lame_duck: accept::LAME_DUCK });
        assert_eq!(Ending::Restart.stop(), Stop { answer_queue: false, lame_duck: accept::LAME_DUCK });
        assert_eq!(Ending::Upgrade.stop(), Stop { answer_queue: false, lame_duck: Duration::MAX });
        assert_eq!(Ending::stopping(true), Ending::Restart);
        assert_eq!(Ending::stopping(false), Ending::Close);
    }

    #[test]
    fn a_pid_file_is_written_whole_and_removed_only_by_its_process() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("couchlink.pid");
        serving(Some(&file), None);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), format!("{}\n", std::process::id()));
        std::fs::write(&file, "1\n").unwrap();
        stopped(Some(&file));
        assert!(file.exists(), "a successor's pid file is left");
        serving(Some(&file), None);
        stopped(Some(&file));
        assert!(!file.exists());
    }
}
