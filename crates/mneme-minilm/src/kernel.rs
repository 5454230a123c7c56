//! A linear layer packed for products with few rows.
//!
//! A query has 10–30 tokens, so every product in the model is a short, wide
//! one: a handful of rows against a 384×384 or 384×1536 weight matrix. A
//! general matrix multiply repacks its right-hand side on every call and is
//! tuned for square shapes. Here the weights are packed once, at load, into
//! panels of [`PANEL`] output columns, each panel `k × PANEL` floats laid out
//! contiguously. A block of up to [`ROWS`] input rows then walks one panel
//! from start to end with all `ROWS × PANEL` partial sums in registers, so the
//! weights stream through once per block and nothing else touches memory.
//!
//! Two implementations compute the same sums in the same order per output:
//! AVX2 + FMA where the CPU has it (checked once, at construction), and a
//! portable loop everywhere else. FMA rounds once where the portable loop
//! rounds twice, so the two agree to float rounding, not bit for bit.

/// Output columns per packed panel: two 8-lane AVX registers.
pub const PANEL: usize = 16;
/// Input rows per block: 6 rows × 2 registers = 12 accumulators, which with
/// the two weight registers and one broadcast fits AVX2's 16 registers.
pub const ROWS: usize = 6;

/// `y = x · Wᵀ + b` with `W` stored as `n` rows of `k` inputs (PyTorch's
/// layout), packed for [`Linear::forward`].
pub struct Linear {
    k: usize,
    n: usize,
    panels: Vec<f32>,
    bias: Vec<f32>,
    simd: bool,
}

impl Linear {
    /// Packs `weight` (`n × k`, row-major) and `bias` (`n`). `n` must be a
    /// multiple of [`PANEL`].
    pub fn new(weight: &[f32], bias: &[f32], n: usize, k: usize) -> Result<Self, String> {
        if weight.len() != n * k {
            return Err(format!("weight holds {} values, expected {n} × {k}", weight.len()));
        }
        if bias.len() != n {
            return Err(format!("bias holds {} values, expected {n}", bias.len()));
        }
        if !n.is_multiple_of(PANEL) || k == 0 {
            return Err(format!("a {n} × {k} layer cannot be packed in panels of {PANEL} columns"));
        }
        let mut panels = vec![0.0; n * k];
        for (p, panel) in panels.chunks_exact_mut(k * PANEL).enumerate() {
            for (kk, lane) in panel.chunks_exact_mut(PANEL).enumerate() {
                for (c, v) in lane.iter_mut().enumerate() {
                    *v = weight[(p * PANEL + c) * k + kk];
                }
            }
        }
        Ok(Self { k, n, panels, bias: bias.to_vec(), simd: simd_available() })
    }

    pub fn outputs(&self) -> usize {
        self.n
    }

