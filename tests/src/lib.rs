//! The end-to-end harness: starts the `mneme` runner on a free loopback port
//! with a fresh state directory, and talks to it over HTTP.
//!
//! The hosted backend runs on the real PostgreSQL (127.0.0.1:5432) and Redis
//! (127.0.0.1:6379) of this machine: each run gets a new database and a new
//! key namespace. A missing service fails the test with the command that
//! starts it; nothing is skipped.

pub mod bench;
pub mod cello;
pub mod evals;
pub mod fake_model;
pub mod fault;
pub mod json_server;
pub mod otlp;
pub mod seed;
pub mod wire;

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const PG_ADMIN: &str = "host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable";
pub const REDIS_ADDR: &str = "127.0.0.1:6379";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name unique to this test run and call.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{prefix}_{}_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst), nanos % 100_000)
}

/// The lowercase words of `text`.
pub fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

pub fn mneme_bin() -> PathBuf {
    let bin = std::env::var_os("MNEME_BIN").map_or_else(|| repo_root().join("target/release/mneme"), PathBuf::from);
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test.sh, which builds the runner and the components",
        bin.display()
    );
    bin
}

/// The Spin-compatible runner the tests start instead of `mneme up`
/// (`MNEME_E2E_RUNNER`, for example a `spin` built from source): it gets
/// the same manifest, minus the `[application.tool.mneme]` table that Spin
/// ignores, the same runtime config and variables, and `mneme cron` beside
/// it runs the schedules, as a deployment on plain Spin does. `None` runs
/// the tests on `mneme up`.
pub fn foreign_runner() -> Option<PathBuf> {
    std::env::var_os("MNEME_E2E_RUNNER").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Where the local models are: `$MNEME_MODELS_DIR`, else
/// `~/.cache/mneme/ai-models` (`scripts/install.sh` puts them there).
pub fn models_dir() -> PathBuf {
    std::env::var_os("MNEME_MODELS_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache/mneme/ai-models"))
}

/// Every process descended from `pid` (children first found, then theirs),
/// read from `/proc`.
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let child: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let ppid = stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()?;
            Some((child, ppid))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parents.iter().filter(|&&(_, pp)| pp == p).map(|&(c, _)| c));
        i += 1;
    }
    found.remove(0);
    found
}

/// SIGKILLs `child` and every process under it: `spin up` serves from a
/// child process (`spin trigger http`) that a SIGKILL of `spin up` alone
/// would leave running, still answering what was in flight.
fn kill_tree(child: &mut std::process::Child) {
    let below = descendants(child.id());
    let _ = child.kill();
    for pid in below {
        let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).stderr(Stdio::null()).status();
    }
    let _ = child.wait();
}

/// Where the tests that need `mneme up` are listed when another runner
/// runs the suite; `scripts/test.sh` prints it.
pub fn runner_only_report() -> PathBuf {
    repo_root().join("target/e2e-runner-only.txt")
}

/// For a test of what only `mneme up` does (its in-process scheduler and
/// startup job, its request log, its limits and trap answers): under
/// another runner, reports `test` as needing `feature`, on stderr and in
/// [`runner_only_report`], and returns true so the test returns. Under
/// `mneme up`, false. Use [`runner_only!`].
pub fn needs_mneme_up(test: &str, feature: &str) -> bool {
    let Some(runner) = foreign_runner() else { return false };
    let line = format!("{test}: needs {feature} of `mneme up`; not run under {}", runner.display());
    eprintln!("RUNNER-ONLY {line}");
    let path = runner_only_report();
    let _ = std::fs::create_dir_all(path.parent().unwrap());
    // One write of the whole line: tests run in parallel, and an append of
    // one small write is not interleaved with another's.
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        use std::io::Write;
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
    true
}

/// `runner_only!("its request log")` at the top of a test: under another
/// runner (`MNEME_E2E_RUNNER`), the test is reported by name as needing
/// that feature of `mneme up`, and returns.
#[macro_export]
macro_rules! runner_only {
    ($feature:expr) => {{
        fn here() {}
        let name = std::any::type_name_of_val(&here).trim_end_matches("::here");
        if $crate::needs_mneme_up(name, $feature) {
            return;
        }
    }};
}

