//! The server's HLG options as one type for command lines (clap) and config files (serde),
//! shared by `mistralrs-hlg serve` and the patched upstream `mistralrs serve`
//! (`patches/mistralrs-cli-0.8.1`), so the two accept the same flags and keys.

use std::collections::BTreeMap;
use std::fmt;

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use mistralrs_server_core::mistralrs_server_router_builder::MistralRsServerRouterBuilder;
use mistralrs_server_core::types::SharedMistralRsState;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::config::RawValue;
use crate::params::{Field, Kind};
use crate::processor::{Backend, BackendError};
use crate::HlgConfig;
use crate::HlgError;
use crate::ToeShape;

use super::engine::Batching;
use super::engine::{Choices, Gate};
use super::engine::{Concurrency, EngineMode};
use super::error::{OptionError, ServerError};
use super::load::ModelHints;
use super::router::RouterBuilder;

/// The seven `--hlg-*` engine flags, one per field of the `hlg` object
/// ([`Field::flag`]). In a config file the keys are the flag names (`hlg-toe = 3.0`;
/// `hlg_toe` is accepted too): strings read like flags (`"off"`, `"4.5"`), TOML numbers
/// and booleans as themselves. Values are kept as given and checked by [`Self::defaults`].
///
/// ```
/// use mistralrs_hlg::{config::RawValue, params::Field, server::HlgFlags};
/// let file = HlgFlags::default().with(Field::Toe, RawValue::Number(2.0));
/// let cli = HlgFlags::default().with(Field::Toe, RawValue::Number(5.0));
/// assert_eq!(cli.over(&file).get(Field::Toe), Some(&RawValue::Number(5.0)));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HlgFlags {
    values: BTreeMap<Field, RawValue>,
}

impl HlgFlags {
    /// The value given for a field's flag.
    ///
    /// ```
    /// use mistralrs_hlg::{config::RawValue, params::Field, server::HlgFlags};
    /// let flags = HlgFlags::default().with(Field::Width, RawValue::from_flag("off"));
    /// assert_eq!(flags.get(Field::Width), Some(&RawValue::from_flag("off")));
    /// assert_eq!(flags.get(Field::Toe), None);
    /// ```
    pub fn get(&self, field: Field) -> Option<&RawValue> {
        self.values.get(&field)
    }

    /// These flags with one more set.
    ///
    /// ```
    /// use mistralrs_hlg::{config::RawValue, params::Field, server::HlgFlags};
    /// let flags = HlgFlags::default().with(Field::Enabled, RawValue::from_flag("on"));
    /// assert_eq!(flags.defaults()?.enabled(), Some(true));
    /// # Ok::<(), mistralrs_hlg::server::OptionError>(())
    /// ```
    pub fn with(mut self, field: Field, value: RawValue) -> Self {
        self.values.insert(field, value);
        self
    }

    /// The server's HLG defaults these flags give, validated; the error names the flag
    /// and the accepted range (`--hlg-toe: \`hlg.toe\` must be a number in [1e-6, 1000] or "off", got -2`).
    ///
    /// ```
    /// use mistralrs_hlg::{config::RawValue, params::Field, server::HlgFlags};
    /// let bad = HlgFlags::default().with(Field::Toe, RawValue::Number(-2.0));
    /// assert_eq!(
    ///     bad.defaults().unwrap_err().to_string(),
    ///     r#"--hlg-toe: `hlg.toe` must be a number in [1e-6, 1000] or "off", got -2"#
    /// );
    /// ```
    pub fn defaults(&self) -> Result<HlgConfig, OptionError> {
        let mut cfg = HlgConfig::default();
        for (&field, value) in &self.values {
            cfg.set_field(field, value.clone())
                .map_err(|error| OptionError::Curve {
                    flag: field.flag(),
                    error,
                })?;
        }
        cfg.check_scales().map_err(|error| OptionError::Curve {
            flag: match error {
                HlgError::Unused { field, .. } => field.flag(),
                _ => "hlg",
            },
            error,
        })?;
        Ok(cfg)
    }

