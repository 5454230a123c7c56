//! The scheduler: one for `mneme up` and `mneme cron` (#24). Entries use
//! spin-trigger-cron's syntax (`component`, `cron_expression` with a
//! leading seconds field) and name a `path` that the component serves over
//! HTTP: a scheduled job is an authenticated `POST` to that tick endpoint.
//! `mneme up` dispatches it in-process (so jobs run as async code: a sync
//! cron export that waits on Postgres traps under WASI 0.3); `mneme cron`
//! sends it to any deployment's URL, for an app served by `spin up` or
//! SpinKube. Runs are spread by a little jitter, a failing job backs off
//! (`mneme_manifest::schedule`), and the console hears of failures,
//! recoveries and a summary every few minutes ([`Console`]; every run with
//! `--mneme-log-ticks`). Entries marked
//! `at_startup` run once before the rest: under `mneme up` they must
//! succeed before it serves; `mneme cron` retries them until they do.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use chrono::Utc;

use crate::app::App;
use crate::manifest::{CronTrigger, parse_schedule};
use mneme_manifest::schedule;

/// Where ticks go.
pub enum Target {
    /// The app this process serves.
    InProcess(Arc<App>),
    /// A deployment at `base` (`http://host:port`), called with `token`.
    Remote { base: String, token: Option<String>, agent: ureq::Agent },
}

/// How long a remote tick may take (the longest job, a consolidation
/// drain, stays well inside it).
const REMOTE_TIMEOUT: Duration = Duration::from_secs(600);

impl Target {
    pub fn remote(base: &str, token: Option<String>) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(REMOTE_TIMEOUT))
            .http_status_as_error(false)
            .build()
            .new_agent();
        Self::Remote { base: base.trim_end_matches('/').to_string(), token, agent }
    }

    /// Runs one tick of `job`; returns the HTTP status and body.
    pub async fn tick(&self, job: &CronTrigger) -> Result<(u16, String)> {
        match self {
            Self::InProcess(app) => in_process(app, job).await,
            Self::Remote { base, token, agent } => {
                let (url, token, agent) = (format!("{base}{}", job.path), token.clone(), agent.clone());
                tokio::task::spawn_blocking(move || {
                    let mut req = agent.post(&url);
                    if let Some(t) = &token {
                        req = req.header("authorization", &format!("Bearer {t}"));
                    }
                    let mut resp = req.send_empty().with_context(|| format!("POST {url}"))?;
                    let status = resp.status().as_u16();
                    let body = resp.body_mut().read_to_string().unwrap_or_default();
                    Ok((status, body))
                })
                .await?
            }
        }
    }
}

async fn in_process(app: &Arc<App>, job: &CronTrigger) -> Result<(u16, String)> {
    let mut req = http::Request::post(&job.path).header(http::header::HOST, "localhost");
    if let Some(var) = &app.manifest.cron_token_variable
        && let Some(token) = app.variables.get(var)
    {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let (parts, ()) = req.body(())?.into_parts();
    let id = crate::server::request_id();
    let (resp, _) = crate::server::dispatch(app, parts, Bytes::new(), None, &id).await;
    let status = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body()).await.map(|b| b.to_bytes()).unwrap_or_default();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// What the console says about scheduled runs: under `verbose`, a line per
/// run (`MNEME_LOG_TICKS`); otherwise failures, the first success after
/// them, and every `summary_every` a line of counts per job. A tick's
/// request-log line is not written for in-process ticks either way.
pub struct Console {
    verbose: bool,
    summary_every: Duration,
    counts: Mutex<BTreeMap<String, schedule::Counts>>,
}

impl Console {
    pub fn new(verbose: bool, summary_every: Duration) -> Arc<Self> {
        Arc::new(Self { verbose, summary_every, counts: Mutex::new(BTreeMap::new()) })
    }

    /// From the environment: `MNEME_LOG_TICKS` (any value but `0`/empty)
    /// for a line per run, `MNEME_TICK_SUMMARY_SECS` for the summary's
    /// period (default 300 s).
    pub fn from_env(verbose_flag: bool) -> Arc<Self> {
        let verbose = verbose_flag || std::env::var("MNEME_LOG_TICKS").is_ok_and(|v| !v.is_empty() && v != "0");
        let every = std::env::var("MNEME_TICK_SUMMARY_SECS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&s| s > 0)
            .map_or(schedule::SUMMARY_EVERY, Duration::from_secs);
        Self::new(verbose, every)
    }

    fn count(&self, path: &str, outcome: schedule::Outcome) {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).entry(path.to_string()).or_default().add(outcome);
    }

    /// Prints the summary every `summary_every`, unless every run prints.
    fn spawn_summaries(self: &Arc<Self>) {
        if self.verbose {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(me.summary_every).await;
                let counts = std::mem::take(&mut *me.counts.lock().unwrap_or_else(|e| e.into_inner()));
                if let Some(line) = schedule::summary(me.summary_every, &counts) {
                    eprintln!("{line}");
                }
            }
        });
    }
}

/// Runs the `at_startup` jobs once; any failure stops `mneme up`.
pub async fn run_startup(target: &Target, jobs: &[CronTrigger]) -> Result<()> {
    for job in jobs.iter().filter(|j| j.at_startup) {
        let (status, body) = target.tick(job).await?;
        if !schedule::succeeded(status) {
            bail!("startup job {} answered {status}: {body}", job.path);
        }
        eprintln!("startup job {}: {body}", job.path);
    }
    Ok(())
}

