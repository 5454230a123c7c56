//! The query embedding alone (docs/BENCHMARKS.md, D-K11): the first 300
//! LoCoMo questions, each tokenised as the runner does it (no padding,
//! truncation at 256) and embedded one at a time by `mneme-minilm` on this
//! thread, after 20 warm-up queries. No HTTP, no store: this is the part of
//! `/retrieve` that the model costs.
//!
//! Usage: bench-embed [--runs 300]   (weights from $MNEME_MODELS_DIR, else
//! ~/.cache/mneme/ai-models)

use std::path::PathBuf;
use std::time::Instant;

use mneme_e2e::bench::{arg, locomo, report};
use mneme_minilm::{Config, MiniLm};
use tokenizers::{Tokenizer, TruncationParams};

fn main() {
    let runs: usize = arg("--runs").map_or(300, |r| r.parse().expect("--runs takes a number"));
    let dir = std::env::var_os("MNEME_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache/mneme/ai-models"))
        .join("all-minilm-l6-v2");
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()));
    let config: Config = serde_json::from_slice(&read("config.json")).expect("config.json");
    let started = Instant::now();
    let model = MiniLm::from_safetensors(&read("model.safetensors"), &config).expect("loading the weights");
    println!("model loaded in {:.0} ms", started.elapsed().as_secs_f64() * 1e3);
    let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).expect("tokenizer.json");
    tokenizer.with_padding(None);
    tokenizer.with_truncation(Some(TruncationParams { max_length: 256, ..Default::default() })).expect("truncation");

    let questions: Vec<String> = locomo()
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["qa"].as_array().unwrap().iter().map(|q| q["question"].as_str().unwrap().to_string()))
        .take(runs + 20)
        .collect();
    let ids: Vec<Vec<u32>> =
        questions.iter().map(|q| tokenizer.encode(q.as_str(), true).expect("tokenising").get_ids().to_vec()).collect();
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
    println!("queries: mean {tokens:.1} tokens, one thread");
    report("embed", &mut ms);
}
