//! The one error type of the store library: a stable `code` slug the entry
//! components map to HTTP statuses, and a message that says what went wrong.

/// A storage failure. `code` is one of `store-unavailable`, `store-busy`, `bad-sql`,
/// `conflict`, `access-denied`, `config`, `migration` or `decode`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct StoreError {
    pub code: &'static str,
    pub message: String,
}

impl StoreError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}
