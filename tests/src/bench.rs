//! What the benchmark binaries share: their command line, percentiles and
//! the latency line they print.

use crate::Backend;

/// `../shared/data/locomo10.json`, the conversations the retrieval benchmarks ask about.
pub fn locomo() -> serde_json::Value {
    let path = crate::repo_root().join("../shared/data/locomo10.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Every LoCoMo turn of eight words or more, in order: what the knowledge
/// benchmarks ingest as positions.
pub fn locomo_turns(data: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for conv in data.as_array().unwrap() {
        let c = &conv["conversation"];
        for n in 1.. {
            let Some(s) = c.get(format!("session_{n}")).and_then(serde_json::Value::as_array) else { break };
            for t in s {
                let text = t["text"].as_str().unwrap_or_default();
                if text.split_whitespace().count() >= 8 {
                    out.push(text.to_string());
                }
            }
        }
    }
    out
}

/// The value after `name` on the command line (`--runs 300`).
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// `--backend hosted` (PostgreSQL and Redis), else the embedded default.
pub fn backend() -> Backend {
    match arg("--backend").as_deref() {
        Some("hosted") => Backend::Hosted,
        _ => Backend::Embedded,
    }
}

/// The `p` quantile (0–1) of already sorted samples, nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Sorts the samples and prints `name: n=… p50=… p95=… max=…` (ms).
pub fn report(name: &str, ms: &mut [f64]) {
    if ms.is_empty() {
        println!("{name}: n=0");
        return;
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "{name}: n={} p50={:.1} ms p95={:.1} ms max={:.1} ms",
        ms.len(),
        percentile(ms, 0.5),
        percentile(ms, 0.95),
        ms[ms.len() - 1]
    );
}

/// all-MiniLM-L6-v2 as the runner loads it, from `$MNEME_MODELS_DIR` (else
/// `~/.cache/mneme/ai-models`), with its tokenizer set as the runner sets
/// it (no padding, truncation at 256); prints how long the load took.
pub fn minilm() -> (mneme_minilm::MiniLm, tokenizers::Tokenizer) {
    minilm_with(mneme_minilm::Precision::Fast)
}

/// [`minilm`] with the layers' products in `precision` (D-K23).
pub fn minilm_with(precision: mneme_minilm::Precision) -> (mneme_minilm::MiniLm, tokenizers::Tokenizer) {
    let dir = crate::models_dir().join("all-minilm-l6-v2");
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()));
    let config: mneme_minilm::Config = serde_json::from_slice(&read("config.json")).expect("config.json");
    let started = std::time::Instant::now();
    let model = mneme_minilm::MiniLm::with_precision(&read("model.safetensors"), &config, precision)
        .expect("loading the weights");
    println!("model loaded in {:.0} ms", started.elapsed().as_secs_f64() * 1e3);
    let mut tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).expect("tokenizer.json");
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams { max_length: 256, ..Default::default() }))
        .expect("truncation");
    (model, tokenizer)
}

/// SplitMix64: the benchmarks' seeded randomness.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
