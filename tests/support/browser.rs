//! Headless Chromium driven over WebDriver (chromedriver), for the targets that test what a
//! person sees in a browser (`fauxton`, `console`). Without Chromium and chromedriver the test
//! fails, naming the packages.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

use super::apache::free_port;
use super::eventually::{eventually, Text};

/// Headless Chromium behind chromedriver, with a screenshot folder.
pub struct Browser {
    driver: Child,
    /// The WebDriver session.
    pub client: Client,
    /// Where the screenshots go.
    pub shots: PathBuf,
    taken: usize,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium; screenshots go to `target/{shots}/`.
    pub async fn start(shots: &str) -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("this test needs chromedriver and Chromium (apt-get install chromium chromium-driver): {e}")
            });
        eventually("chromedriver listens", Duration::from_secs(10), || async {
            std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())
        })
        .await;
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,800"]}),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| panic!("chromedriver could not start Chromium (apt-get install chromium): {e}"));
        let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target").join(shots);
        // Only this run's screenshots: docs take theirs from here.
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        Browser { driver, client, shots, taken: 0 }
    }

    /// Saves what the browser shows as `NN-name.png`.
    pub async fn shot(&mut self, name: &str) {
        self.taken += 1;
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{:02}-{name}.png", self.taken)), png).unwrap();
    }

    /// Polls `css` until it is there (at most 10 s).
    pub async fn find(&self, css: &str) -> fantoccini::elements::Element {
        let what = format!("{css} appears");
        eventually(&what, Duration::from_secs(10), || async {
            match self.client.find(Locator::Css(css)).await {
                Ok(element) => Ok(element),
                Err(_) => Err(Text(self.page().await)),
            }
        })
        .await
    }

    /// Where the browser is and what its page says, for a failure's message.
    pub async fn page(&self) -> String {
        let (url, body) = (self.client.current_url().await, self.client.find(Locator::Css("body")).await);
        let text = match body {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        format!("at {url:?} the page says:\n{text}")
    }

    /// Clicks what `css` finds (waiting for it as [`Browser::find`] does).
    pub async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap_or_else(|e| panic!("clicking {css}: {e}"));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