/// A manifest line with its `source = "…"` made absolute against `base`,
/// so the manifest can be written elsewhere; any other line as it is.
fn absolute_source(line: &str, base: &Path) -> String {
    match line.strip_prefix("source = \"") {
        Some(rest) => format!("source = \"{}\"", base.join(rest.trim_end_matches('"')).display()),
        None => line.to_string(),
    }
}

/// Every Rust file under `dir`, into `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every scheduled job of the app, as the tick endpoint names them.
pub const TICK_JOBS: [&str; 11] = [
    "migrate",
    "heartbeat",
    "reminders",
    "knowledge",
    "index",
    "tools",
    "tasks",
    "consolidate",
    "drift",
    "regulate",
    "reflect",
];

/// A free loopback port, for a runner that is told its port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `manifest` as Spin reads it: without the `[application.tool.mneme]`
/// tables, its sources absolute, written into `dir`.
fn as_spin_reads_it(app_dir: &Path, manifest: &str, dir: &Path) -> PathBuf {
    let src = app_dir.join(manifest);
    let base = src.parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(&src).unwrap();
    let mut out = Vec::new();
    let mut in_tool = false;
    for l in text.lines() {
        let t = l.trim_start();
        if t.starts_with('[') {
            in_tool = t.starts_with("[application.tool") || t.starts_with("[[application.tool");
        }
        if in_tool {
            continue;
        }
        out.push(absolute_source(l, &base));
    }
    let path = dir.join("spin-app.toml");
    std::fs::write(&path, out.join("\n")).unwrap();
    path
}

/// Which storage the app runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Spin SQLite and Spin key-value files.
    Embedded,
    /// PostgreSQL and Redis.
    Hosted,
}

pub const BACKENDS: [Backend; 2] = [Backend::Embedded, Backend::Hosted];

/// A fresh PostgreSQL database, dropped when this value is.
pub struct PgDatabase {
    pub name: String,
}

impl PgDatabase {
    pub fn create() -> Self {
        let mut admin = postgres::Client::connect(PG_ADMIN, postgres::NoTls).unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not reachable at 127.0.0.1:5432 ({e}). Start it with: \
                 pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
            )
        });
        let name = unique("mneme_test");
        admin.batch_execute(&format!("CREATE DATABASE {name}")).expect("creating the test database");
        Self { name }
    }

    pub fn url(&self) -> String {
        format!("host=127.0.0.1 port=5432 user=postgres dbname={} sslmode=disable", self.name)
    }

    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url(), postgres::NoTls).expect("connecting to the test database")
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        if let Ok(mut admin) = postgres::Client::connect(PG_ADMIN, postgres::NoTls) {
            let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

/// Fails with the start command when Redis is not answering.
pub fn require_redis() {
    let ok = TcpStream::connect_timeout(&REDIS_ADDR.parse().unwrap(), Duration::from_secs(2)).and_then(|mut s| {
        use std::io::Write;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        s.write_all(b"PING\r\n")?;
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf)?;
        Ok(buf == *b"+PONG\r\n")
    });
    assert!(
        matches!(ok, Ok(true)),
        "Redis is not answering at {REDIS_ADDR}. Start it with: redis-server --daemonize yes --bind 127.0.0.1 -::1 \
         --port 6379 --save \"\" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log"
    );
}

