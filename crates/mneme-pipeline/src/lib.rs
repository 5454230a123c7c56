//! The I/O of the pipeline stages. Each stage component (`components/*`)
//! is a thin adapter: it decodes the JSON request its WIT function receives,
//! calls one function here, and encodes the answer (D-C2). The decisions
//! themselves are `mneme-conversation`'s pure functions; this crate reads
//! and writes the stores around them.

pub mod rx;

pub use mneme_substrate::*;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Decodes a stage request.
pub fn decode<T: DeserializeOwned>(request: &str) -> Result<T> {
    serde_json::from_str(request).map_err(|e| Fail::invalid(format!("stage request: {e}")))
}

/// Encodes a stage answer.
pub fn encode<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Fail::new("internal", format!("encoding the answer: {e}")))
}

/// Runs a stage function from JSON to JSON.
pub async fn run<Req: DeserializeOwned, Resp: Serialize>(
    request: &str,
    f: impl AsyncFnOnce(Req) -> Result<Resp>,
) -> Result<String> {
    encode(&f(decode(request)?).await?)
}
