//! What each fuzz target checks, shared by the cargo-fuzz targets (`fuzz_targets/`) and
//! the stable replay of the kept corpus (`integration-tests/tests/fuzz_corpus.rs`).

use mistralrs_hlg::config::RawValue;
use mistralrs_hlg::{params::Span, CurveParts, HlgConfig, HlgCurve, HlgError, Pivot, ToeShape};

/// The `hlg` request field: any bytes as a JSON body's `hlg` value.
pub fn hlg_json(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    accepted_or_named(
        HlgConfig::deserialize_checked(v).expect("a JSON value always reaches the validator"),
    );
}

/// The config file: any text as a TOML table whose keys are `hlg` fields, values read as
/// the server reads file values (strings like flags, numbers and booleans as themselves).
pub fn hlg_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(table) = text.parse::<toml::Table>() else {
        return;
    };
    let mut cfg = HlgConfig::default();
    for (key, value) in table {
        let raw = match value {
            toml::Value::String(s) => RawValue::from_flag(&s),
            toml::Value::Integer(i) => RawValue::Number(i as f64),
            toml::Value::Float(f) => RawValue::Number(f),
            toml::Value::Boolean(b) => RawValue::Bool(b),
            toml::Value::Array(_) => RawValue::Other("an array"),
            toml::Value::Table(_) => RawValue::Other("an object"),
            toml::Value::Datetime(_) => RawValue::Other("a date"),
        };
        if let Err(e) = cfg.set(&key, raw) {
            return named(&e);
        }
    }
    accepted_or_named(cfg.check_scales().map(|()| cfg));
}

/// The engine flags: `field=value` lines, values as a command line gives them.
pub fn hlg_flags(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let pairs: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once('=')).collect();
    accepted_or_named(HlgConfig::from_pairs(pairs));
}

fn named(e: &HlgError) {
    assert!(e.param().starts_with("hlg"), "{e:?}");
    assert!(!e.to_string().is_empty());
}

fn accepted_or_named(r: Result<HlgConfig, HlgError>) {
    let cfg = match r {
        Ok(cfg) => cfg,
        Err(e) => return named(&e),
    };
    // What was accepted serialises and reads back as itself, and makes a usable curve.
    let json = serde_json::to_value(&cfg).expect("serialising an accepted config");
    let back = HlgConfig::deserialize_checked(json.clone())
        .expect("JSON")
        .unwrap_or_else(|e| panic!("{json} does not read back: {e}"));
    assert_eq!(back, cfg);
    let curve = cfg.curve();
    check_curve(
        &curve,
        &[
            0.0,
            -1.0,
            -3.5,
            -30.0,
            12.0,
            f32::NEG_INFINITY,
            -f32::MAX,
            f32::MAX,
        ],
    );
}

/// The kernel: a curve and a vector from the bytes. The curve's knobs are taken as the
/// fuzzer gives them and skipped when the validator refuses them (only accepted curves
/// reach the kernel); the vector's entries may be anything, NaN and ±inf included.
pub fn kernel(data: &[u8]) {
    if data.len() < 18 {
        return;
    }
    let f = |i: usize| f32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]]);
    let knob = |on: bool, v: f32| on.then_some(v.abs());
    let flags = data[0];
    let pivot = Pivot::ALL[data[1] as usize % Pivot::ALL.len()];
    // Only `top` reads the offset; the others keep a valid one so they are not skipped.
    let offset = if pivot == Pivot::Top { f(2).abs() } else { 0.0 };
    let shape = ToeShape::ALL[(flags >> 4) as usize % ToeShape::ALL.len()];
    let Ok(curve) = HlgCurve::new(CurveParts {
        pivot,
        pivot_offset: Span::Nats(offset),
        width: knob(flags & 1 != 0, f(6)).map(Span::Nats),
        shoulder: knob(flags & 2 != 0, f(10)),
        toe: knob(flags & 4 != 0, f(14)),
        toe_shape: shape,
    }) else {
        return;
    };
    // Auto mode: flag bit 3 makes the width (when on) `f(6)`·σ, the top bit of byte 1
    // the offset `f(2)`·σ; a scale out of range is skipped like any other value.
    let curve = if flags & 9 == 9 {
        curve.with_auto_width(f(6).abs())
    } else {
        Ok(curve)
    };
    let curve = match curve {
        Ok(c) if data[1] & 0x80 != 0 => c.with_auto_pivot_offset(offset),
        other => other,
    };
    let Ok(curve) = curve else {
        return;
    };
    let x: Vec<f32> = data[18..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if x.is_empty() {
        return;
    }
    check_curve(&curve, &x);
}

/// The curve's contract on `x`: NaN exactly where the input has NaN, −inf stays −inf,
/// finite entries come out finite or −inf with the largest finite one finite, and the
/// order of the non-NaN entries is kept.
pub fn check_curve(curve: &HlgCurve, x: &[f32]) {
    let mut y = x.to_vec();
    curve.apply(&mut y);
    for (a, b) in x.iter().zip(&y) {
        assert_eq!(a.is_nan(), b.is_nan(), "{curve:?}: {a} -> {b}");
        if *a == f32::NEG_INFINITY {
            assert_eq!(*b, f32::NEG_INFINITY, "{curve:?}");
        }
        if a.is_finite() {
            assert!(
                b.is_finite() || *b == f32::NEG_INFINITY,
                "{curve:?}: {a} -> {b}"
            );
        }
    }
    if let Some(top) = x
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
    {
        assert!(
            y[top].is_finite(),
            "{curve:?}: the top finite entry {} -> {}",
            x[top],
            y[top]
        );
    }
    let mut pairs: Vec<(f32, f32)> = x
        .iter()
        .copied()
        .zip(y.iter().copied())
        .filter(|(a, _)| !a.is_nan())
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    for w in pairs.windows(2) {
        assert!(
            w[0].1 <= w[1].1,
            "{curve:?}: {:?} then {:?}: order not kept",
            w[0],
            w[1]
        );
    }
}
