//! Writes one of the tests' tiny random-weight models, for runs outside the tests (the
//! 262k-vocabulary decode benchmark of docs/PERFORMANCE.md):
//!
//! ```text
//! cargo run --release -p mistralrs-hlg-integration-tests --example tiny_model -- mistral3 262144 /tmp/tiny
//! cargo run --release -p mistralrs-hlg-integration-tests --example tiny_model -- plain-llama 32000 /tmp/tiny-hf
//! ```
//!
//! Architectures: any `general.architecture` of `tiny::Arch` (llama, mistral3, phi2,
//! phi3, qwen2, qwen3, qwen3moe, starcoder2; and, for mistral.rs 0.9.2, gemma, gemma2,
//! phimoe, glm4, glm4moe, smollm3, granite, granitemoe, gpt-oss, hunyuan-dense,
//! hunyuan-moe, lfm2, lfm2moe, deepseek2, granitehybrid, qwen3next, qwen35moe, qwen35) as a GGUF
//! file, or plain-llama (a Hugging Face directory).

use mistralrs_hlg_integration_tests::tiny::{write_gguf, write_plain_llama, Arch};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [arch, vocab, dir] = &args[..] else {
        anyhow::bail!("usage: tiny_model ARCH VOCAB DIR");
    };
    let vocab: usize = vocab.parse()?;
    let dir = std::path::Path::new(dir);
    let path = if arch == "plain-llama" {
        write_plain_llama(dir, vocab)?
    } else {
        let a = Arch::ALL
            .into_iter()
            .find(|a| a.name() == arch)
            .ok_or_else(|| anyhow::anyhow!("unknown architecture {arch:?}"))?;
        write_gguf(dir, a, vocab)?
    };
    println!("{}", path.display());
    Ok(())
}
