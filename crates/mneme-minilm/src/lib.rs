//! all-MiniLM-L6-v2 sentence embeddings, one sentence at a time.
//!
//! The runner answers Spin's `generate-embeddings` with this model, and a
//! query's embedding sits on `/retrieve`'s critical path. The model is a
//! 6-layer BERT encoder (hidden size 384, 12 heads, feed-forward 1536)
//! followed by mean pooling and L2 normalisation, as sentence-transformers
//! runs it.
//!
//! Why a forward pass of its own rather than a tensor library: a query is
//! 10–30 tokens, and at that size a general library spends most of its time
//! repacking weights, allocating a tensor per operation and waking a thread
//! pool. Here every weight matrix is packed once, at load ([`kernel`]), and a
//! sentence runs on the calling thread with a handful of buffers. Each
//! sentence runs alone, so there is no padding and no attention mask; a batch
//! is the caller's loop (the runner spreads it over threads).
//!
//! The arithmetic is BERT's as the weights expect it: word + position +
//! token-type-0 embeddings, LayerNorm with the config's epsilon, scaled
//! dot-product attention with a softmax per head, exact (erf) GELU, residual
//! connections after attention and after the feed-forward block. Where the
//! CPU has AVX-512 BF16 the layers' products take their inputs and weights
//! in bfloat16 and sum in single precision (D-K23); [`Precision::Single`]
//! keeps single precision throughout.
//!
//! This crate does no I/O: the caller reads the weights and the config, and
//! tokenises.

mod kernel;

use kernel::Linear;
pub use kernel::Precision;
use serde::Deserialize;

/// The fields of a Hugging Face `config.json` that the forward pass needs.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("config.json: {0}")]
    Config(String),
    #[error("model.safetensors: {0}")]
    Weights(String),
    #[error("nothing to embed: the token sequence is empty")]
    Empty,
    #[error("{len} tokens exceed the model's {max} positions")]
    TooLong { len: usize, max: usize },
    #[error("token id {id} is outside the vocabulary of {vocab}")]
    UnknownToken { id: u32, vocab: usize },
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

