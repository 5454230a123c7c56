//! `fermyon:spin/llm@2.0.0`.
//!
//! `generate-embeddings` with `all-minilm-l6-v2` runs natively (candle) on
//! the weights in Spin's local model layout,
//! `.spin/ai-models/all-minilm-l6-v2/{model.safetensors,tokenizer.json,config.json}`;
//! the model loads once, on first use, and sentences are mean-pooled and
//! L2-normalised as sentence-transformers does. Padding is to the longest
//! sentence of a batch (the shipped tokenizer pads every input to 128
//! tokens, which costs about 10x for nothing).
//!
//! `infer` is forwarded to the OpenAI-compatible endpoint named by
//! `[llm_compute] type = "remote_http"` in the runtime config; with none
//! configured it fails with an error that says so.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use http_body_util::{BodyExt, Full};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::SpinView;
use super::fermyon::spin::llm::{
    EmbeddingsResult, EmbeddingsUsage, Error, Host, InferencingParams, InferencingResult, InferencingUsage,
};
use crate::runtime_config::LlmCompute;

pub const EMBEDDING_MODEL: &str = "all-minilm-l6-v2";

pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
}

impl Embedder {
    pub fn load(dir: &std::path::Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        let config: Config = serde_json::from_str(
            &std::fs::read_to_string(dir.join("config.json"))
                .with_context(|| format!("reading {}/config.json", dir.display()))?,
        )?;
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| anyhow::anyhow!("tokenizer.json: {e}"))?;
        tokenizer.with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..Default::default() }));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: 256, ..Default::default() }))
            .map_err(|e| anyhow::anyhow!("tokenizer truncation: {e}"))?;
        // SAFETY: the weights file is only read; it is not modified while mapped.
        let vb =
            unsafe { VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DType::F32, &Device::Cpu)? };
        let model = BertModel::load(vb, &config)?;
        Ok(Self { model, tokenizer })
    }

    /// Embeds `texts`; returns one unit-length vector per text and the token count.
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<(Vec<Vec<f32>>, u32)> {
        if texts.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let enc = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| anyhow::anyhow!("tokenising: {e}"))?;
        let tokens: u32 = enc.iter().map(|e| e.get_attention_mask().iter().sum::<u32>()).sum();
        let ids = Tensor::new(enc.iter().map(|e| e.get_ids().to_vec()).collect::<Vec<_>>(), &Device::Cpu)?;
        let mask = Tensor::new(enc.iter().map(|e| e.get_attention_mask().to_vec()).collect::<Vec<_>>(), &Device::Cpu)?;
        let hidden = self.model.forward(&ids, &ids.zeros_like()?, Some(&mask))?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let pooled = summed.broadcast_div(&mask.sum(1)?)?;
        let normed = pooled.broadcast_div(&pooled.sqr()?.sum_keepdim(1)?.sqrt()?)?;
        Ok((normed.to_vec2::<f32>()?, tokens))
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
                        "embedding model not available in {}: {e:#} (run scripts/up.sh to install it)",
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
        Ok(remote_infer(&compute, &model, &prompt, params).await)
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
        let out = tokio::task::spawn_blocking(move || embedder.embed(&text)).await?;
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
