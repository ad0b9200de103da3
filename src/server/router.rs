//! The router: this crate's routes over upstream's, behind the security layer.

use std::sync::Arc;

use axum::routing::{get, post, MethodRouter};
use axum::{Json, Router};
use mistralrs_server_core::mistralrs_server_router_builder::MistralRsServerRouterBuilder;
use mistralrs_server_core::types::SharedMistralRsState;

use super::engine::Choices;
use super::engine::{self, Concurrency, Gate};
use super::error::ServerError;
use super::handlers::{generation, hlg_defaults, respond, Chat, Completion};
use super::state::AppState;
use super::{grammar, openapi, routes, security, served_name};
use crate::config::HlgConfig;
use crate::processor::Backend;

/// Builds the server's router, the one way there is: this crate's rows of
/// [`routes::ROUTES`] (HLG on the generation routes, `GET /v1/hlg`, the OpenAPI
/// document), and upstream's router for everything else, always behind a
/// [`security::Exposure`] (the default: no key, only the public rows served, media from
/// files or remote addresses refused,
/// errors in OpenAI's shape). [`HlgServerOptions::router`] sets it from the flags, with
/// the start-up probe deciding the gate and `n > 1`.
///
/// ```
/// use mistralrs_hlg::{server::{self, load, Choices, RouterBuilder}, HlgConfig};
///
/// # async fn run() -> Result<(), mistralrs_hlg::server::ServerError> {
/// let source = load::ModelSource::resolve("/models/model.gguf", None)?;
/// let defaults: HlgConfig = serde_json::from_str(r#"{"enabled": true, "toe": 2}"#).unwrap();
/// let router = RouterBuilder::new(load::load(&source).await?)
///     .defaults(defaults)
///     .choices(Choices::Split)
///     .build()
///     .await?;
/// server::serve(router, "127.0.0.1", 1234).await
/// # }
/// ```
pub struct RouterBuilder {
    mistralrs: SharedMistralRsState,
    defaults: HlgConfig,
    choices: Choices,
    backend: Backend,
    gate: Gate,
    exposure: security::Exposure,
    upstream: MistralRsServerRouterBuilder,
    served_name: Option<(String, String)>,
}

impl RouterBuilder {
    /// A router over `mistralrs` with the built-in HLG defaults, `n > 1` split, the
    /// kernel backend, no gate and the default exposure.
    pub fn new(mistralrs: SharedMistralRsState) -> Self {
        RouterBuilder {
            mistralrs,
            defaults: HlgConfig::default(),
            choices: Choices::Split,
            backend: Backend::Kernel,
            gate: Gate::new(Concurrency::Concurrent, vec![]),
            exposure: security::Exposure::default(),
            upstream: MistralRsServerRouterBuilder::new(),
            served_name: None,
        }
    }

    /// The server's HLG defaults (`--hlg-*`).
    pub fn defaults(mut self, defaults: HlgConfig) -> Self {
        self.defaults = defaults;
        self
    }

    /// How `n > 1` runs ([`Choices`]).
    pub fn choices(mut self, choices: Choices) -> Self {
        self.choices = choices;
        self
    }

    /// Where the curve runs (`--hlg-backend`).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The engine's admission: a serial [`Gate`] runs one request at a time in the
    /// engine, on every route that reaches it (see [`engine`]).
    pub fn gate(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }

    /// What the server exposes: key, admin routes, media ([`security::Exposure`]).
    pub fn exposure(mut self, exposure: security::Exposure) -> Self {
        self.exposure = exposure;
        self
    }

    /// Upstream's router builder as a CLI configures it (mistral.rs 0.9's tool rounds,
    /// observability, agent permissions); the engine is set to this builder's.
    pub fn upstream(mut self, upstream: MistralRsServerRouterBuilder) -> Self {
        self.upstream = upstream;
        self
    }

    /// Answers requests for `served` as the engine's model `internal`
    /// ([`served_name::serve_under_name`]).
    pub fn served_name(mut self, internal: String, served: String) -> Self {
        self.served_name = Some((internal, served));
        self
    }

    /// The router, behind its exposure.
    pub async fn build(mut self) -> Result<Router, ServerError> {
        let exposure = std::mem::take(&mut self.exposure);
        Ok(exposure.apply(self.build_unexposed().await?))
    }

