//! A loopback HTTP server answering JSON, for tests of outbound calls: an
//! HTTP signal source and an external rec store. Each `METHOD /path` gets
//! the answer set for it (404 otherwise); a `POST /v1/rx/recs` without one
//! is taken as a store insert and answered `201 {"id": "ext-N"}`. Every
//! request is recorded with its headers.

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Lowercase names.
    pub headers: HashMap<String, String>,
    pub body: String,
}

type Answers = Arc<Mutex<HashMap<String, (u16, String, Duration)>>>;

pub struct JsonServer {
    /// `host:port`.
    pub addr: String,
    answers: Answers,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl JsonServer {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let answers: Answers = Arc::new(Mutex::new(HashMap::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (a, r) = (answers.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (a, r) = (a.clone(), r.clone());
                std::thread::spawn(move || serve(stream, &a, &r));
            }
        });
        Self { addr, answers, requests }
    }

    /// Answers `method path` with `status` and `body`.
    pub fn set(&self, method: &str, path: &str, status: u16, body: &serde_json::Value) {
        self.set_delayed(method, path, status, body, Duration::ZERO);
    }

    /// Answers `method path` after `delay` (a slow tool, a slow source).
    pub fn set_delayed(&self, method: &str, path: &str, status: u16, body: &serde_json::Value, delay: Duration) {
        self.answers.lock().unwrap().insert(format!("{method} {path}"), (status, body.to_string(), delay));
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn requests(&self, method: &str, path: &str) -> Vec<Recorded> {
        self.requests.lock().unwrap().iter().filter(|r| r.method == method && r.path == path).cloned().collect()
    }
}

fn serve(
    mut s: std::net::TcpStream,
    answers: &Mutex<HashMap<String, (u16, String, Duration)>>,
    log: &Mutex<Vec<Recorded>>,
) {
    let Some((head, body)) = crate::wire::read_request(&mut s) else { return };
    let mut lines = head.lines();
    let first: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
    let (method, path) =
        (first.first().copied().unwrap_or("").to_string(), first.get(1).copied().unwrap_or("").to_string());
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let inserts = {
        let mut l = log.lock().unwrap();
        l.push(Recorded { method: method.clone(), path: path.clone(), headers, body });
        l.iter().filter(|r| r.method == "POST" && r.path == "/v1/rx/recs").count()
    };
    let answer = answers.lock().unwrap().get(&format!("{method} {path}")).cloned();
    let (status, body) = match answer {
        Some((status, body, delay)) => {
            std::thread::sleep(delay);
            (status, body)
        }
        None if method == "POST" && path == "/v1/rx/recs" => (201, format!("{{\"id\": \"ext-{inserts}\"}}")),
        None => (404, "{\"error\": {\"code\": \"not-found\", \"message\": \"nothing here\"}}".into()),
    };
    let _ = write!(
        s,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}
