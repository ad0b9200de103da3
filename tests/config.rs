//! The `hlg` object: every validation message as an insta snapshot, round trips,
//! shorthands, and the precedence merge.

use mistralrs_hlg::{params::Span, CurveParts, HlgConfig, HlgCurve, Pivot, ToeShape};

fn error_of(json: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let err = HlgConfig::deserialize_checked(v).unwrap().unwrap_err();
    format!("param: {}\nmessage: {}", err.param(), err)
}

#[test]
fn validation_messages() {
    let cases = [
        r#"{"toe": -2}"#,
        r#"{"toe": 0}"#,
        r#"{"shoulder": "soft"}"#,
        r#"{"shoulder": 1e-9}"#,
        r#"{"width": -0.5}"#,
        r#"{"width": "on"}"#,
        r#"{"width": null}"#,
        r#"{"width": 1e39}"#,
        r#"{"pivot_offset": -1}"#,
        r#"{"pivot_offset": 1e33}"#,
        r#"{"toe": 1000.5}"#,
        r#"{"shoulder": 1e6}"#,
        r#"{"pivot_offset": "off"}"#,
        r#"{"width": "automatic"}"#,
        r#"{"toe": "auto"}"#,
        r#"{"width_scale": -1}"#,
        r#"{"pivot_offset_scale": 1001}"#,
        r#"{"width_scale": "auto"}"#,
        r#"{"width": 2, "width_scale": 1.5}"#,
        r#"{"width": "off", "width_scale": 1.5}"#,
        r#"{"pivot_offset": 4, "pivot_offset_scale": 2}"#,
        r#"{"pivot": "mean"}"#,
        r#"{"pivot": 3}"#,
        r#"{"toe_shape": "cubic"}"#,
        r#"{"toe_shape": ["log"]}"#,
        r#"{"enabled": "yes"}"#,
        r#"{"enabled": 1}"#,
        r#"{"gain": 2}"#,
        r#"{"Width": 2}"#,
        r#""on""#,
        r#"4"#,
        r#"null"#,
        r#"[1, 2]"#,
    ];
    let all: Vec<String> = cases
        .iter()
        .map(|c| format!("{c}\n{}", error_of(c)))
        .collect();
    insta::assert_snapshot!(all.join("\n\n"));
}

#[test]
fn serde_json_error_text_carries_the_message() {
    let err = serde_json::from_str::<HlgConfig>(r#"{"toe": -2}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"`hlg.toe` must be a number in [1e-6, 1000] or "off", got -2"#
    );
}

#[test]
fn valid_configs_round_trip() {
    for json in [
        r#"{}"#,
        r#"{"enabled":true}"#,
        r#"{"enabled":false,"pivot":"median"}"#,
        r#"{"pivot":"top","pivot_offset":6.5,"width":4.0,"shoulder":"off","toe":0.25,"toe_shape":"exp"}"#,
        r#"{"width":"off","toe":"off","toe_shape":"quadratic"}"#,
        r#"{"pivot":"entropy","width":0.0,"shoulder":1e-6}"#,
    ] {
        let cfg: HlgConfig = serde_json::from_str(json).unwrap();
        let back = serde_json::to_string(&cfg).unwrap();
        let again: HlgConfig = serde_json::from_str(&back).unwrap();
        assert_eq!(cfg, again, "{json} -> {back}");
        let a: serde_json::Value = serde_json::from_str(json).unwrap();
        let b: serde_json::Value = serde_json::from_str(&back).unwrap();
        assert_eq!(a, b);
    }
}

