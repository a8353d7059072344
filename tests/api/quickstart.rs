//! The README's first command, `couchdb/quickstart.sh`, as a newcomer meets it: a port already
//! taken is named before anything is built, and one SIGTERM stops everything it started.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::apache::free_ports;
use crate::support::process::wait_within;
use crate::support::*;

/// The quick start with `args`; its stderr lines arrive on the receiver.
fn quickstart(args: &[String], env: &[(&str, &Path)]) -> (Child, mpsc::Receiver<String>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("couchdb/quickstart.sh");
    let mut command = Command::new(script);
    command.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("the quick start runs");
    let (tx, rx) = mpsc::channel();
    for stream in [
        Box::new(child.stderr.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stdout.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                eprintln!("[quickstart] {line}");
                let _ = tx.send(line);
            }
        });
    }
    (child, rx)
}

/// Waits (at most `limit`) for `child` to exit; its exit code.
fn exit_code_within(child: &mut Child, limit: Duration) -> Option<i32> {
    wait_within(child, limit).unwrap_or_else(|()| panic!("the quick start still runs after {limit:?}")).code()
}

fn ports_with_console(couchdb: u16, port: u16, admin: u16, console: u16) -> Vec<String> {
    [
        "--couchdb-port",
        &couchdb.to_string(),
        "--port",
        &port.to_string(),
        "--admin-port",
        &admin.to_string(),
        "--console-port",
        &console.to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}

#[tokio::test]
async fn a_port_already_in_use_is_named_before_anything_is_built() {
    // The test's own CouchDB API plays the one a user already runs on 5984.
    let db = TestDb::new().await;
    let taken: u16 = db.couch.url.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap();
    let [port, admin, console] = free_ports();
    let (mut child, lines) = quickstart(&ports_with_console(taken, port, admin, console), &[]);
    // Building would take far longer (and block on the test's own build directory).
    let code =
        tokio::task::spawn_blocking(move || exit_code_within(&mut child, Duration::from_secs(20))).await.unwrap();
    let output: Vec<String> = lines.try_iter().collect();
    let output = output.join("\n");
    assert_eq!(code, Some(1), "{output}");
    assert!(output.contains(&format!("port {taken} (the local CouchDB) is already in use")), "{output}");
    assert!(output.contains("A CouchDB API answers there") && output.contains("--couchdb-port"), "{output}");
    assert!(!output.contains("Compiling") && !output.contains("Finished"), "it built first: {output}");
}

#[tokio::test]
async fn one_sigterm_stops_everything_the_quick_start_started_and_leaves_nothing_behind() {
    let [couchdb, port, admin, console] = free_ports();
    let tmp = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut args = ports_with_console(couchdb, port, admin, console);
    args.extend(["--data".to_owned(), data.path().display().to_string()]);
    let bin = Path::new(env!("CARGO_BIN_EXE_couchlink"));
    let (mut child, lines) =
        quickstart(&args, &[("COUCHLINK_BIN", bin), ("TMPDIR", tmp.path()), ("COUCHLINK_LOG_DIR", logs.path())]);
    let mut output = Vec::new();
    let serving = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if let Ok(line) = lines.recv_timeout(Duration::from_millis(100)) {
                let done = line.contains("serving redirects on");
                output.push(line);
                if done {
                    return (true, output, lines);
                }
            }
        }
        (false, output, lines)
    });
    let (served, mut output, lines) = serving.await.unwrap();
    assert!(served, "the quick start never served: {output:?}");

    // The README's example works against it.
    let created = http()
        .put(format!("http://127.0.0.1:{couchdb}/links/H83if"))
        .basic_auth("editor", Some("editor"))
        .json(&json!({"url": "https://example.com/"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let r = http().get(format!("http://127.0.0.1:{port}/H83if")).send().await.unwrap();
    assert_eq!(r.status(), 302);

    // The console it prints: its page, and the editor's login and list through it (pouchdb-server
    // speaks `_session` and JavaScript views as CouchDB 3 does).
    assert!(output.iter().any(|l| l.contains(&format!("http://127.0.0.1:{console}/"))), "{output:?}");
    let base = format!("http://127.0.0.1:{console}");
    let page = eventually("the console answers", Duration::from_secs(10), || async {
        http().get(format!("{base}/")).send().await.map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("couchlink console"));
    let login = http()
        .post(format!("{base}/couch/_session"))
        .header("origin", &base)
        .json(&json!({"name": "editor", "password": "editor"}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let session = login.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let recent: serde_json::Value = http()
        .get(format!("{base}/couch/links/_design/console/_view/recent?descending=true&include_docs=true&limit=10"))
        .header("cookie", session)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(recent["rows"][0]["id"], "H83if", "{recent}");

    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let code =
        tokio::task::spawn_blocking(move || exit_code_within(&mut child, Duration::from_secs(30))).await.unwrap();
    output.extend(lines.try_iter());
    assert_eq!(code, Some(143), "stopped by SIGTERM: {output:?}");
    for p in [couchdb, port, admin, console] {
        assert!(std::net::TcpStream::connect(("127.0.0.1", p)).is_err(), "port {p} still answers: {output:?}");
    }
    let litter: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(litter.is_empty(), "litter left in TMPDIR: {litter:?}");
    let log: String =
        std::fs::read_dir(logs.path()).unwrap().map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect();
    assert_eq!(log.lines().count(), 1, "the redirect was logged before the exit");
    // The stand-in's own output goes to its file, not to the newcomer's terminal.
    assert!(data.path().join("couchdb.log").exists());
    assert!(!output.iter().any(|l| l.contains("(node:") || l.contains("pouchdb")), "{output:?}");
}
