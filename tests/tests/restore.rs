//! A backup that restores (#51 item 5), through the runner over HTTP: an
//! export of a store holding every kind of data restores into an empty
//! instance, on each backend and across them (embedded into PostgreSQL and
//! back), and exporting it again gives the same content; a restore sent
//! again changes nothing; a store with data of its own is refused unless
//! the restore merges; a newer format is refused, the first format is
//! migrated; `mneme restore` sends a file in parts and carries on after a
//! file cut short.

use std::collections::BTreeMap;
use std::path::Path;

use mneme_e2e::{App, Backend, BackendEnv, Resp, TEST_KEY, mneme_bin, only_migrating, test_env};
use serde_json::{Value, json};

/// The test clock: 2026-03-02 09:00 UTC.
const T0: u64 = 1_772_442_000_000;
const DAY: u64 = 86_400_000;

/// An app with no scheduled job but the migration, so nothing changes the
/// store between an export and the next but the test.
fn start(b: &BackendEnv, dir: &Path) -> App {
    let mut env = test_env(b, None);
    env.push(("SPIN_VARIABLE_TOOL_HOST".into(), "127.0.0.1:9".into()));
    App::start(&only_migrating(dir), &env)
}

fn ok(r: Resp, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.body);
    r.json()
}

fn chat(app: &App, text: &str, thread: &str, at: u64) {
    let r = app.call("POST", "/chat", Some(json!({"text": text, "thread_id": thread})), at);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("event: done"), "{}", r.body);
}

/// Fills a store with data of every kind the API writes without a model.
fn fill(app: &App) {
    chat(app, "Hi! My name is Ana and I live in Lisbon.", "t-home", T0);
    chat(app, "Remind me tomorrow at 9 to call the dentist", "t-home", T0 + 60_000);
    chat(app, "What do I think about hiring for slope over intercept?", "t-work", T0 + 120_000);
    chat(app, "thanks!", "t-work", T0 + 180_000);
    for (title, text) in [
        ("Training consistency", "Training consistency beats intensity: missed sessions per week decide progress."),
        ("Lisbon notes", "The tram 28 runs through Alfama; the dentist is on Rua Augusta."),
    ] {
        ok(app.call("POST", "/documents", Some(json!({"title": title, "text": text})), T0 + 200_000), 201);
    }
    let obs = json!({"observations": [
        {"kind": "checkin", "energy": 2, "sleep": 2, "waist_cm": 84, "body_fat_pct": 18, "target_sessions_per_week": 4, "at": T0 - 3 * DAY},
        {"kind": "workout", "type": "strength", "minutes": 50, "rpe_actual": 8, "rpe_prescribed": 7,
         "load_kg": 95, "prev_load_kg": 100, "hard_lower": true, "at": T0 - 2 * DAY}
    ]});
    ok(app.call("POST", "/rx/fitness/observations", Some(obs), T0 + 210_000), 201);
    ok(app.call("POST", "/rx/fitness", None, T0 + 220_000), 201);
    let tool = json!({"description": "Current weather for a city", "url": "http://127.0.0.1:9/weather"});
    ok(app.call("PUT", "/tools/weather", Some(tool), T0 + 230_000), 200);
    ok(app.call("POST", "/tasks", Some(json!({"goal": "Plan the Porto trip", "priority": 3})), T0 + 240_000), 201);
    let transcript = "Ana: For hiring, I always weigh slope over intercept: how fast someone learns beats what they know today.\n\
                      Bo: So the senior candidate?\n\
                      Ana: We decided to hire the junior engineer; the senior one can wait a quarter.";
    let body = json!({"source_type": "meeting", "source_date": "2026-03-01", "text": transcript});
    let r = app.call("POST", "/knowledge/ingest", Some(body), T0 + 250_000);
    assert!(r.status == 202 || r.status == 200, "ingest: {} {}", r.status, r.body);
    app.knowledge_job(r.json()["job_id"].as_str().unwrap());
    app.tick("reminders", T0 + DAY + 3_600_000, 1);
}

/// An export at `at`, whole.
fn export(app: &App, at: u64) -> Value {
    let r = app.call("GET", "/privacy/export", None, at);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// What an export holds, in an order that does not depend on the backend:
/// every table's rows, the search items and the memory keys, each sorted.
fn content(e: &Value) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for (t, rows) in e["tables"].as_object().unwrap() {
        let mut r: Vec<String> = rows.as_array().unwrap().iter().map(Value::to_string).collect();
        r.sort();
        out.insert(format!("tables.{t}"), r);
    }
    let mut s: Vec<String> = e["search"].as_array().unwrap().iter().map(Value::to_string).collect();
    s.sort();
    out.insert("search".into(), s);
    let kv: Vec<String> = e["kv"].as_object().unwrap().iter().map(|(k, v)| format!("{k}={v}")).collect();
    out.insert("kv".into(), kv);
    out
}

