//! The server's HLG options as one type for command lines (clap) and config files (serde),
//! shared by `mistralrs-hlg serve` and the patched upstream `mistralrs serve`
//! (`patches/mistralrs-cli-0.8.1`), so the two accept the same flags and keys.

use clap::Args;
use mistralrs_server_core::types::SharedMistralRsState;
use serde::{Deserialize, Deserializer};

use crate::config::RawValue;
use crate::processor::Backend;
use crate::HlgConfig;

use super::{defaults_from_flags, Batching, Choices, FLAGS};

/// The seven `--hlg-*` engine flags. In a config file the keys are the flag names
/// (`hlg-toe = 3.0`; `hlg_toe` is accepted too): strings read like flags (`"off"`,
/// `"4.5"`), TOML numbers and booleans as themselves.
#[derive(Args, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct HlgFlags {
    /// Turn HLG on for every sampled request that does not say otherwise.
    #[arg(long = "hlg-sampling", value_name = "on|off", value_parser = flag_value)]
    #[serde(
        default,
        rename = "hlg-sampling",
        alias = "hlg_sampling",
        deserialize_with = "file_value"
    )]
    pub sampling: Option<RawValue>,
    /// HLG pivot mode.
    #[arg(long = "hlg-pivot", value_name = "top|entropy|median", value_parser = flag_value)]
    #[serde(
        default,
        rename = "hlg-pivot",
        alias = "hlg_pivot",
        deserialize_with = "file_value"
    )]
    pub pivot: Option<RawValue>,
    /// HLG: nats below the top token (pivot `top`), in [0, 1000].
    #[arg(long = "hlg-pivot-offset", value_name = "NATS", value_parser = flag_value, allow_hyphen_values = true)]
    #[serde(
        default,
        rename = "hlg-pivot-offset",
        alias = "hlg_pivot_offset",
        deserialize_with = "file_value"
    )]
    pub pivot_offset: Option<RawValue>,
    /// HLG: half-width of the linear mid band in nats, in [0, 1000], or `off`.
    #[arg(long = "hlg-width", value_name = "NATS|off", value_parser = flag_value, allow_hyphen_values = true)]
    #[serde(
        default,
        rename = "hlg-width",
        alias = "hlg_width",
        deserialize_with = "file_value"
    )]
    pub width: Option<RawValue>,
    /// HLG: shoulder rolloff in nats, in [1e-6, 1000], or `off`.
    #[arg(long = "hlg-shoulder", value_name = "NATS|off", value_parser = flag_value, allow_hyphen_values = true)]
    #[serde(
        default,
        rename = "hlg-shoulder",
        alias = "hlg_shoulder",
        deserialize_with = "file_value"
    )]
    pub shoulder: Option<RawValue>,
    /// HLG: toe rolloff in nats, in [1e-6, 1000], or `off`.
    #[arg(long = "hlg-toe", value_name = "NATS|off", value_parser = flag_value, allow_hyphen_values = true)]
    #[serde(
        default,
        rename = "hlg-toe",
        alias = "hlg_toe",
        deserialize_with = "file_value"
    )]
    pub toe: Option<RawValue>,
    /// HLG toe shape.
    #[arg(long = "hlg-toe-shape", value_name = "log|quadratic|exp", value_parser = flag_value)]
    #[serde(
        default,
        rename = "hlg-toe-shape",
        alias = "hlg_toe_shape",
        deserialize_with = "file_value"
    )]
    pub toe_shape: Option<RawValue>,
}

impl HlgFlags {
    /// The flags that are set, as `(flag name without "--", value)` in [`FLAGS`] order.
    pub fn pairs(&self) -> Vec<(&'static str, RawValue)> {
        let vals = [
            &self.sampling,
            &self.pivot,
            &self.pivot_offset,
            &self.width,
            &self.shoulder,
            &self.toe,
            &self.toe_shape,
        ];
        FLAGS
            .iter()
            .zip(vals)
            .filter_map(|((flag, _), v)| v.clone().map(|v| (*flag, v)))
            .collect()
    }

    /// The server's HLG defaults these flags give, validated; the error names the flag
    /// and the accepted range (`--hlg-toe: \`hlg.toe\` must be a number in [1e-6, 1000] or "off", got -2`).
    pub fn defaults(&self) -> Result<HlgConfig, String> {
        defaults_from_flags(self.pairs())
    }