    /// These flags over `base` (each flag that is set wins), e.g. a command line over a
    /// config file.
    ///
    /// ```
    /// use mistralrs_hlg::{config::RawValue, params::Field, server::HlgFlags};
    /// let file = HlgFlags::default().with(Field::Toe, RawValue::Number(2.0)).with(Field::Width, RawValue::Number(1.0));
    /// let cli = HlgFlags::default().with(Field::Toe, RawValue::Number(5.0));
    /// let both = cli.over(&file);
    /// assert_eq!((both.get(Field::Toe), both.get(Field::Width)), (Some(&RawValue::Number(5.0)), Some(&RawValue::Number(1.0))));
    /// ```
    pub fn over(&self, base: &HlgFlags) -> HlgFlags {
        let mut values = base.values.clone();
        values.extend(self.values.iter().map(|(f, v)| (*f, v.clone())));
        HlgFlags { values }
    }
}

/// The curve's flags and the range of z it is tabulated over: `mistralrs-hlg curve`
/// (a table) and `mistralrs-hlg-eval curve` (a figure).
///
/// ```
/// use clap::Parser;
/// use mistralrs_hlg::server::CurveTable;
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     table: CurveTable,
/// }
/// let cli = Cli::parse_from(["curve", "--from", "-1", "--to", "1", "--hlg-toe-shape", "exp"]);
/// let (zs, curves) = cli.table.tabulate()?;
/// assert_eq!(zs, [-1.0, -0.5, 0.0, 0.5, 1.0]);
/// assert_eq!((curves.len(), curves[0].1.len()), (3, 5));
/// # Ok::<(), mistralrs_hlg::server::OptionError>(())
/// ```
#[derive(Args, Clone, Debug)]
pub struct CurveTable {
    /// The curve's knobs (the built-in defaults otherwise; the toe shape is each shape).
    #[command(flatten)]
    pub hlg: HlgFlags,
    /// Smallest z (nats from the pivot).
    #[arg(long, default_value_t = -24.0, allow_hyphen_values = true)]
    pub from: f64,
    /// Largest z.
    #[arg(long, default_value_t = 12.0, allow_hyphen_values = true)]
    pub to: f64,
    /// Step.
    #[arg(long, default_value_t = 0.5)]
    pub step: f64,
}

/// g₁ per toe shape, one value per z.
pub type ShapeCurves = Vec<(ToeShape, Vec<f64>)>;

impl CurveTable {
    /// The z values from `from` to `to` by `step`, and g₁(z) at each for every toe shape
    /// under the flags' other knobs.
    pub fn tabulate(&self) -> Result<(Vec<f64>, ShapeCurves), OptionError> {
        let cfg = self.hlg.defaults()?;
        if !(self.step > 0.0 && self.to > self.from && (self.to - self.from) / self.step <= 1e6) {
            return Err(OptionError::Value {
                flag: "step",
                expected: "> 0, with --to above --from and at most a million steps between",
                got: format!("{} (from {} to {})", self.step, self.from, self.to),
            });
        }
        let zs: Vec<f64> = (0..)
            .map(|i| self.from + f64::from(i) * self.step)
            .take_while(|z| *z <= self.to + 1e-9)
            .collect();
        let curves = ToeShape::ALL
            .into_iter()
            .map(|s| {
                let c = cfg.curve().with_toe_shape(s);
                (s, zs.iter().map(|&z| c.g1(z)).collect())
            })
            .collect();
        Ok((zs, curves))
    }
}

/// The flag of one field: name, value list and help from [`Field`].
fn flag_arg(field: Field) -> Arg {
    let numeric = !matches!(field.kind(), Kind::Switch | Kind::Name(..));
    Arg::new(field.flag())
        .long(field.flag())
        .value_name(field.value_name())
        .help(field.help())
        .action(ArgAction::Set)
        .value_parser(flag_value)
        .allow_hyphen_values(numeric)
}