impl Norm {
    /// Normalises each row of `x` in place.
    #[inline(always)]
    fn apply(&self, x: &mut [f32]) {
        let h = self.gamma.len() as f32;
        for row in x.chunks_exact_mut(self.gamma.len()) {
            let mean = row.iter().sum::<f32>() / h;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

struct Layer {
    /// Query, key and value in one product: outputs `[q | k | v]`.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    up: Linear,
    down: Linear,
    output_norm: Norm,
}

/// A loaded model. Immutable, so one instance serves any number of threads.
pub struct MiniLm {
    hidden: usize,
    heads: usize,
    max_positions: usize,
    vocab: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    /// AVX2 and FMA are there: the element-wise loops are compiled for them.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    simd: bool,
}

/// Reads named tensors out of a safetensors file, with or without the
/// `bert.` prefix that some exports carry.
struct Weights<'a>(safetensors::SafeTensors<'a>);

impl Weights<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, Error> {
        let view = self
            .0
            .tensor(name)
            .or_else(|_| self.0.tensor(&format!("bert.{name}")))
            .map_err(|_| Error::Weights(format!("tensor `{name}` is missing")))?;
        if view.dtype() != safetensors::Dtype::F32 {
            return Err(Error::Weights(format!("tensor `{name}` is {:?}; only F32 is supported", view.dtype())));
        }
        if view.shape() != shape {
            return Err(Error::Weights(format!("tensor `{name}` has shape {:?}, expected {shape:?}", view.shape())));
        }
        Ok(view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }

    fn linear(&self, prefix: &str, n: usize, k: usize, precision: Precision) -> Result<Linear, Error> {
        let w = self.get(&format!("{prefix}.weight"), &[n, k])?;
        let b = self.get(&format!("{prefix}.bias"), &[n])?;
        Linear::new(&w, &b, n, k, precision).map_err(|e| Error::Weights(format!("{prefix}: {e}")))
    }

    fn norm(&self, prefix: &str, h: usize, eps: f32) -> Result<Norm, Error> {
        Ok(Norm {
            gamma: self
                .get(&format!("{prefix}.weight"), &[h])
                .or_else(|_| self.get(&format!("{prefix}.gamma"), &[h]))?,
            beta: self.get(&format!("{prefix}.bias"), &[h]).or_else(|_| self.get(&format!("{prefix}.beta"), &[h]))?,
            eps,
        })
    }
}

impl MiniLm {
    /// Builds the model from the bytes of `model.safetensors` and its config,
    /// with [`Precision::Fast`] products.
    pub fn from_safetensors(bytes: &[u8], config: &Config) -> Result<Self, Error> {
        Self::with_precision(bytes, config, Precision::Fast)
    }

    /// [`Self::from_safetensors`] with the layers' products in `precision`:
    /// [`Precision::Single`] for the reference test, and for `bench-embed
    /// --exact`, which measures what the bfloat16 products change (D-K23).
    pub fn with_precision(bytes: &[u8], config: &Config, precision: Precision) -> Result<Self, Error> {
        let c = config;
        if c.hidden_act != "gelu" {
            return Err(Error::Config(format!("hidden_act `{}` is not supported (only `gelu`)", c.hidden_act)));
        }
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(Error::Config(format!(
                "hidden_size {} does not split into {} heads",
                c.hidden_size, c.num_attention_heads
            )));
        }
        if c.type_vocab_size == 0 {
            return Err(Error::Config("type_vocab_size is 0".into()));
        }
        let w = Weights(safetensors::SafeTensors::deserialize(bytes).map_err(|e| Error::Weights(e.to_string()))?);
        let h = c.hidden_size;
        let eps = c.layer_norm_eps as f32;
        let token_types = w.get("embeddings.token_type_embeddings.weight", &[c.type_vocab_size, h])?;
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for i in 0..c.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let mut qkv_w = Vec::with_capacity(3 * h * h);
            let mut qkv_b = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                qkv_w.extend(w.get(&format!("{p}.attention.self.{part}.weight"), &[h, h])?);
                qkv_b.extend(w.get(&format!("{p}.attention.self.{part}.bias"), &[h])?);
            }
            layers.push(Layer {
                qkv: Linear::new(&qkv_w, &qkv_b, 3 * h, h, precision)
                    .map_err(|e| Error::Weights(format!("{p}: {e}")))?,
                attention_out: w.linear(&format!("{p}.attention.output.dense"), h, h, precision)?,
                attention_norm: w.norm(&format!("{p}.attention.output.LayerNorm"), h, eps)?,
                up: w.linear(&format!("{p}.intermediate.dense"), c.intermediate_size, h, precision)?,
                down: w.linear(&format!("{p}.output.dense"), h, c.intermediate_size, precision)?,
                output_norm: w.norm(&format!("{p}.output.LayerNorm"), h, eps)?,
            });
        }
        Ok(Self {
            hidden: h,
            heads: c.num_attention_heads,
            max_positions: c.max_position_embeddings,
            vocab: c.vocab_size,
            word: w.get("embeddings.word_embeddings.weight", &[c.vocab_size, h])?,
            position: w.get("embeddings.position_embeddings.weight", &[c.max_position_embeddings, h])?,
            token_type: token_types[..h].to_vec(),
            embedding_norm: w.norm("embeddings.LayerNorm", h, eps)?,
            layers,
            simd: kernel::simd_available(),
        })
    }

    /// Whether the layers' products run in bfloat16 (AVX-512 BF16, D-K23)
    /// rather than single precision.
    pub fn bf16(&self) -> bool {
        !self.layers.is_empty()
            && self.layers.iter().all(|l| [&l.qkv, &l.attention_out, &l.up, &l.down].iter().all(|lin| lin.bf16()))
    }

    /// The length of every embedding.
    pub fn dimensions(&self) -> usize {
        self.hidden
    }

    /// The most tokens one sentence may have.
    pub fn max_tokens(&self) -> usize {
        self.max_positions
    }

    /// The unit-length sentence embedding of one tokenised sentence
    /// (special tokens included, no padding).
    pub fn embed(&self, ids: &[u32]) -> Result<Vec<f32>, Error> {
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is true only when the CPU reported AVX2 and FMA.
            return unsafe { self.embed_avx2(ids) };
        }
        self.forward(ids)
    }

    /// [`Self::forward`] with the element-wise loops (attention, GELU, the
    /// norms) compiled for eight lanes instead of the baseline's four. No
    /// multiply and add is fused here, so the results are the same bits.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn embed_avx2(&self, ids: &[u32]) -> Result<Vec<f32>, Error> {
        self.forward(ids)
    }

    #[inline(always)]
    fn forward(&self, ids: &[u32]) -> Result<Vec<f32>, Error> {
        let (m, h) = (ids.len(), self.hidden);
        if m == 0 {
            return Err(Error::Empty);
        }
        if m > self.max_positions {
            return Err(Error::TooLong { len: m, max: self.max_positions });
        }
        let mut x = vec![0.0f32; m * h];
        for (i, (&id, row)) in ids.iter().zip(x.chunks_exact_mut(h)).enumerate() {
            if id as usize >= self.vocab {
                return Err(Error::UnknownToken { id, vocab: self.vocab });
            }
            let word = &self.word[id as usize * h..][..h];
            let pos = &self.position[i * h..][..h];
            for (((v, a), b), c) in row.iter_mut().zip(word).zip(pos).zip(&self.token_type) {
                *v = a + b + c;
            }
        }
        self.embedding_norm.apply(&mut x);

        let inter = self.layers.first().map_or(0, |l| l.up.outputs());
        let mut qkv = vec![0.0f32; m * 3 * h];
        let mut context = vec![0.0f32; m * h];
        let mut sum = vec![0.0f32; m * h];
        let mut wide = vec![0.0f32; m * inter];
        for layer in &self.layers {
            layer.qkv.forward(&x, m, &mut qkv);
            attention(&qkv, m, h, self.heads, &mut context);
            layer.attention_out.forward(&context, m, &mut sum);
            add_into(&mut sum, &x);
            layer.attention_norm.apply(&mut sum);
            std::mem::swap(&mut x, &mut sum);

            layer.up.forward(&x, m, &mut wide);
            wide.iter_mut().for_each(|v| *v = gelu(*v));
            layer.down.forward(&wide, m, &mut sum);
            add_into(&mut sum, &x);
            layer.output_norm.apply(&mut sum);
            std::mem::swap(&mut x, &mut sum);
        }

        let mut pooled = vec![0.0f32; h];
        for row in x.chunks_exact(h) {
            add_into(&mut pooled, row);
        }
        pooled.iter_mut().for_each(|v| *v /= m as f32);
        let norm = pooled.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            pooled.iter_mut().for_each(|v| *v /= norm);
        }
        Ok(pooled)
    }
}

