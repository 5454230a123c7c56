//! The knowledge-entry system of the 001 seed, as pure functions.
//!
//! The seed's table is the contract: every field of an entry, its closed
//! list of values and the rule that sets it live in [`entry`]. What happens
//! to an extracted candidate, in order: [`validate`] (drop off-list types and
//! missing reasoning, default confidence and stability), [`patterns`]
//! (resolve the reasoning pattern), [`governor`] (merge into a near-duplicate
//! or supersede on a contradiction). Reading: [`rank`] computes the
//! read-time scores, [`fusion`] the candidate generation both retrievals
//! share. [`mirror`] renders an entry as markdown and [`tar`] packs a vault.
//! The stage that does the I/O is `components/knowledge`.

pub mod entry;
pub mod extract;
pub mod fusion;
pub mod governor;
pub mod ivf;
pub mod job;
pub mod mirror;
pub mod neighbours;
pub mod patterns;
pub mod rank;
pub mod rules;
pub mod tar;
pub mod text;
pub mod validate;

pub use entry::{Confidence, Entry, KnowledgeType, SourceType, Stability};
