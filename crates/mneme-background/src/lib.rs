//! The rules of the background engines of the message-flow design (002
//! §6–8, §12), as pure functions over plain data: the components read and
//! write the stores and hand the state to these. Randomness comes in as
//! numbers in `[0, 1)` from the caller, so a seeded generator in a test (or
//! the host's random source in production) decides every draw.

pub mod consolidate;
pub mod cycle;
pub mod drift;
pub mod regulator;
pub mod tasks;

/// The queue Path B's tool jobs wait on (`components/act` enqueues and
/// claims them; `/tick/tools` drains it and reports its depth).
pub const TOOL_QUEUE: &str = "tool-queue";

/// A draw in `[0, 1)`, clamped so a caller's 1.0 cannot escape a range.
pub fn unit(r: f64) -> f64 {
    if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0 - f64::EPSILON) }
}

/// A deterministic generator for schedules and seed choices (SplitMix64):
/// one seed, the same draws on every machine.
#[derive(Debug, Clone)]
pub struct Draws(u64);

impl Draws {
    pub fn new(seed: u64) -> Self {
        Draws(seed)
    }

    /// The next draw in `[0, 1)`.
    pub fn draw(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_repeatable_and_in_range() {
        let a: Vec<f64> = {
            let mut d = Draws::new(7);
            (0..1000).map(|_| d.draw()).collect()
        };
        let b: Vec<f64> = {
            let mut d = Draws::new(7);
            (0..1000).map(|_| d.draw()).collect()
        };
        assert_eq!(a, b);
        assert!(a.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = a.iter().sum::<f64>() / a.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
        assert_eq!(unit(1.0), 1.0 - f64::EPSILON);
        assert_eq!(unit(f64::NAN), 0.0);
    }
}
