//! The vector index (D-K16): inverted lists over the sign-bit signatures.
//!
//! A corpus's signatures start in its flat blocks, which a query reads whole
//! (the scan of [`crate::fusion::shortlist`]). Once a corpus holds
//! [`TRAIN_AT`] of them, [`Training`] draws [`LISTS`] centroids from a
//! sample of their embeddings by spherical k-means (in steps, so the upkeep
//! can yield between them), every signature moves
//! to the list of the centroid nearest to it, and a query reads only the
//! [`PROBES`] lists nearest its own embedding, plus whatever is still flat.
//!
//! An item's list is a function of its signature alone ([`Centroids::list_of`],
//! exact integer arithmetic), because a signature moved out of a flat block
//! has no embedding at hand: the same item lands in the same list whether it
//! was written after training, moved by the upkeep, or looked for on
//! deletion. The centroids never change once trained.

/// Signatures a corpus holds before its lists are trained. Below it the flat
/// scan costs a millisecond or two, and every query sees every item.
pub const TRAIN_AT: u64 = 20_000;
/// Lists per corpus.
pub const LISTS: usize = 256;
/// Lists a query reads.
pub const PROBES: usize = 32;
/// Lists the ingest's search for a claim's near neighbours reads (D-K17):
/// a restatement (cosine 0.85 and more) sits in the lists nearest the claim,
/// where a question's answers are spread wider; the full-text read beside it
/// finds the claims that share its words.
pub const NEIGHBOUR_PROBES: usize = 4;
/// Lists a claim's neighbour search reads when its full-text read finds
/// nothing, as when every word of the claim is common (D-K26): the vector
/// side decides alone, and the time the full text would have taken pays
/// for 4 lists more (D-K27).
pub const NEIGHBOUR_PROBES_ALONE: usize = 8;
/// Embeddings the centroids are trained on, at most.
pub const SAMPLE: usize = 8_192;
/// Rounds of k-means, at most (it stops sooner once no member moves).
pub const ROUNDS: usize = 10;
/// Flat blocks one run of the upkeep moves into lists, per corpus: about
/// 32,000 signatures, so a run stays around a second.
pub const DRAIN_BLOCKS: usize = 32;
/// Embedding dimensions.
const DIMS: usize = 384;
/// A centroid's unit-vector components, as integers.
const SCALE: f32 = 32_767.0;

/// A corpus's centroids: unit vectors of [`DIMS`] components, each stored
/// as an `i16` of [`SCALE`], centroid after centroid.
#[derive(Debug, Clone, PartialEq)]
pub struct Centroids {
    q: Vec<i16>,
}

impl Centroids {
    /// Bytes one centroid takes in [`Self::encode`].
    pub const BYTES_EACH: usize = 2 * DIMS;

    /// Spherical k-means over `sample` (embeddings of [`DIMS`]) in one
    /// go: [`Training`] stepped to its end.
    pub fn train(sample: &[Vec<f32>], k: usize, rounds: usize) -> Self {
        let mut t = Training::new(sample, k, rounds);
        while t.step() {}
        t.finish()
    }

    pub fn len(&self) -> usize {
        self.q.len() / DIMS
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, j: usize) -> &[i16] {
        &self.q[j * DIMS..(j + 1) * DIMS]
    }

    /// The list a signature belongs to: the centroid with the highest dot
    /// product with the signature's ±1 vector, the lowest on a tie. Integer
    /// arithmetic, so the answer never depends on the order of the sum.
    pub fn list_of(&self, sig: &[u64]) -> usize {
        let score = |j: usize| -> i32 {
            self.get(j)
                .iter()
                .enumerate()
                .map(|(d, &x)| if sig[d / 64] >> (d % 64) & 1 == 1 { i32::from(x) } else { -i32::from(x) })
                .sum()
        };
        best(self.len(), score)
    }

