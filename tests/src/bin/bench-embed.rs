//! The embedding alone (docs/BENCHMARKS.md, D-K11): LoCoMo texts, each
//! tokenised as the runner does it (no padding, truncation at 256) and
//! embedded one at a time by `mneme-minilm` on this thread, after 20
//! warm-ups. No HTTP, no store: this is the part of `/retrieve` (questions)
//! or of an ingest (`--turns`: what an entry's retrieval embedding reads,
//! its topic, a conversation turn and a reasoning) that the model costs.
//!
//! `--exact` keeps every product in single precision where the CPU would
//! multiply in bfloat16 (D-K23). `--compare` measures what the bfloat16
//! products change instead of timing: each text's cosine to its
//! single-precision embedding, and for each question how many of its 10
//! nearest turns (among the first 5,000) both builds find.
//!
//! Usage: bench-embed [--runs 300] [--turns] [--exact | --compare]   (weights
//! from $MNEME_MODELS_DIR, else ~/.cache/mneme/ai-models)

use std::time::Instant;

use mneme_e2e::bench::{arg, locomo, locomo_turns, report};
use mneme_minilm::Precision;
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
    if std::env::args().any(|a| a == "--compare") {
        return compare(runs);
    }
    let exact = std::env::args().any(|a| a == "--exact");
    let (model, tokenizer) = mneme_e2e::bench::minilm_with(if exact { Precision::Single } else { Precision::Fast });
    println!("products in {}", if model.bf16() { "bfloat16" } else { "single precision" });

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

/// What the bfloat16 products change (`--compare`).
fn compare(questions: usize) {
    let (model, tokenizer) = mneme_e2e::bench::minilm();
    assert!(model.bf16(), "this CPU has no AVX-512 BF16: both builds are single precision");
    let (exact, _) = mneme_e2e::bench::minilm_with(Precision::Single);
    let data = locomo();
    let ids = |t: &str| tokenizer.encode(t, true).expect("tokenising").get_ids().to_vec();
    let turns: Vec<Vec<u32>> = entry_texts(&data).iter().take(5_000).map(|t| ids(t)).collect();
    let qs: Vec<Vec<u32>> = data
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["qa"].as_array().unwrap().iter().map(|q| q["question"].as_str().unwrap().to_string()))
        .take(questions)
        .map(|q| ids(&q))
        .collect();
    let both = |set: &[Vec<u32>]| -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
        (set.iter().map(|t| model.embed(t).unwrap()).collect(), set.iter().map(|t| exact.embed(t).unwrap()).collect())
    };
    let (tb, te) = both(&turns);
    let (qb, qe) = both(&qs);
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let mut cos: Vec<f64> = tb.iter().zip(&te).chain(qb.iter().zip(&qe)).map(|(a, b)| dot(a, b) as f64).collect();
    cos.sort_by(f64::total_cmp);
    let mean = cos.iter().sum::<f64>() / cos.len() as f64;
    println!(
        "cosine to single precision over {} texts: min {:.5}, 1st percentile {:.5}, median {:.6}, mean {:.6}",
        cos.len(),
        cos[0],
        cos[cos.len() / 100],
        cos[cos.len() / 2],
        mean
    );
    let top = |q: &[f32], set: &[Vec<f32>]| -> Vec<usize> {
        let mut s: Vec<(f32, usize)> = set.iter().enumerate().map(|(i, t)| (dot(q, t), i)).collect();
        s.sort_by(|a, b| b.0.total_cmp(&a.0));
        s.iter().take(10).map(|x| x.1).collect()
    };
    let (mut same, mut first) = (0usize, 0usize);
    for (b, e) in qb.iter().zip(&qe) {
        let (x, y) = (top(b, &tb), top(e, &te));
        same += x.iter().filter(|i| y.contains(i)).count();
        first += usize::from(x[0] == y[0]);
    }
    println!(
        "{} questions against {} turns: {:.4} of the 10 nearest shared, the nearest the same for {:.4}",
        qs.len(),
        turns.len(),
        same as f64 / (10 * qs.len()) as f64,
        first as f64 / qs.len() as f64
    );
}