/// Runs a Redis command over RESP and returns the raw reply.
pub fn redis_cmd(args: &[&str]) -> String {
    use std::io::Write;
    let mut s = TcpStream::connect(REDIS_ADDR).expect("connecting to Redis");
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Environment that points the app at `backend`; keeps the database alive.
pub struct BackendEnv {
    pub vars: Vec<(String, String)>,
    pub pg: Option<PgDatabase>,
    pub namespace: String,
}

impl BackendEnv {
    pub fn new(backend: Backend) -> Self {
        let namespace = unique("ns");
        let mut vars = vec![("SPIN_VARIABLE_STORE_NAMESPACE".to_string(), namespace.clone())];
        let pg = match backend {
            Backend::Embedded => None,
            Backend::Hosted => {
                require_redis();
                let db = PgDatabase::create();
                vars.push(("SPIN_VARIABLE_PG_URL".into(), db.url()));
                vars.push(("SPIN_VARIABLE_REDIS_URL".into(), format!("redis://{REDIS_ADDR}")));
                Some(db)
            }
        };
        Self { vars, pg, namespace }
    }
}

/// A running `mneme up`.
pub struct App {
    child: Child,
    pub url: String,
    pub state: tempfile::TempDir,
    log: PathBuf,
    stdout: Vec<String>,
    /// `mneme cron` beside a foreign runner, and its log.
    scheduler: Option<(Child, PathBuf)>,
}

/// What starting the runner led to.
pub enum Started {
    Serving(App),
    Exited { code: Option<i32>, log: String },
}

impl App {
    /// Starts the app in `manifest` (relative to the repo root) with `env`.
    pub fn start(manifest: &str, env: &[(String, String)]) -> App {
        Self::start_with(manifest, env, &[]).unwrap_or_else(|log| panic!("the runner did not start:\n{log}"))
    }

    pub fn start_with(manifest: &str, env: &[(String, String)], args: &[&str]) -> Result<App, String> {
        match Self::launch(manifest, env, args) {
            Started::Serving(app) => Ok(app),
            Started::Exited { log, .. } => Err(log),
        }
    }

    pub fn launch(manifest: &str, env: &[(String, String)], args: &[&str]) -> Started {
        Self::launch_in(tempfile::tempdir().unwrap(), manifest, env, args)
    }

    /// Kills the runner with SIGKILL, a crash in which nothing is cleaned
    /// up, and starts it again on the same state directory.
    pub fn crash_and_restart(mut self, manifest: &str, env: &[(String, String)]) -> App {
        kill_tree(&mut self.child);
        let state = std::mem::replace(&mut self.state, tempfile::tempdir().unwrap());
        drop(self);
        match Self::launch_in(state, manifest, env, &[]) {
            Started::Serving(app) => app,
            Started::Exited { log, .. } => panic!("the runner did not restart:\n{log}"),
        }
    }

    /// Stops the runner as dropping it does (SIGTERM, SIGKILL after 5 s)
    /// and gives back its state directory: SQLite's `-wal` files are in it,
    /// so a copy of it is a consistent store either way.
    pub fn stop(mut self) -> tempfile::TempDir {
        let state = std::mem::replace(&mut self.state, tempfile::tempdir().unwrap());
        drop(self);
        state
    }

    /// Starts the runner on a state directory the caller prepared.
    pub fn launch_in(state: tempfile::TempDir, manifest: &str, env: &[(String, String)], args: &[&str]) -> Started {
        let root = repo_root();
        let log = state.path().join("runner.log");
        // `MNEME_APP_DIR` runs the app of another checkout (its spin.toml
        // and components), for an A/B comparison with MNEME_BIN.
        let app_dir = std::env::var_os("MNEME_APP_DIR").map_or_else(|| root.clone(), PathBuf::from);
        let foreign = foreign_runner();
        let (program, manifest_arg, listen) = match &foreign {
            Some(runner) => (
                runner.clone(),
                as_spin_reads_it(&app_dir, manifest, state.path()),
                format!("127.0.0.1:{}", free_port()),
            ),
            None => (mneme_bin(), PathBuf::from(manifest), "127.0.0.1:0".to_string()),
        };
        if foreign.is_some() {
            // Spin reads local models from `<state-dir>/ai-models/<name>/`.
            let link = state.path().join("ai-models");
            if !link.exists() {
                std::os::unix::fs::symlink(models_dir(), &link).expect("linking the models into the state dir");
            }
        }
        let mut cmd = Command::new(program);
        cmd.current_dir(&app_dir)
            .arg("up")
            .arg("-f")
            .arg(&manifest_arg)
            .args(["--listen", &listen, "--state-dir"])
            .arg(state.path())
            .args(args)
            .env("MNEME_CACHE_DIR", root.join("target/e2e-cache"))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        if !args.contains(&"--runtime-config-file") {
            cmd.arg("--runtime-config-file").arg(root.join("tests/fixtures/runtime-config.toml"));
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawning mneme");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut stdout = Vec::new();
        while Instant::now() < deadline {
            match lines.next() {
                Some(Ok(line)) => {
                    let serving = line.strip_prefix("Serving ").map(str::to_string);
                    stdout.push(line);
                    if let Some(url) = serving {
                        // Keep draining stdout so the runner never blocks on it.
                        std::thread::spawn(move || for _ in lines.by_ref() {});
                        let scheduler =
                            foreign.is_some().then(|| start_scheduler(&url, &app_dir.join(manifest), env, &state));
                        if foreign.is_some() {
                            // What a deployment's readiness probe does: the
                            // first request, which puts the schema in place
                            // (D-F28), before the test touches the database.
                            let _ = ureq::get(&format!("{url}/health")).call();
                        }
                        return Started::Serving(App {
                            child,
                            url,
                            state,
                            log,
                            stdout,
                            scheduler: scheduler.flatten(),
                        });
                    }
                }
                _ => break,
            }
        }
        // Exited, or never said it was serving in time: then it is stopped,
        // not waited for (a slow start on a busy machine hung the test).
        let code = if Instant::now() < deadline {
            child.wait().ok().and_then(|s| s.code())
        } else {
            eprintln!("the runner did not serve within 120 s; stopping it");
            kill_tree(&mut child);
            None
        };
        Started::Exited { code, log: std::fs::read_to_string(&log).unwrap_or_default() }
    }

    /// Sends SIGTERM, as a process manager would on shutdown.
    pub fn terminate(&self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
    }

    /// Waits up to `limit` for the runner to exit; its exit status, if it did.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The runner's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stdout(&self) -> &[String] {
        &self.stdout
    }

    /// The runner's log, then the scheduler's when one runs beside it.
    pub fn log(&self) -> String {
        let mut log = std::fs::read_to_string(&self.log).unwrap_or_default();
        if let Some((_, path)) = &self.scheduler {
            log.push_str(&std::fs::read_to_string(path).unwrap_or_default());
        }
        log
    }

    /// Waits up to `limit` for `needle` to appear in the log. The runner
    /// writes a request's line from a thread of its own after the response,
    /// so a line can trail what the request did by moments.
    pub fn wait_log(&self, needle: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.log().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn get(&self, path: &str) -> Resp {
        self.request("GET", path, &[], None)
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Resp {
        self.request_within(method, path, headers, body, Duration::from_secs(60))
    }

    /// [`App::request`], waiting up to `limit` for the whole answer.
    pub fn request_within(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        limit: Duration,
    ) -> Resp {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(limit)).build().into();
        let url = format!("{}{path}", self.url);
        let mut req = http_request(method, &url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = match body {
            Some(b) => agent.run(req.body(b.to_vec()).unwrap()),
            None => agent.run(req.body(()).unwrap()),
        }
        .unwrap_or_else(|e| panic!("{method} {path} failed: {e}\nrunner log:\n{}", self.log()));
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let mut body = String::new();
        resp.into_body().into_reader().read_to_string(&mut body).unwrap();
        Resp { status, headers, body }
    }

    /// `method path` as the principal of a `test_env` app ([`TEST_KEY`]) on
    /// the test clock at `at`, with a JSON body.
    pub fn call(&self, method: &str, path: &str, body: Option<serde_json::Value>, at: u64) -> Resp {
        self.call_as(TEST_KEY, method, path, body.as_ref(), Some(at))
    }

    /// `method path` with `Bearer key`, the test clock at `at` when given,
    /// and a JSON body.
    pub fn call_as(
        &self,
        key: &str,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        at: Option<u64>,
    ) -> Resp {
        let auth = format!("Bearer {key}");
        let clock = at.map(|t| t.to_string());
        let mut headers = vec![("authorization", auth.as_str())];
        if let Some(c) = &clock {
            headers.push(("x-mneme-clock", c.as_str()));
        }
        let body = body.map(serde_json::Value::to_string);
        self.request(method, path, &headers, body.as_deref().map(str::as_bytes))
    }

    /// `POST /tick/{job}` with the cron token of a `test_env` app, the test
    /// clock at `at` and the seeded randomness `seed`; the tick's `result`.
    pub fn tick(&self, job: &str, at: u64, seed: u64) -> serde_json::Value {
        self.tick_within(job, at, seed, Duration::from_secs(60))
    }

    /// [`App::tick`], waiting up to `limit` (a worker cycle with a CPU model
    /// runs new iterations for 90 s, each up to 30 s).
    pub fn tick_within(&self, job: &str, at: u64, seed: u64, limit: Duration) -> serde_json::Value {
        let (t, s) = (at.to_string(), seed.to_string());
        let headers = [("authorization", CRON_AUTH), ("x-mneme-clock", t.as_str()), ("x-mneme-seed", s.as_str())];
        let r = self.request_within("POST", &format!("/tick/{job}"), &headers, None, limit);
        assert_eq!(r.status, 200, "tick {job}: {}", r.body);
        r.json()["result"].clone()
    }

    /// Drains the knowledge queue (`POST /tick/knowledge`, on the wall
    /// clock) until job `job` is done or failed; the job's report.
    pub fn knowledge_job(&self, job: &str) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = self.request("POST", "/tick/knowledge", &[("authorization", CRON_AUTH)], None);
            assert_eq!(r.status, 200, "tick: {}", r.body);
            let r = self.call_as(TEST_KEY, "GET", &format!("/knowledge/jobs/{job}"), None, None);
            assert_eq!(r.status, 200, "{}", r.body);
            let j = r.json();
            if j["status"] == "done" || j["status"] == "failed" {
                return j;
            }
            assert!(Instant::now() < deadline, "job {job} did not finish: {j}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The rows of one table of `GET /privacy/export` at `at`, as exported.
    pub fn table(&self, name: &str, at: u64) -> Vec<serde_json::Value> {
        let r = self.call("GET", "/privacy/export", None, at);
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["tables"][name].as_array().cloned().unwrap_or_default()
    }

    /// Reads a streamed response, noting when each chunk arrived.
    pub fn stream(&self, path: &str) -> Vec<(Duration, String)> {
        let started = Instant::now();
        let resp = ureq::get(&format!("{}{path}", self.url)).call().expect("streaming request");
        let mut reader = resp.into_body().into_reader();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                return out;
            }
            out.push((started.elapsed(), String::from_utf8_lossy(&buf[..n]).into_owned()));
        }
    }
}

fn http_request(method: &str, url: &str) -> ureq::http::request::Builder {
    ureq::http::Request::builder().method(method).uri(url)
}

/// `mneme cron` against `url` with the schedules of `manifest`, when it
/// has any, and the app's environment (its cron token).
fn start_scheduler(
    url: &str,
    manifest: &Path,
    env: &[(String, String)],
    state: &tempfile::TempDir,
) -> Option<(Child, PathBuf)> {
    let text = std::fs::read_to_string(manifest).ok()?;
    if !text.contains("[[application.tool.mneme.cron]]") {
        return None;
    }
    let log = state.path().join("cron.log");
    let mut cmd = Command::new(mneme_bin());
    cmd.args(["cron", "--url", url, "-f"]).arg(manifest).current_dir(state.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child =
        cmd.stdout(Stdio::null()).stderr(std::fs::File::create(&log).ok()?).spawn().expect("spawning mneme cron");
    Some((child, log))
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some((mut cron, _)) = self.scheduler.take() {
            let _ = cron.kill();
            let _ = cron.wait();
        }
        // Already gone (crashed on purpose): its pid may be someone else's now.
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_tree(&mut self.child);
    }
}

/// A response, fully read.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Asserts an `{error: {code, message}}` body with `status` and `code`.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "expected {status} {code}, got: {}", self.body);
        let v = self.json();
        assert_eq!(v["error"]["code"], code, "error code in {}", self.body);
        assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "error message in {}", self.body);
    }
}

