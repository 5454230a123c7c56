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
//!
//! A third, where the CPU has AVX-512 BF16, multiplies in bfloat16 with
//! single-precision sums ([`bf16`], D-K23): twice the products per
//! instruction and half the weight bytes, for embeddings within a cosine of
//! 0.99997 of the single-precision ones.

/// Output columns per packed panel: two 8-lane AVX registers.
pub const PANEL: usize = 16;
/// Input rows per block: 6 rows × 2 registers = 12 accumulators, which with
/// the two weight registers and one broadcast fits AVX2's 16 registers.
pub const ROWS: usize = 6;

/// What a layer's products multiply in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// bfloat16 inputs and weights with single-precision sums where the CPU
    /// has AVX-512 BF16 ([`bf16`], D-K23); single precision elsewhere.
    Fast,
    /// Single precision throughout.
    Single,
}

/// `y = x · Wᵀ + b` with `W` stored as `n` rows of `k` inputs (PyTorch's
/// layout), packed for [`Linear::forward`].
pub struct Linear {
    k: usize,
    n: usize,
    /// Single-precision panels; empty when `pairs` holds the weights.
    panels: Vec<f32>,
    bias: Vec<f32>,
    simd: bool,
    /// The weights as bfloat16 pairs for AVX-512 BF16 ([`bf16`]), when
    /// asked for, the CPU has it and the shape allows.
    pairs: Option<Vec<u32>>,
}

impl Linear {
    /// Packs `weight` (`n × k`, row-major) and `bias` (`n`) for products in
    /// `precision`. `n` must be a multiple of [`PANEL`].
    pub fn new(weight: &[f32], bias: &[f32], n: usize, k: usize, precision: Precision) -> Result<Self, String> {
        if weight.len() != n * k {
            return Err(format!("weight holds {} values, expected {n} × {k}", weight.len()));
        }
        if bias.len() != n {
            return Err(format!("bias holds {} values, expected {n}", bias.len()));
        }
        if !n.is_multiple_of(PANEL) || k == 0 {
            return Err(format!("a {n} × {k} layer cannot be packed in panels of {PANEL} columns"));
        }
        let bias = bias.to_vec();
        let simd = simd_available();
        if precision == Precision::Fast && bf16_available() && n.is_multiple_of(bf16::PANEL) && k.is_multiple_of(2) {
            return Ok(Self { k, n, panels: Vec::new(), bias, simd, pairs: Some(bf16::pack(weight, n, k)) });
        }
        let mut panels = vec![0.0; n * k];
        for (p, panel) in panels.chunks_exact_mut(k * PANEL).enumerate() {
            for (kk, lane) in panel.chunks_exact_mut(PANEL).enumerate() {
                for (c, v) in lane.iter_mut().enumerate() {
                    *v = weight[(p * PANEL + c) * k + kk];
                }
            }
        }
        Ok(Self { k, n, panels, bias, simd, pairs: None })
    }

    pub fn outputs(&self) -> usize {
        self.n
    }