fn import(app: &App, doc: &str, query: &str, at: u64) -> Resp {
    let auth = format!("Bearer {TEST_KEY}");
    let clock = at.to_string();
    app.request(
        "POST",
        &format!("/privacy/import{query}"),
        &[("authorization", auth.as_str()), ("x-mneme-clock", clock.as_str()), ("content-type", "application/json")],
        Some(doc.as_bytes()),
    )
}

fn assert_same(a: &Value, b: &Value, what: &str) {
    let (ca, cb) = (content(a), content(b));
    for (k, rows) in &ca {
        assert_eq!(Some(rows), cb.get(k), "{what}: `{k}` differs");
    }
    assert_eq!(ca.len(), cb.len(), "{what}: the sections differ");
}

/// When the tests export: the facts and gists of `fill` are still live.
const AT: u64 = T0 + 1_200_000;

/// The export without the memory records expired by the system's clock.
fn without_expired(e: &Value) -> Value {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let mut e = e.clone();
    e["kv"].as_object_mut().unwrap().retain(|_, v| {
        let record: Value = serde_json::from_str(v["text"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
        record["expires_ms"].as_u64().is_none_or(|x| x > now)
    });
    e
}

#[test]
fn an_export_restores_into_an_empty_store_on_each_backend_and_across_them() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = BackendEnv::new(Backend::Embedded);
    let source = start(&embedded, dir.path());
    fill(&source);
    let original = export(&source, AT);
    assert_eq!((original["format"].as_str(), original["version"].as_u64()), (Some("mneme-export"), Some(2)));
    for t in [
        "exchanges",
        "working_memory",
        "threads",
        "scheduled_items",
        "persistent_tasks",
        "rx_observations",
        "rx_recs",
        "rx_artifacts",
        "tools",
        "rx_doors",
        "knowledge_jobs",
    ] {
        assert!(!original["tables"][t].as_array().unwrap().is_empty(), "the source has no `{t}`:\n{original}");
    }
    assert!(original["search"].as_array().unwrap().len() >= 2, "{}", original["search"]);
    assert!(original["search"][0]["embedding"].as_str().is_some_and(|e| e.len() > 2000));
    let doc = original.to_string();

    // Embedded → PostgreSQL → embedded, each restore into a new store.
    let hosted = BackendEnv::new(Backend::Hosted);
    let pg = start(&hosted, dir.path());
    let r = ok(import(&pg, &doc, "", AT), 200);
    assert_eq!(
        (r["mode"].as_str(), r["finished"].as_bool(), r["version"].as_u64()),
        (Some("fresh"), Some(true), Some(2))
    );
    assert!(r["rows"].as_u64().unwrap() > 20 && r["search_items"].as_u64().unwrap() >= 2, "{r}");
    let in_pg = export(&pg, AT);
    assert_same(&original, &in_pg, "embedded into PostgreSQL");
    // The restored store works: search finds a restored document by meaning
    // and words, and new rows take new ids past the restored ones.
    let found = ok(pg.call("GET", "/search?q=tram%20Alfama", None, AT), 200);
    assert!(found.to_string().contains("Lisbon notes"), "{found}");
    chat(&pg, "I also like the Douro valley.", "t-home", AT + 1000);
    ok(pg.call("POST", "/tasks", Some(json!({"goal": "Renew the passport", "priority": 2})), AT + 2000), 201);

    // Sent again: nothing changes.
    let again = ok(import(&pg, &doc, "", AT + 3000), 200);
    assert_eq!(again["finished"], true, "{again}");
    let twice = export(&pg, AT + 3000);
    assert_eq!(
        twice["tables"]["exchanges"].as_array().unwrap().len(),
        in_pg["tables"]["exchanges"].as_array().unwrap().len() + 1,
        "the restore sent again wrote no exchange twice"
    );

    // Back to an embedded store, from PostgreSQL's own export.
    let embedded2 = BackendEnv::new(Backend::Embedded);
    let back = start(&embedded2, dir.path());
    ok(import(&back, &in_pg.to_string(), "", AT), 200);
    assert_same(&original, &export(&back, AT), "PostgreSQL back into embedded");

    // A store with data of its own refuses another export unless merging,
    // which keeps the store's rows where a key is in both.
    let other = export(&pg, AT + 4000);
    let mut other_doc = other.clone();
    other_doc["export_id"] = json!("another-export");
    let r = import(&back, &other_doc.to_string(), "", AT + 5000);
    r.assert_error(409, "conflict");
    assert!(r.body.contains("merge"), "{}", r.body);
    let merged = ok(import(&back, &other_doc.to_string(), "?merge=true", AT + 5000), 200);
    assert_eq!(merged["mode"], "merge");
    assert!(merged["kept"].as_u64().unwrap() > 0 && merged["rows"].as_u64().unwrap() > 0, "{merged}");
    let after = export(&back, AT + 6000);
    let ex = after["tables"]["exchanges"].as_array().unwrap();
    assert!(ex.iter().any(|e| e["prompt"] == "I also like the Douro valley."), "the merge brought the new exchange");
    let tasks: Vec<&Value> = after["tables"]["persistent_tasks"].as_array().unwrap().iter().collect();
    assert!(tasks.iter().any(|t| t["goal"] == "Renew the passport"));
}

#[test]
fn bad_exports_are_refused_before_anything_is_written_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    for backend in mneme_e2e::BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, dir.path());
        let newer =
            json!({"format": "mneme-export", "version": 3, "export_id": "x", "exported_at_ms": 1, "tables": {}});
        let r = import(&app, &newer.to_string(), "", T0);
        r.assert_error(400, "invalid");
        assert!(r.body.contains("newer Mneme"), "{}", r.body);
        for (doc, says) in [
            ("", "empty"),
            ("{\"format\": \"mneme-export\", \"version\": 2", "cut short"),
            ("[1, 2]", "JSON object"),
            ("{\"format\": \"zip\", \"version\": 1}", "not a Mneme export"),
            (
                "{\"format\":\"mneme-export\",\"version\":2,\"export_id\":\"e\",\"exported_at_ms\":1,\"tables\":{\"nope\":[{}]}}",
                "`tables.nope`",
            ),
            (
                "{\"format\":\"mneme-export\",\"version\":2,\"export_id\":\"e\",\"exported_at_ms\":1,\"tables\":{\"threads\":[{\"id\":\"t\",\"created_ms\":\"soon\"}]}}",
                "`tables.threads[0].created_ms` must be a whole number",
            ),
            (
                "{\"format\":\"mneme-export\",\"version\":2,\"export_id\":\"e\",\"exported_at_ms\":1,\"tables\":{\"threads\":[{\"id\":\"t\",\"colour\":1}]}}",
                "no such column",
            ),
        ] {
            let r = import(&app, doc, "", T0);
            r.assert_error(400, "invalid");
            assert!(r.body.contains(says), "{doc}: {}", r.body);
        }
        import(&app, "{}", "?merge=maybe", T0).assert_error(400, "invalid");
        let r = app.call("GET", "/privacy/import", None, T0);
        r.assert_error(405, "method-not-allowed");
        // A part that skips ahead is refused, and nothing was written.
        let skip = json!({"format": "mneme-export", "version": 2, "export_id": "e2", "exported_at_ms": 1, "part": 2,
                          "last": false, "tables": {"threads": [{"id": "t9", "created_ms": 1, "last_activity_ms": 1}]}});
        import(&app, &skip.to_string(), "", T0).assert_error(409, "conflict");
        let e = export(&app, T0);
        assert!(e["tables"]["threads"].as_array().unwrap().is_empty(), "{}", e["tables"]["threads"]);
    }
}