/// The named events of a `text/event-stream` body with their JSON data.
///
/// Comment lines (`: keepalive`), `retry:` and `id:` lines carry no event
/// and are skipped. A frame that carries an event but cannot be read as
/// one (an `event:` with no `data:`, `data:` with no `event:`, or data
/// that is not JSON) panics with the frame: dropping it would let a check
/// that an event is absent pass on a malformed stream.
pub fn parse_sse(raw: &str) -> Vec<(String, serde_json::Value)> {
    raw.split("\n\n").filter_map(parse_sse_frame).collect()
}

/// `spin.toml` without the cron entries of the named tick jobs, so only a
/// test's own ticks (on the test clock) run them. Panics when an entry has
/// moved.
pub fn without_crons(dir: &Path, jobs: &[&str]) -> String {
    edited_manifest(dir, "spin.toml", |mut m| {
        for job in jobs {
            let path = format!("path = \"/tick/{job}\"");
            let end = m.find(&path).unwrap_or_else(|| panic!("no cron entry for /tick/{job}")) + path.len();
            let start = m[..end].rfind("[[application.tool.mneme.cron]]").expect("a cron table");
            m.replace_range(start..end, "");
        }
        m
    })
    .display()
    .to_string()
}

/// A whole number the app's database answers `query` with (a scalar
/// `SELECT`, its value a BIGINT on PostgreSQL), read straight from the
/// database: for the tables the export leaves out because a restore
/// rebuilds them, the search index's vectors and blocks (D-M5).
pub fn store_number(app: &App, b: &BackendEnv, query: &str) -> i64 {
    match &b.pg {
        Some(db) => db.client().query_one(query, &[]).unwrap().get::<_, i64>(0),
        None => rusqlite::Connection::open(app.state.path().join("sqlite_db.db"))
            .unwrap()
            .query_row(query, [], |r| r.get(0))
            .unwrap(),
    }
}