    /// `out (m × n) = x (m × k) · Wᵀ + b`, both row-major.
    pub fn forward(&self, x: &[f32], m: usize, out: &mut [f32]) {
        assert_eq!(x.len(), m * self.k, "input is not {m} rows of {}", self.k);
        assert_eq!(out.len(), m * self.n, "output is not {m} rows of {}", self.n);
        #[cfg(target_arch = "x86_64")]
        if let Some(pairs) = &self.pairs {
            // SAFETY: `pairs` exists only when the CPU reported AVX-512 F and
            // BF16, and the slice lengths were checked above.
            unsafe { bf16::forward(self, pairs, x, m, out) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if self.simd {
            // SAFETY: `simd` is true only when the CPU reported AVX2 and FMA,
            // and the slice lengths were checked above.
            unsafe { avx2::forward(self, x, m, out) };
            return;
        }
        debug_assert!(self.pairs.is_none(), "bfloat16 pairs are served by the x86-64 path only");
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

    /// A single-precision layer's portable loop, even where AVX2 is there.
    #[cfg(test)]
    pub(crate) fn portable(mut self) -> Self {
        assert!(self.pairs.is_none(), "a bfloat16 layer has no single-precision panels");
        self.simd = false;
        self
    }

    /// Whether `forward` multiplies in bfloat16.
    pub(crate) fn bf16(&self) -> bool {
        self.pairs.is_some()
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

pub(crate) fn bf16_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // BF16 implies BW to the compiler, which may use it in `bf16::forward`.
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The products in bfloat16 with single-precision sums (AVX-512 BF16's
/// `vdpbf16ps`): each instruction multiplies 16 pairs of inputs by 16 pairs
/// of weights and adds both products to 16 sums, twice the work of a
/// single-precision FMA. Inputs and weights are rounded to 8 significant
/// bits (round to nearest even); the sums, the bias and everything outside
/// the products stay in single precision.
mod bf16 {
    /// Output columns per panel: two 16-lane registers.
    pub const PANEL: usize = 32;
    /// Input rows per block: 12 rows × 2 registers = 24 accumulators, with
    /// the two weight registers and one broadcast in AVX-512's 32.
    #[cfg(any(target_arch = "x86_64", test))]
    pub const ROWS: usize = 12;

    /// `f` rounded to the nearest bfloat16 (ties to even), as its 16 bits.
    pub fn round(f: f32) -> u16 {
        let b = f.to_bits();
        if f.is_nan() {
            return ((b >> 16) | 0x40) as u16;
        }
        ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
    }

    /// Packs `weight` (`n × k`) as panels of [`PANEL`] columns; within a
    /// panel, input pair `j` of column `c` is one `u32` (input `2j` in the
    /// low half) at `j · PANEL + c`.
    pub fn pack(weight: &[f32], n: usize, k: usize) -> Vec<u32> {
        let mut out = vec![0u32; n * k / 2];
        for (p, panel) in out.chunks_exact_mut(k / 2 * PANEL).enumerate() {
            for (j, lane) in panel.chunks_exact_mut(PANEL).enumerate() {
                for (c, v) in lane.iter_mut().enumerate() {
                    let row = &weight[(p * PANEL + c) * k..];
                    *v = u32::from(round(row[2 * j])) | (u32::from(round(row[2 * j + 1])) << 16);
                }
            }
        }
        out
    }

    /// # Safety
    /// The CPU must support AVX-512 F and BF16; `x` and `out` must hold `m`
    /// rows; `pairs` must be `l`'s weights packed by [`pack`].
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(super) unsafe fn forward(l: &super::Linear, pairs: &[u32], x: &[f32], m: usize, out: &mut [f32]) {
        let (k, n) = (l.k, l.n);
        // The inputs rounded once, in pairs laid out as the weights are.
        let xb: Vec<u32> = x.chunks_exact(2).map(|p| u32::from(round(p[0])) | (u32::from(round(p[1])) << 16)).collect();
        for p in 0..n / PANEL {
            let mut r = 0;
            while r < m {
                let rows = (m - r).min(ROWS);
                // SAFETY: panel p spans k / 2 × PANEL pairs of `pairs`; rows
                // r..r + rows of `xb` (k / 2 each) and of `out` exist.
                unsafe {
                    let panel = pairs.as_ptr().add(p * k / 2 * PANEL);
                    let bias = l.bias.as_ptr().add(p * PANEL);
                    let xp = xb.as_ptr().add(r * k / 2);
                    let op = out.as_mut_ptr().add(r * n + p * PANEL);
                    match rows {
                        12 => block::<12>(xp, k / 2, panel, bias, op, n),
                        11 => block::<11>(xp, k / 2, panel, bias, op, n),
                        10 => block::<10>(xp, k / 2, panel, bias, op, n),
                        9 => block::<9>(xp, k / 2, panel, bias, op, n),
                        8 => block::<8>(xp, k / 2, panel, bias, op, n),
                        7 => block::<7>(xp, k / 2, panel, bias, op, n),
                        6 => block::<6>(xp, k / 2, panel, bias, op, n),
                        5 => block::<5>(xp, k / 2, panel, bias, op, n),
                        4 => block::<4>(xp, k / 2, panel, bias, op, n),
                        3 => block::<3>(xp, k / 2, panel, bias, op, n),
                        2 => block::<2>(xp, k / 2, panel, bias, op, n),
                        _ => block::<1>(xp, k / 2, panel, bias, op, n),
                    }
                }
                r += rows;
            }
        }
    }

    /// `R` rows of paired inputs (stride `kp` pairs) against one panel, into
    /// `R` rows of `out` (stride `n`).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    #[inline]
    unsafe fn block<const R: usize>(
        x: *const u32,
        kp: usize,
        panel: *const u32,
        bias: *const f32,
        out: *mut f32,
        n: usize,
    ) {
        use std::arch::x86_64::*;
        // SAFETY: the caller passes pointers valid for R rows and one panel.
        unsafe {
            let mut lo = [_mm512_loadu_ps(bias); R];
            let mut hi = [_mm512_loadu_ps(bias.add(16)); R];
            for j in 0..kp {
                let w0: __m512bh = std::mem::transmute(_mm512_loadu_si512(panel.add(j * PANEL).cast()));
                let w1: __m512bh = std::mem::transmute(_mm512_loadu_si512(panel.add(j * PANEL + 16).cast()));
                for i in 0..R {
                    let xv: __m512bh = std::mem::transmute(_mm512_set1_epi32(*x.add(i * kp + j) as i32));
                    lo[i] = _mm512_dpbf16_ps(lo[i], xv, w0);
                    hi[i] = _mm512_dpbf16_ps(hi[i], xv, w1);
                }
            }
            for i in 0..R {
                _mm512_storeu_ps(out.add(i * n), lo[i]);
                _mm512_storeu_ps(out.add(i * n + 16), hi[i]);
            }
        }
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
            let single = || Linear::new(&w, &b, n, k, Precision::Single).unwrap();
            for lin in [single(), single().portable()] {
                let mut got = vec![f32::NAN; m * n];
                lin.forward(&x, m, &mut got);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!((*g as f64 - w).abs() < 1e-5, "m = {m}, simd = {}, output {i}: {g} vs {w}", lin.simd);
                }
            }
        }
    }

    /// `f` as the bfloat16 it rounds to, back in single precision.
    fn bf16_value(f: f32) -> f32 {
        f32::from_bits(u32::from(bf16::round(f)) << 16)
    }

    #[test]
    fn rounding_to_bfloat16_is_to_the_nearest_even() {
        assert_eq!(bf16::round(1.0), 0x3f80);
        // 1 + 2⁻⁸ lies halfway between 1 and 1 + 2⁻⁷: to the even one, 1.
        assert_eq!(bf16::round(1.0 + 1.0 / 256.0), 0x3f80);
        // 1 + 3·2⁻⁸ lies halfway between 1 + 2⁻⁷ and 1 + 2⁻⁶: to 1 + 2⁻⁶.
        assert_eq!(bf16::round(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(bf16::round(-2.0), 0xc000);
        // A negative tie goes to the even one too.
        assert_eq!(bf16::round(-(1.0 + 3.0 / 256.0)), 0xbf82);
        // Past the largest bfloat16, to infinity.
        assert_eq!(bf16_value(f32::MAX), f32::INFINITY);
        assert!(bf16_value(f32::NAN).is_nan());
        // A signalling NaN whose payload is in the low bits stays a NaN.
        assert!(bf16_value(f32::from_bits(0x7f80_0001)).is_nan());
        assert_eq!(bf16_value(f32::INFINITY), f32::INFINITY);
    }

    /// Where the CPU has AVX-512 BF16, the packed product equals the plain
    /// definition over inputs and weights rounded to bfloat16, for every
    /// block size; elsewhere the layer keeps single precision.
    #[test]
    fn the_bfloat16_product_is_the_definition_over_rounded_values() {
        let (n, k) = (64, 48);
        let w = values(5, n * k);
        let b = values(6, n);
        let lin = Linear::new(&w, &b, n, k, Precision::Fast).unwrap();
        assert_eq!(lin.bf16(), bf16_available());
        if !lin.bf16() {
            eprintln!("this CPU has no AVX-512 BF16: its layers keep single precision");
            return;
        }
        let wr: Vec<f32> = w.iter().map(|&v| bf16_value(v)).collect();
        for m in 1..=2 * bf16::ROWS + 1 {
            let x = values(7 + m as u64, m * k);
            let xr: Vec<f32> = x.iter().map(|&v| bf16_value(v)).collect();
            let want = naive(&wr, &b, &xr, m, n, k);
            let mut got = vec![f32::NAN; m * n];
            lin.forward(&x, m, &mut got);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((*g as f64 - w).abs() < 1e-5, "m = {m}, output {i}: {g} vs {w}");
            }
        }
    }

    /// The packed pairs read back in plain loops, on every target: input
    /// pair `j` of column `c` of panel `p` is at `p · k/2 · PANEL + j ·
    /// PANEL + c`, input `2j` in the low half.
    #[test]
    fn the_bfloat16_pairs_hold_each_weight_where_the_product_reads_it() {
        let (n, k) = (64, 48);
        let w = values(8, n * k);
        let pairs = bf16::pack(&w, n, k);
        assert_eq!(pairs.len(), n * k / 2);
        let half = |v: u32| f32::from_bits(v << 16);
        for c in 0..n {
            for i in 0..k {
                let (p, lane, j) = (c / bf16::PANEL, c % bf16::PANEL, i / 2);
                let v = pairs[p * (k / 2) * bf16::PANEL + j * bf16::PANEL + lane];
                let got = if i % 2 == 0 { half(v & 0xffff) } else { half(v >> 16) };
                assert_eq!(got, bf16_value(w[c * k + i]), "column {c}, input {i}");
            }
        }
    }

    #[test]
    fn shapes_that_cannot_be_packed_are_refused() {
        let new = |w: &[f32], b: &[f32], n, k| Linear::new(w, b, n, k, Precision::Fast).err().unwrap();
        assert!(new(&[0.0; 8 * 3], &[0.0; 8], 8, 3).contains("panels of 16"));
        assert!(new(&[0.0; 10], &[0.0; 16], 16, 3).contains("expected 16 × 3"));
        assert!(new(&[0.0; 48], &[0.0; 15], 16, 3).contains("expected 16"));
    }
}
