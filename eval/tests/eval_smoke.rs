//! The evaluation pipeline end to end on the embedded model, at a tiny size: capture,
//! the KL characterisation, entropy matching, online generations through each sampler,
//! the guardrail scorer and the perf A/B. The full-size runs are `mistralrs-hlg-eval …`
//! (docs/RESULTS.md); this checks that each piece measures what it says.

use mistralrs::Model;
use mistralrs_hlg::{HlgConfig, HlgCurve};
use mistralrs_hlg_eval::capture::{self, Capture, CaptureConfig};
use mistralrs_hlg_eval::generate::{generate, generate_seeded};
use mistralrs_hlg_eval::lm::Lm;
use mistralrs_hlg_eval::metrics::log_softmax;
use mistralrs_hlg_eval::sampler::{mean_entropy, Sampler};
use mistralrs_hlg_eval::{confirm, diversity, frontier, guardrail, kl, perf, prompts, PerPrompt};

#[tokio::test(flavor = "multi_thread")]
async fn the_evaluation_pipeline_measures_what_it_says() {
    let model = capture::load_model(None).await.unwrap();

    // Capture: every 2nd of 6 steps, two prompts.
    let cfg = CaptureConfig {
        max_tokens: 6,
        every: 2,
        temperature: 1.0,
        dequantized: capture::weights_dequantized(),
        seeded: true,
    };
    let c = capture::capture(&model, &prompts::OPEN_ENDED[..2], &cfg, |_| {})
        .await
        .unwrap();
    assert_eq!(c.vocab, 49152);
    assert!(c.rows.len() >= 2 && c.rows.len() <= 6, "{:?}", c.rows);
    assert!(c.rows.iter().all(|r| r.step % 2 == 0 && r.step < 6));
    assert_eq!(c.logits.len(), c.rows.len() * c.vocab);
    // Seeded by each prompt's text: the same capture again, with the prompts in the
    // other order and after other requests on the engine (whose generator has moved on).
    let reversed = [prompts::OPEN_ENDED[1], prompts::OPEN_ENDED[0]];
    let again = capture::capture(&model, &reversed, &cfg, |_| {})
        .await
        .unwrap();
    assert_eq!(
        again.texts,
        [c.texts[1].clone(), c.texts[0].clone()],
        "a seeded capture is the same run after run"
    );
    let split = c.rows.iter().filter(|r| r.prompt == 0).count() * c.vocab;
    assert_eq!(
        again.logits[again.logits.len() - split..],
        c.logits[..split]
    );

    kl_characterisation(&c);
    entropy_matching(&c);
    online_generation(&model, &c).await;
    seeded_and_resumed(&model).await;
    judged_by_the_engine(&model).await;
    gold_answers(&model).await;
    guardrail_scorer(&model).await;
    perf_ab(&model).await;
}

/// KL: plain temperature against itself is 0; every point is finite where the curve
/// cannot overflow (the default curve, any pivot mode).
fn kl_characterisation(c: &Capture) {
    let r = kl::characterise(c, &HlgConfig::default(), 1.0, 2, |_, _| {}).unwrap();
    assert_eq!(r.temperature_only.kl, 0.0);
    let pivots = &r.sweeps.iter().find(|(k, _)| k == "pivot").unwrap().1;
    assert_eq!(pivots.len(), 9);
    assert!(
        pivots
            .iter()
            .all(|p| p.mean.kl.is_finite() && p.mean.kl > 0.0),
        "{pivots:?}"
    );
}

/// Matching: every method's offline entropy equals plain temperature's (to 2e-3 nats).
/// Top-p's and min-p's entropy jumps where a token enters the kept set, and on a handful
/// of positions a jump can step over the target: there the bisection must have found
/// the jump (the entropy below the target just under the temperature it returns, above
/// it just over; the bisection stops within 1e-4 of T).
fn entropy_matching(c: &Capture) {
    let methods = diversity::matched(c, 0.8, &HlgConfig::default()).unwrap();
    let target = methods[0].1;
    assert_eq!(methods.len(), 6);
    let rows = || (0..c.rows.len()).map(|i| c.row(i));
    for (s, h) in &methods {
        let stepped = matches!(s, Sampler::TopP { .. } | Sampler::MinP { .. }) && {
            let t = s.temperature();
            let (below, above) = (
                mean_entropy(&s.at(t - 1e-4), rows()),
                mean_entropy(&s.at(t + 1e-4), rows()),
            );
            below <= target && target <= above
        };
        assert!(
            (h - target).abs() < 2e-3 || stepped,
            "{} reached {h}, target {target}",
            s.name()
        );
        let again = mean_entropy(s, (0..c.rows.len()).map(|i| c.row(i)));
        assert_eq!(again, *h);
    }
}

