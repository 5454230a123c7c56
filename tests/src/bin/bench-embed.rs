//! The embedding alone (docs/BENCHMARKS.md, D-K11): LoCoMo texts, each
//! tokenised as the runner does it (no padding, truncation at 256) and
//! embedded one at a time by `mneme-minilm` on this thread, after 20
//! warm-ups. No HTTP, no store: this is the part of `/retrieve` (questions)
//! or of an ingest (`--turns`: what an entry's retrieval embedding reads,
//! its topic, a conversation turn and a reasoning) that the model costs.
//!
//! Usage: bench-embed [--runs 300] [--turns]   (weights from
//! $MNEME_MODELS_DIR, else ~/.cache/mneme/ai-models)

use std::time::Instant;

use mneme_e2e::bench::{arg, locomo, locomo_turns, report};
use serde_json::Value;

/// Turns of eight words or more, as an ingested entry's retrieval text
/// (`topic. position reasoning`), the shape `bench-knowledge` ingests.
fn entry_texts(data: &Value) -> Vec<String> {
    locomo_turns(data)
        .into_iter()
        .enumerate()
        .map(|(k, text)| {
            let topic = text.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
            format!("{topic}. {text} it came up in conversation {k}")
        })
        .collect()
}

fn main() {
    let runs: usize = arg("--runs").map_or(300, |r| r.parse().expect("--runs takes a number"));
    let ingest = std::env::args().any(|a| a == "--turns");
    let (model, tokenizer) = mneme_e2e::bench::minilm();

    let data = locomo();
    let texts: Vec<String> = if ingest {
        entry_texts(&data).into_iter().take(runs + 20).collect()
    } else {
        data.as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["qa"].as_array().unwrap().iter().map(|q| q["question"].as_str().unwrap().to_string()))
            .take(runs + 20)
            .collect()
    };
    let ids: Vec<Vec<u32>> =
        texts.iter().map(|q| tokenizer.encode(q.as_str(), true).expect("tokenising").get_ids().to_vec()).collect();
    for q in &ids[..20] {
        model.embed(q).unwrap();
    }
    let mut ms = Vec::new();
    for q in &ids[20..] {
        let t = Instant::now();
        let v = model.embed(q).unwrap();
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(v.len(), 384);
    }
    let tokens = ids[20..].iter().map(Vec::len).sum::<usize>() as f64 / ms.len() as f64;
    println!("{}: mean {tokens:.1} tokens, one thread", if ingest { "entry texts" } else { "queries" });
    report("embed", &mut ms);
}
