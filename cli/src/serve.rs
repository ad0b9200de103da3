//! `mistralrs-hlg serve`: the options and config file (`options::ServeOptions`), the model
//! and the format its weights are served in, then (in the runtime) the engine, the router
//! and the listener.

use crate::options::ServeOptions;
use mistralrs_hlg::server::{self, load::ModelHints, load::ModelSource};
use mistralrs_hlg::weights::{self, Weights};

/// What `serve` runs, decided before any thread starts.
pub struct Prepared {
    opts: ServeOptions,
    source: ModelSource,
    hints: ModelHints,
}

/// The options checked, the model resolved (fetched if it is the embedded one) and its
/// weights prepared ([`weights::prepare`]). Call before the async runtime exists: a
/// dequantization at load is set through candle's environment variables, which its
/// threads read when they first make a matrix.
pub fn prepare(args: ServeOptions) -> anyhow::Result<Prepared> {
    let file = match &args.config {
        Some(p) => ServeOptions::read(p)?,
        None => ServeOptions::default(),
    };
    // Flags over the file; every value is checked before the model loads.
    let opts = args.over(&file);
    opts.check()?;
    let weights: Weights = opts
        .weights
        .as_deref()
        .unwrap_or("auto")
        .parse()
        .map_err(anyhow::Error::msg)?;
    let source = match &opts.model {
        Some(m) => {
            ModelSource::resolve_format(m, opts.gguf_file.as_deref(), opts.format.as_deref())?
        }
        None => {
            let path = mistralrs_hlg::model::ensure_default_model()?;
            ModelSource::resolve(&path.to_string_lossy(), None)?
        }
    };
    // What the file says (end-of-sequence tokens, the served name) comes from the file
    // the user named, not from its converted copy.
    let hints = source.hints();
    let source = in_format(source, weights)?;
    Ok(Prepared {
        opts,
        source,
        hints,
    })
}

pub async fn run(prepared: Prepared) -> anyhow::Result<()> {
    let Prepared {
        opts,
        source,
        hints,
    } = prepared;
    tracing::info!(?source, "starting");
    let engine = server::load::EngineOptions {
        cpu: opts.cpu,
        seed: opts.seed,
        prefix_cache_n: opts.prefix_cache_n,
        isq: opts.isq.clone(),
    };
    if let Some(warning) = opts.hlg.batching_warning(&engine) {
        tracing::warn!("{warning}");
    }
    let mistralrs = server::load::load_with(&source, &engine).await?;
    let router = opts.hlg.router_for(mistralrs, hints).await?;
    let host = opts.host.as_deref().unwrap_or("127.0.0.1");
    Ok(server::serve(router, host, opts.port.unwrap_or(1234)).await?)
}

/// `source` with its weights in `weights`: a local GGUF prepared (converted once and
/// cached, or dequantized at load); any other source as it is, which only `auto` and
/// `as-is` accept.
fn in_format(source: ModelSource, weights: Weights) -> anyhow::Result<ModelSource> {
    match source {
        ModelSource::Local { dir, file } => {
            let served = weights::prepare(weights, &dir.join(&file))?;
            tracing::info!(weights = served.weights.name(), load = ?served.load, path = %served.path.display(), "weights");
            if let Some((key, value)) = served.load.env() {
                // Before any thread exists (see `prepare`).
                std::env::set_var(key, value);
            }
            Ok(ModelSource::resolve(&served.path.to_string_lossy(), None)?)
        }
        other if matches!(weights, Weights::Auto | Weights::AsIs) => Ok(other),
        other => anyhow::bail!(
            "--weights {} applies to a local GGUF file; {other:?} is not one (use --isq for a plain model)",
            weights.name()
        ),
    }
}
