//! Time, once: the clock every component reads and the calendar every rule
//! that speaks of days, hours or the principal's local time goes through.
//!
//! Before this crate Mneme had three wall clocks, three copies of the
//! civil-date arithmetic and a fixed UTC offset standing in for a time
//! zone, so a daily reminder moved by an hour at every daylight-saving
//! change. Zone arithmetic is delegated to jiff with the IANA database
//! bundled, so a component resolves `Europe/London` exactly as the native
//! tests do. Nothing here does I/O beyond reading the system clock.

pub mod calendar;
pub mod clock;
pub mod when;

pub use calendar::{Recurrence, Zone};
