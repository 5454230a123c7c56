//! The schema, in place before an instance's first request, under any
//! runner (#24): `spin up` runs no startup job, so a fresh database would
//! stay empty until someone called `/tick/migrate`. Each entry instance
//! asks the store once; a current schema costs one read, and after that an
//! atomic load per request. Concurrent first requests are safe: the store
//! serialises migrators (an advisory lock on PostgreSQL, `BEGIN IMMEDIATE`
//! on SQLite) and each re-reads what is applied under the lock.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::mneme::store::store;
use mneme_types::{ErrorCode, StageError};

static READY: AtomicBool = AtomicBool::new(false);

/// Whether this instance has found the schema current.
pub fn ready() -> bool {
    READY.load(Ordering::Acquire)
}

/// Migrates the schema if it is behind this build; after one success in
/// this instance, does nothing. A store that did not answer fails the
/// request at once (`store-unavailable`): its route would only wait out the
/// same deadline again, and a fresh instance, which under Spin may be every
/// request's, would then answer a silent store after two deadlines, not
/// one (#50). Any other failure is logged and the request goes on: the
/// route then meets the store's own error, as it would have.
pub async fn ensure() -> Result<(), StageError> {
    if READY.load(Ordering::Acquire) {
        return Ok(());
    }
    match store::ensure_migrated().await {
        Ok(applied) => {
            for m in &applied {
                eprintln!("schema: applied migration {} ({})", m.version, m.name);
            }
            READY.store(true, Ordering::Release);
            Ok(())
        }
        // A store that did not answer, or could not be reached; not one
        // another writer holds (`store-busy`), which answers once it is free.
        Err(e) if e.code == ErrorCode::StoreUnavailable => {
            eprintln!("schema: the check failed ({}: {})", e.code, e.message);
            Err(e)
        }
        Err(e) => {
            eprintln!("schema: the check failed ({}: {}); the request goes on", e.code, e.message);
            Ok(())
        }
    }
}
