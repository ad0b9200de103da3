//! `mistralrs-hlg`: the OpenAI-compatible mistral.rs server with HLG sampling, and tools.
//! One module per subcommand; the work is library code.

use clap::{Parser, Subcommand};

mod curve;
mod options;
mod serve;

#[derive(Parser)]
#[command(
    name = "mistralrs-hlg",
    version,
    about = "mistral.rs with HLG sampling"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the OpenAI-compatible server (the embedded SmolLM2-135M when no model is named).
    Serve(Box<options::ServeOptions>),
    /// Fetch the embedded default model into the cache and print its path.
    FetchModel,
    /// Print the curve g₁(z) for each toe shape as a table, or draw it as SVG.
    Curve(mistralrs_hlg::server::CurveTable),
}

fn main() -> anyhow::Result<()> {
    mistralrs_hlg::server::initialize_logging();
    match Cli::parse().cmd {
        Cmd::Serve(args) => {
            // Decided before the runtime starts its threads (see `serve::prepare`).
            let prepared = serve::prepare(*args)?;
            tokio::runtime::Runtime::new()?.block_on(serve::run(prepared))
        }
        Cmd::FetchModel => {
            let gguf = mistralrs_hlg::model::ensure_default_model()?;
            println!("{}", gguf.display());
            Ok(())
        }
        Cmd::Curve(args) => curve::run(args),
    }
}
