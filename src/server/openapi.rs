//! `GET /api-doc/openapi.json`: upstream's OpenAPI document with the `hlg` field.
//!
//! The document is mistralrs-server-core's own (`get_openapi_doc`), which upstream serves
//! only with its swagger-ui feature. Added here: an `Hlg` schema built from the
//! validator's own ranges and names, an `hlg` property on the request schema of every
//! route that applies it (found through the route, so a renamed schema is still found),
//! and `GET /v1/hlg`.

use serde_json::{json, Value};

use crate::params::{Field, Kind, Range};

/// The name of the request body schema of `POST path`, as the document refers to it.
fn request_schema(doc: &Value, path: &str) -> Option<String> {
    let r = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        ["$ref"]
        .as_str()?;
    r.strip_prefix("#/components/schemas/").map(str::to_owned)
}

fn number(range: Range) -> Value {
    json!({"type": "number", "minimum": range.min(), "maximum": range.max()})
}

/// One field's schema, from its kind.
fn field_schema(field: Field) -> Value {
    let mut v = match field.kind() {
        Kind::Switch => {
            json!({"oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["on", "off"]}]})
        }
        Kind::Name(names, _) => json!({"type": "string", "enum": names}),
        Kind::Number(r) => number(r),
        Kind::Knob(r) => json!({"oneOf": [number(r), {"type": "string", "enum": ["off"]}]}),
        Kind::Auto(r) => json!({"oneOf": [number(r), {"type": "string", "enum": ["auto"]}]}),
        Kind::AutoKnob(r) => {
            json!({"oneOf": [number(r), {"type": "string", "enum": ["auto", "off"]}]})
        }
    };
    v["description"] = Value::from(format!(
        "{}. Accepted: {}.",
        field.description(),
        field.expected()
    ));
    v
}

/// The JSON schema of the `hlg` object (its object form; `true`/`false` also accepted).
///
/// ```
/// use mistralrs_hlg::{params::MIN_BETA, server::openapi::hlg_schema};
/// let s = hlg_schema();
/// let toe = &s["properties"]["toe"]["oneOf"][0];
/// assert_eq!(toe["minimum"].as_f64(), Some(f64::from(MIN_BETA)), "the validator's own bound");
/// assert_eq!(s["additionalProperties"], false);
/// ```
pub fn hlg_schema() -> Value {
    let properties: serde_json::Map<String, Value> = Field::ALL
        .into_iter()
        .map(|f| (f.name().to_string(), field_schema(f)))
        .collect();
    json!({
        "description": "HLG sampling for this request: a piecewise tone curve on the logits. An object opts in (a missing `enabled` means on); `true`/`false` are short for `{\"enabled\": true|false}`. Missing fields come from the server's --hlg-* defaults (GET /v1/hlg).",
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
    })
}

/// Upstream's document with `hlg` described, built once per process.
///
/// ```
/// use mistralrs_hlg::server::openapi::document;
/// let doc = document();
/// assert!(doc["paths"]["/v1/chat/completions"].is_object());
/// assert!(std::ptr::eq(doc, document()), "built once");
/// ```
pub fn document() -> &'static Value {
    static DOC: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DOC.get_or_init(build)
}

fn build() -> Value {
    let mut doc = serde_json::to_value(mistralrs_server_core::openapi_doc::get_openapi_doc(None))
        .unwrap_or_else(|_| json!({}));
    doc["components"]["schemas"]["Hlg"] = hlg_schema();
    let field = json!({"oneOf": [{"type": "boolean"}, {"$ref": "#/components/schemas/Hlg"}], "description": "HLG sampling (mistralrs-hlg)."});
    for path in super::routes::hlg_paths() {
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
    doc["paths"][super::routes::HLG_DEFAULTS] = json!({"get": {
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
        for field in [
            "pivot_offset",
            "width",
            "shoulder",
            "toe",
            "width_scale",
            "pivot_offset_scale",
        ] {
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
            // The words the schema lists are exactly those the validator takes.
            let listed = p
                .get("oneOf")
                .map_or(vec![], |o| o[1]["enum"].as_array().unwrap().clone());
            for word in ["off", "auto"] {
                let taken = HlgConfig::deserialize_checked(json!({ field: word }))
                    .unwrap()
                    .is_ok();
                assert_eq!(
                    listed.contains(&json!(word)),
                    taken,
                    "{field}: {word:?} in the schema and the validator disagree"
                );
            }
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
        assert_eq!(props.len(), Field::ALL.len());
        for f in Field::ALL {
            assert!(
                schema["properties"].get(f.name()).is_some(),
                "{f} missing from the schema"
            );
        }
    }

    #[test]
    fn document_describes_hlg_on_every_hlg_request() {
        let doc = document();
        assert!(doc["components"]["schemas"]["Hlg"].is_object());
        for path in crate::server::routes::hlg_paths() {
            let name = request_schema(doc, path)
                .unwrap_or_else(|| panic!("POST {path} has no request schema"));
            assert!(
                doc["components"]["schemas"][&name]["properties"]["hlg"].is_object(),
                "{name} (POST {path}) has no hlg property"
            );
        }
        assert!(doc["paths"]["/v1/chat/completions"].is_object());
    }

    /// Every path the document describes is a row of the route table on this host (with
    /// any parameter name): a route upstream documents is reviewed before it is served.
    #[test]
    fn every_documented_path_is_declared() {
        let paths = document()["paths"].as_object().unwrap();
        assert!(paths.len() > 5);
        // Which segments are parameters: a documented `{id}` is not a row's literal.
        let shape = |p: &str| p.split('/').map(|s| s.starts_with('{')).collect::<Vec<_>>();
        for path in paths.keys() {
            let row = crate::server::routes::served()
                .find(|r| r.matches(path) && shape(r.path) == shape(path));
            assert!(
                row.is_some(),
                "{path} is documented and not in routes::ROUTES"
            );
        }
    }
}
