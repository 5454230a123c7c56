//! Restore benchmark (docs/BENCHMARKS.md, #51 item 5): the size and time of
//! a round trip, export file → `mneme restore` → `GET /privacy/export`,
//! through the runner over HTTP, at `--items` items.
//!
//! The export is written here, a block of ten items at a time: a thread,
//! four exchanges, three working-memory turns and two documents in the
//! search index (each with a unit-length random embedding and 40 words of
//! text from a 2,000-word vocabulary). It is restored into an empty store
//! with `mneme restore` (2 MiB parts), exported again, and the two are
//! compared item by item: an order-free digest of every row, search item
//! and memory key (FNV-1a of each one's canonical JSON, summed) must be
//! equal, and so must the counts.
//!
//! Usage: bench-restore --backend embedded|hosted [--items 10000] [--dir DIR]

use std::collections::BTreeMap;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::time::Instant;

use mneme_backup::{Item, Reader};
use mneme_e2e::bench::{SplitMix, arg, backend};
use mneme_e2e::{App, BackendEnv, TEST_KEY, mneme_bin, test_env};
use serde_json::{Value, json};

/// The generator's draws.
trait Draws {
    fn coord(&mut self) -> f32;
    fn words(&mut self, n: usize) -> String;
}

impl Draws for SplitMix {
    fn coord(&mut self) -> f32 {
        self.unit() as f32 - 0.5
    }
    fn words(&mut self, n: usize) -> String {
        (0..n).map(|_| format!("w{}", self.next_u64() % 2000)).collect::<Vec<_>>().join(" ")
    }
}

/// The order-free digest of an export's items, and how many of each kind.
#[derive(Debug, Default, PartialEq)]
struct Digest {
    sum: u64,
    counts: BTreeMap<String, u64>,
}

impl Digest {
    fn add(&mut self, kind: &str, v: &Value) {
        // Canonical: the keys sorted, whatever the map type keeps.
        let canon: BTreeMap<&String, &Value> = v.as_object().map(|m| m.iter().collect()).unwrap_or_default();
        let text = format!("{kind}\0{}", serde_json::to_string(&canon).unwrap());
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.sum = self.sum.wrapping_add(h);
        *self.counts.entry(kind.to_string()).or_default() += 1;
    }

    /// The digest of an export file: its data tables, search items and
    /// memory keys (the configuration a new store starts with is left out).
    fn of_file(path: &Path) -> Digest {
        let mut d = Digest::default();
        let mut f = std::fs::File::open(path).unwrap();
        let mut r = Reader::new();
        let mut chunk = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            r.feed(&chunk[..n]);
            while let Some(item) = r.next_item().unwrap() {
                match item {
                    Item::Row { table, row } if mneme_backup::DATA_TABLES.contains(&table.as_str()) => {
                        d.add(&table, &Value::Object(row))
                    }
                    Item::Search(s) => d.add("search", &Value::Object(s)),
                    Item::Kv { key, value } => d.add("kv", &json!({"key": key, "value": value})),
                    _ => {}
                }
            }
        }
        r.finish().unwrap();
        d
    }
}

const T0: i64 = 1_772_442_000_000;

/// Writes one table of `blocks` blocks' rows.
fn section(
    out: &mut BufWriter<std::fs::File>,
    d: &mut Digest,
    name: &str,
    first: bool,
    blocks: usize,
    rows: &mut dyn FnMut(usize) -> Vec<Value>,
) {
    if !first {
        write!(out, ",").unwrap();
    }
    write!(out, "\"{name}\":[").unwrap();
    let mut n = 0;
    for b in 0..blocks {
        for row in rows(b) {
            if n > 0 {
                write!(out, ",").unwrap();
            }
            serde_json::to_writer(&mut *out, &row).unwrap();
            d.add(name, &row);
            n += 1;
        }
    }
    write!(out, "]").unwrap();
}