    /// These flags over `base` (each flag that is set wins), e.g. a command line over a
    /// config file.
    pub fn over(&self, base: &HlgFlags) -> HlgFlags {
        HlgFlags {
            sampling: self.sampling.clone().or_else(|| base.sampling.clone()),
            pivot: self.pivot.clone().or_else(|| base.pivot.clone()),
            pivot_offset: self
                .pivot_offset
                .clone()
                .or_else(|| base.pivot_offset.clone()),
            width: self.width.clone().or_else(|| base.width.clone()),
            shoulder: self.shoulder.clone().or_else(|| base.shoulder.clone()),
            toe: self.toe.clone().or_else(|| base.toe.clone()),
            toe_shape: self.toe_shape.clone().or_else(|| base.toe_shape.clone()),
        }
    }
}

/// Everything a server command needs to serve HLG: the seven flags, where the curve runs
/// (`--hlg-backend`) and how `n > 1` is served (`--hlg-n-choices`).
///
/// ```
/// use clap::Parser;
/// use mistralrs_hlg::server::HlgServerOptions;
///
/// #[derive(Parser)]
/// struct Serve {
///     #[command(flatten)]
///     hlg: HlgServerOptions,
/// }
/// let cli = Serve::try_parse_from(["serve", "--hlg-sampling", "on", "--hlg-toe", "3"]).unwrap();
/// let defaults = cli.hlg.flags.defaults().unwrap();
/// assert_eq!(defaults.enabled(), Some(true));
/// assert_eq!(defaults.curve().toe(), Some(3.0));
///
/// let bad = Serve::try_parse_from(["serve", "--hlg-toe", "-2"]).unwrap();
/// assert!(bad.hlg.flags.defaults().unwrap_err().starts_with("--hlg-toe: "));
/// ```
#[derive(Args, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct HlgServerOptions {
    #[command(flatten)]
    #[serde(flatten)]
    #[allow(missing_docs)]
    pub flags: HlgFlags,
    /// Where the HLG curve runs: `kernel` (the slice kernel, the default) or `mlx` (mlx-rs
    /// ops on MLX's default device; needs a build with the `mlx` feature).
    #[arg(long = "hlg-backend", value_name = "kernel|mlx")]
    #[serde(default, rename = "hlg-backend", alias = "hlg_backend")]
    pub backend: Option<String>,
    /// How `n > 1` is served: `split` (the default) runs n single-choice generations one
    /// after another, because mistral.rs 0.8.1 corrupts the choices of a batched sampled
    /// request on the CPU; `batched` passes the request through as upstream does.
    #[arg(long = "hlg-n-choices", alias = "n-choices", value_name = "split|batched", value_parser = ["split", "batched"])]
    #[serde(default, rename = "hlg-n-choices", alias = "hlg_n_choices")]
    pub n_choices: Option<String>,
    /// How many requests the engine runs at once: `auto` (the default) probes the engine
    /// at start-up and runs one request at a time when it decodes batched rows wrongly
    /// (mistral.rs 0.8.1 on the CPU), any number otherwise; `serial` always one; `on`
    /// never limits (a patched engine, or a GPU). Waiting requests queue; none is refused.
    #[arg(long = "hlg-batching", value_name = "auto|serial|on", value_parser = Batching::NAMES)]
    #[serde(default, rename = "hlg-batching", alias = "hlg_batching")]
    pub batching: Option<String>,
    /// Require `Authorization: Bearer KEY` on every route but `/health` and `/` (401
    /// otherwise). Also read from the environment variable MISTRALRS_HLG_API_KEY.
    #[arg(
        long = "api-key",
        value_name = "KEY",
        env = "MISTRALRS_HLG_API_KEY",
        hide_env_values = true
    )]
    #[serde(default, rename = "api-key", alias = "api_key")]
    pub api_key: Option<String>,
    /// Serve upstream's management routes (model unload/reload/tune, re_isq, system
    /// info and doctor); 404 without this.
    #[arg(long = "allow-admin-routes")]
    #[serde(default, rename = "allow-admin-routes", alias = "allow_admin_routes")]
    pub allow_admin_routes: bool,
    /// Let requests name media at http(s) addresses, which the server then fetches
    /// (refused with a 400 without this; `data:` URLs are always accepted).
    #[arg(long = "allow-remote-media")]
    #[serde(default, rename = "allow-remote-media", alias = "allow_remote_media")]
    pub allow_remote_media: bool,
    /// Let requests name media by local path or file:// URL, which the server then reads
    /// (refused with a 400 without this).
    #[arg(long = "allow-local-media")]
    #[serde(default, rename = "allow-local-media", alias = "allow_local_media")]
    pub allow_local_media: bool,
    /// The name the model is served under, in responses' `model` field and
    /// `GET /v1/models` (requests may use it or `default`). Default: the model file's
    /// name without `.gguf`, else the last component of the model id; never a local path.
    #[arg(long = "served-model-name", value_name = "NAME")]
    #[serde(default, rename = "served-model-name", alias = "served_model_name")]
    pub served_model_name: Option<String>,
}