/// Online: a toe so hard that only the top token keeps mass: every drawn token is the
/// base argmax, and the recorded entropy is ~0; one base log-prob per token but the last.
async fn online_generation(model: &Model, c: &Capture) {
    let hard: HlgConfig = serde_json::from_str(
        r#"{"pivot_offset": 0, "width": 0, "shoulder": "off", "toe": 0.001, "toe_shape": "exp"}"#,
    )
    .unwrap();
    let s = Sampler::Hlg {
        t: 1.0,
        hlg: hard.resolved(true),
    };
    let (text, trace) = generate(model, prompts::OPEN_ENDED[0], &s, 6)
        .await
        .unwrap();
    assert!(!text.is_empty());
    assert_eq!(trace.base_logprob.len() + 1, trace.entropy.len());
    assert!(
        trace.entropy.iter().all(|&h| h < 1e-6),
        "{:?}",
        trace.entropy
    );
    // Greedy decoding of the same prompt draws the same tokens: compare the texts.
    let greedy = model
        .send_chat_request(
            mistralrs::RequestBuilder::new()
                .add_message(mistralrs::TextMessageRole::User, prompts::OPEN_ENDED[0])
                .set_sampler_max_len(6),
        )
        .await
        .unwrap();
    assert_eq!(Some(text), greedy.choices[0].message.content.clone());
    // And the temperature sampler's recorded entropy is the entropy of softmax(x / T).
    let row = c.row(0);
    let lp = log_softmax(row, 0.8).unwrap();
    let h: f64 = -lp
        .iter()
        .filter(|v| v.is_finite())
        .map(|v| v.exp() * v)
        .sum::<f64>();
    assert!((Sampler::Temperature { t: 0.8 }.entropy(row) - h).abs() < 1e-9);
}

