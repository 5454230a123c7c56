//! `mneme restore FILE`: restores a privacy export into a running Mneme,
//! read from the file a chunk at a time and sent to `POST /privacy/import`
//! in parts of about 2 MiB (`--part-bytes`: half the app's body limit, so
//! a part that runs over by an item still fits) (#51 item 5), so an export of any size restores
//! within the app's body limit and this command's memory. A part that gets
//! a 503, or no answer, is sent again (a part sent twice changes nothing);
//! the run stops at the first other refusal and says why. The file is read
//! whole once before anything is sent, so a file cut short or of a newer
//! format sends nothing; a run cut off while sending (the app or the link
//! went down) carries on when it is run again: the parts already taken are
//! taken again with no change.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use mneme_backup::{HeaderFields, Item, Parts, Reader};
use serde_json::Value;

/// Tries per part before the run gives up.
const TRIES: u32 = 4;

#[derive(Default)]
struct Totals {
    parts: u64,
    rows: u64,
    kept: u64,
    search: u64,
    keys: u64,
}

pub fn run(file: &Path, url: Option<String>, merge: bool, part_bytes: usize) -> Result<()> {
    let remote = mneme_vault::Remote::from_env(url)?;
    // First the whole file is read for its header (a tool that sorted the
    // keys moved `version` to the end) and checked whole, so a newer
    // format or a file cut short is refused with nothing sent.
    let mut header = HeaderFields::default();
    each_item(file, &mut |item| {
        if let Item::Field(k, v) = item {
            header.add(k, v);
        }
        Ok(())
    })
    .with_context(|| format!("{} is not a whole export", file.display()))?;
    let judged = header.judge().map_err(anyhow::Error::msg)?;
    let path = if merge { "/privacy/import?merge=true" } else { "/privacy/import" };
    let mut parts = Parts::new(part_bytes);
    for (k, v) in header.fields() {
        parts.push(Item::Field(k.clone(), v.clone()));
    }
    let mut totals = Totals::default();
    each_item(file, &mut |item| {
        if matches!(item, Item::Field(..)) {
            return Ok(());
        }
        match parts.push(item) {
            Some(part) => send(&remote, path, part, &mut totals),
            None => Ok(()),
        }
    })?;
    send(&remote, path, parts.finish(), &mut totals)?;
    println!(
        "restored export {} (format version {}) in {} parts: {} rows, {} search items, {} memory keys written; {} kept as the store had them",
        judged.export_id, judged.version, totals.parts, totals.rows, totals.search, totals.keys, totals.kept
    );
    Ok(())
}

/// Reads the export a chunk at a time and hands each item to `f`.
fn each_item(file: &Path, f: &mut dyn FnMut(Item) -> Result<()>) -> Result<()> {
    let mut input = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
    let mut reader = Reader::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = input.read(&mut chunk).with_context(|| format!("reading {}", file.display()))?;
        if n == 0 {
            break;
        }
        reader.feed(&chunk[..n]);
        while let Some(item) = reader.next_item()? {
            f(item)?;
        }
    }
    reader.finish()?;
    Ok(())
}

fn send(remote: &mneme_vault::Remote, path: &str, part: String, totals: &mut Totals) -> Result<()> {
    let headers = [("content-type", "application/json".to_string())];
    let mut wait = Duration::from_secs(1);
    for attempt in 1..=TRIES {
        let last = attempt == TRIES;
        match remote.request("POST", path, &headers, Some(part.clone().into_bytes())) {
            Ok((200, body)) => {
                let r: Value = serde_json::from_slice(&body).context("the app's answer to a part")?;
                let n = |k: &str| r[k].as_u64().unwrap_or(0);
                totals.parts += 1;
                totals.rows += n("rows");
                totals.kept += n("kept");
                totals.search += n("search_items");
                totals.keys += n("memory_keys");
                if totals.parts.is_multiple_of(25) {
                    eprintln!("mneme restore: {} parts, {} rows so far", totals.parts, totals.rows);
                }
                return Ok(());
            }
            Ok((503, body)) if !last => {
                eprintln!("mneme restore: part {} waits {wait:?}: {}", totals.parts, api_error(503, &body));
            }
            Ok((status, body)) => bail!("part {} was refused: {}", totals.parts, api_error(status, &body)),
            Err(e) if !last => eprintln!("mneme restore: part {} waits {wait:?}: {e:#}", totals.parts),
            Err(e) => return Err(e.context(format!("part {}", totals.parts))),
        }
        std::thread::sleep(wait);
        wait *= 2;
    }
    unreachable!("the last try returns")
}

fn api_error(status: u16, body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match (v["error"]["code"].as_str(), v["error"]["message"].as_str()) {
        (Some(c), Some(m)) => format!("{status} {c}: {m}"),
        _ => format!("HTTP {status}"),
    }
}
