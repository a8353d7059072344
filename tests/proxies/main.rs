//! couchlink behind a real nginx, configured with the shipped `deploy/nginx-couchlink.conf`:
//! a client cannot forge the address it is logged with; and CouchDB behind nginx under a path
//! prefix, which `serve` and the console both reach. Needs nginx (`apt-get install
//! nginx-light`); run as `cargo test --test proxies` (.ci/run runs it).

#[path = "../support/mod.rs"]
mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::process::tool;
use support::*;

/// nginx on a free loopback port, proxying to `upstream` with the shipped location block.
struct Nginx {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Nginx {
    fn start(upstream: std::net::SocketAddr) -> Nginx {
        Nginx::start_shipped("deploy/nginx-couchlink.conf", "127.0.0.1:8080", upstream)
    }

    /// nginx with the shipped location block `file`, its `proxy_pass` to `shipped_upstream`
    /// pointed at `upstream`.
    fn start_shipped(file: &str, shipped_upstream: &str, upstream: std::net::SocketAddr) -> Nginx {
        let shipped = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
        let pass = format!("proxy_pass http://{shipped_upstream};");
        assert!(shipped.contains(&pass), "{file} names the default port");
        Nginx::start_with(&shipped.replace(shipped_upstream, &upstream.to_string()))
    }

    /// nginx with `location` (its blocks) as its one server's.
    fn start_with(location: &str) -> Nginx {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let d = dir.path().display();
        let conf = format!(
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\n\
             http {{\n access_log off;\n client_body_temp_path {d};\n proxy_temp_path {d};\n\
             fastcgi_temp_path {d};\n uwsgi_temp_path {d};\n scgi_temp_path {d};\n\
             server {{\n  listen 127.0.0.1:{port};\n  server_name 0x1f.ie;\n{location}\n }}\n}}\n"
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let mut command = tool("nginx", "nginx-light");
        command.arg("-c").arg(dir.path().join("nginx.conf")).stdout(Stdio::null()).stderr(Stdio::inherit());
        let child = command.spawn().expect("nginx starts");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "nginx never listened on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx { child, port, _dir: dir }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn behind_nginx_a_client_cannot_forge_its_logged_address() {
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.trusted_proxies = "127.0.0.1".parse().unwrap();
    }))
    .await;
    let nginx = Nginx::start(app.addr);
    // The client comes from 127.0.0.2: an address couchlink does not trust, as a client on the
    // internet is.
    let client = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = format!("http://127.0.0.1:{}/Nopee", nginx.port);
    let forgeries: [&[(&str, &str)]; 4] = [
        &[],
        &[("forwarded", "for=203.0.113.66")],
        &[("forwarded", "for=unknown")],
        &[("x-forwarded-for", "203.0.113.66"), ("forwarded", "for=\"[2001:db8::66]\"")],
    ];
    for headers in forgeries {
        let mut request = client.get(&url).header("host", "0x1f.ie");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 404, "{headers:?}: couchlink answered through nginx");
    }
    let lines = app.wait_for_log_lines(forgeries.len()).await;
    for (line, headers) in lines.iter().zip(forgeries) {
        assert_eq!(line.split(' ').nth(1), Some("127.0.0.2"), "{headers:?} forged the logged address: {line}");
    }
}

