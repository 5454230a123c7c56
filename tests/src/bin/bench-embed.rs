//! The query embedding alone (docs/BENCHMARKS.md, D-K11): the first 300
//! LoCoMo questions, each tokenised as the runner does it (no padding,
//! truncation at 256) and embedded one at a time by `mneme-minilm` on this
//! thread, after 20 warm-up queries. No HTTP, no store: this is the part of
//! `/retrieve` that the model costs.
//!
//! Usage: bench-embed [--runs 300]   (weights from $MNEME_MODELS_DIR, else
//! ~/.cache/mneme/ai-models)

use std::time::Instant;

use mneme_e2e::bench::{arg, locomo, report};

fn main() {
    let runs: usize = arg("--runs").map_or(300, |r| r.parse().expect("--runs takes a number"));
    let (model, tokenizer) = mneme_e2e::bench::minilm();

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