/// Runs the `at_startup` jobs once each, retrying a failure (the
/// deployment may still be starting) with the backoff of a 1 s job.
pub async fn run_startup_until_done(target: &Target, jobs: &[CronTrigger]) {
    for job in jobs.iter().filter(|j| j.at_startup) {
        let mut failures = 0;
        loop {
            match target.tick(job).await {
                Ok((status, body)) if schedule::succeeded(status) => {
                    eprintln!("startup job {}: {body}", job.path);
                    break;
                }
                outcome => {
                    failures += 1;
                    let wait = schedule::backoff(failures, Duration::from_secs(1)).min(Duration::from_secs(30));
                    eprintln!("startup job {} {}; retrying in {} s", job.path, describe(&outcome), wait.as_secs());
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// How a run ended: `Skipped` when the job was not due, or another
/// scheduler's run holds its lease.
fn outcome_of(outcome: &Result<(u16, String)>) -> schedule::Outcome {
    match outcome {
        Ok((status, body)) if schedule::succeeded(*status) => {
            let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
            let result = &v["result"];
            if result["ran"] == serde_json::Value::Bool(false) || result["due"] == serde_json::Value::Bool(false) {
                schedule::Outcome::Skipped
            } else {
                schedule::Outcome::Ok
            }
        }
        _ => schedule::Outcome::Failed,
    }
}

/// The `mneme.tick.outcome` of a run: `ok`, `skipped` or `failed`.
fn outcome_name(outcome: schedule::Outcome) -> &'static str {
    match outcome {
        schedule::Outcome::Ok => "ok",
        schedule::Outcome::Skipped => "skipped",
        schedule::Outcome::Failed => "failed",
    }
}

/// A drain's `result.queued` (`{queue: jobs}`) as `mneme.queue.depth`.
fn record_queues(m: &crate::otel::metrics::Metrics, body: &str) {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    if let Some(queues) = v["result"]["queued"].as_object() {
        let depths: Vec<(String, i64)> = queues.iter().map(|(q, n)| (q.clone(), n.as_i64().unwrap_or(0))).collect();
        m.queue_depths(&depths);
    }
}

fn describe(outcome: &Result<(u16, String)>) -> String {
    match outcome {
        Ok((status, body)) => format!("answered {status}: {}", body.chars().take(200).collect::<String>()),
        Err(e) => format!("failed: {e:#}"),
    }
}

/// Spawns one task per entry, and the console's summaries.
pub fn spawn_all(target: Arc<Target>, jobs: &[CronTrigger], console: Arc<Console>) -> Result<()> {
    let schedules: Vec<_> = jobs.iter().map(|j| parse_schedule(&j.cron_expression)).collect::<Result<_>>()?;
    for (job, schedule) in jobs.iter().cloned().zip(schedules) {
        let (target, console) = (target.clone(), console.clone());
        tokio::spawn(async move { run_job(&target, &job, &schedule, &console).await });
    }
    console.spawn_summaries();
    Ok(())
}

/// The time between two runs of `schedule` from now (a day for a daily
/// job, a second for `* * * * * *`).
fn interval(schedule: &cron::Schedule) -> Duration {
    let mut it = schedule.upcoming(Utc);
    match (it.next(), it.next()) {
        (Some(a), Some(b)) => (b - a).to_std().unwrap_or(Duration::from_secs(1)),
        _ => Duration::from_secs(3600),
    }
}

async fn run_job(target: &Target, job: &CronTrigger, schedule: &cron::Schedule, console: &Console) {
    let every = interval(schedule);
    let mut failures = 0u32;
    let mut held_until: Option<Instant> = None;
    for next in schedule.upcoming(Utc) {
        let wait = (next - Utc::now()).to_std().unwrap_or_default() + schedule::jitter(every, rand::random());
        tokio::time::sleep(wait).await;
        if held_until.is_some_and(|t| Instant::now() < t) {
            continue;
        }
        let started = Instant::now();
        let outcome = target.tick(job).await;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let ended = outcome_of(&outcome);
        console.count(&job.path, ended);
        if let Some(m) = crate::otel::metrics() {
            m.tick(&job.path, outcome_name(ended));
            if let Ok((_, body)) = &outcome {
                record_queues(m, body);
            }
        }
        match &outcome {
            Ok((status, _)) if schedule::succeeded(*status) => {
                match schedule::say(console.verbose, failures, true) {
                    schedule::Say::Every => eprintln!("cron {} {} {status} {ms:.2}ms", job.component, job.path),
                    schedule::Say::Recovered(n) => eprintln!(
                        "cron {} {} recovered: {status} after {n} failure{} ({ms:.2}ms)",
                        job.component,
                        job.path,
                        if n == 1 { "" } else { "s" }
                    ),
                    schedule::Say::Nothing | schedule::Say::Failure => {}
                }
                failures = 0;
                held_until = None;
            }
            _ => {
                failures = failures.saturating_add(1);
                let back = schedule::backoff(failures, every);
                held_until = Some(Instant::now() + back);
                eprintln!(
                    "cron {} {} {} after {ms:.2}ms; {failures} in a row, next try in {} s or later",
                    job.component,
                    job.path,
                    describe(&outcome),
                    back.as_secs()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_need_a_seconds_field() {
        assert!(parse_schedule("*/10 * * * * *").is_ok());
        assert!(parse_schedule("0 0 3 * * * 2030").is_ok());
        assert!(parse_schedule("* * * * *").is_err(), "five-field cron has no seconds");
        assert!(parse_schedule("61 * * * * *").is_err());
    }

    #[test]
    fn intervals_follow_the_expression() {
        assert_eq!(interval(&parse_schedule("*/10 * * * * *").unwrap()), Duration::from_secs(10));
        assert_eq!(interval(&parse_schedule("0 */10 * * * *").unwrap()), Duration::from_secs(600));
        assert_eq!(interval(&parse_schedule("0 0 3 * * *").unwrap()), Duration::from_secs(86_400));
    }
}