#[test]
fn shorthands_and_defaults() {
    let on: HlgConfig = serde_json::from_str("true").unwrap();
    assert_eq!(on.enabled(), Some(true));
    assert_eq!(on.curve(), HlgCurve::default());
    let off: HlgConfig = serde_json::from_str("false").unwrap();
    assert_eq!(off.enabled(), Some(false));
    // An object without `enabled` leaves it unset: the request layer reads that as on.
    let obj: HlgConfig = serde_json::from_str(r#"{"toe": 3.5}"#).unwrap();
    assert_eq!(obj.enabled(), None);
    assert_eq!(
        obj.curve(),
        HlgCurve::default().with_toe(Some(3.5)).unwrap()
    );
    // Integers are numbers too.
    let int: HlgConfig = serde_json::from_str(r#"{"width": 3}"#).unwrap();
    assert_eq!(
        int.curve().width(),
        Some(mistralrs_hlg::params::Span::Nats(3.0))
    );
}

#[test]
fn precedence_request_over_server_over_builtin() {
    let server = HlgConfig::from_pairs([
        ("enabled", "off"),
        ("pivot", "median"),
        ("width", "2"),
        ("toe_shape", "exp"),
    ])
    .unwrap();
    let request: HlgConfig = serde_json::from_str(r#"{"width": "off", "toe": 1.5}"#).unwrap();
    let merged = request.merged_over(&server);
    assert_eq!(merged.enabled(), Some(false)); // the request did not say; the server did
    let c = merged.curve();
    assert_eq!(c.pivot(), Pivot::Median);
    assert_eq!(c.width(), None);
    assert_eq!(c.toe(), Some(1.5));
    assert_eq!(c.toe_shape(), ToeShape::Exp);
    assert_eq!(c.shoulder(), HlgCurve::default().shoulder()); // built-in
                                                              // The fully resolved view names every field, in the crate's own order (not a
                                                              // `serde_json::Value`, whose key order depends on serde_json's features).
    insta::assert_json_snapshot!(merged.resolved(false), @r#"
    {
      "enabled": false,
      "pivot": "median",
      "pivot_offset": 4.0,
      "width": "off",
      "shoulder": 2.0,
      "toe": 1.5,
      "toe_shape": "exp"
    }
    "#);
}

#[test]
fn flags_use_the_same_validation() {
    let err = HlgConfig::from_pairs([("toe", "-1")]).unwrap_err();
    assert_eq!(err.param(), "hlg.toe");
    let err = HlgConfig::from_pairs([("width", "inf")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"`hlg.width` must be a number in [0, 1000], "auto" or "off", got "inf""#
    );
    let err = HlgConfig::from_pairs([("toe_shape", "cubic")]).unwrap_err();
    assert_eq!(err.param(), "hlg.toe_shape");
    assert!(HlgConfig::from_pairs([("nope", "1")]).is_err());
}

/// Auto mode from the request object and the flags: the curve, `GET /v1/hlg`'s resolved
/// form, and a scale from the server's defaults under a request's own value.
#[test]
fn auto_mode_reads_and_resolves() {
    use mistralrs_hlg::params::{Span, DEFAULT_PIVOT_OFFSET_SCALE, DEFAULT_WIDTH_SCALE};
    let cfg: HlgConfig =
        serde_json::from_str(r#"{"width": "auto", "pivot_offset": "auto", "width_scale": 1.5}"#)
            .unwrap();
    let c = cfg.curve();
    assert_eq!(c.width(), Some(Span::Auto(1.5)));
    assert_eq!(c.pivot_offset(), Span::Auto(DEFAULT_PIVOT_OFFSET_SCALE));
    assert_eq!(
        serde_json::to_value(cfg.resolved(true)).unwrap(),
        serde_json::json!({"enabled": true, "pivot": "top", "pivot_offset": "auto",
            "width": "auto", "shoulder": 2.0, "toe": 1.0, "toe_shape": "quadratic",
            "width_scale": 1.5, "pivot_offset_scale": DEFAULT_PIVOT_OFFSET_SCALE})
    );
    let flags = HlgConfig::from_pairs([("width", "auto"), ("width_scale", "0.75")]).unwrap();
    assert_eq!(flags.curve().width(), Some(Span::Auto(0.75)));
    // A request's fixed width over a server's auto one: the server's scale is not used.
    let request: HlgConfig = serde_json::from_str(r#"{"width": 2}"#).unwrap();
    assert_eq!(
        request.merged_over(&flags).curve().width(),
        Some(Span::Nats(2.0))
    );
    // A request's "auto" takes the server's scale, else the built-in one.
    let auto: HlgConfig = serde_json::from_str(r#"{"width": "auto"}"#).unwrap();
    assert_eq!(
        auto.merged_over(&flags).curve().width(),
        Some(Span::Auto(0.75))
    );
    assert_eq!(auto.curve().width(), Some(Span::Auto(DEFAULT_WIDTH_SCALE)));
}

#[test]
fn curve_constructor_validates() {
    assert!(HlgCurve::new(CurveParts {
        pivot: Pivot::Top,
        pivot_offset: Span::Nats(-1.0),
        width: Some(Span::Nats(1.0)),
        shoulder: None,
        toe: None,
        toe_shape: ToeShape::Log
    })
    .is_err());
    assert!(HlgCurve::default().with_width(Some(f32::NAN)).is_err());
    assert!(HlgCurve::default().with_toe(Some(f32::INFINITY)).is_err());
    assert!(HlgCurve::default().with_shoulder(Some(0.0)).is_err());
}