    /// [`Self::list_of`] for many signatures, through per-byte tables of
    /// partial sums (48 lookups per centroid instead of 384 additions),
    /// one centroid's table (48 KiB) at a time; the same answers.
    pub fn lists_of(&self, sigs: &[Vec<u64>]) -> Vec<usize> {
        const BYTES: usize = DIMS / 8;
        let of: Vec<[u8; BYTES]> =
            sigs.iter().map(|sig| std::array::from_fn(|k| (sig[k / 8] >> (8 * (k % 8)) & 0xFF) as u8)).collect();
        let mut top = vec![(i32::MIN, 0usize); sigs.len()];
        let mut table = vec![0i32; BYTES * 256];
        for j in 0..self.len() {
            let c = self.get(j);
            for (k, row) in table.chunks_exact_mut(256).enumerate() {
                for (v, t) in row.iter_mut().enumerate() {
                    *t = (0..8)
                        .map(|b| if v >> b & 1 == 1 { i32::from(c[8 * k + b]) } else { -i32::from(c[8 * k + b]) })
                        .sum();
                }
            }
            for (bytes, best) in of.iter().zip(top.iter_mut()) {
                let score: i32 = bytes.iter().enumerate().map(|(k, &v)| table[k * 256 + usize::from(v)]).sum();
                if score > best.0 {
                    *best = (score, j);
                }
            }
        }
        top.into_iter().map(|t| t.1).collect()
    }

    /// The `n` lists nearest to a query's embedding (highest dot product
    /// first, ties by the lower list).
    pub fn probes(&self, query: &[f32], n: usize) -> Vec<usize> {
        let mut all: Vec<(f32, usize)> = (0..self.len())
            .map(|j| (self.get(j).iter().zip(query).map(|(&x, q)| f32::from(x) * q).sum::<f32>(), j))
            .collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        all.into_iter().take(n).map(|(_, j)| j).collect()
    }

    /// Little-endian `i16`s, centroid after centroid.
    pub fn encode(&self) -> Vec<u8> {
        self.q.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Decodes [`Self::encode`]'s bytes; none when they are not whole
    /// centroids, or none at all (a trained corpus has at least one).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.is_empty() || !bytes.len().is_multiple_of(2 * DIMS) {
            return None;
        }
        Some(Centroids { q: bytes.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]])).collect() })
    }
}

/// Multiply-adds one [`Training::step`] does, about: some 20 ms of
/// WebAssembly on this project's machines, so the upkeep can yield to the
/// other requests its instance serves between steps (D-K16).
const STEP_WORK: usize = 1 << 24;

/// Spherical k-means over a sample of embeddings, in steps of bounded work
/// ([`Self::step`]), so the caller can let other work run between them: at
/// most `k` centroids, seeded by [`Seeding`]; each round assigns every
/// point to the centroid of the highest cosine and sets each centroid to its
/// members' normalised mean (a centroid left with no member keeps its
/// place), for at most `rounds` rounds or until no point moves. A point of
/// another length, or with a component that is not finite, is left out.
/// Deterministic: the same sample gives the same centroids, whatever the
/// steps' size.
pub struct Training<'a> {
    sample: Vec<&'a [f32]>,
    k: usize,
    rounds: usize,
    /// Until the seeds are drawn.
    seeding: Option<Seeding>,
    /// Float centroids, one after another.
    c: Vec<f32>,
    assigned: Vec<usize>,
    round: usize,
    /// The next point this round assigns.
    next: usize,
    moved: bool,
    done: bool,
    seeds_per_step: usize,
    points_per_step: usize,
}

impl<'a> Training<'a> {
    pub fn new(sample: &'a [Vec<f32>], k: usize, rounds: usize) -> Self {
        let sample: Vec<&[f32]> =
            sample.iter().map(Vec::as_slice).filter(|v| v.len() == DIMS && v.iter().all(|x| x.is_finite())).collect();
        let n = sample.len().max(1);
        let done = sample.is_empty() || k == 0;
        Training {
            seeding: (!done).then(|| Seeding::new(&sample)),
            sample,
            k,
            rounds,
            c: Vec::new(),
            assigned: Vec::new(),
            round: 0,
            next: 0,
            moved: false,
            done,
            // A seed measures every point against itself; assigning a
            // point measures it against every centroid.
            seeds_per_step: (STEP_WORK / (n * DIMS)).max(1),
            points_per_step: (STEP_WORK / (k.max(1) * DIMS)).max(1),
        }
    }

    /// Does the next piece of work; false once there is none left.
    pub fn step(&mut self) -> bool {
        if self.done {
            return false;
        }
        if let Some(s) = &mut self.seeding {
            for _ in 0..self.seeds_per_step {
                if s.chosen.len() >= self.k || !s.draw(&self.sample) {
                    self.c = points(&self.sample, &s.chosen);
                    self.assigned = vec![usize::MAX; self.sample.len()];
                    self.seeding = None;
                    self.done = self.rounds == 0;
                    break;
                }
            }
            return !self.done;
        }
        let end = (self.next + self.points_per_step).min(self.sample.len());
        for p in self.next..end {
            let n = nearest_float(&self.c, self.sample[p]);
            self.moved |= self.assigned[p] != n;
            self.assigned[p] = n;
        }
        self.next = end;
        if end == self.sample.len() {
            self.round += 1;
            self.next = 0;
            match std::mem::take(&mut self.moved) {
                false => self.done = true,
                true => {
                    self.means();
                    self.done = self.round == self.rounds;
                }
            }
        }
        !self.done
    }

