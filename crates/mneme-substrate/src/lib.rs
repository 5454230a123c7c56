//! What several stages share and that decides nothing: the stores'
//! shapes that more than one stage reads or writes, and the helpers every
//! stage's I/O uses. The decisions are the pure crates'; each stage's own
//! I/O lives in its component (`components/<stage>`).
//!
//! - [`search`]: the one search index (full text, embeddings, signatures);
//! - [`wm`]: working memory as SQL rows;
//! - [`records`]: gists, facts, FOK, streak and focus in key-value;
//! - [`graph`]: episodes and the concept graph as the readers see them,
//!   and what forgetting one of them takes with it;
//! - [`jobs`]: the `jobs` lease queue the commit, consolidation and Path B
//!   share;
//! - [`schedule`]: the background engines' rows, and giving a claimed
//!   queue job back;
//! - [`events`]: the event log, in commit order (D-C21);
//! - [`task_rows`]: a new persistent task, as the tasks stage, the ACT
//!   loop's skill and the drift engine write it;
//! - [`world`]: the world state around the principal (D-C13);
//! - here: the stage failure, embeddings, BLOBs, `IN` lists, ids and the
//!   principal's zone.

pub mod events;
pub mod graph;
pub mod jobs;
pub mod records;
pub mod schedule;
pub mod search;
pub mod task_rows;
pub mod wm;
pub mod world;

use serde::Serialize;

pub use mneme_store::{StoreError, Stores};

/// A stage failure: a code (`invalid`, `not-found`, a store code…) and a
/// message; components turn it into their WIT `stage-error`.
#[derive(Debug, Clone, PartialEq)]
pub struct Fail {
    pub code: String,
    pub message: String,
}

impl Fail {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Fail { code: code.into(), message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Fail::new("invalid", message)
    }
}

/// At the seam a failure's code is one of WIT's `error-code`s; a code off
/// that list is `internal`, a fault in Mneme itself.
impl From<Fail> for mneme_types::StageError {
    fn from(f: Fail) -> Self {
        mneme_types::StageError::new(mneme_types::ErrorCode::from_name(&f.code), f.message)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail { code: e.code.to_string(), message: e.message }
    }
}

pub type Result<T> = std::result::Result<T, Fail>;

impl mneme_store::Echo for Fail {
    fn echoes_earlier_failure(&self) -> bool {
        mneme_store::sql::echoes(&self.message)
    }
}

/// A stage failure inside a store transaction's body: a store code keeps
/// its meaning, anything else is internal.
pub fn as_store_error(f: Fail) -> StoreError {
    const CODES: [&str; 9] = [
        "bad-sql",
        "decode",
        "store-unavailable",
        "store-busy",
        "access-denied",
        "conflict",
        "lease-lost",
        "upstream",
        "invalid",
    ];
    StoreError::new(CODES.into_iter().find(|c| *c == f.code).unwrap_or("internal"), f.message)
}

/// The principal's time zone: the variable `time_zone` (an IANA name,
/// default `UTC`), or, while that is left at its default, the fixed
/// `utc_offset_minutes` of earlier releases. A value that names no zone is
/// the deployment's error (`config`, 503), never a silent UTC.
pub async fn principal_zone() -> Result<mneme_time::Zone> {
    let name = spin_sdk::variables::get("time_zone").await.unwrap_or_default();
    let offset = spin_sdk::variables::get("utc_offset_minutes").await.unwrap_or_default();
    mneme_time::Zone::from_settings(&name, &offset).map_err(|m| Fail::new("misconfigured", m))
}

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).expect("the host provides randomness");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A fresh id: 16 random bytes as 32 hex digits.
pub fn new_id() -> String {
    random_hex(16)
}

/// all-MiniLM-L6-v2 embeddings (384 dimensions) of several texts, behind
/// Spin's `generate-embeddings`: one text's vector whatever it is sent
/// with (D-K30).
///
/// A batch is one host call, and the host may spread it over its cores, but
/// a host may also let a batch change a text's vector: Spin 4.1's own
/// embedder pads every text of a batch to the longest and averages over the
/// padding. So before a batch the host is asked, with two short texts,
/// whether [`PROBE`] (one word piece, the text padding changes most) comes
/// out of a batch as it comes out alone; when it does not, every text is
/// embedded in a call of its own. Asked before every batch, so nothing an
/// instance remembers decides it, and at the price of three embeddings of
/// a few word pieces.
pub fn embed_many(texts: &[String]) -> Result<Vec<Vec<f32>>> {
    if texts.len() < 2 || batches_exactly()? {
        return embed_call(texts);
    }
    texts.iter().map(|t| Ok(embed_call(std::slice::from_ref(t))?.remove(0))).collect()
}

/// The text a host's batches are checked with: one word piece.
const PROBE: &str = "a";

/// Whether the host embeds [`PROBE`] beside a longer text as it does alone.
fn batches_exactly() -> Result<bool> {
    let pair = embed_call(&[PROBE.to_string(), "a text a few word pieces longer".to_string()])?;
    let alone = embed_call(&[PROBE.to_string()])?;
    Ok(pair.first().zip(alone.first()).is_some_and(|(p, a)| same_vector(p, a)))
}

/// Whether two embeddings of one text are the same, up to the rounding a
/// host's threads may add.
fn same_vector(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-5)
}

/// One `generate-embeddings` call.
fn embed_call(texts: &[String]) -> Result<Vec<Vec<f32>>> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let r = spin_sdk::llm::generate_embeddings(spin_sdk::llm::EmbeddingModel::AllMiniLmL6V2, texts)
        .map_err(|e| Fail::new("embedding-failed", format!("generate-embeddings: {e:?}")))?;
    if r.embeddings.len() != texts.len() {
        return Err(Fail::new("embedding-failed", "generate-embeddings returned the wrong number of embeddings"));
    }
    Ok(r.embeddings)
}

/// One text's embedding.
pub fn embed(text: &str) -> Result<Vec<f32>> {
    embed_many(&[text.to_string()])?.pop().ok_or_else(|| Fail::new("embedding-failed", "no embedding returned"))
}

/// Dimensions of an all-MiniLM-L6-v2 embedding.
pub const EMBEDDING_DIM: usize = 384;

/// How long a search query's embedding is kept.
pub const QUERY_EMBEDDING_TTL_MS: u64 = 30 * 86_400_000;

/// A fixed query's embedding (a door's evidence query), through a key-value
/// cache so a repeated query skips the model. The key is the text's content
/// hash, so only identical text shares an entry.
pub async fn query_embedding(kv: &mneme_store::Kv, text: &str) -> Result<Vec<f32>> {
    let key = format!("qemb:{}", mneme_knowledge::text::content_hash(text));
    if let Some(b) = kv.get(&key).await?
        && b.len() == EMBEDDING_DIM * 4
    {
        return Ok(bytes_f32(&b));
    }
    let e = embed(text)?;
    // The cache only saves time: a write that fails leaves the search whole.
    let _ = kv.set(&key, &f32_bytes(&e), Some(QUERY_EMBEDDING_TTL_MS)).await;
    Ok(e)
}

/// An embedding as a BLOB (little-endian f32s).
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A BLOB back into an embedding.
pub fn bytes_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// `$first, $first+1, …` for an `IN (…)` list of `n` parameters.
pub fn in_list(first: usize, n: usize) -> String {
    (first..first + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// JSON text of a value (for TEXT columns).
pub fn json_text<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}