#[inline(always)]
fn add_into(acc: &mut [f32], x: &[f32]) {
    acc.iter_mut().zip(x).for_each(|(a, b)| *a += b);
}

/// GELU as BERT defines it, `x · Φ(x)` with the exact normal CDF, to
/// within 3·10⁻⁷ of it per unit of `|x|` (see [`erf`]).
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The error function by Abramowitz and Stegun 7.1.26 (absolute error at
/// most 1.5·10⁻⁷ in exact arithmetic, 5.1·10⁻⁷ measured in `f32`), with no
/// branch, so a loop over a slice compiles to vector
/// instructions. `libm::erff` is exact to the last bit, and over a sentence
/// of 50 tokens its 460,000 calls took an eighth of the forward pass.
#[inline(always)]
fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [0.254_829_6, -0.284_496_74, 1.421_413_8, -1.453_152, 1.061_405_4];
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    (1.0 - poly * exp(-a * a)).copysign(x)
}

/// `eᶻ` to within 2 units in the last place, with no branch: `z = n·ln 2 + r`
/// with `|r| ≤ ln 2 / 2`, a degree-7 polynomial for `eʳ`, and `2ⁿ` built in
/// the exponent bits. Arguments are clamped to [-87, 88], where `eᶻ` is a
/// normal float.
#[inline(always)]
fn exp(z: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and taking away 1.5·2²³ rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let z = z.clamp(-87.0, 88.0);
    let n = (z * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = (z - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r / 5040.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// Multi-head self-attention over `qkv` (`m` rows of `[q | k | v]`, each
/// `h` wide), written to `out` (`m × h`).
///
/// Each head's keys are first copied out transposed (`dh` rows of `m`), so
/// a query's `m` scores are built as `dh` passes of `score += q[d] · kᵀ[d]`
/// over contiguous memory: element-wise work the compiler turns into vector
/// instructions, where one dot product per key was a chain of dependent
/// additions.
#[inline(always)]
fn attention(qkv: &[f32], m: usize, h: usize, heads: usize, out: &mut [f32]) {
    let dh = h / heads;
    let scale = 1.0 / (dh as f32).sqrt();
    let row = |j: usize, part: usize, head: usize| &qkv[j * 3 * h + part * h + head * dh..][..dh];
    let mut keys = vec![0.0f32; dh * m];
    let mut weights = vec![0.0f32; m];
    for head in 0..heads {
        for j in 0..m {
            for (d, &k) in row(j, 1, head).iter().enumerate() {
                keys[d * m + j] = k;
            }
        }
        for i in 0..m {
            weights.fill(0.0);
            for (&q, column) in row(i, 0, head).iter().zip(keys.chunks_exact(m)) {
                let q = q * scale;
                weights.iter_mut().zip(column).for_each(|(w, k)| *w += q * k);
            }
            let max = weights.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            weights.iter_mut().for_each(|w| *w = exp(*w - max));
            let total: f32 = weights.iter().sum();
            let o = &mut out[i * h + head * dh..][..dh];
            o.fill(0.0);
            for (j, w) in weights.iter().enumerate() {
                let p = w / total;
                o.iter_mut().zip(row(j, 2, head)).for_each(|(a, v)| *a += p * v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_matches_the_normal_cdf_at_known_points() {
        // x · Φ(x) from tables of the standard normal CDF.
        for (x, want) in [(0.0f32, 0.0f32), (1.0, 0.841_344_7), (-1.0, -0.158_655_3), (2.0, 1.954_5), (-3.0, -0.004_05)]
        {
            assert!((gelu(x) - want).abs() < 1e-4, "gelu({x}) = {} vs {want}", gelu(x));
        }
    }

    #[test]
    fn erf_and_exp_agree_with_the_exact_functions() {
        let mut worst_erf = 0.0f32;
        let mut worst_exp = 0.0f32;
        for i in -100_000..=100_000 {
            let x = i as f32 * 1e-4 * 6.0;
            worst_erf = worst_erf.max((erf(x) - libm::erff(x)).abs());
            let z = i as f32 * 1e-5 * 87.0;
            worst_exp = worst_exp.max(((exp(z) - libm::expf(z)) / libm::expf(z)).abs());
        }
        assert!(worst_erf < 6e-7, "erf is off by {worst_erf}");
        assert!(worst_exp < 3e-7, "exp is off by {worst_exp} (relative)");
        assert_eq!(erf(0.0), 0.0);
        assert_eq!((erf(-20.0), erf(20.0)), (-1.0, 1.0));
        assert!(exp(-1000.0) == exp(-87.0) && exp(-87.0) > 0.0, "clamped to a normal float");
    }

    /// The loops as `embed_avx2` compiles them.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn attention_and_gelu_avx2(qkv: &[f32], m: usize, out: &mut [f32]) {
        attention(qkv, m, 384, 12, out);
        out.iter_mut().for_each(|v| *v = gelu(*v));
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx2_build_of_the_loops_gives_the_same_bits() {
        if !kernel::simd_available() {
            eprintln!("this CPU has no AVX2 and FMA: only the portable build runs here");
            return;
        }
        let m = 37;
        let mut state = 0x9e37_79b9_u32;
        let qkv: Vec<f32> = (0..m * 3 * 384)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state as f32 / u32::MAX as f32 - 0.5) * 6.0
            })
            .collect();
        let mut plain = vec![0.0; m * 384];
        attention(&qkv, m, 384, 12, &mut plain);
        plain.iter_mut().for_each(|v| *v = gelu(*v));
        let mut wide = vec![0.0; m * 384];
        // SAFETY: the CPU reported AVX2 and FMA above.
        unsafe { attention_and_gelu_avx2(&qkv, m, &mut wide) };
        assert!(plain.iter().zip(&wide).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn attention_over_one_token_returns_its_value() {
        let (h, heads) = (4, 2);
        let qkv = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        let mut out = [0.0; 4];
        attention(&qkv, 1, h, heads, &mut out);
        assert_eq!(out, [9.0, 10.0, 11.0, 12.0]);
    }

    #[test]
    fn attention_weighs_values_by_the_softmax_of_scaled_scores() {
        // One head of width 1: token 0's query scores keys 0 and ln 2 · √1.
        let ln2 = std::f32::consts::LN_2;
        let qkv = [1.0, 0.0, 10.0, 0.0, ln2, 40.0];
        let mut out = [0.0; 2];
        attention(&qkv, 2, 1, 1, &mut out);
        // weights 1 : 2 → (10 + 2 · 40) / 3
        assert!((out[0] - 30.0).abs() < 1e-4, "{}", out[0]);
        // token 1's query is 0: equal weights → (10 + 40) / 2
        assert!((out[1] - 25.0).abs() < 1e-4, "{}", out[1]);
    }

    #[test]
    fn layer_norm_centres_and_scales_each_row() {
        let n = Norm { gamma: vec![2.0; 4], beta: vec![1.0; 4], eps: 0.0 };
        let mut x = [1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0, 5.0 + 1e-3];
        n.apply(&mut x);
        let s = (1.25f32).sqrt();
        let want = [1.0 - 3.0 / s, 1.0 - 1.0 / s, 1.0 + 1.0 / s, 1.0 + 3.0 / s];
        for (g, w) in x[..4].iter().zip(want) {
            assert!((g - w).abs() < 1e-5, "{g} vs {w}");
        }
        assert!((x[7] - x[4] - 2.0 * 4.0 / 3.0f32.sqrt()).abs() < 1e-2, "{:?}", &x[4..]);
    }
}