    /// The router without the exposure (no key, no allowlist, no media policy), for a
    /// caller that adds routes of its own after these, as upstream's CLI nests its web UI
    /// at `/ui`: an axum layer covers only the routes that exist when it is added, so the
    /// exposure must go around the finished app ([`security::Exposure::apply`], or
    /// [`super::HlgServerOptions::secure`]). Never serve this router as it is.
    pub async fn build_unexposed(mut self) -> Result<Router, ServerError> {
        let served_name = self.served_name.take();
        let router = routes(self).await?;
        Ok(match served_name {
            Some((internal, served)) => served_name::serve_under_name(router, internal, served),
            None => router,
        })
    }
}

/// This crate's routes over upstream's (gated), without the exposure.
async fn routes(b: RouterBuilder) -> Result<Router, ServerError> {
    let RouterBuilder {
        mistralrs,
        defaults,
        choices,
        backend,
        gate,
        upstream,
        ..
    } = b;
    let upstream = upstream
        .with_mistralrs(mistralrs.clone())
        .build()
        .await
        .map_err(ServerError::upstream("building upstream's router"))?;
    let upstream = engine::gated_upstream(upstream, gate.clone());
    // The tokens llguidance forces once a grammar is done (see `grammar`).
    let grammar_stops = grammar::llguidance_eos(&mistralrs).await;
    let state = Arc::new(AppState {
        grammar_stops,
        mistralrs,
        defaults,
        choices,
        backend,
        gate,
        upstream: upstream.clone(),
    });
    // Upstream's layers on this crate's routes too: its CORS policy (any origin, GET and
    // POST, the content-type and authorization headers) and its body limit.
    let cors = tower_http::cors::CorsLayer::new()
        .allow_methods([axum::http::Method::GET, axum::http::Method::POST])
        .allow_headers([
            axum::http::header::CONTENT_TYPE,
            axum::http::header::AUTHORIZATION,
        ])
        .allow_origin(tower_http::cors::AllowOrigin::any());
    let own = routes::served().fold(Router::new(), |own, r| match r.answer {
        routes::Answer::Own(handler) => match own_handler(handler) {
            Some(h) => own.route(r.path, h),
            None => own,
        },
        routes::Answer::Upstream | routes::Answer::WebUi => own,
    });
    Ok(own
        .route_layer(axum::extract::DefaultBodyLimit::max(
            security::MAX_BODY_BYTES,
        ))
        .route_layer(cors)
        .with_state(state)
        .fallback_service(upstream))
}

/// The handler of one of this crate's routes ([`routes::Own`]); `None` for one the host
/// this crate is built against lacks the types for.
fn own_handler(own: routes::Own) -> Option<MethodRouter<Arc<AppState>>> {
    use routes::Own;
    Some(match own {
        Own::Chat => post(generation::<Chat>),
        Own::Completion => post(generation::<Completion>),
        Own::Responses => post(respond),
        #[cfg(mistralrs_host = "0.9")]
        Own::Messages => post(super::messages::create),
        // Anthropic's Messages route is 0.9's (0.8.1 has no request type for it).
        #[cfg(not(mistralrs_host = "0.9"))]
        Own::Messages => return None,
        Own::HlgDefaults => get(hlg_defaults),
        Own::OpenApi => get(|| async { Json(openapi::document()) }),
    })
}

/// Binds `host:port` and serves `router` until the process ends.
///
/// ```
/// use mistralrs_hlg::server::{serve, ServerError};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// // An address this machine does not have: the error names it.
/// let e = serve(axum::Router::new(), "192.0.2.1", 1234).await.unwrap_err();
/// assert!(matches!(e, ServerError::Net { what: "binding", .. }), "{e}");
/// assert!(e.to_string().starts_with("binding 192.0.2.1:1234: "), "{e}");
/// # });
/// ```
pub async fn serve(router: Router, host: &str, port: u16) -> Result<(), ServerError> {
    let net = |what| {
        move |source| ServerError::Net {
            what,
            addr: format!("{host}:{port}"),
            source,
        }
    };
    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .map_err(net("binding"))?;
    let addr = listener.local_addr().map_err(net("binding"))?;
    tracing::info!("mistralrs-hlg listening on http://{addr}");
    axum::serve(listener, router).await.map_err(net("serving"))
}