#[tokio::test]
async fn behind_nginx_the_console_logs_in_and_refuses_writes_from_other_sites() {
    use couchlink::console::{Console, ConsoleSite};
    let db = TestDb::new().await;
    let mut couch = url::Url::parse(&db.couch.url).unwrap();
    couch.set_username("").unwrap();
    couch.set_password(None).unwrap();
    let site = ConsoleSite {
        db: db.name.clone(),
        public_url: couchlink::domain::PublicUrl::parse("https://0x1f.ie").unwrap(),
        clicks_db: None,
        history_db: None,
        editor_role: EDITOR_ROLE.into(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    tokio::spawn(couchlink::http::accept::run(
        listener,
        std::sync::Arc::new(Console::new(vec![site], couch, true).unwrap()),
        couchlink::http::accept::Limits::new(16, Duration::from_secs(10)),
        std::future::pending::<()>(),
        Duration::from_secs(1),
    ));
    let nginx = Nginx::start_shipped("deploy/nginx-console.conf", "127.0.0.1:8092", upstream);
    let origin = format!("http://127.0.0.1:{}", nginx.port);
    let client = http();

    let page = client.get(format!("{origin}/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("frame-ancestors 'none'"));

    let login = client
        .post(format!("{origin}/couch/_session"))
        .header("origin", &origin)
        .json(&serde_json::json!({"name": EDITOR.0, "password": EDITOR.1}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("; Secure"), "behind TLS the session cookie is Secure: {cookie}");
    let session = cookie.split(';').next().unwrap().to_owned();

    let link = serde_json::json!({"url": "https://example.com/", "inactive": false});
    let forged = client
        .put(format!("{origin}/couch/{}/Frged", db.name))
        .header("origin", "https://evil.example")
        .header("cookie", &session)
        .json(&link)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert_eq!(db.rev("Frged").await, None, "the forged write never reached CouchDB");
    let own = client
        .put(format!("{origin}/couch/{}/Owned", db.name))
        .header("origin", &origin)
        .header("cookie", &session)
        .json(&link)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 201, "{:?}", own.text().await);
}

/// CouchDB under a path prefix: nginx passes `/db/...` to CouchDB as `/...`, the path as the
/// client sent it (escapes kept: a history entry's `H83if%2F...` must not become a path), as
/// CouchDB's documentation configures it. `serve` and the console, both given
/// `http://127.0.0.1:N/db/`, ask every URL under it: the console's login, its list and a save,
/// and the proxy serving what the console saved.
#[tokio::test]
async fn behind_nginx_under_a_path_prefix_couchdb_serves_both_the_proxy_and_the_console() {
    use couchlink::console::{Console, ConsoleSite};
    let db = TestDb::new().await;
    let couch = url::Url::parse(&db.couch.url).unwrap();
    let couchdb = format!("{}:{}", couch.host_str().unwrap(), couch.port_or_known_default().unwrap());
    let nginx = Nginx::start_with(&format!(
        "  location /db/ {{\n   rewrite ^ $request_uri;\n   rewrite ^/db(/.*) $1 break;\n   \
         proxy_pass http://{couchdb}$uri;\n  }}\n"
    ));
    let prefixed = format!("http://127.0.0.1:{}/db/", nginx.port);
    // Nothing of CouchDB answers outside the prefix: a URL that dropped it would be refused.
    let outside = http().get(format!("http://127.0.0.1:{}/_session", nginx.port)).send().await.unwrap();
    assert_eq!(outside.status(), 404);
    db.put_link("Prfx1", serde_json::json!({"url": "https://example.com/first", "title": "First"})).await;

    let site = ConsoleSite {
        db: db.name.clone(),
        public_url: couchlink::domain::PublicUrl::parse("https://0x1f.ie").unwrap(),
        clicks_db: None,
        history_db: None,
        editor_role: EDITOR_ROLE.into(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let console = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(couchlink::http::accept::run(
        listener,
        std::sync::Arc::new(Console::new(vec![site], url::Url::parse(&prefixed).unwrap(), false).unwrap()),
        couchlink::http::accept::Limits::new(16, Duration::from_secs(10)),
        std::future::pending::<()>(),
        Duration::from_secs(1),
    ));
    let client = http();
    let login = client
        .post(format!("{console}/couch/_session"))
        .header("origin", &console)
        .json(&serde_json::json!({"name": EDITOR.0, "password": EDITOR.1}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200, "the login: {:?}", login.text().await);
    let session = login.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let get = |path: String| client.get(format!("{console}/{path}")).header("cookie", &session).send();
    let me: serde_json::Value = get("couch/_session".into()).await.unwrap().json().await.unwrap();
    assert_eq!(me["userCtx"]["name"], EDITOR.0, "{me}");
    let sites: serde_json::Value = get("console.json".into()).await.unwrap().json().await.unwrap();
    assert_eq!(sites["sites"][0]["db"], db.name.as_str(), "{sites}");
    let list =
        get(format!("couch/{}/_design/console/_view/recent?descending=true&include_docs=true&limit=51", db.name))
            .await
            .unwrap();
    assert_eq!(list.status(), 200);
    let list: serde_json::Value = list.json().await.unwrap();
    let ids: Vec<&str> = list["rows"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["Prfx1"], "{list}");
    assert_eq!(list["rows"][0]["doc"]["title"], "First");

    let saved = client
        .put(format!("{console}/couch/{}/Prfx2", db.name))
        .header("origin", &console)
        .header("cookie", &session)
        .json(&serde_json::json!({"url": "https://example.com/second", "inactive": false,
            "edit": {"by": EDITOR.0, "at": "2026-12-04T10:00:00.000Z"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(saved.status(), 201, "the save: {:?}", saved.text().await);
    assert!(db.rev("Prfx2").await.is_some(), "written to CouchDB");

    let app = spawn_app_on(db, move |c| c.couch.url = prefixed).await;
    app.wait_until_served("/Prfx1", 302, Some("https://example.com/first")).await;
    app.wait_until_served("/Prfx2", 302, Some("https://example.com/second")).await;
}