/// What the server knows of the model from its file, beyond what the engine says.
#[derive(Clone, Debug, Default)]
pub struct ModelHints {
    /// The end-of-sequence token ids ([`super::engine::gguf_eos`]): used to end a
    /// disconnected client's non-streamed generation at its next token.
    pub eos: Vec<u32>,
    /// The name to serve the model under when `--served-model-name` is not given.
    pub name: Option<String>,
}

impl HlgServerOptions {
    /// These options over `base` (each one that is set wins).
    pub fn over(&self, base: &HlgServerOptions) -> HlgServerOptions {
        HlgServerOptions {
            flags: self.flags.over(&base.flags),
            backend: self.backend.clone().or_else(|| base.backend.clone()),
            n_choices: self.n_choices.clone().or_else(|| base.n_choices.clone()),
            batching: self.batching.clone().or_else(|| base.batching.clone()),
            api_key: self.api_key.clone().or_else(|| base.api_key.clone()),
            allow_admin_routes: self.allow_admin_routes || base.allow_admin_routes,
            allow_remote_media: self.allow_remote_media || base.allow_remote_media,
            allow_local_media: self.allow_local_media || base.allow_local_media,
            served_model_name: self
                .served_model_name
                .clone()
                .or_else(|| base.served_model_name.clone()),
        }
    }

    /// The backend named by `--hlg-backend` (the kernel when unset).
    pub fn backend(&self) -> Result<Backend, String> {
        Backend::parse(self.backend.as_deref().unwrap_or("kernel"))
    }

    /// How `n > 1` is served as the flag says; `None` when unset (then it follows the
    /// engine: split when its batched rows are wrong, batched otherwise).
    pub fn choices(&self) -> Result<Option<Choices>, String> {
        match self.n_choices.as_deref() {
            None => Ok(None),
            Some("split") => Ok(Some(Choices::Split)),
            Some("batched") => Ok(Some(Choices::Batched)),
            Some(other) => Err(format!(
                "--hlg-n-choices must be \"split\" or \"batched\", got {other:?}"
            )),
        }
    }

    /// `--hlg-batching` ([`Batching::Auto`] when unset).
    pub fn batching(&self) -> Result<Batching, String> {
        Batching::parse(self.batching.as_deref().unwrap_or("auto"))
    }

    /// The whole router (see [`super::router`]) with these options, every value checked
    /// first: an error names the flag and the accepted values. With `--hlg-batching auto`
    /// the engine is probed first ([`super::engine::probe`]).
    pub async fn router(&self, mistralrs: SharedMistralRsState) -> anyhow::Result<axum::Router> {
        self.router_for(mistralrs, ModelHints::default()).await
    }

    /// [`Self::router`], told what the server knows of the model from its file.
    pub async fn router_for(
        &self,
        mistralrs: SharedMistralRsState,
        hints: ModelHints,
    ) -> anyhow::Result<axum::Router> {
        let ModelHints { eos, name } = hints;
        let defaults = self.flags.defaults().map_err(anyhow::Error::msg)?;
        let backend = self.backend().map_err(anyhow::Error::msg)?;
        let choices = self.choices().map_err(anyhow::Error::msg)?;
        let serial = match self.batching().map_err(anyhow::Error::msg)? {
            Batching::Serial => true,
            Batching::On => false,
            Batching::Auto => {
                let report = super::engine::probe(&mistralrs).await;
                match &report {
                    Ok(r) if r.rows_independent => tracing::info!(max_abs_diff = r.max_abs_diff, "the engine decodes batched rows correctly: batching on"),
                    Ok(r) => tracing::warn!(max_abs_diff = r.max_abs_diff, "the engine decodes batched rows wrongly (mistral.rs 0.8.1 on the CPU): one request at a time in the engine, the others queue (--hlg-batching on lifts this on a patched engine)"),
                    Err(e) => tracing::warn!("the batching probe failed ({e}): one request at a time in the engine"),
                }
                !report.is_ok_and(|r| r.rows_independent)
            }
        };
        let choices = choices.unwrap_or(if serial {
            Choices::Split
        } else {
            Choices::Batched
        });
        tracing::info!(hlg = %serde_json::to_string(&defaults.resolved(false))?, ?backend, ?choices, serial, "HLG sampling");
        let exposure = self.exposure();
        tracing::info!(
            api_key = exposure.has_api_key(),
            admin_routes = exposure.allow_admin_routes,
            remote_media = exposure.allow_remote_media,
            local_media = exposure.allow_local_media,
            "exposure"
        );
        let internal = mistralrs
            .get_default_model_id()
            .ok()
            .flatten()
            .unwrap_or_else(|| "default".into());
        let served = self
            .served_model_name
            .clone()
            .or(name)
            .unwrap_or_else(|| super::security::default_served_name(&internal));
        if served != internal {
            mistralrs
                .register_model_alias(served.clone(), &internal)
                .map_err(anyhow::Error::msg)?;
        }
        tracing::info!(model = %served, "serving the model as");
        let router = super::router_with_gate(
            mistralrs,
            defaults,
            choices,
            backend,
            super::Gate::new(serial, eos),
        )
        .await?;
        Ok(exposure.apply(super::security::serve_under_name(router, internal, served)))
    }