/// A copy of spin.toml whose schedule keeps only the migration, so nothing
/// but the test (or benchmark) writes to the store; returns its path.
pub fn only_migrating(dir: &Path) -> String {
    edited_manifest(dir, "spin.toml", |m| {
        let mut out = String::new();
        for (i, block) in m.split("[[application.tool.mneme.cron]]").enumerate() {
            if i == 0 || block.contains("path = \"/tick/migrate\"") {
                if i > 0 {
                    out.push_str("[[application.tool.mneme.cron]]");
                }
                out.push_str(block);
            } else if let Some(rest) = block.find("\n[").map(|j| &block[j..]) {
                // What follows the last cron table: the components.
                out.push_str(rest);
            }
        }
        out
    })
    .display()
    .to_string()
}

/// The API key the tests' apps run with.
pub const TEST_KEY: &str = "test-api-key";
macro_rules! cron_token {
    () => {
        "test-cron"
    };
}
/// The cron token of [`test_env`] apps.
pub const CRON_TOKEN: &str = cron_token!();
/// The `authorization` header of the cron's requests.
pub const CRON_AUTH: &str = concat!("Bearer ", cron_token!());

/// The environment of an app under test: the backend's variables, the API
/// key, the cron token [`CRON_TOKEN`], the test clock on, and the scripted
/// model as the primary model `big-model` when one is given.
pub fn test_env(b: &BackendEnv, model: Option<&fake_model::FakeModel>) -> Vec<(String, String)> {
    let mut env = b.vars.clone();
    env.push(("SPIN_VARIABLE_API_KEY".into(), TEST_KEY.into()));
    env.push(("SPIN_VARIABLE_CRON_TOKEN".into(), CRON_TOKEN.into()));
    env.push(("SPIN_VARIABLE_TEST_CLOCK".into(), "true".into()));
    if let Some(m) = model {
        env.push(("SPIN_VARIABLE_LLM_URL".into(), m.url()));
        env.push(("SPIN_VARIABLE_LLM_HOST".into(), m.addr.clone()));
        env.push(("SPIN_VARIABLE_LLM_MODEL".into(), "big-model".into()));
    }
    env
}

