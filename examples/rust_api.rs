//! HLG through mistral.rs's Rust API: one call on the request builder.
//!
//! `cargo run --release --example rust_api` (fetches the embedded model on first use).

use mistralrs::{GgufModelBuilder, RequestBuilder, TextMessageRole, TokenSource};
use mistralrs_hlg::processor::HlgRequestExt;
use mistralrs_hlg::{HlgCurve, ToeShape};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let gguf = mistralrs_hlg::model::ensure_default_model()?;
    let dir = gguf.parent().expect("model directory");
    let file = gguf
        .file_name()
        .expect("model file")
        .to_string_lossy()
        .into_owned();
    let model = GgufModelBuilder::new(dir.to_string_lossy(), vec![file])
        .with_token_source(TokenSource::None)
        .with_force_cpu()
        .build()
        .await?;

    let curve = HlgCurve::default()
        .with_toe_shape(ToeShape::Quadratic)
        .with_toe(Some(3.0))?;
    let request = RequestBuilder::new()
        .add_message(
            TextMessageRole::User,
            "Describe a market in a city that does not exist.",
        )
        .set_sampler_max_len(48)
        .with_hlg(curve, 0.9); // temperature 0.9 is the mid gain; top-k/top-p/min-p off
    let response = model.send_chat_request(request).await?;
    println!(
        "{}",
        response.choices[0]
            .message
            .content
            .as_deref()
            .unwrap_or_default()
    );
    Ok(())
}
