//! The vector index's quality (docs/BENCHMARKS.md, D-K16), outside the app:
//! real MiniLM embeddings of every LoCoMo turn, then pairs of turns, until
//! `--items`, all in one corpus. Two measures of the vector generator as the
//! store runs it (Hamming shortlist of 200, re-scored by exact cosine), for
//! the flat scan and for the inverted lists at several probe counts:
//! recall@10 against the exact top 10 by cosine (the first 300 LoCoMo
//! questions), and evidence recall@10 (every question with evidence: the
//! share of its evidence turns found), with the share of signatures each
//! query reads. No HTTP, no store: the same pure functions the store calls.
//!
//! Then the ingest's neighbour search (D-K17): every 40th item stands for a
//! new claim, and its neighbours are the other items at cosine ≥ 0.5, best
//! [`STANCE_NEIGHBOURS`] first. Recall of those exact neighbours by the
//! vector generator, flat and at several probe counts, with a shortlist of
//! 200 and of [`NEIGHBOUR_SHORTLIST`] (D-K24; the store re-scores 40 of
//! lists and 200 of a flat scan, D-K28, and `bench-neighbours` measures
//! it with an entry's two embeddings).
//!
//! Usage: bench-ivf [--items 40000] [--threads 2] [--cache FILE] [--neighbours-only]   (weights
//! from $MNEME_MODELS_DIR, else ~/.cache/mneme/ai-models; `--cache` keeps the
//! embeddings, which take minutes, for the next run)

use std::path::PathBuf;
use std::time::Instant;

use mneme_e2e::bench::{arg, locomo};
use mneme_knowledge::fusion::{Block, NEIGHBOUR_SHORTLIST, SHORTLIST, shortlist, signature};

use mneme_knowledge::governor::{MERGE_COSINE_DEFAULT, STANCE_MIN_COSINE, STANCE_NEIGHBOURS};
use mneme_knowledge::ivf::{self, Centroids};

