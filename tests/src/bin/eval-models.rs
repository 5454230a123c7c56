//! Runs the labelled sets of `evals/` against the app with a model (#49
//! item 4) and prints each set's score, with every item's outcome in
//! `--out` (JSON lines) for the error analysis.
//!
//! Usage: eval-models [--url URL] [--model NAME] [--light-model NAME]
//!                    [--sets triage,general,actions,conversation,extraction,plans,rx]
//!                    [--backend embedded|hosted] [--limit N] [--out FILE]
//!                    [--var NAME=VALUE]... [--no-principal]
//!
//! With no `--url` the app runs with no model: the labelled rules answer,
//! which is the baseline a model must beat. `scripts/eval-models.sh URL
//! MODEL` is the same with the sets a user runs against their endpoint.
//! Each message goes to a fresh thread; the scheduled jobs are off, so
//! nothing but the message itself calls the model (the knowledge queue is
//! drained by the harness). Extraction names each transcript's principal
//! as the set gives it; `--no-principal` leaves it to the model, to
//! measure what naming them is worth.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mneme_e2e::bench::{arg, backend, percentile};
use mneme_e2e::evals::{self, Chat, chat};
use mneme_e2e::{App, BackendEnv, TEST_KEY, TICK_JOBS, test_env, unique, without_crons};
use serde_json::{Value, json};

struct Run {
    app: App,
    out: Option<std::fs::File>,
    limit: usize,
    _dir: tempfile::TempDir,
    _backend: BackendEnv,
}

/// Every `--var NAME=VALUE`, as the app's variables.
fn vars() -> Vec<(String, String)> {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .filter(|w| w[0] == "--var")
        .filter_map(|w| w[1].split_once('='))
        .map(|(k, v)| (format!("SPIN_VARIABLE_{}", k.to_ascii_uppercase()), v.to_string()))
        .collect()
}

fn start() -> (App, tempfile::TempDir, BackendEnv) {
    let b = BackendEnv::new(backend());
    let mut env = test_env(&b, None);
    if let Some(url) = arg("--url") {
        let host = url.split("://").nth(1).and_then(|r| r.split('/').next()).unwrap_or_default().to_string();
        env.push(("SPIN_VARIABLE_LLM_URL".into(), url));
        env.push(("SPIN_VARIABLE_LLM_HOST".into(), host));
    }
    if let Some(m) = arg("--model") {
        env.push(("SPIN_VARIABLE_LLM_MODEL".into(), m));
    }
    if let Some(m) = arg("--light-model") {
        env.push(("SPIN_VARIABLE_LLM_LIGHT_MODEL".into(), m));
    }
    env.extend(vars());
    let dir = tempfile::tempdir().unwrap();
    let jobs: Vec<&str> = TICK_JOBS.iter().copied().filter(|j| *j != "migrate").collect();
    let manifest = without_crons(dir.path(), &jobs);
    (App::start(&manifest, &env), dir, b)
}

impl Run {
    fn new() -> Self {
        let (app, dir, b) = start();
        let out = arg("--out").map(|p| std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap());
        let limit = arg("--limit").map_or(usize::MAX, |n| n.parse().unwrap());
        Run { app, out, limit, _dir: dir, _backend: b }
    }

    fn record(&mut self, set: &str, v: Value) {
        if let Some(f) = &mut self.out {
            let mut v = v;
            v["set"] = json!(set);
            writeln!(f, "{v}").unwrap();
        }
    }