    /// Each centroid becomes its members' normalised mean.
    fn means(&mut self) {
        let mut sums = vec![0f32; self.c.len()];
        for (v, &a) in self.sample.iter().zip(&self.assigned) {
            for (s, x) in sums[a * DIMS..(a + 1) * DIMS].iter_mut().zip(v.iter()) {
                *s += x;
            }
        }
        for (cj, sj) in self.c.chunks_exact_mut(DIMS).zip(sums.chunks_exact(DIMS)) {
            let n = sj.iter().map(|x| x * x).sum::<f32>().sqrt();
            if n > 0.0 {
                for (x, s) in cj.iter_mut().zip(sj) {
                    *x = s / n;
                }
            }
        }
    }

    /// The centroids as trained so far (all of them once [`Self::step`]
    /// has returned false).
    pub fn finish(mut self) -> Centroids {
        if let Some(s) = self.seeding.take() {
            self.c = points(&self.sample, &s.chosen);
        }
        // Seeds are unit vectors and so is every mean: each component fits.
        Centroids { q: self.c.iter().map(|x| (x * SCALE).round().clamp(-SCALE, SCALE) as i16).collect() }
    }
}

/// The `chosen` points of `sample`, one after another.
fn points(sample: &[&[f32]], chosen: &[usize]) -> Vec<f32> {
    chosen.iter().flat_map(|&p| sample[p].iter().copied()).collect()
}

/// The k-means++ seeding with a fixed generator: the first point, then each
/// next seed drawn with odds of its squared distance (1 − cosine) to the
/// nearest seed so far, so the seeds spread over the sample's clusters.
/// Fewer than asked when the sample has fewer distinct points.
struct Seeding {
    state: u64,
    chosen: Vec<usize>,
    /// Each point's squared distance to its nearest seed.
    d2: Vec<f64>,
}

impl Seeding {
    /// The first seed: the sample's first point (the sample is not empty).
    fn new(sample: &[&[f32]]) -> Self {
        Seeding {
            state: 0x9E37_79B9_7F4A_7C15,
            chosen: vec![0],
            d2: sample.iter().map(|p| dist(p, sample[0])).collect(),
        }
    }

    /// Draws the next seed; false when every point is a seed or a
    /// duplicate of one.
    fn draw(&mut self, sample: &[&[f32]]) -> bool {
        let total: f64 = self.d2.iter().sum();
        // (NaN is checked too, though the sample holds only finite points.)
        if total.is_nan() || total <= 0.0 {
            return false;
        }
        let state = &mut self.state;
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let mut at = (*state >> 11) as f64 / (1u64 << 53) as f64 * total;
        let mut next = self.d2.iter().rposition(|&d| d > 0.0).expect("a point away from the seeds");
        for (p, &d) in self.d2.iter().enumerate() {
            if d > 0.0 && at < d {
                next = p;
                break;
            }
            at -= d;
        }
        self.chosen.push(next);
        for (d, p) in self.d2.iter_mut().zip(sample) {
            *d = d.min(dist(p, sample[next]));
        }
        true
    }
}

/// The seeding's squared distance, (1 − cosine)², of two unit vectors.
fn dist(a: &[f32], b: &[f32]) -> f64 {
    // A point's cosine to itself may round a little below 1.
    let d = 1.0 - f64::from(a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>());
    if d < 1e-6 { 0.0 } else { d * d }
}

/// The index in `0..n` of the highest score, the lowest on a tie.
fn best(n: usize, score: impl Fn(usize) -> i32) -> usize {
    let mut top = (i32::MIN, 0);
    for j in 0..n {
        let s = score(j);
        if s > top.0 {
            top = (s, j);
        }
    }
    top.1
}

/// The centroid of the highest dot product with `v` among the float
/// centroids `c` (training only), the lowest on a tie.
fn nearest_float(c: &[f32], v: &[f32]) -> usize {
    let mut top = (f32::NEG_INFINITY, 0);
    for (j, cj) in c.chunks_exact(DIMS).enumerate() {
        let s: f32 = cj.iter().zip(v).map(|(a, b)| a * b).sum();
        if s > top.0 {
            top = (s, j);
        }
    }
    top.1
}

