//! The deterministic rules of the message flow (design 002): everything the
//! conversation pipeline decides without a model call. Each module is one
//! step, in request order; none does I/O, so each is tested natively with a
//! table of boundary cases.

pub mod act;
pub mod context;
pub mod generate;
pub mod honesty;
pub mod identity;
pub mod intent;
pub mod mode;
pub mod nomodel;
pub mod phrases;
pub mod router;
pub mod social;
pub mod tools;
pub mod topic;
pub mod triage;

pub use mode::Mode;