/// What the first format wrote for `e`: no version, blobs as `<N bytes>`,
/// the search index as its tables, memory as the readable view only.
fn as_version_1(e: &Value) -> Value {
    let mut tables = e["tables"].as_object().unwrap().clone();
    for rows in tables.values_mut() {
        for row in rows.as_array_mut().unwrap() {
            for v in row.as_object_mut().unwrap().values_mut() {
                // Every embedding: base64 of 384 little-endian floats.
                if v.as_str().is_some_and(|s| s.len() == 2048 && !s.contains(' ')) {
                    *v = json!("<1536 bytes>");
                }
            }
        }
    }
    let items: Vec<Value> = e["search"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut s = s.clone();
            s.as_object_mut().unwrap().remove("embedding");
            s["seq"] = json!(i + 1);
            s
        })
        .collect();
    let vectors: Vec<Value> = (1..=items.len()).map(|i| json!({"seq": i, "embedding": "<1536 bytes>"})).collect();
    tables.insert("search_index".into(), json!(items));
    tables.insert("search_vectors".into(), json!(vectors));
    tables.insert("vector_blocks".into(), json!([{"corpus": "document", "block": 0, "seqs": "<8 bytes>"}]));
    json!({"exported_at_ms": e["exported_at_ms"], "memory": e["memory"], "tables": tables})
}

