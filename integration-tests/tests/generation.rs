//! Generations on the real engine and the embedded model.
//!
//! The engine's sampling RNG is seeded once per engine, so every comparison below runs
//! the same requests, one after another, on a fresh engine each.

use mistralrs_hlg::HlgConfig;
use mistralrs_hlg_integration_tests::{
    engine, fresh_plugin, fresh_plugin_with, on_host, run_prompts, upstream,
};
use serde_json::{json, Value};

const MAX_TOKENS: u32 = 24;

fn with(base: &Value, extra: Value) -> Value {
    let mut v = base.clone();
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// Greedy, T = 0.7 and T = 1.0 over the prompt set, in that order.
async fn sweep(router: &axum::Router, extra: Value) -> Vec<(String, Vec<String>)> {
    let mut out = vec![];
    for (name, t) in [("greedy", 0.0), ("t=0.7", 0.7), ("t=1.0", 1.0)] {
        let fields = with(&json!({"temperature": t}), extra.clone());
        out.push((
            name.to_string(),
            run_prompts(router, MAX_TOKENS, &fields).await,
        ));
    }
    out
}

/// With the plugin present and `hlg` off (absent, or `false`), the output is the engine's
/// own, token for token; the snapshot pins the engine's output so that an upstream bump
/// that changes it shows as a diff.
#[tokio::test(flavor = "multi_thread")]
async fn disabled_path_is_the_engines_output() {
    let without = sweep(&upstream(engine().await).await, json!({})).await;
    let absent = sweep(&fresh_plugin().await, json!({})).await;
    assert_eq!(
        absent, without,
        "hlg absent differs from the engine without the plugin"
    );
    let off = sweep(&fresh_plugin().await, json!({"hlg": false})).await;
    assert_eq!(
        off, without,
        "hlg: false differs from the engine without the plugin"
    );
    let off_obj = sweep(
        &fresh_plugin().await,
        json!({"hlg": {"enabled": false, "toe": 1}}),
    )
    .await;
    assert_eq!(off_obj, without, "hlg.enabled = false differs");
    on_host(|| insta::assert_json_snapshot!("engine_output", without));
}

/// The server the binaries build (`HlgServerOptions::router`, `--hlg-batching auto`)
/// probes the engine at start-up; the probe must not draw from the engine's sampling RNG,
/// or every sampled request of a fresh server would differ from upstream's.
#[tokio::test(flavor = "multi_thread")]
async fn the_start_up_probe_leaves_sampling_as_upstreams() {
    let t = json!({"temperature": 1.0});
    let plain = run_prompts(&upstream(engine().await).await, MAX_TOKENS, &t).await;
    let probed = mistralrs_hlg::server::HlgServerOptions::default()
        .router(engine().await)
        .await
        .expect("router");
    let got = run_prompts(&probed, MAX_TOKENS, &t).await;
    assert_eq!(got, plain, "a fresh probed server samples differently");
}

/// Width off, and shoulder + toe off, reduce HLG to plain temperature (top-k / top-p off,
/// which is what a request without them gets).
#[tokio::test(flavor = "multi_thread")]
async fn identity_configs_are_plain_temperature() {
    let t = json!({"temperature": 0.7});
    let plain = run_prompts(&upstream(engine().await).await, MAX_TOKENS, &t).await;
    for hlg in [
        json!({"width": "off"}),
        json!({"shoulder": "off", "toe": "off"}),
    ] {
        let got = run_prompts(
            &fresh_plugin().await,
            MAX_TOKENS,
            &with(&t, json!({"hlg": hlg.clone()})),
        )
        .await;
        assert_eq!(
            got, plain,
            "identity config {hlg} differs from plain temperature"
        );
    }
}

/// HLG on changes the sampled output, reproducibly on a fresh engine; the server's
/// `--hlg-sampling on` does the same as a request's `"hlg": true`; greedy is untouched.
#[tokio::test(flavor = "multi_thread")]
async fn enabled_changes_sampling_and_leaves_greedy() {
    let t = json!({"temperature": 1.0});
    let plain = run_prompts(&upstream(engine().await).await, MAX_TOKENS, &t).await;
    let cfg = json!({"hlg": {"toe_shape": "exp", "toe": 1.5, "pivot_offset": 4.0}});
    let a = run_prompts(&fresh_plugin().await, MAX_TOKENS, &with(&t, cfg.clone())).await;
    let b = run_prompts(&fresh_plugin().await, MAX_TOKENS, &with(&t, cfg.clone())).await;
    assert_eq!(a, b, "HLG output not reproducible on a fresh engine");
    assert_ne!(a, plain, "HLG did not change the sampled output");
    on_host(|| insta::assert_json_snapshot!("hlg_exp_toe_t1", a));

    let server_on = HlgConfig::from_pairs([
        ("enabled", "on"),
        ("toe_shape", "exp"),
        ("toe", "1.5"),
        ("pivot_offset", "4"),
    ])
    .unwrap();
    let by_flag = run_prompts(&fresh_plugin_with(server_on).await, MAX_TOKENS, &t).await;
    assert_eq!(
        by_flag, a,
        "server default differs from the same config per request"
    );

    let greedy = json!({"temperature": 0.0});
    let g_plain = run_prompts(&upstream(engine().await).await, MAX_TOKENS, &greedy).await;
    let g_hlg = run_prompts(
        &fresh_plugin().await,
        MAX_TOKENS,
        &with(&greedy, json!({"hlg": true})),
    )
    .await;
    assert_eq!(g_hlg, g_plain, "HLG changed a greedy generation");
}

/// Auto mode through the server: `"width": "auto", "pivot_offset": "auto"` samples,
/// reproducibly on a fresh engine, differently from plain temperature and from the fixed
/// curve with the same sides; the server's `--hlg-width auto` gives the same text as the
/// request field, `GET /v1/hlg` shows the mode and its scales, and greedy is untouched.
#[tokio::test(flavor = "multi_thread")]
async fn auto_mode_samples_through_the_server() {
    let t = json!({"temperature": 1.0});
    let auto = json!({"hlg": {"width": "auto", "pivot_offset": "auto", "width_scale": 1.5}});
    let a = run_prompts(&fresh_plugin().await, MAX_TOKENS, &with(&t, auto.clone())).await;
    let b = run_prompts(&fresh_plugin().await, MAX_TOKENS, &with(&t, auto)).await;
    assert_eq!(a, b, "auto mode not reproducible on a fresh engine");
    let plain = run_prompts(&upstream(engine().await).await, MAX_TOKENS, &t).await;
    assert_ne!(a, plain, "auto mode did not change the sampled output");
    let fixed = run_prompts(
        &fresh_plugin().await,
        MAX_TOKENS,
        &with(&t, json!({"hlg": true})),
    )
    .await;
    assert_ne!(a, fixed, "auto mode sampled as the fixed curve");

    let server = HlgConfig::from_pairs([
        ("enabled", "on"),
        ("width", "auto"),
        ("pivot_offset", "auto"),
        ("width_scale", "1.5"),
    ])
    .unwrap();
    let app = fresh_plugin_with(server.clone()).await;
    let (status, text) = mistralrs_hlg_integration_tests::call(&app, "GET", "/v1/hlg", None).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (&v["width"], &v["pivot_offset"], &v["width_scale"]),
        (&json!("auto"), &json!("auto"), &json!(1.5)),
        "{text}"
    );
    let by_flag = run_prompts(&fresh_plugin_with(server).await, MAX_TOKENS, &t).await;
    assert_eq!(
        by_flag, a,
        "the server's auto mode differs from the request's"
    );

    let greedy = json!({"temperature": 0.0});
    let g_plain = run_prompts(&upstream(engine().await).await, MAX_TOKENS, &greedy).await;
    let g_auto = run_prompts(
        &fresh_plugin().await,
        MAX_TOKENS,
        &with(&greedy, json!({"hlg": {"width": "auto"}})),
    )
    .await;
    assert_eq!(g_auto, g_plain, "auto mode changed a greedy generation");
}