/// The online confirmation's draws: the same seed gives the same sample whatever the
/// engine ran in between, and a stored run resumed with more samples keeps its samples
/// and adds only the missing one.
async fn seeded_and_resumed(model: &Model) {
    let s = Sampler::Temperature { t: 1.2 };
    let p = prompts::OPEN_ENDED[1];
    let seed = || mistralrs_hlg_eval::generate::SplitMix::named("smoke");
    let a = generate_seeded(model, p, &s, 8, seed()).await.unwrap();
    // Something else on the engine, drawn by the host's own generator.
    generate(model, p, &s, 8).await.unwrap();
    let b = generate_seeded(model, p, &s, 8, seed()).await.unwrap();
    assert_eq!(a, b);
    assert_eq!(a.1.entropy.len(), a.1.base_logprob.len() + 1);

    let dir = std::env::temp_dir().join(format!("hlg-smoke-confirm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let method = confirm::Planned {
        t_scale: 1.0,
        stream: None,
        family: frontier::Family::Temperature,
        knob: String::new(),
        sampler: s,
        offline: Default::default(),
    };
    let ps = [p];
    let draws = |samples| confirm::Draws {
        model: Lm::Engine(model),
        // The engine judging its own samples, standing in for the other model.
        judge: Some(Lm::Engine(model)),
        level: 1.0,
        samples,
        batch: 1,
        judge_batch: 1,
    };
    let mut count = 0;
    let mut st = confirm::Store::open(&dir, &method, 6).unwrap();
    confirm::run_method(draws(2), &mut st, &method, &ps, || count += 1)
        .await
        .unwrap();
    assert_eq!((count, st.samples.len()), (2, 2));
    let first = st.samples.clone();
    let mut st = confirm::Store::open(&dir, &method, 6).unwrap();
    assert_eq!(st.samples, first);
    confirm::run_method(draws(3), &mut st, &method, &ps, || count += 1)
        .await
        .unwrap();
    assert_eq!((count, st.samples.len()), (3, 3));
    assert_eq!(&st.samples[..2], &first[..]);
    // The third sample is what a fresh run of it alone draws.
    let (text, trace) = generate_seeded(model, p, &method.sampler, 6, method.seed(1.0, p, 2))
        .await
        .unwrap();
    assert_eq!(st.samples[2].text, text);
    // As the file holds it: serde_json reads some floats back an ulp away.
    let read: mistralrs_hlg_eval::generate::Trace =
        serde_json::from_str(&serde_json::to_string(&trace).unwrap()).unwrap();
    assert_eq!(st.samples[2].trace, read);
    judged_measures(method, &st.samples, p);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A prompt's three judged samples measured: the judged log-prob per token and per byte
/// and the judge tokens per sample, as computed here from the samples.
fn judged_measures(method: confirm::Planned, samples: &[confirm::Sample], prompt: &str) {
    let c = confirm::measure(&[method], &[samples.to_vec()], &[prompt], 3);
    assert!((c[0].judged_logprob.mean - judged_mean(samples)).abs() < 1e-12);
    // Per byte: the same sum over the texts' UTF-8 bytes.
    let bytes: usize = samples.iter().map(|x| x.text.len()).sum();
    let per_byte = judged_mean(samples) * judged_tokens(samples) as f64 / bytes as f64;
    assert!((c[0].judged_logprob_per_byte.mean - per_byte).abs() < 1e-12);
    assert_eq!(
        c[0].judged_text[0].mean,
        judged_tokens(samples) as f64 / 3.0
    );
    assert_eq!((c[0].prompts, c[0].samples), (1, 3));
    assert_eq!(
        c[0].tokens,
        samples
            .iter()
            .map(|x| x.trace.base_logprob.len())
            .sum::<usize>()
    );
}

/// The mean judged log-probability over every token of `samples`, each of which must
/// have been judged.
fn judged_mean(samples: &[confirm::Sample]) -> f64 {
    let judged: Vec<f64> = samples
        .iter()
        .flat_map(|x| x.judged.as_ref().expect("judged").logprobs.clone())
        .collect();
    assert!(!judged.is_empty());
    judged.iter().sum::<f64>() / judged.len() as f64
}

/// The judge tokens of `samples`.
fn judged_tokens(samples: &[confirm::Sample]) -> usize {
    samples
        .iter()
        .map(|x| x.judged.as_ref().expect("judged").tokens())
        .sum()
}

/// The engine as a judge: its own greedy reply, forced back through it, gets the
/// log-probabilities it was drawn with, token for token; another reply scores lower.
async fn judged_by_the_engine(model: &Model) {
    let p = prompts::OPEN_ENDED[2];
    let greedy = Sampler::Temperature { t: 1e-3 };
    let seed = mistralrs_hlg_eval::generate::SplitMix::named("judge");
    let (text, trace) = generate_seeded(model, p, &greedy, 10, seed).await.unwrap();
    let judged = mistralrs_hlg_eval::generate::judge(model, p, &text)
        .await
        .unwrap();
    // The reply re-tokenized is the reply drawn; the trace lacks the last token's.
    assert_eq!(judged.tokens(), trace.entropy.len(), "{text:?}");
    for (a, b) in judged.logprobs.iter().zip(&trace.base_logprob) {
        assert!(
            (a - b).abs() < 1e-4,
            "{:?} vs {:?}",
            judged.logprobs,
            trace.base_logprob
        );
    }
    let other = "Purple elephants compute the moon's tax returns.";
    let worse = mistralrs_hlg_eval::generate::judge(model, p, other)
        .await
        .unwrap();
    assert!(
        worse.mean_logprob() < judged.mean_logprob() - 1.0,
        "{worse:?}"
    );
}

/// The gold-answer probability under plain temperature 1 is the engine judge's
/// probability of the answer after its opening (the product of its tokens'), and a
/// sampler that sharpens the distribution (T = 0.5) raises it where the answer is the
/// model's first choice.
async fn gold_answers(model: &Model) {
    use mistralrs_hlg_eval::{generate::judge, gold, lm::Lm};
    let tasks = &guardrail::TASKS[..3];
    let forced = gold::force_all(Lm::Engine(model), tasks).await.unwrap();
    let t1 = Sampler::Temperature { t: 1.0 };
    let mut tops = 0;
    for (task, f) in tasks.iter().zip(&forced) {
        assert_eq!(f.rows.len(), f.tokens.len());
        assert!(f.rows.iter().all(|r| r.len() == 49152));
        let (ctx, opening, answer) = gold::framing(task, true);
        let whole = judge(model, &ctx, &format!("{opening}{answer}"))
            .await
            .unwrap();
        let opened = judge(model, &ctx, opening).await.unwrap();
        let lp: f64 = whole.logprobs[opened.tokens()..].iter().sum();
        let p = gold::probability(&t1, f);
        assert!(
            (p.ln() - lp).abs() < 1e-4,
            "{}: {p} vs {}",
            task.prompt,
            lp.exp()
        );
        let top = f
            .rows
            .iter()
            .zip(&f.tokens)
            .all(|(r, &t)| r.iter().all(|&x| x <= r[t as usize]));
        if top {
            tops += 1;
            assert!(gold::probability(&Sampler::Temperature { t: 0.5 }, f) > p);
        }
    }
    // The capitals after "Answer:" are the model's first choice, at least one of them.
    assert!(tops >= 1);
}

/// Whether `reply`'s first non-empty line holds one of `task`'s answers as a whole word,
/// checked by hand.
fn answered(reply: &str, task: &guardrail::Task) -> bool {
    let first = reply
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_lowercase();
    let mut words = first.split(|c: char| !c.is_alphanumeric());
    words.any(|w| task.answers.contains(&w))
}

/// Guardrail: the scorer on the model's greedy answers agrees with a by-hand check of
/// the replies it recorded.
async fn guardrail_scorer(model: &Model) {
    let greedy = guardrail::Plan {
        tasks: &guardrail::TASKS[..3],
        methods: &[None],
        samples: 1,
        max_tokens: 6,
        batch: 1,
    };
    let acc = guardrail::run_all(Lm::Engine(model), greedy, None, || {})
        .await
        .unwrap()
        .remove(0);
    assert_eq!(acc.items, 3);
    for ((ok, reply), task) in acc.replies.iter().zip(guardrail::TASKS) {
        assert_eq!(*ok, answered(reply, task), "{reply:?}");
    }
    // Every method item by item: greedy once per item, the sampled ones from seeded
    // streams (the same call twice gives the same replies).
    let methods = [None, Some(Sampler::Temperature { t: 1.0 })];
    let tasks = &guardrail::TASKS[..2];
    let plan = two_samples(tasks, &methods);
    let all = guardrail::run_all(Lm::Engine(model), plan, None, || {})
        .await
        .unwrap();
    assert_eq!(all[0].replies, acc.replies[..2]);
    assert_eq!(
        (all[0].samples, all[1].samples, all[1].replies.len()),
        (1, 2, 4)
    );
    for (i, rate) in all[1].per_item.iter().enumerate() {
        let ok = all[1].replies[2 * i..2 * i + 2]
            .iter()
            .filter(|r| r.0)
            .count();
        assert_eq!(*rate, ok as f64 / 2.0);
    }
    // Resumed: the first item in one run, both in the next from its journal, the same
    // replies as the run done at once.
    let dir = std::env::temp_dir().join(format!("hlg-guardrail-smoke-{}", std::process::id()));
    let path = dir.join("g.jsonl");
    let _ = std::fs::remove_dir_all(&dir);
    first_item_through(model, &path, &methods).await;
    let mut journal = guardrail::Journal::open(&path, &methods, 2, 6).unwrap();
    assert_eq!(journal.len(), 1);
    let mut ticks = 0;
    let again = guardrail::run_all(Lm::Engine(model), plan, Some(&mut journal), || ticks += 1)
        .await
        .unwrap();
    assert_eq!((journal.len(), ticks), (2, 6));
    for (a, b) in again.iter().zip(&all) {
        assert_eq!(a.replies, b.replies);
        assert_eq!(a.per_item, b.per_item);
    }
    // The journal's replies are what a resumed run scores, not drawn again.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut item: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    item["replies"][0] = "from the journal".into();
    lines[1] = item.to_string();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let read = first_item_through(model, &path, &methods).await;
    assert_eq!(read[0].replies[0], (false, "from the journal".to_string()));
    assert_eq!(read[1].replies, all[1].replies[..2]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The guardrail's `tasks` with `methods`: 2 samples of 6 tokens, one at a time.
fn two_samples<'a>(
    tasks: &'a [guardrail::Task],
    methods: &'a [Option<Sampler>],
) -> guardrail::Plan<'a> {
    guardrail::Plan {
        tasks,
        methods,
        samples: 2,
        max_tokens: 6,
        batch: 1,
    }
}

/// The guardrail's first item, 2 samples of 6 tokens per method, through the journal at
/// `path` opened afresh (as a run started again opens it).
async fn first_item_through(
    model: &Model,
    path: &std::path::Path,
    methods: &[Option<Sampler>],
) -> Vec<guardrail::Accuracy> {
    let mut journal = guardrail::Journal::open(path, methods, 2, 6).unwrap();
    let plan = two_samples(&guardrail::TASKS[..1], methods);
    guardrail::run_all(Lm::Engine(model), plan, Some(&mut journal), || {})
        .await
        .unwrap()
}

/// Perf: one round, every arm runs and generates.
async fn perf_ab(model: &Model) {
    let per = PerPrompt {
        samples: 1,
        max_tokens: 4,
    };
    let (rounds, summary) = perf::run(
        model,
        &prompts::OPEN_ENDED[..1],
        (HlgCurve::default(), 0.8),
        per,
        || {},
    )
    .await
    .unwrap();
    // One request per arm and prompt.
    assert_eq!(rounds[0].len(), perf::Arm::ALL.len());
    assert!(rounds[0]
        .iter()
        .all(|s| s.tokens > 0 && s.decode_tok_s > 0.0));
    assert_eq!(
        summary
            .iter()
            .find(|s| s.arm == perf::Arm::Off)
            .unwrap()
            .decode_ratio_to_off,
        1.0
    );
}
