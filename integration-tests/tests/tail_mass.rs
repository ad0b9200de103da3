//! What each toe shape does to the tail, on real logits from the embedded model: the
//! probability mass, at a fixed temperature, of the tokens whose base probability is
//! below 1e-4. The log toe (the design's) raises it; quadratic and exp lower it.

use std::sync::{Arc, Mutex};

use candle_core::Tensor;
use mistralrs::{GgufModelBuilder, RequestBuilder, TextMessageRole, TokenSource};
use mistralrs_hlg::{params::Span, CurveParts, HlgCurve, Pivot, ToeShape};
use mistralrs_hlg_integration_tests::PROMPTS;

/// Logits as the processor sees them, for greedy continuations of the prompt set.
async fn capture() -> Vec<Vec<f32>> {
    let gguf = mistralrs_hlg::model::ensure_default_model().unwrap();
    let dir = gguf.parent().unwrap().to_string_lossy().into_owned();
    let file = gguf.file_name().unwrap().to_string_lossy().into_owned();
    let model = GgufModelBuilder::new(dir, vec![file])
        .with_token_source(TokenSource::None)
        .with_force_cpu()
        .build()
        .await
        .unwrap();
    let seen: Arc<Mutex<Vec<Vec<f32>>>> = Arc::default();
    for p in PROMPTS {
        let sink = seen.clone();
        let record = move |logits: &Tensor, _: &[u32]| {
            sink.lock().unwrap().push(logits.to_vec1::<f32>()?);
            Ok(logits.clone())
        };
        let req = RequestBuilder::new()
            .add_message(TextMessageRole::User, p)
            .set_sampler_max_len(16)
            .add_logits_processor(Arc::new(record));
        model.send_chat_request(req).await.unwrap();
    }
    let out = seen.lock().unwrap().clone();
    out
}

fn softmax(x: &[f32], t: f64) -> Vec<f64> {
    let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let e: Vec<f64> = x.iter().map(|&v| ((v as f64 - m) / t).exp()).collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|v| v / s).collect()
}

/// Mean tail mass over positions: plain temperature, then each curve.
fn tail_masses(logits: &[Vec<f32>], t: f64, curves: &[HlgCurve]) -> (f64, Vec<f64>) {
    let (mut plain, mut shaped) = (0.0, vec![0.0; curves.len()]);
    for x in logits {
        let tail: Vec<bool> = softmax(x, 1.0).iter().map(|&p| p < 1e-4).collect();
        let mass = |p: Vec<f64>| {
            p.iter()
                .zip(&tail)
                .filter(|(_, &t)| t)
                .map(|(p, _)| p)
                .sum::<f64>()
        };
        plain += mass(softmax(x, t));
        for (i, c) in curves.iter().enumerate() {
            let mut y = x.clone();
            c.apply(&mut y);
            shaped[i] += mass(softmax(&y, t));
        }
    }
    let n = logits.len() as f64;
    (plain / n, shaped.into_iter().map(|v| v / n).collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn toe_shapes_move_the_tail_the_stated_way() {
    let logits = capture().await;
    assert!(logits.len() >= 30, "captured {} positions", logits.len());
    assert_eq!(logits[0].len(), 49152, "vocabulary");
    for t in [0.7, 1.0] {
        // The toe alone (shoulder off), its knee 10 nats below the top (offset 6, width 4,
        // toe 6): every token the toe moves has base probability below e^-10 < 1e-4, so it
        // is a tail token, and the direction holds at every position.
        let toe_only: Vec<HlgCurve> = ToeShape::ALL
            .iter()
            .map(|s| {
                HlgCurve::new(CurveParts {
                    pivot: Pivot::Top,
                    pivot_offset: Span::Nats(6.0),
                    width: Some(Span::Nats(4.0)),
                    shoulder: None,
                    toe: Some(6.0),
                    toe_shape: *s,
                })
                .unwrap()
            })
            .collect();
        // The shipped knobs with each toe shape (reported, not asserted: their knee is
        // 7 nats below the top and the shoulder lowers the top).
        let defaults: Vec<HlgCurve> = ToeShape::ALL
            .iter()
            .map(|s| HlgCurve::default().with_toe_shape(*s))
            .collect();
        let (plain, alone) = tail_masses(&logits, t, &toe_only);
        let (_, with_shoulder) = tail_masses(&logits, t, &defaults);
        println!("T = {t}: tail mass (base p < 1e-4), mean over {} positions: plain temperature {plain:.5}", logits.len());
        for (i, s) in ToeShape::ALL.iter().enumerate() {
            println!(
                "  {:>9} toe: alone {:.5} ({:+.1}%), with the shipped knobs {:.5} ({:+.1}%)",
                s.name(),
                alone[i],
                (alone[i] / plain - 1.0) * 100.0,
                with_shoulder[i],
                (with_shoulder[i] / plain - 1.0) * 100.0
            );
        }
        for x in &logits {
            let one = std::slice::from_ref(x);
            let (p, a) = tail_masses(one, t, &toe_only);
            assert!(
                a[0] >= p,
                "log toe lowered the tail at T = {t}: {} < {p}",
                a[0]
            );
            assert!(
                a[1] <= p,
                "quadratic toe raised the tail at T = {t}: {} > {p}",
                a[1]
            );
            assert!(
                a[2] <= p,
                "exp toe raised the tail at T = {t}: {} > {p}",
                a[2]
            );
        }
        assert!(alone[0] > plain && alone[1] < plain && alone[2] < alone[1]);
    }
}