#[test]
fn a_version_1_export_is_migrated_and_its_embeddings_computed_again() {
    let dir = tempfile::tempdir().unwrap();
    let b = BackendEnv::new(Backend::Embedded);
    let source = start(&b, dir.path());
    fill(&source);
    let original = export(&source, AT);
    let old = as_version_1(&original);
    for backend in mneme_e2e::BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, dir.path());
        let r = ok(import(&app, &old.to_string(), "", AT), 200);
        assert_eq!((r["version"].as_u64(), r["finished"].as_bool()), (Some(1), Some(true)), "{r}");
        let now = export(&app, AT);
        for t in ["exchanges", "threads", "rx_recs", "persistent_tasks", "scheduled_items"] {
            assert_eq!(now["tables"][t], original["tables"][t], "{backend:?}: `{t}`");
        }
        // The tool and the documents have their embeddings again: the
        // documents are found by meaning as before.
        let tool = &now["tables"]["tools"][0];
        assert_eq!(tool["config"], original["tables"]["tools"][0]["config"]);
        assert_eq!(tool["embedding"], original["tables"]["tools"][0]["embedding"], "the same text, the same vector");
        assert_eq!(now["search"].as_array().unwrap().len(), original["search"].as_array().unwrap().len());
        let found = ok(app.call("GET", "/search?q=how%20often%20to%20train", None, AT), 200);
        assert!(found.to_string().contains("Training consistency"), "{found}");
        // The view's facts came back as memory keys.
        assert_eq!(now["memory"]["facts"], original["memory"]["facts"], "{backend:?}");
    }
}

#[test]
fn mneme_restore_sends_a_file_in_parts_and_carries_on_after_one_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let b = BackendEnv::new(Backend::Hosted);
    let source = start(&b, dir.path());
    fill(&source);
    // The file as Mneme wrote it: its header first.
    let body = source.call("GET", "/privacy/export", None, AT).body;
    let original: Value = serde_json::from_str(&body).unwrap();
    let file = dir.path().join("export.json");
    std::fs::write(&file, &body).unwrap();
    let whole = std::fs::read(&file).unwrap();
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();

    let target = BackendEnv::new(Backend::Embedded);
    let app = start(&target, dir.path());
    let restore = |f: &Path| {
        std::process::Command::new(mneme_bin())
            .args(["restore", f.to_str().unwrap(), "--url", &app.url, "--part-bytes", "4096"])
            .env("MNEME_API_KEY", TEST_KEY)
            .output()
            .unwrap()
    };
    // A file cut short is refused whole: nothing is sent.
    let out = restore(&cut);
    assert!(!out.status.success(), "a file cut short fails");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a whole export") && err.contains("cut short"), "{err}");
    let empty = export(&app, AT);
    assert!(
        empty["tables"]["exchanges"].as_array().unwrap().is_empty() && empty["search"].as_array().unwrap().is_empty()
    );

    // A run cut off while sending: its first parts arrived, the rest did
    // not. The next run carries on; the parts already taken change nothing.
    let mut reader = mneme_backup::Reader::new();
    reader.feed(&whole);
    let mut parts = mneme_backup::Parts::new(4096);
    let mut sent = Vec::new();
    while let Some(item) = reader.next_item().unwrap() {
        if let Some(p) = parts.push(item) {
            sent.push(p);
        }
    }
    assert!(sent.len() > 5, "{} parts", sent.len());
    for p in &sent[..3] {
        ok(import(&app, p, "", AT), 200);
    }
    let out = restore(&file);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("restored export") && said.contains("parts"), "{said}");
    let parts: u64 = said.split(" in ").nth(1).and_then(|s| s.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(parts > 5, "{said}");
    // `mneme restore` runs on the real clock, past the test clock's
    // records, which it leaves out as expired (D-M6).
    let e = export(&app, AT);
    assert_same(&without_expired(&original), &e, "mneme restore, PostgreSQL into embedded");

    // A newer format is refused with nothing sent; no key, a clear error.
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, r#"{"format":"mneme-export","version":9,"export_id":"n","exported_at_ms":1,"tables":{}}"#)
        .unwrap();
    let out = restore(&newer);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("newer Mneme"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = std::process::Command::new(mneme_bin())
        .args(["restore", file.to_str().unwrap(), "--url", &app.url])
        .env_remove("MNEME_API_KEY")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("MNEME_API_KEY"));
}