    /// What these options expose (key, management routes, media sources).
    pub fn exposure(&self) -> super::security::Exposure {
        let mut e = super::security::Exposure::default().with_api_key(self.api_key.as_deref());
        e.allow_admin_routes = self.allow_admin_routes;
        e.allow_remote_media = self.allow_remote_media;
        e.allow_local_media = self.allow_local_media;
        e
    }
}

/// A flag's text as a value (never fails: values are checked with the rest of the config).
fn flag_value(s: &str) -> Result<RawValue, std::convert::Infallible> {
    Ok(RawValue::from_flag(s))
}

/// A config-file value: strings read like flags, numbers and booleans as themselves.
fn file_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RawValue>, D::Error> {
    Ok(Some(match RawValue::deserialize(d)? {
        RawValue::Str(s) => RawValue::from_flag(&s),
        v => v,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct File {
        #[allow(dead_code)]
        port: Option<u16>,
        #[serde(flatten)]
        hlg: HlgServerOptions,
    }

    #[test]
    fn config_file_keys_read_like_the_flags() {
        let f: File = toml::from_str("port = 8080\nhlg-sampling = \"on\"\nhlg_toe = 2.5\nhlg-width = \"off\"\nhlg-toe-shape = \"exp\"\nhlg-backend = \"kernel\"").unwrap();
        let cfg = f.hlg.flags.defaults().unwrap();
        assert_eq!(cfg.enabled(), Some(true));
        let c = cfg.curve();
        assert_eq!(
            (c.toe(), c.width(), c.toe_shape()),
            (Some(2.5), None, crate::ToeShape::Exp)
        );
        assert_eq!(f.hlg.backend(), Ok(Backend::Kernel));
        assert_eq!(f.hlg.choices(), Ok(None));
        assert_eq!(f.hlg.batching(), Ok(Batching::Auto));

        let bad: File = toml::from_str("hlg-shoulder = -1").unwrap();
        assert_eq!(
            bad.hlg.flags.defaults().unwrap_err(),
            r#"--hlg-shoulder: `hlg.shoulder` must be a number in [1e-6, 1000] or "off", got -1"#
        );
        let bad: File = toml::from_str("hlg-n-choices = \"sometimes\"").unwrap();
        assert_eq!(
            bad.hlg.choices().unwrap_err(),
            r#"--hlg-n-choices must be "split" or "batched", got "sometimes""#
        );
    }

    #[test]
    fn flags_win_over_the_file() {
        let file = HlgServerOptions {
            flags: HlgFlags {
                toe: Some(RawValue::Number(2.0)),
                width: Some(RawValue::Number(1.0)),
                ..Default::default()
            },
            n_choices: Some("batched".into()),
            ..Default::default()
        };
        let flags = HlgServerOptions {
            flags: HlgFlags {
                toe: Some(RawValue::Number(5.0)),
                ..Default::default()
            },
            ..Default::default()
        };
        let merged = flags.over(&file);
        assert_eq!(merged.flags.toe, Some(RawValue::Number(5.0)));
        assert_eq!(merged.flags.width, Some(RawValue::Number(1.0)));
        assert_eq!(merged.choices(), Ok(Some(Choices::Batched)));
    }
}
