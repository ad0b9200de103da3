//! `mistralrs-hlg serve`: the options and config file (`server::ServeOptions`), then the
//! model, the router and the listener.

use mistralrs_hlg::server::{self, load::ModelSource, ServeOptions};

pub async fn run(args: ServeOptions) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(p) => ServeOptions::read(p)?,
        None => ServeOptions::default(),
    };
    // Flags over the file; every value is checked before the model loads.
    let opts = args.over(&file);
    opts.check()?;
    let source = match &opts.model {
        Some(m) => {
            ModelSource::resolve_format(m, opts.gguf_file.as_deref(), opts.format.as_deref())?
        }
        None => {
            let path = mistralrs_hlg::model::ensure_default_model()?;
            ModelSource::resolve(&path.to_string_lossy(), None)?
        }
    };
    tracing::info!(?source, "starting");
    let engine = server::load::EngineOptions {
        cpu: opts.cpu,
        seed: opts.seed,
        prefix_cache_n: opts.prefix_cache_n,
        isq: opts.isq.clone(),
    };
    let mistralrs = server::load::load_with(&source, &engine).await?;
    let router = opts.hlg.router_for(mistralrs, source.hints()).await?;
    let host = opts.host.as_deref().unwrap_or("127.0.0.1");
    Ok(server::serve(router, host, opts.port.unwrap_or(1234)).await?)
}