/// Which of `n` flat blocks (in block order) the sample reads: `take` of
/// them spread evenly from the first, so the sample spans the corpus's
/// whole history rather than its oldest items.
pub fn sample_blocks(n: usize, take: usize) -> Vec<usize> {
    if take == 0 {
        return Vec::new();
    }
    if n <= take {
        return (0..n).collect();
    }
    (0..take).map(|i| i * n / take).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::signature;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        }
        fn near(&mut self, centre: &[f32], spread: f32) -> Vec<f32> {
            let v: Vec<f32> = centre.iter().map(|c| c + spread * self.unit()).collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / n).collect()
        }
    }

    /// `clusters` random directions, each with `per` points around it.
    fn clustered(clusters: usize, per: usize, rng: &mut Rng) -> (Vec<Vec<f32>>, Vec<usize>) {
        let centres: Vec<Vec<f32>> = (0..clusters).map(|_| rng.near(&[0.0; DIMS], 1.0)).collect();
        let mut points = Vec::new();
        let mut truth = Vec::new();
        for _ in 0..per {
            for (c, centre) in centres.iter().enumerate() {
                points.push(rng.near(centre, 0.05));
                truth.push(c);
            }
        }
        (points, truth)
    }

    #[test]
    fn training_finds_well_separated_clusters_and_their_signatures_follow() {
        let mut rng = Rng(7);
        let (points, truth) = clustered(8, 40, &mut rng);
        let c = Centroids::train(&points, 8, ROUNDS);
        assert_eq!(c.len(), 8);
        // Every cluster's points share one list, and no two clusters do,
        // whether found from the embedding or from its signature alone.
        let mut list_of = [usize::MAX; 8];
        for (p, &t) in points.iter().zip(&truth) {
            let n = c.list_of(&signature(p));
            if list_of[t] == usize::MAX {
                list_of[t] = n;
            }
            assert_eq!(list_of[t], n, "cluster {t} split");
            assert_eq!(c.probes(p, 1), vec![n], "a point's nearest list is its signature's");
        }
        let mut lists = list_of.to_vec();
        lists.sort_unstable();
        lists.dedup();
        assert_eq!(lists.len(), 8, "two clusters share a list");
    }

    #[test]
    fn training_is_deterministic_and_the_tables_agree_with_the_sum() {
        let mut rng = Rng(11);
        let points: Vec<Vec<f32>> = (0..600).map(|_| rng.near(&[0.0; DIMS], 1.0)).collect();
        let a = Centroids::train(&points, 32, ROUNDS);
        assert_eq!(a, Centroids::train(&points, 32, ROUNDS));
        let sigs: Vec<Vec<u64>> = (0..500).map(|_| (0..6).map(|_| rng.next()).collect()).collect();
        let bulk = a.lists_of(&sigs);
        for (s, l) in sigs.iter().zip(&bulk) {
            assert_eq!(a.list_of(s), *l);
        }
        let mut used = bulk.clone();
        used.sort_unstable();
        used.dedup();
        assert!(used.len() > 16, "random signatures spread over the lists: {}", used.len());
    }

    #[test]
    fn the_steps_size_does_not_change_the_centroids() {
        let mut rng = Rng(13);
        let points: Vec<Vec<f32>> = (0..300).map(|_| rng.near(&[0.0; DIMS], 1.0)).collect();
        let whole = Centroids::train(&points, 16, ROUNDS);
        for (seeds, pts) in [(1, 1), (3, 7), (1, 300), (16, 1)] {
            let mut t = Training::new(&points, 16, ROUNDS);
            (t.seeds_per_step, t.points_per_step) = (seeds, pts);
            let mut steps = 0;
            while t.step() {
                steps += 1;
            }
            assert_eq!(t.finish(), whole, "{seeds} seeds, {pts} points a step");
            assert!(steps >= 15 / seeds, "{steps} steps");
        }
        // The default steps cut a round of the upkeep's training (8,192
        // points against 256 centroids) into some fifty, and its seeding
        // into some fifty more.
        let sample = vec![vec![1.0 / (DIMS as f32).sqrt(); DIMS]; SAMPLE];
        let t = Training::new(&sample, LISTS, ROUNDS);
        let (round, seeding) = (SAMPLE.div_ceil(t.points_per_step), LISTS.div_ceil(t.seeds_per_step));
        assert!((40..=60).contains(&round) && (40..=60).contains(&seeding), "{round}, {seeding}");
    }

    #[test]
    fn the_stepped_training_gives_the_centroids_the_one_loop_form_gave() {
        // 2,000 unit vectors in 37 loose groups; the hash (FNV-1a of the
        // encoded centroids) is what `Centroids::train` gave before the
        // training was stepped (e0149ac^), so stores trained by either
        // build agree on every list.
        let mut st = 12_345u64;
        let mut next = || {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            (st >> 11) as f32 / (1u64 << 53) as f32 - 0.5
        };
        let points: Vec<Vec<f32>> = (0..2_000)
            .map(|i| {
                let v: Vec<f32> = (0..DIMS).map(|d| next() + if d % 37 == i % 37 { 1.5 } else { 0.0 }).collect();
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter().map(|x| x / n).collect()
            })
            .collect();
        let c = Centroids::train(&points, 64, ROUNDS);
        let hash =
            c.encode().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
        assert_eq!((c.len(), hash), (64, 0x2ced_311d_32a2_d978));
    }

    #[test]
    fn fewer_points_than_lists_gives_one_list_each() {
        let mut rng = Rng(3);
        let points: Vec<Vec<f32>> = (0..3).map(|_| rng.near(&[0.0; DIMS], 1.0)).collect();
        let c = Centroids::train(&points, LISTS, ROUNDS);
        assert_eq!(c.len(), 3);
        let mut lists: Vec<usize> = points.iter().map(|p| c.list_of(&signature(p))).collect();
        for (p, l) in points.iter().zip(&lists) {
            assert_eq!(c.probes(p, 1), vec![*l], "each point is its own list's centroid");
        }
        lists.sort_unstable();
        assert_eq!(lists, vec![0, 1, 2]);
        assert!(Centroids::train(&[], LISTS, ROUNDS).is_empty());
        // A vector of another length, or with NaN, is not a sample point.
        assert!(Centroids::train(&[vec![1.0; 3]], LISTS, ROUNDS).is_empty());
        let mut nan = points[0].clone();
        nan[5] = f32::NAN;
        assert_eq!(Centroids::train(&[nan, points[1].clone()], LISTS, ROUNDS).len(), 1);
    }

    #[test]
    fn probes_are_nearest_first_and_ties_go_to_the_lower_list() {
        let axis = |d: usize, x: i16| -> Vec<i16> { (0..DIMS).map(|i| if i == d { x } else { 0 }).collect() };
        let c = Centroids { q: [axis(0, 100), axis(1, 300), axis(0, 200), axis(1, 300)].concat() };
        let mut q = vec![0.0; DIMS];
        (q[0], q[1]) = (0.1, 0.9);
        assert_eq!(c.probes(&q, 3), vec![1, 3, 2]);
        assert_eq!(c.probes(&q, 10).len(), 4);
        // Signature of dims 0 and 1 set, the rest clear: every centroid
        // scores its one component, so the highest wins, the lower on a tie.
        let sig = vec![0b11, 0, 0, 0, 0, 0];
        assert_eq!(c.list_of(&sig), 1);
        assert_eq!(c.lists_of(&[sig]), vec![1]);
    }

    #[test]
    fn centroids_round_trip_and_refuse_ragged_bytes() {
        let mut rng = Rng(5);
        let points: Vec<Vec<f32>> = (0..4).map(|_| rng.near(&[0.0; DIMS], 1.0)).collect();
        let c = Centroids::train(&points, 4, ROUNDS);
        let bytes = c.encode();
        assert_eq!(bytes.len(), 4 * DIMS * 2);
        assert_eq!(Centroids::decode(&bytes), Some(c));
        assert_eq!(Centroids::decode(&bytes[..100]), None);
        assert_eq!(Centroids::decode(&[]), None);
    }

    #[test]
    fn the_sample_spans_the_blocks_evenly() {
        assert_eq!(sample_blocks(5, 16), vec![0, 1, 2, 3, 4]);
        assert_eq!(sample_blocks(100, 4), vec![0, 25, 50, 75]);
        assert_eq!(sample_blocks(3, 0), Vec::<usize>::new());
        let s = sample_blocks(1000, 16);
        assert_eq!(s.len(), 16);
        assert!(s.windows(2).all(|w| w[1] > w[0]) && *s.last().unwrap() < 1000);
    }
}