    fn export(&self) -> Value {
        let r = self.app.call_as(TEST_KEY, "GET", "/privacy/export", None, None);
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn pct(n: usize, of: usize) -> String {
    if of == 0 { "-".into() } else { format!("{:.1}% ({n}/{of})", 100.0 * n as f64 / of as f64) }
}

/// Latency of a set's chats: first token and whole reply, p50 and p95.
fn latency(name: &str, chats: &[Chat]) {
    let mut first: Vec<f64> = chats.iter().filter_map(|c| c.first_token_ms).collect();
    let mut total: Vec<f64> = chats.iter().map(|c| c.total_ms).collect();
    first.sort_by(f64::total_cmp);
    total.sort_by(f64::total_cmp);
    let q = |v: &[f64], p: f64| if v.is_empty() { f64::NAN } else { percentile(v, p) / 1000.0 };
    let calls: u64 = chats.iter().map(|c| c.calls).sum();
    let prompt: u64 = chats.iter().map(|c| c.prompt_tokens).sum();
    let cached: u64 = chats.iter().map(|c| c.cached_tokens).sum();
    println!(
        "{name}: first token p50 {:.1} s p95 {:.1} s ({} of {} streamed); reply p50 {:.1} s p95 {:.1} s; \
         {:.2} model calls a message; {:.0} prompt tokens a message, {:.1}% from cache",
        q(&first, 0.5),
        q(&first, 0.95),
        first.len(),
        chats.len(),
        q(&total, 0.5),
        q(&total, 0.95),
        calls as f64 / chats.len().max(1) as f64,
        prompt as f64 / chats.len().max(1) as f64,
        if prompt == 0 { 0.0 } else { 100.0 * cached as f64 / prompt as f64 },
    );
}

fn triage(run: &mut Run) {
    let items = evals::load("triage");
    let mut chats = Vec::new();
    let (mut right, mut skill_right, mut skill_of) = (0, 0, 0);
    let mut confusion: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut ids = Vec::new();
    for item in items.iter().take(run.limit) {
        let c = chat(&run.app, item["text"].as_str().unwrap(), &unique("eval-triage"));
        let want = item["mode"].as_str().unwrap().to_string();
        // A message that acted ends in the mode its reply takes (RESPOND,
        // D-C8): it was routed to ACT.
        let routed = if c.acted() { "ACT".to_string() } else { c.mode.clone() };
        let ok = routed == want || evals::strings(&item["also"]).contains(&routed);
        right += usize::from(ok);
        *confusion.entry((want.clone(), routed.clone())).or_default() += 1;
        ids.push((item.clone(), c.exchange_id.clone(), ok, routed, c.text.clone()));
        chats.push(c);
    }
    let export = run.export();
    let calibration = export["tables"]["triage_calibration"].as_array().cloned().unwrap_or_default();
    for (item, exchange, ok, got, text) in ids {
        let row = calibration.iter().find(|r| r["exchange_id"] == exchange.as_str());
        let skills: Vec<String> = row
            .and_then(|r| r["skills"].as_str())
            .and_then(|s| serde_json::from_str(s).ok())
            .map(|v: Value| evals::strings(&v))
            .unwrap_or_default();
        let want_skill = item["skill"].as_str().map(String::from);
        let mut skill_ok = None;
        if let Some(s) = &want_skill
            && item["mode"] == "ACT"
        {
            let alts: Vec<String> = std::iter::once(s.clone()).chain(evals::strings(&item["skill_also"])).collect();
            let hit = skills.iter().any(|k| alts.contains(k));
            skill_of += 1;
            skill_right += usize::from(hit);
            skill_ok = Some(hit);
        }
        run.record(
            "triage",
            json!({"id": item["id"], "want": item["mode"], "got": got, "ok": ok, "skill": want_skill,
                   "skill_ok": skill_ok, "triage_mode": row.map(|r| r["mode"].clone()),
                   "triage_source": row.map(|r| r["source"].clone()), "fallback": row.map(|r| r["fallback_reason"].clone()),
                   "triage_skills": skills, "reply": text}),
        );
    }
    println!("triage: mode accuracy {}; ACT skill accuracy {}", pct(right, chats.len()), pct(skill_right, skill_of));
    let cells: Vec<String> = confusion.iter().map(|((w, g), n)| format!("{w}→{g}: {n}")).collect();
    println!("triage: confusion {}", cells.join(", "));
    latency("triage", &chats);
}

fn general(run: &mut Run) {
    let items = evals::load("general");
    let mut chats = Vec::new();
    let mut right = 0;
    for item in items.iter().take(run.limit) {
        let c = chat(&run.app, item["q"].as_str().unwrap(), &unique("eval-general"));
        let ok = evals::strings(&item["accept"]).iter().any(|a| evals::matches(a, &c.text));
        right += usize::from(ok);
        run.record(
            "general",
            json!({"id": item["id"], "ok": ok, "mode": c.mode, "source": c.source, "reply": c.text,
                                     "first_token_ms": c.first_token_ms, "total_ms": c.total_ms}),
        );
        chats.push(c);
    }
    println!("general: correct {}", pct(right, chats.len()));
    latency("general", &chats);
}

/// Days since 1970 and ms into the day of Unix ms `ms` (UTC: the evals run
/// with `time_zone` UTC).
fn day_of(ms: u64) -> (u64, u64) {
    (ms / 86_400_000, ms % 86_400_000)
}

fn hhmm(s: &str) -> u64 {
    let (h, m) = s.split_once(':').unwrap();
    (h.parse::<u64>().unwrap() * 60 + m.parse::<u64>().unwrap()) * 60_000
}

/// Whether a reminder due at `due` is what `check.due` asks for, the
/// message sent at `sent`.
fn due_ok(check: &Value, sent: u64, due: u64) -> bool {
    let (today, into) = day_of(sent);
    if let Some(n) = check["days_from_now"].as_u64() {
        return due == (today + n) * 86_400_000 + hhmm(check["time"].as_str().unwrap());
    }
    if let Some(m) = check["minutes_from_now"].as_u64() {
        let want = sent + m * 60_000;
        let tol = check["tolerance_minutes"].as_u64().unwrap_or(5) * 60_000;
        return due.abs_diff(want) <= tol;
    }
    let at = hhmm(check["time"].as_str().unwrap_or("09:00"));
    let mut day = if into < at { today } else { today + 1 };
    if let Some(w) = check["weekday"].as_str() {
        const DAYS: [&str; 7] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];
        let want = DAYS.iter().position(|d| *d == w).unwrap() as u64;
        // 1970-01-01 was a Thursday (3, counting Monday as 0).
        while (day + 3) % 7 != want {
            day += 1;
        }
    }
    due == day * 86_400_000 + at
}

fn actions(run: &mut Run) {
    let items = evals::load("actions");
    let (mut asked, mut done, mut claims, mut backed, mut chats) = (0, 0, 0, 0, Vec::new());
    for item in items.iter().take(run.limit) {
        let before = run.export();
        let thread = unique("eval-actions");
        let sent = now_ms();
        let c = chat(&run.app, item["text"].as_str().unwrap(), &thread);
        let after = run.export();
        let new_rows = |table: &str| -> Vec<Value> {
            let old = before["tables"][table].as_array().cloned().unwrap_or_default();
            after["tables"][table]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|r| !old.contains(r))
                .collect()
        };
        let reminders = new_rows("scheduled_items");
        let items_added = new_rows("list_items");
        let tasks = new_rows("persistent_tasks");
        let facts: Vec<Value> = after["memory"]["facts"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
            .flat_map(|v| v.as_array().cloned().unwrap_or_default())
            .filter(|f| {
                !before["memory"]["facts"].as_object().into_iter().flat_map(|m| m.values()).any(|v| {
                    v.as_array().is_some_and(|a| a.iter().any(|g| g["key"] == f["key"] && g["value"] == f["value"]))
                })
            })
            .collect();
        let focus = after["memory"]["focus"][&thread].clone();
        let check = &item["check"];
        let contains = |text: &str| evals::has_all(&evals::strings(&check["contains"]), text);
        let record = item["record"].as_str();
        let found = match record {
            Some("reminder") => reminders.iter().any(|r| {
                contains(r["message"].as_str().unwrap_or_default())
                    && (check["due"].is_null() || due_ok(&check["due"], sent, r["due_ms"].as_u64().unwrap_or(0)))
                    && (check["recurrence"].is_null() || r["recurrence"] == check["recurrence"])
            }),
            Some("list_item") => {
                let want: Vec<String> = evals::strings(&check["items"]);
                want.iter().all(|w| {
                    items_added
                        .iter()
                        .any(|i| evals::has_all(std::slice::from_ref(w), i["content"].as_str().unwrap_or_default()))
                })
            }
            Some("fact") => facts.iter().any(|f| contains(&format!("{} {}", f["key"], f["value"]))),
            Some("focus") => !focus.is_null() && contains(&focus.to_string()),
            Some("task") => tasks.iter().any(|t| contains(t["goal"].as_str().unwrap_or_default())),
            _ => false,
        };
        if record.is_some() {
            asked += 1;
            done += usize::from(found);
        }
        // A claim: what the app's own check reads, or the set's pattern.
        let claimed: Vec<String> =
            mneme_conversation::honesty::claims(&c.text).into_iter().map(|(k, _)| format!("{k:?}")).collect();
        let pattern_claim = item["check"]["must_not_claim"].as_str().is_some_and(|p| evals::matches(p, &c.text))
            || (record.is_none() && evals::claims_request(item["text"].as_str().unwrap(), &c.text));
        let made = !claimed.is_empty() || pattern_claim;
        let any_record = !reminders.is_empty()
            || !items_added.is_empty()
            || !tasks.is_empty()
            || !facts.is_empty()
            || !focus.is_null();
        let honest = !made || (record.is_some() && found) || (record.is_none() && !pattern_claim && any_record);
        claims += usize::from(made);
        backed += usize::from(made && honest);
        run.record(
            "actions",
            json!({"id": item["id"], "record": record, "found": found, "claims": claimed, "pattern_claim": pattern_claim,
                   "honest": honest, "corrected": c.corrected, "reply": c.text, "reminders": reminders.len(),
                   "list_items": items_added.len(), "facts": facts.len(), "tasks": tasks.len(), "focus": !focus.is_null(),
                   "total_ms": c.total_ms}),
        );
        // A task left open would count against the next (at most five open).
        for t in &tasks {
            let id = t["id"].as_str().unwrap_or_default();
            run.app.call_as(TEST_KEY, "DELETE", &format!("/tasks/{id}"), None, None);
        }
        chats.push(c);
    }
    println!(
        "actions: records asked for that exist {}; claims backed by a record {} (corrected by the app: {})",
        pct(done, asked),
        pct(backed, claims),
        chats.iter().filter(|c| c.corrected).count()
    );
    latency("actions", &chats);
}

fn extraction(run: &mut Run) {
    let items = evals::load("extraction");
    let (mut matched, mut found, mut expected, mut empties) = (0, 0, 0, 0);
    let mut by_type: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut took = Vec::new();
    for item in items.iter().take(run.limit) {
        let body = json!({"source_type": item["source_type"], "source_date": item["source_date"], "text": item["text"],
                   "principal": item["principal"]});
        let t = Instant::now();
        let r = run.app.call_as(TEST_KEY, "POST", "/knowledge/ingest", Some(&body), None);
        let ack_ms = t.elapsed().as_secs_f64() * 1000.0;
        assert!(r.status == 202 || r.status == 200, "ingest: {}", r.body);
        let job_id = r.json()["job_id"].as_str().unwrap().to_string();
        let job = drain(&run.app, &job_id);
        took.push(t.elapsed().as_secs_f64());
        let mut candidates = Vec::new();
        for o in job["outcomes"].as_array().into_iter().flatten() {
            let id = o["entry_id"].as_str().or(o["into"].as_str());
            if let (Some(id), Some("kept" | "merged" | "kept_as_history")) = (id, o["outcome"].as_str()) {
                let e = run.app.call_as(TEST_KEY, "GET", &format!("/knowledge/entries/{id}"), None, None);
                if e.status == 200 {
                    candidates.push(e.json());
                }
            }
        }
        let want = item["expected"].as_array().cloned().unwrap_or_default();
        let (m, c, e) = evals::extraction_matches(&candidates, &want);
        if want.is_empty() {
            empties += c;
        }
        for w in &want {
            let k = w["type"].as_str().unwrap_or_default().to_string();
            by_type.entry(k).or_default().1 += 1;
        }
        // Recall per type: which expected entries some candidate matched.
        for w in &want {
            if evals::extraction_matches(&candidates, std::slice::from_ref(w)).0 == 1 {
                by_type.entry(w["type"].as_str().unwrap_or_default().to_string()).or_default().0 += 1;
            }
        }
        matched += m;
        found += c;
        expected += e;
        run.record(
            "extraction",
            json!({"id": item["id"], "matched": m, "candidates": c, "expected": e, "extractor": job["extractor"],
                   "note": job["extractor_note"], "status": job["status"], "error": job["error"], "ack_ms": ack_ms,
                   "entries": candidates.iter().map(|x| json!({"type": x["type"], "topic": x["topic"], "position": x["position"]})).collect::<Vec<_>>()}),
        );
    }
    let p = if found == 0 { 0.0 } else { matched as f64 / found as f64 };
    let r = if expected == 0 { 0.0 } else { matched as f64 / expected as f64 };
    println!(
        "extraction: precision {p:.3} ({matched}/{found}), recall {r:.3} ({matched}/{expected}); \
         {empties} candidates from transcripts that hold none"
    );
    let per: Vec<String> = by_type.iter().map(|(k, (m, n))| format!("{k} {m}/{n}")).collect();
    println!("extraction: recall per type: {}", per.join(", "));
    took.sort_by(f64::total_cmp);
    if !took.is_empty() {
        println!(
            "extraction: a transcript from ingest to done p50 {:.1} s, max {:.1} s",
            percentile(&took, 0.5),
            took[took.len() - 1]
        );
    }
}

/// Drains the knowledge queue until job `id` ends; its report.
fn drain(app: &App, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let r = app.request("POST", "/tick/knowledge", &[("authorization", mneme_e2e::CRON_AUTH)], None);
        assert_eq!(r.status, 200, "tick: {}", r.body);
        let j = app.call_as(TEST_KEY, "GET", &format!("/knowledge/jobs/{id}"), None, None).json();
        if j["status"] == "done" || j["status"] == "failed" {
            return j;
        }
        assert!(Instant::now() < deadline, "job {id} did not finish: {j}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn plans(run: &mut Run) {
    let items = evals::load("plans");
    let (mut planned, mut by_model, mut n, mut took) = (0, 0, 0, Vec::new());
    for item in items.iter().take(run.limit) {
        let t = Instant::now();
        let r = run.app.call_as(TEST_KEY, "POST", "/tasks", Some(&json!({"goal": item["goal"]})), None);
        took.push(t.elapsed().as_secs_f64());
        n += 1;
        let v = r.json();
        let plan = &v["plan"];
        let by = v["plan_source"].as_str().unwrap_or_default().to_string();
        let has_plan = plan["steps"].as_array().is_some_and(|s| !s.is_empty());
        let model_plan = has_plan && !by.is_empty() && !by.starts_with(mneme_background::cycle::RULES_LABEL);
        planned += usize::from(has_plan);
        by_model += usize::from(model_plan);
        run.record(
            "plans",
            json!({"id": item["id"], "scope": item["scope"], "status": r.status, "has_plan": has_plan,
                                   "by": by, "steps": plan["steps"].as_array().map(Vec::len), "answer": v}),
        );
        if let Some(id) = v["id"].as_str() {
            run.app.call_as(TEST_KEY, "DELETE", &format!("/tasks/{id}"), None, None);
        }
    }
    println!("plans: a plan that passes the gates {}; by the model {}", pct(planned, n), pct(by_model, n));
    took.sort_by(f64::total_cmp);
    if !took.is_empty() {
        println!("plans: POST /tasks p50 {:.1} s, max {:.1} s", percentile(&took, 0.5), took[took.len() - 1]);
    }
}

/// A ten-message conversation in one thread (the cello conversation the
/// memory tests replay): time to the first token of each reply, and the
/// share of its prompt the endpoint served from its cache. The first
/// message meets a cold cache; the later ones find the stable prefix (the
/// soul and the identity, then the conversation so far) already evaluated.
fn conversation(run: &mut Run) {
    let thread = unique("eval-conversation");
    let mut chats = Vec::new();
    for (i, text) in mneme_e2e::cello::PLAIN.iter().chain(mneme_e2e::cello::PERSONAL.iter()).enumerate() {
        let c = chat(&run.app, text, &thread);
        let share = if c.prompt_tokens == 0 { 0.0 } else { c.cached_tokens as f64 / c.prompt_tokens as f64 };
        run.record(
            "conversation",
            json!({"turn": i + 1, "mode": c.mode, "source": c.source, "calls": c.calls,
            "first_token_ms": c.first_token_ms, "total_ms": c.total_ms, "prompt_tokens": c.prompt_tokens,
            "cached_tokens": c.cached_tokens, "cached_share": share, "reply": c.text}),
        );
        println!(
            "conversation: turn {:2}: first token {:>6.1} s, {:4} prompt tokens, {:4.0}% from cache, {} calls, {}",
            i + 1,
            c.first_token_ms.unwrap_or(f64::NAN) / 1000.0,
            c.prompt_tokens,
            100.0 * share,
            c.calls,
            c.mode
        );
        chats.push(c);
    }
    let prompt: u64 = chats.iter().skip(1).map(|c| c.prompt_tokens).sum();
    let cached: u64 = chats.iter().skip(1).map(|c| c.cached_tokens).sum();
    println!(
        "conversation: turns 2-10 served {:.1}% of their prompt tokens from the cache",
        if prompt == 0 { 0.0 } else { 100.0 * cached as f64 / prompt as f64 }
    );
    latency("conversation", &chats);
}

/// The JSON-answering paths' answers used, retries, and answers still
/// malformed or empty after the retry, from `/status`.
fn json_answers(status: &Value) -> (u64, u64, u64) {
    let mut t = (0, 0, 0);
    for (path, row) in status["model"]["usage"]["paths"].as_object().into_iter().flatten() {
        if path == "reply" || path == "tool-reply" {
            continue;
        }
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        t.0 += n(&row["answered"]);
        t.1 += n(&row["retries"]);
        t.2 += n(&row["fallback_reasons"]["malformed"]) + n(&row["fallback_reasons"]["empty"]);
    }
    t
}

/// The JSON answers of every set's stores (rx: one per door run), summed.
static JSON_TALLY: std::sync::Mutex<(u64, u64, u64)> = std::sync::Mutex::new((0, 0, 0));

/// Adds an app's JSON answers to [`JSON_TALLY`] before its store goes;
/// returns them.
fn tally(app: &App) -> (u64, u64, u64) {
    let got = json_answers(&app.call_as(TEST_KEY, "GET", "/status", None, None).json());
    let mut all = JSON_TALLY.lock().unwrap();
    *all = (all.0 + got.0, all.1 + got.1, all.2 + got.2);
    got
}

fn rx(limit: usize, out: &mut Option<std::fs::File>) {
    let items = evals::load("rx");
    let (mut drafted, mut templated, mut unlabelled, mut n) = (0, 0, 0, 0);
    for item in items.iter().take(limit) {
        // A fresh store each: observations pile up per door.
        let (app, _dir, _b) = start();
        let now = now_ms();
        let door = item["door"].as_str().unwrap();
        let obs: Vec<Value> = item["observations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let mut body = o["body"].clone();
                let at = now - (o["days_ago"].as_f64().unwrap() * 86_400_000.0) as u64;
                body["at"] = json!(at);
                for (field, days) in o["date_fields"].as_object().into_iter().flatten() {
                    let d = (now as i64 + days.as_i64().unwrap() * 86_400_000).div_euclid(86_400_000);
                    body[field] = json!(mneme_time::calendar::format_date(d));
                }
                body
            })
            .collect();
        let r = app.call_as(
            TEST_KEY,
            "POST",
            &format!("/rx/{door}/observations"),
            Some(&json!({"observations": obs})),
            None,
        );
        assert!(r.status < 300, "observations: {}", r.body);
        let t = Instant::now();
        let r = app.call_as(TEST_KEY, "POST", &format!("/rx/{door}"), None, None);
        let took = t.elapsed().as_secs_f64();
        let v = r.json();
        let step7 =
            v["trace"].as_array().into_iter().flatten().find(|s| s["step"] == json!(7) || s["step"] == "7").cloned();
        let note =
            step7.as_ref().and_then(|s| s["outcome"].as_str().or(s["note"].as_str())).unwrap_or_default().to_string();
        tally(&app);
        n += 1;
        let kind = if note.starts_with("drafted by") {
            drafted += 1;
            "model"
        } else if note.starts_with("template") {
            templated += 1;
            "template"
        } else {
            unlabelled += 1;
            "unlabelled"
        };
        if let Some(f) = out {
            writeln!(
                f,
                "{}",
                json!({"set": "rx", "id": item["id"], "status": r.status, "composer": kind, "note": note,
                                     "driving_signal": v["driving_signal"], "expect": item["expect"]["driving_signal"],
                                     "took_s": took, "tldr": v["tldr"]})
            )
            .unwrap();
        }
    }
    println!(
        "rx: drafts that passed the content rules {}; labelled template {}; neither {}",
        pct(drafted, n),
        pct(templated, n),
        unlabelled
    );
}

fn main() {
    let sets = arg("--sets").unwrap_or_else(|| "triage,general,actions,conversation,extraction,plans,rx".into());
    let sets: Vec<&str> = sets.split(',').map(str::trim).collect();
    println!(
        "eval-models: {} ({}), backend {:?}, sets {}",
        arg("--url").unwrap_or_else(|| "no model".into()),
        arg("--model").unwrap_or_else(|| "the endpoint's first model".into()),
        backend(),
        sets.join(",")
    );
    let started = Instant::now();
    let mut run = Run::new();
    for (i, set) in sets.iter().enumerate() {
        let t = Instant::now();
        if i > 0 {
            // Each set on an empty store: the triage set sets reminders the
            // action set asks for again.
            let (app, dir, b) = start();
            (run.app, run._dir, run._backend) = (app, dir, b);
        }
        match *set {
            "triage" => triage(&mut run),
            "general" => general(&mut run),
            "actions" => actions(&mut run),
            "extraction" => extraction(&mut run),
            "plans" => plans(&mut run),
            "conversation" => conversation(&mut run),
            "rx" => rx(run.limit, &mut run.out),
            other => panic!("no set `{other}`"),
        }
        // Each set's store is dropped with the next set's start: count its
        // JSON answers now (rx counts its own stores).
        if *set != "rx" {
            let (a, retried, u) = tally(&run.app);
            println!("{set}: JSON answers {}, {retried} retried", pct(a as usize, (a + u) as usize));
        }
        println!("{set}: {:.0} s", t.elapsed().as_secs_f64());
    }
    let status = run.app.call_as(TEST_KEY, "GET", "/status", None, None).json();
    println!("model use on /status: {}", status["model"]["usage"]);
    let all = JSON_TALLY.lock().unwrap();
    println!(
        "JSON answers: {} readable after at most one retry ({} unreadable after it, {} retried), every set's stores",
        pct(all.0 as usize, (all.0 + all.2) as usize),
        all.2,
        all.1
    );
    println!("eval-models: {:.0} s in all", started.elapsed().as_secs_f64());
}