fn main() {
    let items: usize = arg("--items").map_or(40_000, |n| n.parse().expect("--items takes a number"));
    let threads: usize = arg("--threads").map_or(2, |n| n.parse().expect("--threads takes a number"));
    let (model, tokenizer) = mneme_e2e::bench::minilm();

    let data = locomo();
    let mut turns = Vec::new();
    let mut turn_ids: Vec<(usize, String)> = Vec::new();
    for (conv_no, conv) in data.as_array().unwrap().iter().enumerate() {
        let c = &conv["conversation"];
        for n in 1.. {
            let Some(s) = c.get(format!("session_{n}")).and_then(|v| v.as_array()) else { break };
            for t in s {
                turns.push(t["text"].as_str().unwrap_or_default().to_string());
                turn_ids.push((conv_no, t["dia_id"].as_str().unwrap_or_default().to_string()));
            }
        }
    }
    let texts: Vec<String> = (0..items)
        .map(|k| match k < turns.len() {
            true => turns[k].clone(),
            false => format!("{} {}", turns[k % turns.len()], turns[(k * 7 + 3) % turns.len()]),
        })
        .collect();
    let questions: Vec<String> = data
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["qa"].as_array().unwrap().iter().filter_map(|q| q["question"].as_str().map(String::from)))
        .take(300)
        .collect();
    let embed_all = |texts: &[String]| -> Vec<Vec<f32>> {
        let chunk = texts.len().div_ceil(threads.max(1)).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = texts
                .chunks(chunk)
                .map(|part| {
                    let (model, tokenizer) = (&model, &tokenizer);
                    s.spawn(move || {
                        part.iter()
                            .map(|t| model.embed(tokenizer.encode(t.as_str(), true).unwrap().get_ids()).unwrap())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        })
    };
    // `--cache FILE` keeps the embeddings between runs (they take minutes).
    let cache = arg("--cache").map(PathBuf::from);
    let cached = cache.as_ref().and_then(|c| std::fs::read(c).ok()).filter(|b| b.len() == (items + 300) * 384 * 4);
    let (vectors, queries) = match cached {
        Some(bytes) => {
            let all: Vec<Vec<f32>> = bytes
                .chunks_exact(384 * 4)
                .map(|v| v.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
                .collect();
            let (v, q) = all.split_at(items);
            println!("read {} items and {} queries from the cache", v.len(), q.len());
            (v.to_vec(), q.to_vec())
        }
        None => {
            let t = Instant::now();
            let vectors = embed_all(&texts);
            let queries = embed_all(&questions);
            println!(
                "embedded {} items and {} queries in {:.0} s",
                vectors.len(),
                queries.len(),
                t.elapsed().as_secs_f64()
            );
            if let Some(c) = &cache {
                let bytes: Vec<u8> = vectors.iter().chain(&queries).flatten().flat_map(|x| x.to_le_bytes()).collect();
                std::fs::write(c, bytes).expect("writing the cache");
            }
            (vectors, queries)
        }
    };
    // Every question with evidence, and the items holding it.
    let mut ev_questions = Vec::new();
    let mut evidence: Vec<Vec<usize>> = Vec::new();
    for (conv_no, conv) in data.as_array().unwrap().iter().enumerate() {
        for q in conv["qa"].as_array().unwrap() {
            let held: Vec<usize> = q["evidence"]
                .as_array()
                .map(|e| {
                    e.iter()
                        .filter_map(|d| {
                            turn_ids.iter().position(|t| t.0 == conv_no && Some(t.1.as_str()) == d.as_str())
                        })
                        .collect()
                })
                .unwrap_or_default();
            if !held.is_empty() && held.iter().all(|&h| h < items) {
                ev_questions.push(q["question"].as_str().unwrap_or_default().to_string());
                evidence.push(held);
            }
        }
    }
    let ev_cache = cache.as_ref().map(|c| c.with_extension("evidence"));
    let ev_queries: Vec<Vec<f32>> =
        match ev_cache.as_ref().and_then(|c| std::fs::read(c).ok()).filter(|b| b.len() == ev_questions.len() * 384 * 4)
        {
            Some(bytes) => bytes
                .chunks_exact(384 * 4)
                .map(|v| v.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
                .collect(),
            None => {
                let e = embed_all(&ev_questions);
                if let Some(c) = &ev_cache {
                    std::fs::write(c, e.iter().flatten().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
                }
                e
            }
        };
    println!("{} questions with evidence among the items", ev_questions.len());
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let sigs: Vec<Vec<u64>> = vectors.iter().map(|v| signature(v)).collect();
    let truth: Vec<Vec<usize>> = queries
        .iter()
        .map(|q| {
            let mut all: Vec<(f32, usize)> = vectors.iter().enumerate().map(|(i, v)| (dot(q, v), i)).collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0));
            all.into_iter().take(10).map(|x| x.1).collect()
        })
        .collect();
    // The store's vector generator over the given blocks: the Hamming
    // shortlist re-scored by cosine, best 10.
    let generator = |q: &[f32], blocks: &[Block]| -> Vec<usize> {
        let mut found: Vec<(f32, usize)> = shortlist(&signature(q), blocks, SHORTLIST)
            .into_iter()
            .map(|s| (dot(q, &vectors[s as usize]), s as usize))
            .collect();
        found.sort_by(|a, b| b.0.total_cmp(&a.0));
        found.into_iter().take(10).map(|x| x.1).collect()
    };
    let recall = |got: &[Vec<usize>]| {
        let hit: usize = got.iter().zip(&truth).map(|(g, t)| g.iter().filter(|x| t.contains(x)).count()).sum();
        hit as f64 / (10 * truth.len()) as f64
    };
    let ev_recall = |got: &[Vec<usize>]| {
        got.iter()
            .zip(&evidence)
            .map(|(g, e)| e.iter().filter(|x| g.contains(x)).count() as f64 / e.len() as f64)
            .sum::<f64>()
            / evidence.len() as f64
    };
    let flat = Block { seqs: (0..items as i64).collect(), sigs: sigs.clone() };
    let got: Vec<Vec<usize>> = queries.iter().map(|q| generator(q, std::slice::from_ref(&flat))).collect();
    let ev: Vec<Vec<usize>> = ev_queries.iter().map(|q| generator(q, std::slice::from_ref(&flat))).collect();
    println!(
        "flat scan: recall@10 {:.3}, evidence recall@10 {:.3}, reads 100% of signatures",
        recall(&got),
        ev_recall(&ev)
    );

    // The upkeep's sample: embeddings spread evenly over the corpus.
    let step = (items / ivf::SAMPLE).max(1);
    let sample: Vec<Vec<f32>> = (0..items).step_by(step).take(ivf::SAMPLE).map(|i| vectors[i].clone()).collect();
    let t = Instant::now();
    let centroids = Centroids::train(&sample, ivf::LISTS, ivf::ROUNDS);
    println!("trained {} lists on {} embeddings in {:.1} s", centroids.len(), sample.len(), t.elapsed().as_secs_f64());
    let t = Instant::now();
    let mut lists: Vec<Block> = vec![Block::default(); centroids.len()];
    for (i, l) in centroids.lists_of(&sigs).into_iter().enumerate() {
        lists[l].push(i as i64, sigs[i].clone());
    }
    let mut sizes: Vec<usize> = lists.iter().map(|b| b.seqs.len()).collect();
    sizes.sort_unstable();
    println!(
        "assigned {items} signatures in {:.2} s; list sizes min {}, median {}, max {}",
        t.elapsed().as_secs_f64(),
        sizes[0],
        sizes[sizes.len() / 2],
        sizes[sizes.len() - 1]
    );
    let run = |qs: &[Vec<f32>], probes: usize| -> (Vec<Vec<usize>>, usize) {
        let mut read = 0;
        let got = qs
            .iter()
            .map(|q| {
                let chosen: Vec<Block> = centroids.probes(q, probes).into_iter().map(|j| lists[j].clone()).collect();
                read += chosen.iter().map(|b| b.seqs.len()).sum::<usize>();
                generator(q, &chosen)
            })
            .collect();
        (got, read)
    };
    // The ingest's neighbours: exact, then by the generator (the claim
    // itself left out, as a new claim is not yet stored).
    let claims: Vec<usize> = (0..items).step_by(40).collect();
    let near = |i: usize, found: &mut Vec<(f32, usize)>| -> Vec<usize> {
        found.retain(|f| f.1 != i && f.0 >= STANCE_MIN_COSINE);
        found.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        found.iter().take(STANCE_NEIGHBOURS).map(|f| f.1).collect()
    };
    let exact: Vec<Vec<usize>> = claims
        .iter()
        .map(|&i| near(i, &mut vectors.iter().enumerate().map(|(j, v)| (dot(&vectors[i], v), j)).collect()))
        .collect();
    let wanted: usize = exact.iter().map(Vec::len).sum();
    let is_merge = |i: usize, j: usize| dot(&vectors[i], &vectors[j]) >= MERGE_COSINE_DEFAULT;
    // The vector generator over the given blocks for claim `i`: its best
    // `n` by Hamming distance, judged by exact cosine: a question's
    // shortlist of 200, and the neighbour search's of 40 of lists (D-K24).
    let pool = NEIGHBOUR_SHORTLIST;
    let nearest = |i: usize, blocks: &[Block], n: usize| -> Vec<usize> {
        let q = &vectors[i];
        near(
            i,
            &mut shortlist(&signature(q), blocks, n)
                .into_iter()
                .map(|s| (dot(q, &vectors[s as usize]), s as usize))
                .collect(),
        )
    };
    // All exact neighbours, and the merge candidates among them (cosine at
    // or above the default merge threshold): a missed one is a duplicate.
    let merges: usize = claims.iter().zip(&exact).map(|(&i, t)| t.iter().filter(|&&j| is_merge(i, j)).count()).sum();
    let neighbour_recall = |got: &[Vec<usize>]| {
        let hit: usize = got.iter().zip(&exact).map(|(g, t)| t.iter().filter(|x| g.contains(x)).count()).sum();
        let merged: usize = claims
            .iter()
            .zip(got.iter().zip(&exact))
            .map(|(&i, (g, t))| t.iter().filter(|&&j| is_merge(i, j) && g.contains(&j)).count())
            .sum();
        format!("{:.3}, merges {:.3}", hit as f64 / wanted.max(1) as f64, merged as f64 / merges.max(1) as f64)
    };
    let whole = std::slice::from_ref(&flat);
    let got: Vec<Vec<usize>> = claims.iter().map(|&i| nearest(i, whole, SHORTLIST)).collect();
    let hamming: Vec<Vec<usize>> = claims.iter().map(|&i| nearest(i, whole, pool)).collect();
    println!(
        "neighbours: {} claims, {} with any, {wanted} exact neighbours ({merges} at the merge threshold); flat scan finds {} (shortlist of {pool}: {})",
        claims.len(),
        exact.iter().filter(|e| !e.is_empty()).count(),
        neighbour_recall(&got),
        neighbour_recall(&hamming)
    );
    for probes in [1, 2, 4, 8, 16, 32] {
        let mut read = 0;
        let (got, hamming): (Vec<Vec<usize>>, Vec<Vec<usize>>) = claims
            .iter()
            .map(|&i| {
                let chosen: Vec<Block> =
                    centroids.probes(&vectors[i], probes).into_iter().map(|j| lists[j].clone()).collect();
                read += chosen.iter().map(|b| b.seqs.len()).sum::<usize>();
                (nearest(i, &chosen, SHORTLIST), nearest(i, &chosen, pool))
            })
            .unzip();
        println!(
            "neighbours, {probes} probes: finds {} (shortlist of {pool}: {}), reads {:.1}% of signatures",
            neighbour_recall(&got),
            neighbour_recall(&hamming),
            100.0 * read as f64 / (items * claims.len()) as f64
        );
    }
    if std::env::args().any(|a| a == "--neighbours-only") {
        return;
    }
    for probes in [16, 32, 48, 64] {
        let (got, read) = run(&queries, probes);
        let (ev, _) = run(&ev_queries, probes);
        println!(
            "{probes} probes of {}{}: recall@10 {:.3}, evidence recall@10 {:.3}, reads {:.1}% of signatures",
            centroids.len(),
            if probes == ivf::PROBES { " (the store's)" } else { "" },
            recall(&got),
            ev_recall(&ev),
            100.0 * read as f64 / (items * queries.len()) as f64
        );
    }
}