/// Writes a copy of `manifest` (relative to the repo root) with `edit`
/// applied, its component paths made absolute; returns its path.
pub fn edited_manifest(dir: &Path, manifest: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let root = repo_root();
    let src = root.join(manifest);
    let base = src.parent().unwrap();
    let text =
        std::fs::read_to_string(&src).unwrap().lines().map(|l| absolute_source(l, base)).collect::<Vec<_>>().join("\n");
    let path = dir.join(unique("manifest") + ".toml");
    std::fs::write(&path, edit(text)).unwrap();
    path
}

/// `openapi.yaml` as JSON, read through the PyYAML of the tools venv
/// (`scripts/install.sh --test` installs it).
pub fn openapi_description() -> serde_json::Value {
    let venv = std::env::var("MNEME_TOOLS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").expect("HOME is set")).join(".cache/mneme/venv"));
    let python = venv.join("bin/python");
    assert!(python.exists(), "{} is missing: run scripts/install.sh --test", python.display());
    let out = Command::new(python)
        .args(["-c", "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)"])
        .arg(repo_root().join("openapi.yaml"))
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the description as JSON")
}

/// One frame of [`parse_sse`]: `None` for a frame with no event in it.
fn parse_sse_frame(frame: &str) -> Option<(String, serde_json::Value)> {
    // A field's value drops one space after the colon (the SSE spec).
    let field = |line: &str, name: &str| {
        line.strip_prefix(name).and_then(|r| r.strip_prefix(':')).map(|v| v.strip_prefix(' ').unwrap_or(v).to_string())
    };
    let mut name = None;
    let mut data: Option<String> = None;
    for line in frame.lines() {
        if let Some(n) = field(line, "event") {
            name = Some(n);
        } else if let Some(d) = field(line, "data") {
            // Several data lines join with a newline (the SSE spec).
            data = Some(match data {
                Some(before) => format!("{before}\n{d}"),
                None => d,
            });
        }
    }
    match (name, data) {
        (None, None) => None,
        (Some(name), Some(data)) => match serde_json::from_str(&data) {
            Ok(v) => Some((name, v)),
            Err(e) => panic!("SSE event `{name}` has data that is not JSON ({e}); the frame:\n{frame}"),
        },
        (Some(name), None) => panic!("SSE event `{name}` has no data line; the frame:\n{frame}"),
        (None, Some(_)) => panic!("SSE frame with data but no event name; the frame:\n{frame}"),
    }
}

#[cfg(test)]
mod sse_tests {
    use super::parse_sse;
    use serde_json::json;

    #[test]
    fn events_are_read_and_comments_retry_and_id_lines_skipped() {
        let raw = "retry: 3000\n\n: keepalive\n\nid: 4\nevent: message\ndata: {\"mode\":\"RESPOND\"}\n\nevent:done\ndata:{}\n\n";
        assert_eq!(
            parse_sse(raw),
            vec![("message".to_string(), json!({"mode": "RESPOND"})), ("done".to_string(), json!({}))]
        );
        assert_eq!(parse_sse(""), vec![]);
    }

    #[test]
    #[should_panic(expected = "SSE event `reminder` has data that is not JSON")]
    fn an_event_whose_data_is_not_json_fails() {
        parse_sse("event: message\ndata: {}\n\nevent: reminder\ndata: {\"id\": 1\n\n");
    }

    #[test]
    #[should_panic(expected = "SSE event `done` has no data line")]
    fn an_event_without_data_fails() {
        parse_sse("event: done\n\n");
    }

    #[test]
    #[should_panic(expected = "SSE frame with data but no event name")]
    fn data_without_an_event_fails() {
        parse_sse(": keepalive\n\ndata: {}\n\n");
    }
}
