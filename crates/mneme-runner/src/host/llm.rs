//! `fermyon:spin/llm@2.0.0`.
//!
//! `generate-embeddings` with `all-minilm-l6-v2` runs natively
//! (`mneme-minilm`) on the weights in Spin's local model layout,
//! `<state-dir>/ai-models/all-minilm-l6-v2/{model.safetensors,tokenizer.json,config.json}`;
//! the model loads once, on first use, and sentences are mean-pooled and
//! L2-normalised as sentence-transformers does.
//!
//! `infer` is forwarded to the OpenAI-compatible endpoint named by
//! `[llm_compute] type = "remote_http"` in the runtime config; with none
//! configured it fails with an error that says so.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mneme_minilm::MiniLm;
use tokenizers::{Tokenizer, TruncationParams};

use super::SpinView;
use super::fermyon::spin::llm::{
    EmbeddingsResult, EmbeddingsUsage, Error, Host, InferencingParams, InferencingResult, InferencingUsage,
};
use crate::runtime_config::LlmCompute;

pub const EMBEDDING_MODEL: &str = "all-minilm-l6-v2";
/// Longer inputs are truncated, as sentence-transformers does for this model.
const MAX_TOKENS: usize = 256;

pub struct Embedder {
    model: MiniLm,
    tokenizer: Tokenizer,
}

impl Embedder {
    pub fn load(dir: &std::path::Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        let config: mneme_minilm::Config = serde_json::from_str(
            &std::fs::read_to_string(dir.join("config.json"))
                .with_context(|| format!("reading {}/config.json", dir.display()))?,
        )?;
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| anyhow::anyhow!("tokenizer.json: {e}"))?;
        // Each sentence runs alone, so none is padded (the shipped tokenizer
        // pads every input to 128 tokens, which costs about 10x for nothing).
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|e| anyhow::anyhow!("tokenizer truncation: {e}"))?;
        let path = dir.join("model.safetensors");
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let model = MiniLm::from_safetensors(&bytes, &config)?;
        Ok(Self { model, tokenizer })
    }

    /// Embeds `texts`; returns one unit-length vector per text and the token
    /// count. One text runs on the calling thread; a batch is spread over the
    /// machine's cores.
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<(Vec<Vec<f32>>, u32)> {
        let enc = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| anyhow::anyhow!("tokenising: {e}"))?;
        let tokens = enc.iter().map(|e| e.get_ids().len() as u32).sum();
        let threads = std::thread::available_parallelism().map_or(1, usize::from).min(enc.len());
        if threads <= 1 {
            let out = enc.iter().map(|e| self.model.embed(e.get_ids())).collect::<Result<_, _>>()?;
            return Ok((out, tokens));
        }
        // Thread t embeds texts t, t + threads, t + 2·threads, …
        let parts = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let enc = &enc;
                    s.spawn(move || {
                        enc.iter().skip(t).step_by(threads).map(|e| self.model.embed(e.get_ids())).collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("an embedding thread panicked")).collect::<Vec<_>>()
        });
        let mut parts: Vec<_> = parts.into_iter().map(Vec::into_iter).collect();
        let out = (0..enc.len())
            .map(|i| parts[i % threads].next().expect("one result per text"))
            .collect::<Result<_, _>>()?;
        Ok((out, tokens))
    }
}

/// The app's model services.
pub struct Llm {
    models_dir: PathBuf,
    embedder: OnceLock<Result<Arc<Embedder>, String>>,
    compute: Option<LlmCompute>,
}

impl Llm {
    pub fn new(models_dir: PathBuf, compute: Option<LlmCompute>) -> Self {
        Self { models_dir, embedder: OnceLock::new(), compute }
    }

    pub fn embedder(&self) -> Result<Arc<Embedder>, String> {
        self.embedder
            .get_or_init(|| {
                let dir = self.models_dir.join(EMBEDDING_MODEL);
                Embedder::load(&dir).map(Arc::new).map_err(|e| {
                    format!(
                        "embedding model not available in {}: {e:#} (scripts/install.sh installs it there)",
                        dir.display()
                    )
                })
            })
            .clone()
    }
}

fn denied(model: &str) -> Error {
    Error::InvalidInput(format!(
        "The component does not have access to use '{model}'. To give the component access, add '{model}' to the 'ai_models' key for the component in your spin.toml manifest"
    ))
}

impl Host for SpinView<'_> {
    async fn infer(
        &mut self,
        model: String,
        prompt: String,
        params: Option<InferencingParams>,
    ) -> wasmtime::Result<Result<InferencingResult, Error>> {
        if !self.ctx.caps.ai_models.contains(&model) {
            return Ok(Err(denied(&model)));
        }
        let Some(compute) = self.ctx.services.llm.compute.clone() else {
            return Ok(Err(Error::RuntimeError(
                "no inference endpoint is configured: add [llm_compute] type = \"remote_http\", url = \"http://host/v1\" to the runtime config".into(),
            )));
        };
        let mut span = self.ctx.scope.host("spin_llm.infer");
        crate::otel::set(&mut span, "llm.model", model.as_str());
        let result = remote_infer(&compute, &model, &prompt, params).await;
        if let Ok(r) = &result {
            crate::otel::set(&mut span, "gen_ai.usage.input_tokens", r.usage.prompt_token_count);
            crate::otel::set(&mut span, "gen_ai.usage.output_tokens", r.usage.generated_token_count);
        }
        Ok(super::finish(span, result))
    }

    async fn generate_embeddings(
        &mut self,
        model: String,
        text: Vec<String>,
    ) -> wasmtime::Result<Result<EmbeddingsResult, Error>> {
        if !self.ctx.caps.ai_models.contains(&model) {
            return Ok(Err(denied(&model)));
        }
        if model != EMBEDDING_MODEL {
            return Ok(Err(Error::ModelNotSupported));
        }
        let embedder = match self.ctx.services.llm.embedder() {
            Ok(e) => e,
            Err(msg) => return Ok(Err(Error::RuntimeError(msg))),
        };
        let mut span = self.ctx.scope.host("spin_llm.generate_embeddings");
        crate::otel::set(&mut span, "llm.model", model.as_str());
        let out = tokio::task::spawn_blocking(move || embedder.embed(&text)).await?;
        if let Ok((_, tokens)) = &out {
            crate::otel::set(&mut span, "gen_ai.usage.input_tokens", *tokens);
        }
        let out = super::finish(span, out);
        Ok(out
            .map(|(embeddings, tokens)| EmbeddingsResult {
                embeddings,
                usage: EmbeddingsUsage { prompt_token_count: tokens },
            })
            .map_err(|e| Error::RuntimeError(format!("{e:#}"))))
    }
}

