//! The cron trigger. Entries use spin-trigger-cron's syntax (`component`,
//! `cron_expression` with a leading seconds field) and name a `path` that
//! the component serves over HTTP: a scheduled job is an authenticated
//! `POST` to that tick endpoint, dispatched in-process, so jobs run as async
//! code (a sync cron export that waits on Postgres traps under WASI 0.3).
//! Entries marked `at_startup` run once, and must succeed, before serving.

use std::sync::Arc;

use anyhow::{Result, bail};
use bytes::Bytes;
use chrono::Utc;

use crate::app::App;
use crate::manifest::{CronTrigger, parse_schedule};

/// Runs one tick of `job`; returns the HTTP status and body.
pub async fn tick(app: &Arc<App>, job: &CronTrigger) -> Result<(u16, String)> {
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

/// Runs the `at_startup` jobs once; any failure stops the app.
pub async fn run_startup(app: &Arc<App>) -> Result<()> {
    for job in app.manifest.cron.iter().filter(|j| j.at_startup) {
        let (status, body) = tick(app, job).await?;
        if status != 200 {
            bail!("startup job {} answered {status}: {body}", job.path);
        }
        eprintln!("startup job {}: {body}", job.path);
    }
    Ok(())
}

/// Spawns one task per cron entry.
pub fn spawn_all(app: &Arc<App>) -> Result<()> {
    for job in app.manifest.cron.clone() {
        let schedule = parse_schedule(&job.cron_expression)?;
        let app = app.clone();
        tokio::spawn(async move {
            for next in schedule.upcoming(Utc) {
                let wait = (next - Utc::now()).to_std().unwrap_or_default();
                tokio::time::sleep(wait).await;
                let started = std::time::Instant::now();
                match tick(&app, &job).await {
                    Ok((status, _)) => eprintln!(
                        "cron {} {} {status} {:.2}ms",
                        job.component,
                        job.path,
                        started.elapsed().as_secs_f64() * 1e3
                    ),
                    Err(e) => eprintln!("cron {} {} failed: {e:#}", job.component, job.path),
                }
            }
        });
    }
    Ok(())
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
    fn upcoming_times_follow_the_expression() {
        let s = parse_schedule("*/10 * * * * *").unwrap();
        let mut it = s.upcoming(Utc);
        let a = it.next().unwrap();
        let b = it.next().unwrap();
        assert_eq!((b - a).num_seconds(), 10);
        assert_eq!(a.timestamp() % 10, 0);
    }
}