/// Writes an export of `items` items to `path`; returns its digest.
fn generate(path: &Path, items: usize) -> Digest {
    let mut rng = SplitMix(11);
    let mut d = Digest::default();
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let blocks = items.div_ceil(10);
    write!(out, "{},\"tables\":{{", mneme_backup::opening(&format!("bench-{items}"), T0)).unwrap();
    section(&mut out, &mut d, "threads", true, blocks, &mut |b| {
        vec![json!({"id": format!("t{b}"), "created_ms": T0, "last_activity_ms": T0 + b as i64, "exchange_count": 4,
                    "previous_mode": "RESPOND", "previous_tools": "[]"})]
    });
    let mut text = SplitMix(12);
    section(&mut out, &mut d, "exchanges", false, blocks, &mut |b| {
        (0..4)
            .map(|i| {
                json!({"id": format!("x{b}-{i}"), "thread_id": format!("t{b}"), "request_id": format!("r{b}-{i}"),
                       "source": "chat", "prompt": text.words(12), "response": text.words(30), "topic": format!("topic-{}", b % 50),
                       "mode": "RESPOND", "confidence": 0.75, "reply_source": "rules", "created_ms": T0 + (b * 4 + i) as i64,
                       "duration_ms": 12})
            })
            .collect()
    });
    section(&mut out, &mut d, "working_memory", false, blocks, &mut |b| {
        (0..3)
            .map(|i| {
                json!({"id": (b * 3 + i + 1) as i64, "thread_id": format!("t{b}"), "role": if i % 2 == 0 { "user" } else { "assistant" },
                       "content": text.words(20), "at_ms": T0 + (b * 3 + i) as i64})
            })
            .collect()
    });
    write!(out, "}},\"search\":[").unwrap();
    for b in 0..blocks {
        for i in 0..2 {
            let mut e: Vec<f32> = (0..384).map(|_| rng.coord()).collect();
            let norm = e.iter().map(|x| x * x).sum::<f32>().sqrt();
            e.iter_mut().for_each(|x| *x /= norm);
            let bytes: Vec<u8> = e.iter().flat_map(|x| x.to_le_bytes()).collect();
            let item = json!({"corpus": "document", "ref_id": format!("doc-{b}-{i}"), "title": rng.words(4),
                              "body": rng.words(40), "context": "", "dated": "2 March 2026",
                              "meta": "{}", "created_ms": T0 + (b * 2 + i) as i64,
                              "embedding": mneme_backup::base64(&bytes)});
            if b + i > 0 {
                write!(out, ",").unwrap();
            }
            serde_json::to_writer(&mut out, &item).unwrap();
            d.add("search", &item);
        }
    }
    write!(out, "],\"kv\":{{}},\"memory\":{{}}}}").unwrap();
    out.flush().unwrap();
    d
}

fn main() {
    let items: usize = arg("--items").map_or(10_000, |n| n.parse().expect("--items N"));
    let dir = match arg("--dir") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let b = BackendEnv::new(backend());
    // No scheduled job but the migration: nothing but the restore writes.
    let app = App::start(&mneme_e2e::only_migrating(dir.path()), &test_env(&b, None));
    let input = dir.path().join("export.json");
    let t = Instant::now();
    let written = generate(&input, items);
    let size = std::fs::metadata(&input).unwrap().len();
    println!(
        "generated {} items ({:?}) in {:.1} s: {:.1} MB",
        written.counts.values().sum::<u64>(),
        written.counts,
        t.elapsed().as_secs_f64(),
        size as f64 / 1e6
    );

    let t = Instant::now();
    let out = std::process::Command::new(mneme_bin())
        .args(["restore", input.to_str().unwrap(), "--url", &app.url])
        .env("MNEME_API_KEY", TEST_KEY)
        .output()
        .unwrap();
    let restore_s = t.elapsed().as_secs_f64();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    println!(
        "restore: {restore_s:.1} s ({:.0} items/s): {}",
        items as f64 / restore_s,
        String::from_utf8_lossy(&out.stdout).trim()
    );

    let exported = dir.path().join("again.json");
    let t = Instant::now();
    let status = std::process::Command::new("curl")
        .args(["-sS", "-f", "-o", exported.to_str().unwrap(), "-H", &format!("Authorization: Bearer {TEST_KEY}")])
        .arg(format!("{}/privacy/export", app.url))
        .status()
        .unwrap();
    let export_s = t.elapsed().as_secs_f64();
    assert!(status.success());
    let again = std::fs::metadata(&exported).unwrap().len();
    println!("export: {export_s:.1} s ({:.0} items/s), {:.1} MB", items as f64 / export_s, again as f64 / 1e6);
    let read = Digest::of_file(&exported);
    assert_eq!(read, written, "the export again holds exactly what was restored");
    println!(
        "round trip at {items} items: restore {restore_s:.1} s + export {export_s:.1} s; file {:.1} MB → {:.1} MB; digest equal",
        size as f64 / 1e6,
        again as f64 / 1e6
    );
}