impl Args for HlgFlags {
    fn augment_args(cmd: Command) -> Command {
        Field::ALL
            .into_iter()
            .fold(cmd, |cmd, f| cmd.arg(flag_arg(f)))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for HlgFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = HlgFlags::default();
        flags.update_from_arg_matches(m)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for field in Field::ALL {
            if let Ok(Some(v)) = m.try_get_one::<RawValue>(field.flag()) {
                self.values.insert(field, v.clone());
            }
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for HlgFlags {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HlgFlags;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of hlg-* keys")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<HlgFlags, A::Error> {
                let mut flags = HlgFlags::default();
                while let Some(key) = a.next_key::<String>()? {
                    match Field::from_flag(&key) {
                        Some(field) => {
                            let v = file_value(a.next_value::<RawValue>()?);
                            flags.values.insert(field, v);
                        }
                        // Another option's key, read by whoever flattens this in.
                        None => {
                            a.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(flags)
            }
        }
        d.deserialize_map(V)
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
/// assert!(bad.hlg.flags.defaults().unwrap_err().to_string().starts_with("--hlg-toe: "));
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
    /// How `n > 1` is served: `split` runs n single-choice generations one after another,
    /// because mistral.rs 0.8.1 corrupts the choices of a batched sampled request on the
    /// CPU; `batched` passes the request through as upstream does. Unset: what the
    /// start-up probe finds (`--hlg-batching auto`): `split` where the engine's batched
    /// rows are wrong; where they are right, batched for a whole answer and split for a
    /// stream (0.8.1 ends some concurrent streamed groups without `[DONE]`).
    #[arg(long = "hlg-n-choices", alias = "n-choices", value_name = "split|batched", value_parser = ["split", "batched"])]
    #[serde(default, rename = "hlg-n-choices", alias = "hlg_n_choices")]
    pub n_choices: Option<String>,
    /// How many requests the engine runs at once: `auto` (the default) runs one at a time
    /// on the CPU; elsewhere it probes the engine at start-up and runs one at a time when
    /// it decodes batched rows wrongly, any number otherwise; `serial` always one; `on`
    /// never limits. Waiting requests queue; none is refused.
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
    /// Serve every route of the host, not only generation, the model list, health and the
    /// documents (docs/SERVING.md, "Security"): upstream's management routes (model
    /// unload/reload/tune/status, re_isq, system info and doctor; on mistral.rs 0.9 also
    /// calibration, LoRA adapters, metrics, files, containers, skills, sessions and agent
    /// approvals) and any route a later host adds; 404 without this.
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

impl HlgServerOptions {
    /// These options over `base` (each one that is set wins).
    ///
    /// ```
    /// use mistralrs_hlg::server::HlgServerOptions;
    /// let file = HlgServerOptions { n_choices: Some("batched".into()), allow_admin_routes: true, ..Default::default() };
    /// let cli = HlgServerOptions { n_choices: Some("split".into()), ..Default::default() };
    /// let both = cli.over(&file);
    /// assert_eq!((both.n_choices.as_deref(), both.allow_admin_routes), (Some("split"), true));
    /// ```
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
    ///
    /// ```
    /// use mistralrs_hlg::{processor::Backend, server::HlgServerOptions};
    /// assert_eq!(HlgServerOptions::default().backend(), Ok(Backend::Kernel));
    /// ```
    pub fn backend(&self) -> Result<Backend, OptionError> {
        let name = self.backend.as_deref().unwrap_or("kernel");
        Backend::parse(name).map_err(|e| match e {
            BackendError::MlxNotBuilt => OptionError::MlxNotBuilt,
            BackendError::Unknown(got) => OptionError::Value {
                flag: "hlg-backend",
                expected: Backend::EXPECTED,
                got,
            },
        })
    }

    /// How `n > 1` is served as the flag says; `None` when unset (then it follows the
    /// engine: split when its batched rows are wrong, batched otherwise).
    ///
    /// ```
    /// use mistralrs_hlg::server::{Choices, HlgServerOptions};
    /// assert_eq!(HlgServerOptions::default().choices(), Ok(None));
    /// let o = HlgServerOptions { n_choices: Some("batched".into()), ..Default::default() };
    /// assert_eq!(o.choices(), Ok(Some(Choices::Batched)));
    /// ```
    pub fn choices(&self) -> Result<Option<Choices>, OptionError> {
        match self.n_choices.as_deref() {
            None => Ok(None),
            Some("split") => Ok(Some(Choices::Split)),
            Some("batched") => Ok(Some(Choices::Batched)),
            Some(other) => Err(OptionError::Value {
                flag: "hlg-n-choices",
                expected: r#""split" or "batched""#,
                got: other.to_string(),
            }),
        }
    }

    /// `--hlg-batching` ([`Batching::Auto`] when unset).
    ///
    /// ```
    /// use mistralrs_hlg::server::{Batching, HlgServerOptions};
    /// let o = HlgServerOptions { batching: Some("serial".into()), ..Default::default() };
    /// assert_eq!(o.batching(), Ok(Batching::Serial));
    /// ```
    pub fn batching(&self) -> Result<Batching, OptionError> {
        let name = self.batching.as_deref().unwrap_or("auto");
        Batching::parse(name).ok_or_else(|| OptionError::Value {
            flag: "hlg-batching",
            expected: Batching::EXPECTED,
            got: name.to_string(),
        })
    }

    /// What the operator is warned of at start-up about how the engine is set to batch:
    /// `--hlg-batching on` with a prefix cache, on an engine whose scheduler makes parked
    /// completions prompts again ([`super::load::engine_resumes_parked_completions`]): in
    /// the load run this corrupted concurrent answers (docs/SERVING.md). The registry's
    /// engine has that scheduler; `scripts/serve`'s carries the fix.
    ///
    /// ```
    /// use mistralrs_hlg::server::{load::EngineOptions, HlgServerOptions};
    /// let on = HlgServerOptions { batching: Some("on".into()), ..Default::default() };
    /// let cpu = |n| EngineOptions { cpu: true, prefix_cache_n: Some(n), ..Default::default() };
    /// let fixed = mistralrs_hlg::server::load::engine_resumes_parked_completions();
    /// assert_eq!(on.batching_warning(&cpu(4)).is_some(), !fixed);
    /// assert!(fixed || on.batching_warning(&cpu(4)).unwrap().contains("--prefix-cache-n 0"));
    /// assert_eq!(on.batching_warning(&cpu(0)), None);
    /// assert_eq!(HlgServerOptions::default().batching_warning(&cpu(4)), None);
    /// ```
    pub fn batching_warning(&self, engine: &super::load::EngineOptions) -> Option<String> {
        let cache = engine.prefix_cache();
        (self.batching() == Ok(Batching::On)
            && cache > 0
            && !super::load::engine_resumes_parked_completions())
        .then(|| {
            format!("--hlg-batching on with a prefix cache of {cache}: this engine's scheduler prefills a parked prefix-cache hit again on top of its own cache, which corrupted concurrent answers in a load run (docs/SERVING.md); add --prefix-cache-n 0, leave batching to auto (serial on the CPU), or build with scripts/serve's engine (patches/mistralrs-core-0.8.1)")
        })
    }

    /// The whole router (see [`RouterBuilder`]) with these options, every value checked
    /// first: an error names the flag and the accepted values. With `--hlg-batching auto`
    /// off the CPU the engine is probed first ([`super::engine::probe`]).
    ///
    /// ```
    /// use mistralrs_hlg::server::{self, load, HlgServerOptions};
    ///
    /// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
    /// let source = load::ModelSource::resolve("/models/model.gguf", None)?;
    /// let engine = load::load(&source).await?;
    /// let router = HlgServerOptions::default().router(engine).await?;
    /// server::serve(router, "127.0.0.1", 1234).await
    /// # }
    /// ```
    pub async fn router(
        &self,
        mistralrs: SharedMistralRsState,
    ) -> Result<axum::Router, ServerError> {
        self.router_for(mistralrs, ModelHints::default()).await
    }

    /// [`Self::router`], told what the server knows of the model from its file.
    ///
    /// ```
    /// use mistralrs_hlg::server::{self, load, HlgServerOptions};
    ///
    /// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
    /// let source = load::ModelSource::resolve("/models/model.gguf", None)?;
    /// let engine = load::load(&source).await?;
    /// // The file's end-of-sequence tokens cancel a disconnected client's generation; its
    /// // name is what responses show as `model`.
    /// let router = HlgServerOptions::default().router_for(engine, source.hints()).await?;
    /// server::serve(router, "127.0.0.1", 1234).await
    /// # }
    /// ```
    pub async fn router_for(
        &self,
        mistralrs: SharedMistralRsState,
        hints: ModelHints,
    ) -> Result<axum::Router, ServerError> {
        let upstream = MistralRsServerRouterBuilder::new();
        self.router_with_upstream(mistralrs, hints, upstream).await
    }

    /// [`Self::router_for`] over upstream's router as `upstream` configures it: what a
    /// CLI that sets options on upstream's builder (mistral.rs 0.9's tool rounds,
    /// observability, agent permissions) passes. The engine is set to `mistralrs`.
    ///
    /// ```
    /// use mistralrs_hlg::server::{self, load, HlgServerOptions};
    /// use mistralrs_server_core::mistralrs_server_router_builder::MistralRsServerRouterBuilder;
    ///
    /// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
    /// let source = load::ModelSource::resolve("/models/model.gguf", None)?;
    /// let engine = load::load(&source).await?;
    /// let upstream = MistralRsServerRouterBuilder::new().with_max_body_limit(1 << 20);
    /// let router = HlgServerOptions::default()
    ///     .router_with_upstream(engine, source.hints(), upstream)
    ///     .await?;
    /// server::serve(router, "127.0.0.1", 1234).await
    /// # }
    /// ```
    pub async fn router_with_upstream(
        &self,
        mistralrs: SharedMistralRsState,
        hints: ModelHints,
        upstream: MistralRsServerRouterBuilder,
    ) -> Result<axum::Router, ServerError> {
        let app = self.app_with_upstream(mistralrs, hints, upstream).await?;
        Ok(self.secure(app))
    }

    /// [`Self::router_with_upstream`] without the exposure, for a CLI that adds routes
    /// of its own after these (upstream's `mistralrs serve` nests its web UI at `/ui`):
    /// add them, then serve the finished app only through [`Self::secure`], so that the
    /// key, the allowlist and the media policy cover every route, the added ones too.
    ///
    /// ```
    /// use axum::routing::get;
    /// use mistralrs_hlg::server::{self, load, HlgServerOptions};
    /// use mistralrs_server_core::mistralrs_server_router_builder::MistralRsServerRouterBuilder;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let source = load::ModelSource::resolve("/models/model.gguf", None)?;
    /// let engine = load::load(&source).await?;
    /// let options = HlgServerOptions { api_key: Some("sk-1".into()), ..Default::default() };
    /// let app = options
    ///     .app_with_upstream(engine, source.hints(), MistralRsServerRouterBuilder::new())
    ///     .await?
    ///     .nest("/ui", axum::Router::new().route("/", get(|| async { "ui" })));
    /// server::serve(options.secure(app), "127.0.0.1", 1234).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn app_with_upstream(
        &self,
        mistralrs: SharedMistralRsState,
        hints: ModelHints,
        upstream: MistralRsServerRouterBuilder,
    ) -> Result<axum::Router, ServerError> {
        let ModelHints { eos, name } = hints;
        let defaults = self.flags.defaults()?;
        let backend = self.backend()?;
        let EngineMode {
            concurrency,
            choices,
        } = self.engine_mode(&mistralrs).await?;
        tracing::info!(hlg = %serde_json::to_value(defaults.resolved(false)).unwrap_or_default(), ?backend, ?choices, ?concurrency, "HLG sampling");
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
            .unwrap_or_else(|| super::served_name::default_served_name(&internal));
        if served != internal {
            mistralrs
                .register_model_alias(served.clone(), &internal)
                .map_err(ServerError::upstream("registering the served model name"))?;
        }
        tracing::info!(model = %served, "serving the model as");
        RouterBuilder::new(mistralrs)
            .defaults(defaults)
            .choices(choices)
            .backend(backend)
            .gate(Gate::new(concurrency, eos))
            .upstream(upstream)
            .served_name(internal, served)
            .build_unexposed()
            .await
    }

    /// `app` behind these options' exposure ([`Self::exposure`]): the API key, the
    /// allowlist of [`super::routes::ROUTES`] and the media policy on every
    /// route `app` has, with every error in OpenAI's shape. Apply it last, to the app
    /// that is served.
    ///
    /// ```
    /// use axum::{body::Body, http::Request, routing::get, Router};
    /// use mistralrs_hlg::server::HlgServerOptions;
    /// use tower::ServiceExt;
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let options = HlgServerOptions { api_key: Some("sk-1".into()), ..Default::default() };
    /// let app = Router::new().nest("/ui", Router::new().route("/", get(|| async { "ui" })));
    /// let app = options.secure(app);
    /// let get_ui = |auth: &str| Request::get("/ui").header("authorization", auth).body(Body::empty()).unwrap();
    /// assert_eq!(app.clone().oneshot(get_ui("Bearer no")).await.unwrap().status(), 401);
    /// // The key is right, but the web UI keeps state: closed until --allow-admin-routes.
    /// assert_eq!(app.oneshot(get_ui("Bearer sk-1")).await.unwrap().status(), 404);
    /// # });
    /// ```
    pub fn secure(&self, app: axum::Router) -> axum::Router {
        self.exposure().apply(app)
    }

    /// Refuses a second listener (`flag`, upstream's `--mcp-port`) while an API key is
    /// set: it serves on a port of its own, outside the router that [`Self::secure`]
    /// guards, so the key would not cover it.
    ///
    /// ```
    /// use mistralrs_hlg::server::HlgServerOptions;
    /// let keyed = HlgServerOptions { api_key: Some("sk-1".into()), ..Default::default() };
    /// let e = keyed.check_second_listener("--mcp-port", Some(4321)).unwrap_err();
    /// assert!(e.to_string().contains("--mcp-port"), "{e}");
    /// assert!(keyed.check_second_listener("--mcp-port", None).is_ok());
    /// assert!(HlgServerOptions::default().check_second_listener("--mcp-port", Some(4321)).is_ok());
    /// ```
    pub fn check_second_listener(&self, flag: &str, port: Option<u16>) -> Result<(), OptionError> {
        match port {
            Some(port) if self.exposure().has_api_key() => Err(OptionError::Unguarded {
                flag: flag.to_string(),
                port,
            }),
            _ => Ok(()),
        }
    }

    /// How the engine takes requests with these options: one at a time or batched, and
    /// `n > 1` split or batched. `--hlg-batching auto` (the default) is serial on the CPU
    /// (batching buys no throughput there, and with a prefix cache it let concurrent
    /// requests corrupt each other on the patched 0.8.1 engine: docs/SERVING.md); on
    /// an accelerator it probes the engine ([`super::engine::probe`]): batched only where
    /// its batched rows are right (with streamed `n > 1` split:
    /// [`Choices::SplitStreams`]), serial and split where they are mixed or fail.
    /// `--hlg-n-choices` overrides the split.
    ///
    /// ```
    /// use mistralrs_hlg::server::{engine::EngineMode, load, Choices, Concurrency, HlgServerOptions};
    ///
    /// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
    /// let source = load::ModelSource::resolve("/models/model.gguf", None)?;
    /// let engine = load::load(&source).await?;
    /// let serial = HlgServerOptions { batching: Some("serial".into()), ..Default::default() };
    /// let mode = serial.engine_mode(&engine).await?;
    /// assert_eq!(mode, EngineMode { concurrency: Concurrency::Serial, choices: Choices::Split });
    /// # Ok(())
    /// # }
    /// ```
    pub async fn engine_mode(
        &self,
        mistralrs: &SharedMistralRsState,
    ) -> Result<EngineMode, OptionError> {
        let choices = self.choices()?;
        let concurrency = concurrency(self.batching()?, mistralrs).await;
        let choices = choices.unwrap_or(match concurrency {
            Concurrency::Serial => Choices::Split,
            Concurrency::Concurrent => Choices::SplitStreams,
        });
        Ok(EngineMode {
            concurrency,
            choices,
        })
    }

    /// What these options expose (key, management routes, media sources).
    ///
    /// ```
    /// use mistralrs_hlg::server::HlgServerOptions;
    /// let o = HlgServerOptions { allow_local_media: true, ..Default::default() };
    /// let e = o.exposure();
    /// assert!(e.allow_local_media && !e.allow_remote_media && !e.has_api_key());
    /// ```
    pub fn exposure(&self) -> super::security::Exposure {
        let mut e = super::security::Exposure::default().with_api_key(self.api_key.as_deref());
        e.allow_admin_routes = self.allow_admin_routes;
        e.allow_remote_media = self.allow_remote_media;
        e.allow_local_media = self.allow_local_media;
        e
    }
}

/// Whether the engine must run one request at a time: as `--hlg-batching` says, or, for
/// `auto`, serial on the CPU and elsewhere as the start-up probe finds (serial when it
/// fails). The probe is not run on the CPU: it sends requests through the served engine,
/// for a finding that would change nothing there.
async fn concurrency(batching: Batching, mistralrs: &SharedMistralRsState) -> Concurrency {
    match batching {
        Batching::Serial => Concurrency::Serial,
        Batching::On => Concurrency::Concurrent,
        Batching::Auto if mistralrs.config(None).is_ok_and(|c| c.device.is_cpu()) => {
            tracing::info!("on the CPU: one request at a time in the engine, the others queue (batching buys no throughput here, and with a prefix cache concurrent requests corrupted each other; --hlg-batching on lifts this)");
            Concurrency::Serial
        }
        Batching::Auto => match super::engine::probe(mistralrs).await {
            Ok(r) if r.rows_independent => {
                tracing::info!(
                    max_abs_diff = r.max_abs_diff,
                    "the engine decodes batched rows correctly: batching on"
                );
                Concurrency::Concurrent
            }
            Ok(r) => {
                tracing::warn!(max_abs_diff = r.max_abs_diff, "the engine decodes batched rows wrongly: one request at a time in the engine, the others queue");
                Concurrency::Serial
            }
            Err(e) => {
                tracing::warn!(
                    "the batching probe failed ({e}): one request at a time in the engine"
                );
                Concurrency::Serial
            }
        },
    }
}

/// A flag's text as a value (never fails: values are checked with the rest of the config).
fn flag_value(s: &str) -> Result<RawValue, std::convert::Infallible> {
    Ok(RawValue::from_flag(s))
}

/// A config-file value: strings read like flags, numbers and booleans as themselves.
fn file_value(v: RawValue) -> RawValue {
    match v {
        RawValue::Str(s) => RawValue::from_flag(&s),
        v => v,
    }
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
            bad.hlg.flags.defaults().unwrap_err().to_string(),
            r#"--hlg-shoulder: `hlg.shoulder` must be a number in [1e-6, 1000] or "off", got -1"#
        );
        let bad: File = toml::from_str("hlg-n-choices = \"sometimes\"").unwrap();
        assert_eq!(
            bad.hlg.choices().unwrap_err().to_string(),
            r#"--hlg-n-choices must be "split" or "batched", got "sometimes""#
        );
    }

    #[test]
    fn flags_win_over_the_file() {
        let file = HlgServerOptions {
            flags: HlgFlags::default()
                .with(Field::Toe, RawValue::Number(2.0))
                .with(Field::Width, RawValue::Number(1.0)),
            n_choices: Some("batched".into()),
            ..Default::default()
        };
        let flags = HlgServerOptions {
            flags: HlgFlags::default().with(Field::Toe, RawValue::Number(5.0)),
            ..Default::default()
        };
        let merged = flags.over(&file);
        assert_eq!(merged.flags.get(Field::Toe), Some(&RawValue::Number(5.0)));
        assert_eq!(merged.flags.get(Field::Width), Some(&RawValue::Number(1.0)));
        assert_eq!(merged.choices(), Ok(Some(Choices::Batched)));
    }
}