/// One chat-completions call to an OpenAI-compatible endpoint.
async fn remote_infer(
    c: &LlmCompute,
    model: &str,
    prompt: &str,
    params: Option<InferencingParams>,
) -> Result<InferencingResult, Error> {
    let p = params.unwrap_or(InferencingParams {
        max_tokens: 100,
        repeat_penalty: 1.1,
        repeat_penalty_last_n_token_count: 64,
        temperature: 0.8,
        top_k: 40,
        top_p: 0.9,
    });
    let body = serde_json::json!({
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": p.max_tokens,
        "temperature": p.temperature,
        "top_p": p.top_p,
    });
    let mut req = http::Request::post(format!("{}/chat/completions", c.url)).header("content-type", "application/json");
    if let Some(token) = &c.auth_token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let req = req
        .body(Full::new(Bytes::from(body.to_string())).map_err(|never| match never {}))
        .map_err(|e| Error::RuntimeError(e.to_string()))?;
    let opts = wasmtime_wasi_http::p3::RequestOptions {
        connect_timeout: Some(std::time::Duration::from_secs(5)),
        first_byte_timeout: Some(std::time::Duration::from_secs(120)),
        between_bytes_timeout: Some(std::time::Duration::from_secs(60)),
    };
    let (resp, io) = wasmtime_wasi_http::p3::default_send_request(req, Some(opts))
        .await
        .map_err(|e| Error::RuntimeError(format!("inference endpoint: {e:?}")))?;
    let driver = tokio::spawn(io);
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| Error::RuntimeError(format!("inference endpoint: {e:?}")))?
        .to_bytes();
    driver.abort();
    if !status.is_success() {
        return Err(Error::RuntimeError(format!(
            "inference endpoint answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::RuntimeError(format!("inference endpoint sent invalid JSON: {e}")))?;
    let text = v["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string();
    let usage = InferencingUsage {
        prompt_token_count: v["usage"]["prompt_tokens"].as_u64().unwrap_or(0) as u32,
        generated_token_count: v["usage"]["completion_tokens"].as_u64().unwrap_or(0) as u32,
    };
    Ok(InferencingResult { text, usage })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embedder() -> Embedder {
        let dir = std::env::var_os("MNEME_MODELS_DIR").expect(
            "MNEME_MODELS_DIR must name the directory holding all-minilm-l6-v2 (scripts/test.sh sets it; scripts/install.sh downloads the weights)",
        );
        Embedder::load(&PathBuf::from(dir).join(EMBEDDING_MODEL)).expect("loading all-minilm-l6-v2")
    }

    use mneme_text::cosine;

    #[test]
    fn sentence_similarities_match_the_reference_model() {
        let texts: Vec<String> =
            ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."]
                .map(String::from)
                .to_vec();
        let e = embedder();
        let (v, tokens) = e.embed(&texts).unwrap();
        assert_eq!(tokens, 8 + 11 + 9, "[CLS] and [SEP] count, nothing is padded");
        // The reference figures of ../shared/reference/embeddings.md §4, to
        // their four places; bfloat16 products (D-K23) move a similarity by
        // up to about 1e-3.
        let tolerance = if e.model.bf16() { 1e-3 } else { 5e-5 };
        for ((i, j), want) in [((0, 1), 0.7553), ((0, 2), -0.1050), ((1, 2), -0.0610)] {
            let got = cosine(&v[i], &v[j]);
            assert!((got - want).abs() < tolerance, "cos({i}, {j}) = {got}, reference {want}");
        }
        for e in &v {
            let norm = e.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "embeddings are unit length, not {norm}");
        }
    }

    #[test]
    fn a_batch_spread_over_threads_equals_texts_embedded_one_at_a_time() {
        let e = embedder();
        let texts: Vec<String> = (0..7).map(|i| format!("sentence number {i} about {}", "rivers ".repeat(i))).collect();
        let (batch, _) = e.embed(&texts).unwrap();
        assert_eq!(batch.len(), texts.len());
        for (t, b) in texts.iter().zip(&batch) {
            let (alone, _) = e.embed(std::slice::from_ref(t)).unwrap();
            assert_eq!(&alone[0], b, "batch order or content differs for {t:?}");
        }
        assert_eq!(e.embed(&[]).unwrap(), (Vec::new(), 0));
    }

    #[test]
    fn long_inputs_are_truncated_not_refused() {
        let (v, tokens) = embedder().embed(&["word ".repeat(1000)]).unwrap();
        assert_eq!(tokens as usize, MAX_TOKENS);
        assert_eq!(v[0].len(), 384);
    }
}
