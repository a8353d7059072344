//! A TCP relay between couchlink and CouchDB that a test can cut and restore, or slow down: a
//! network outage without stopping CouchDB.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Relays connections to one upstream `host:port`.
pub struct Relay {
    pub addr: SocketAddr,
    up: Arc<AtomicBool>,
    delay_ms: Arc<AtomicU64>,
    pumps: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// Connections open now, and the most open at once since [`Relay::reset_max_open`].
    open: Arc<(AtomicU64, AtomicU64)>,
    /// Bytes CouchDB sent through the relay.
    down: Arc<AtomicU64>,
}

impl Relay {
    /// A relay to `upstream` (`http://host:port`), up.
    pub async fn start(upstream: &str) -> Relay {
        let upstream = upstream.trim_start_matches("http://").trim_end_matches('/').to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Relay {
            addr: listener.local_addr().unwrap(),
            up: Arc::new(AtomicBool::new(true)),
            delay_ms: Default::default(),
            pumps: Default::default(),
            open: Default::default(),
            down: Default::default(),
        };
        let (up, delay, pumps, open, down) =
            (relay.up.clone(), relay.delay_ms.clone(), relay.pumps.clone(), relay.open.clone(), relay.down.clone());
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                if !up.load(Relaxed) {
                    continue; // dropped: the connection is reset
                }
                let open = open.clone();
                let now = open.0.fetch_add(1, Relaxed) + 1;
                open.1.fetch_max(now, Relaxed);
                let pumping = pump(client, upstream.clone(), delay.clone(), down.clone());
                let pump = tokio::spawn(async move {
                    // Counted down however the pump ends, aborted by `cut` included.
                    let _open = OpenConnection(open);
                    pumping.await;
                });
                pumps.lock().unwrap().push(pump);
            }
        });
        relay
    }

    /// The CouchDB URL through this relay.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, Relaxed);
        for pump in self.pumps.lock().unwrap().drain(..) {
            pump.abort();
        }
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.up.store(true, Relaxed);
    }

    /// Connections open through the relay now.
    pub fn open(&self) -> u64 {
        self.open.0.load(Relaxed)
    }

    /// The most connections open at once since the last reset.
    pub fn max_open(&self) -> u64 {
        self.open.1.load(Relaxed)
    }

    /// Starts counting the most open connections afresh.
    pub fn reset_max_open(&self) {
        self.open.1.store(self.open(), Relaxed);
    }

    /// Bytes CouchDB has sent through the relay (answers, headers included).
    pub fn bytes_down(&self) -> u64 {
        self.down.load(Relaxed)
    }

    /// Holds each request chunk for `ms` before passing it on.
    pub fn delay(&self, ms: u64) {
        self.delay_ms.store(ms, Relaxed);
    }
}

/// One connection through the relay, counted as open until dropped.
struct OpenConnection(Arc<(AtomicU64, AtomicU64)>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Relaxed);
    }
}

/// Copies bytes both ways until either side closes, delaying the client's chunks.
async fn pump(mut client: tokio::net::TcpStream, upstream: String, delay: Arc<AtomicU64>, down: Arc<AtomicU64>) {
    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { return };
    let (mut server_read, mut server_write) = server.into_split();
    let (mut client_read, mut client_write) = client.split();
    let upward = async {
        let mut buf = vec![0u8; 16384];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let ms = delay.load(Relaxed);
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let downward = async {
        let mut buf = vec![0u8; 16384];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            down.fetch_add(n as u64, Relaxed);
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        _ = upward => {}
        _ = downward => {}
    }
}
