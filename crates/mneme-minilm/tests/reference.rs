//! The forward pass against the reference implementation, on the real
//! weights (`$MNEME_MODELS_DIR/all-minilm-l6-v2`, downloaded by
//! scripts/install.sh). The expected values were computed by candle 0.11.1's
//! BERT with the same weights and token ids; over 300 LoCoMo questions the two
//! differed by at most 3.6e-7 per component.

use mneme_minilm::{Config, Error, MiniLm, Precision};

/// The bytes of `model.safetensors` and the parsed `config.json`.
fn files() -> (Vec<u8>, Config) {
    let dir = std::env::var_os("MNEME_MODELS_DIR").expect(
        "MNEME_MODELS_DIR must name the directory holding all-minilm-l6-v2 (scripts/test.sh sets it; scripts/install.sh downloads the weights)",
    );
    let dir = std::path::PathBuf::from(dir).join("all-minilm-l6-v2");
    let config = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    (std::fs::read(dir.join("model.safetensors")).unwrap(), config)
}

fn model() -> MiniLm {
    let (bytes, config) = files();
    MiniLm::from_safetensors(&bytes, &config).unwrap()
}

fn exact() -> MiniLm {
    let (bytes, config) = files();
    MiniLm::with_precision(&bytes, &config, Precision::Single).unwrap()
}

#[test]
fn embeddings_match_the_reference_implementation() {
    let m = exact();
    let cases: [(&str, &[u32], [f32; 6]); 4] = [
        (
            "A man is eating food.",
            &[101, 1037, 2158, 2003, 5983, 2833, 1012, 102],
            [0.033241548, 0.004406076, -0.006276969, 0.04837862, -0.1387022, -0.033617303],
        ),
        (
            "A man is eating a piece of bread.",
            &[101, 1037, 2158, 2003, 5983, 1037, 3538, 1997, 7852, 1012, 102],
            [0.052518442, 0.05524134, -0.011188249, -0.0057454277, -0.12720829, -0.022251777],
        ),
        (
            "The girl is carrying a baby.",
            &[101, 1996, 2611, 2003, 4755, 1037, 3336, 1012, 102],
            [-0.03630885, -0.035653498, -0.027222807, 0.03831998, 0.070777625, -0.016579496],
        ),
        ("(empty)", &[101, 102], [-0.11883833, 0.04829856, -0.0025481526, -0.011011228, 0.051950738, 0.010291775]),
    ];
    for (text, ids, want) in cases {
        let v = m.embed(ids).unwrap();
        assert_eq!(v.len(), m.dimensions());
        for (i, (g, w)) in v.iter().zip(want).enumerate() {
            assert!((g - w).abs() < 2e-6, "{text}: component {i} is {g}, reference {w}");
        }
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{text}: norm {norm}");
    }
}

/// Where the CPU has AVX-512 BF16 the products run in bfloat16 (D-K23):
/// each embedding stays within a cosine of 0.9999 of the single-precision
/// one, and within 2e-3 of it per component. Elsewhere the two
/// builds are one and the same.
#[test]
fn bfloat16_products_stay_next_to_single_precision() {
    let fast = model();
    let exact = exact();
    let sentences: [&[u32]; 4] = [
        &[101, 1037, 2158, 2003, 5983, 2833, 1012, 102],
        &[101, 1037, 2158, 2003, 5983, 1037, 3538, 1997, 7852, 1012, 102],
        &[101, 1996, 2611, 2003, 4755, 1037, 3336, 1012, 102],
        &[101, 102],
    ];
    for ids in sentences {
        let (a, b) = (fast.embed(ids).unwrap(), exact.embed(ids).unwrap());
        if !fast.bf16() {
            assert_eq!(a, b, "without AVX-512 BF16 both are single precision");
            continue;
        }
        let cos: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(cos > 0.9999, "{ids:?}: cosine {cos} to single precision");
        let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
        assert!(worst < 2e-3, "{ids:?}: a component is {worst} away");
    }
    eprintln!("products in {}", if fast.bf16() { "bfloat16" } else { "single precision (no AVX-512 BF16 here)" });
}

#[test]
fn bad_token_sequences_are_errors() {
    let m = model();
    assert_eq!(m.embed(&[]), Err(Error::Empty));
    assert_eq!(m.embed(&[101, 40_000, 102]), Err(Error::UnknownToken { id: 40_000, vocab: 30522 }));
    let long = vec![1000u32; m.max_tokens() + 1];
    assert_eq!(m.embed(&long), Err(Error::TooLong { len: 513, max: 512 }));
}

#[test]
fn weights_that_do_not_fit_the_config_are_refused() {
    let (bytes, mut config) = files();
    config.intermediate_size = 1024;
    let Err(Error::Weights(msg)) = MiniLm::from_safetensors(&bytes, &config).map(|_| ()) else {
        panic!("a wrong shape must be refused")
    };
    assert!(msg.contains("encoder.layer.0.intermediate.dense.weight") && msg.contains("[1024, 384]"), "{msg}");
    config.intermediate_size = 1536;
    config.hidden_act = "relu".into();
    assert!(matches!(MiniLm::from_safetensors(&bytes, &config).map(|_| ()), Err(Error::Config(_))));
    config.hidden_act = "gelu".into();
    assert!(matches!(MiniLm::from_safetensors(b"not safetensors", &config).map(|_| ()), Err(Error::Weights(_))));
}