    /// `out (m × n) = x (m × k) · Wᵀ + b`, both row-major.
    pub fn forward(&self, x: &[f32], m: usize, out: &mut [f32]) {
        assert_eq!(x.len(), m * self.k, "input is not {m} rows of {}", self.k);
        assert_eq!(out.len(), m * self.n, "output is not {m} rows of {}", self.n);
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is true only when the CPU reported AVX2 and FMA,
            // and the slice lengths were checked above.
            unsafe { avx2::forward(self, x, m, out) };
            return;
        }
        self.forward_portable(x, m, out);
    }

    fn forward_portable(&self, x: &[f32], m: usize, out: &mut [f32]) {
        let (k, n) = (self.k, self.n);
        for (p, panel) in self.panels.chunks_exact(k * PANEL).enumerate() {
            for r in 0..m {
                let mut acc = [0.0f32; PANEL];
                acc.copy_from_slice(&self.bias[p * PANEL..][..PANEL]);
                for (&xv, w) in x[r * k..][..k].iter().zip(panel.chunks_exact(PANEL)) {
                    for (a, &wv) in acc.iter_mut().zip(w) {
                        *a += xv * wv;
                    }
                }
                out[r * n + p * PANEL..][..PANEL].copy_from_slice(&acc);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn portable(mut self) -> Self {
        self.simd = false;
        self
    }
}

pub(crate) fn simd_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Linear, PANEL, ROWS};
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX2 and FMA; `x` and `out` must hold `m` rows.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn forward(l: &Linear, x: &[f32], m: usize, out: &mut [f32]) {
        let (k, n) = (l.k, l.n);
        for p in 0..n / PANEL {
            let mut r = 0;
            while r < m {
                let rows = (m - r).min(ROWS);
                // SAFETY: panel p spans k × PANEL floats of `panels`; rows
                // r..r + rows of `x` and of `out` exist (checked by the caller).
                unsafe {
                    let panel = l.panels.as_ptr().add(p * k * PANEL);
                    let bias = l.bias.as_ptr().add(p * PANEL);
                    let xp = x.as_ptr().add(r * k);
                    let op = out.as_mut_ptr().add(r * n + p * PANEL);
                    match rows {
                        6 => block::<6>(xp, k, panel, bias, op, n),
                        5 => block::<5>(xp, k, panel, bias, op, n),
                        4 => block::<4>(xp, k, panel, bias, op, n),
                        3 => block::<3>(xp, k, panel, bias, op, n),
                        2 => block::<2>(xp, k, panel, bias, op, n),
                        _ => block::<1>(xp, k, panel, bias, op, n),
                    }
                }
                r += rows;
            }
        }
    }

    /// `R` rows of `x` (stride `k`) against one panel, into `R` rows of
    /// `out` (stride `n`).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn block<const R: usize>(
        x: *const f32,
        k: usize,
        panel: *const f32,
        bias: *const f32,
        out: *mut f32,
        n: usize,
    ) {
        // SAFETY: the caller passes pointers valid for R rows and one panel.
        unsafe {
            let mut lo = [_mm256_loadu_ps(bias); R];
            let mut hi = [_mm256_loadu_ps(bias.add(8)); R];
            for kk in 0..k {
                let w0 = _mm256_loadu_ps(panel.add(kk * PANEL));
                let w1 = _mm256_loadu_ps(panel.add(kk * PANEL + 8));
                for i in 0..R {
                    let xv = _mm256_set1_ps(*x.add(i * k + kk));
                    lo[i] = _mm256_fmadd_ps(xv, w0, lo[i]);
                    hi[i] = _mm256_fmadd_ps(xv, w1, hi[i]);
                }
            }
            for i in 0..R {
                _mm256_storeu_ps(out.add(i * n), lo[i]);
                _mm256_storeu_ps(out.add(i * n + 8), hi[i]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random sequence in [-1, 1).
    fn values(seed: u64, len: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    fn naive(w: &[f32], b: &[f32], x: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for r in 0..m {
            for o in 0..n {
                out[r * n + o] = b[o] as f64 + (0..k).map(|i| x[r * k + i] as f64 * w[o * k + i] as f64).sum::<f64>();
            }
        }
        out
    }

    #[test]
    fn packed_product_matches_the_plain_definition_for_every_row_count() {
        let (n, k) = (48, 40);
        let w = values(1, n * k);
        let b = values(2, n);
        for m in 1..=2 * ROWS + 1 {
            let x = values(3 + m as u64, m * k);
            let want = naive(&w, &b, &x, m, n, k);
            for lin in [Linear::new(&w, &b, n, k).unwrap(), Linear::new(&w, &b, n, k).unwrap().portable()] {
                let mut got = vec![f32::NAN; m * n];
                lin.forward(&x, m, &mut got);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!((*g as f64 - w).abs() < 1e-5, "m = {m}, simd = {}, output {i}: {g} vs {w}", lin.simd);
                }
            }
        }
    }

    #[test]
    fn shapes_that_cannot_be_packed_are_refused() {
        assert!(Linear::new(&[0.0; 8 * 3], &[0.0; 8], 8, 3).err().unwrap().contains("panels of 16"));
        assert!(Linear::new(&[0.0; 10], &[0.0; 16], 16, 3).err().unwrap().contains("expected 16 × 3"));
        assert!(Linear::new(&[0.0; 48], &[0.0; 15], 16, 3).err().unwrap().contains("expected 16"));
    }
}
