//! `GET /api-doc/openapi.json`: upstream's OpenAPI document with the `hlg` field.
//!
//! The document is mistralrs-server-core's own (`get_openapi_doc`), which upstream serves
//! only with its swagger-ui feature. Added here: an `Hlg` schema built from the
//! validator's own ranges and names, an `hlg` property on the request schema of every
//! route that applies it (found through the route, so a renamed schema is still found),
//! and `GET /v1/hlg`.

use serde_json::{json, Value};

use crate::config::PivotMode;
use crate::curve::{Range, ToeShape, MAX_NATS, PIVOT_OFFSET, SHOULDER, TOE, WIDTH};

/// The name of the request body schema of `POST path`, as the document refers to it.
fn request_schema(doc: &Value, path: &str) -> Option<String> {
    let r = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        ["$ref"]
        .as_str()?;
    r.strip_prefix("#/components/schemas/").map(str::to_owned)
}

fn number(range: &Range, off: bool, what: &str) -> Value {
    let n = json!({"type": "number", "minimum": range.min(), "maximum": MAX_NATS});
    let n = if off {
        json!({"oneOf": [n, {"type": "string", "enum": ["off"]}]})
    } else {
        n
    };
    let mut n = n;
    n["description"] = Value::from(format!("{what} Accepted: {}.", range.expected));
    n
}

/// The JSON schema of the `hlg` object (its object form; `true`/`false` also accepted).
pub fn hlg_schema() -> Value {
    json!({
        "description": "HLG sampling for this request: a piecewise tone curve on the logits. An object opts in (a missing `enabled` means on); `true`/`false` are short for `{\"enabled\": true|false}`. Missing fields come from the server's --hlg-* defaults (GET /v1/hlg).",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "enabled": {"description": "On or off; also \"on\"/\"off\".", "oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["on", "off"]}]},
            "pivot": {"description": "Where the curve is centred.", "type": "string", "enum": PivotMode::ALL.iter().map(|p| p.name()).collect::<Vec<_>>()},
            "pivot_offset": number(&PIVOT_OFFSET, false, "Nats below the top logit (pivot `top`)."),
            "width": number(&WIDTH, true, "Half-width of the linear mid band, nats."),
            "shoulder": number(&SHOULDER, true, "Shoulder rolloff, nats."),
            "toe": number(&TOE, true, "Toe rolloff, nats."),
            "toe_shape": {"description": "The toe's shape.", "type": "string", "enum": ToeShape::ALL.iter().map(|s| s.name()).collect::<Vec<_>>()},
        }
    })
}

/// Upstream's document with `hlg` described.
pub fn document() -> Value {
    let mut doc = serde_json::to_value(mistralrs_server_core::openapi_doc::get_openapi_doc(None))
        .unwrap_or_else(|_| json!({}));
    doc["components"]["schemas"]["Hlg"] = hlg_schema();
    let field = json!({"oneOf": [{"type": "boolean"}, {"$ref": "#/components/schemas/Hlg"}], "description": "HLG sampling (mistralrs-hlg)."});
    for path in super::security::HLG_ROUTES {
        let Some(name) = request_schema(&doc, path) else {
            continue;
        };
        if let Some(props) = doc["components"]["schemas"]
            .get_mut(&name)
            .and_then(|s| s.get_mut("properties"))
            .and_then(Value::as_object_mut)
        {
            props.insert("hlg".into(), field.clone());
        }
    }
    doc["paths"]["/v1/hlg"] = json!({"get": {
        "tags": ["mistralrs-hlg"],
        "summary": "The server's effective HLG defaults (every field filled).",
        "responses": {"200": {"description": "The defaults", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Hlg"}}}}}
    }});
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HlgConfig;

    /// Every schema range is the validator's: its bounds accepted, just past them refused.
    #[test]
    fn schema_ranges_are_the_validators() {
        let schema = hlg_schema();
        for field in ["pivot_offset", "width", "shoulder", "toe"] {
            let p = &schema["properties"][field];
            let n = p.get("oneOf").map_or(p, |o| &o[0]);
            let (min, max) = (
                n["minimum"].as_f64().unwrap(),
                n["maximum"].as_f64().unwrap(),
            );
            let ok = |v: f64| {
                HlgConfig::deserialize_checked(json!({ field: v }))
                    .unwrap()
                    .is_ok()
            };
            assert!(ok(min) && ok(max), "{field}: [{min}, {max}] not accepted");
            assert!(
                !ok(min - min.abs().max(1e-9) * 0.5 - 1e-9) && !ok(max * 1.001),
                "{field}: beyond [{min}, {max}] accepted"
            );
            let off_ok = HlgConfig::deserialize_checked(json!({ field: "off" }))
                .unwrap()
                .is_ok();
            assert_eq!(
                p.get("oneOf").is_some(),
                off_ok,
                "{field}: \"off\" in the schema and the validator disagree"
            );
        }
        for (field, names) in [
            ("pivot", &schema["properties"]["pivot"]["enum"]),
            ("toe_shape", &schema["properties"]["toe_shape"]["enum"]),
        ] {
            for name in names.as_array().unwrap() {
                assert!(
                    HlgConfig::deserialize_checked(json!({ field: name }))
                        .unwrap()
                        .is_ok(),
                    "{field} = {name}"
                );
            }
        }
        let props: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(props.len(), crate::config::FIELDS.len());
        for f in crate::config::FIELDS {
            assert!(
                schema["properties"].get(f).is_some(),
                "{f} missing from the schema"
            );
        }
    }

    #[test]
    fn document_describes_hlg_on_every_hlg_request() {
        let doc = document();
        assert!(doc["components"]["schemas"]["Hlg"].is_object());
        for path in crate::server::security::HLG_ROUTES {
            let name = request_schema(&doc, path)
                .unwrap_or_else(|| panic!("POST {path} has no request schema"));
            assert!(
                doc["components"]["schemas"][&name]["properties"]["hlg"].is_object(),
                "{name} (POST {path}) has no hlg property"
            );
        }
        assert!(doc["paths"]["/v1/chat/completions"].is_object());
    }
}
