//! Tiny random-weight models that the tests write themselves: one GGUF file per
//! architecture the host's GGUF loader accepts, at a chosen vocabulary size, with a
//! SentencePiece (unigram) vocabulary and a chat template in its metadata.
//!
//! Two layers, hidden size 64, four heads (two key/value heads), weights in Q8_0 drawn
//! from a fixed-seed generator, so the same file comes out every time. The output layer is
//! scaled so that the logits spread over several nats, as a trained model's do: a flat
//! distribution would leave nothing for a sampler to shape.

use std::path::{Path, PathBuf};

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// The GGUF architectures these tests write: every one mistral.rs 0.8.1 loads
/// (`pipeline/gguf.rs`), then those only 0.9.2 loads (`gguf/normal_registry.rs`), whose
/// tensors follow llama.cpp's names and 0.9.2's bindings (`gguf/normal_bindings.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// `llama` (Llama, Mistral, SmolLM).
    Llama,
    /// `mistral3`: Llama's tensors under the `mistral3` metadata prefix.
    Mistral3,
    /// `phi2`: LayerNorm, fused QKV with biases, partial rotary.
    Phi2,
    /// `phi3`: fused QKV, fused gate/up.
    Phi3,
    /// `qwen2`: Q/K/V biases.
    Qwen2,
    /// `qwen3`: Q/K norms.
    Qwen3,
    /// `qwen3moe`: Q/K norms and a mixture of experts in every layer.
    Qwen3Moe,
    /// `starcoder2`: LayerNorm and biases everywhere.
    Starcoder2,
    /// `gemma`: norms stored as 1 + w, embeddings scaled by √hidden, GELU.
    Gemma,
    /// `gemma2`: Gemma's plus norms after attention and MLP, soft-capped logits, a
    /// sliding window.
    Gemma2,
    /// `phimoe`: LayerNorm, biases, two of four experts per token.
    PhiMoe,
    /// `glm4`: four norms a layer, Q/K/V biases, fused gate/up, half-rotary heads.
    Glm4,
    /// `glm4moe`: a dense first layer, then routed experts with a score bias and a
    /// shared expert; Q/K norms.
    Glm4Moe,
    /// `smollm3`: Llama's tensors, no rotary embedding every fourth layer.
    SmolLm3,
    /// `granite`: Llama's tensors with embedding, attention, residual and logit scales.
    Granite,
    /// `granitemoe`: Granite's scales and routed experts.
    GraniteMoe,
    /// `gpt-oss`: biases everywhere, attention sinks, sliding and full layers in turn,
    /// routed experts with biases.
    GptOss,
    /// `hunyuan-dense`: Llama's tensors with Q/K norms.
    HunYuanDense,
    /// `hunyuan-moe`: Q/K norms, routed experts and a shared one.
    HunYuanMoe,
    /// `lfm2`: a short-convolution layer, then an attention layer with Q/K norms; the
    /// final norm is stored as the embedding norm.
    Lfm2,
    /// `lfm2moe`: LFM2's layers, the second with sigmoid-routed experts and a score bias.
    Lfm2Moe,
    /// `deepseek2` (DeepSeek-V2, named so in `general.name`, which picks the loader):
    /// multi-head latent attention with split key/value up-projections, a dense first
    /// layer, then routed experts and a shared one.
    DeepSeek2,
    /// `granitehybrid` (Granite 4.0-H): a Mamba-2 layer, then an attention layer without
    /// rotary embedding, each with routed experts and a shared MLP.
    GraniteHybrid,
    /// `qwen3next`: a gated delta-net (linear attention) layer, then a gated full
    /// attention layer; routed experts and a gated shared expert in both; norms stored as
    /// 1 + w.
    Qwen3Next,
    /// `qwen35moe` (Qwen3.5 MoE's text model): Qwen3-Next's layers with the delta net's β
    /// and α projections stored apart.
    Qwen35Moe,
    /// `qwen35` (Qwen3.5's dense text model): Qwen3.5-MoE's delta net and gated
    /// attention with a dense MLP and M-RoPE sections.
    Qwen35,
}

impl Arch {
    /// Every architecture, in the order the matrix reports them.
    pub const ALL: [Arch; 26] = [
        Arch::Llama,
        Arch::Mistral3,
        Arch::Phi2,
        Arch::Phi3,
        Arch::Qwen2,
        Arch::Qwen3,
        Arch::Qwen3Moe,
        Arch::Starcoder2,
        Arch::Gemma,
        Arch::Gemma2,
        Arch::PhiMoe,
        Arch::Glm4,
        Arch::Glm4Moe,
        Arch::SmolLm3,
        Arch::Granite,
        Arch::GraniteMoe,
        Arch::GptOss,
        Arch::HunYuanDense,
        Arch::HunYuanMoe,
        Arch::Lfm2,
        Arch::Lfm2Moe,
        Arch::DeepSeek2,
        Arch::GraniteHybrid,
        Arch::Qwen3Next,
        Arch::Qwen35Moe,
        Arch::Qwen35,
    ];

    /// `general.architecture`.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Mistral3 => "mistral3",
            Arch::Phi2 => "phi2",
            Arch::Phi3 => "phi3",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Starcoder2 => "starcoder2",
            Arch::Gemma => "gemma",
            Arch::Gemma2 => "gemma2",
            Arch::PhiMoe => "phimoe",
            Arch::Glm4 => "glm4",
            Arch::Glm4Moe => "glm4moe",
            Arch::SmolLm3 => "smollm3",
            Arch::Granite => "granite",
            Arch::GraniteMoe => "granitemoe",
            Arch::GptOss => "gpt-oss",
            Arch::HunYuanDense => "hunyuan-dense",
            Arch::HunYuanMoe => "hunyuan-moe",
            Arch::Lfm2 => "lfm2",
            Arch::Lfm2Moe => "lfm2moe",
            Arch::DeepSeek2 => "deepseek2",
            Arch::GraniteHybrid => "granitehybrid",
            Arch::Qwen3Next => "qwen3next",
            Arch::Qwen35Moe => "qwen35moe",
            Arch::Qwen35 => "qwen35",
        }
    }

    /// Qwen3-Next and Qwen3.5 (dense and MoE): a gated delta net, then gated attention
    /// with half-rotary heads and Q/K norms.
    fn delta_net(self) -> bool {
        matches!(self, Arch::Qwen3Next | Arch::Qwen35Moe | Arch::Qwen35)
    }

    /// Whether only mistral.rs 0.9.2 loads it (0.8.1's server refuses it, naming 0.9.2).
    pub fn only_on_0_9(self) -> bool {
        (self as usize) >= (Arch::Gemma as usize)
    }
}

const HIDDEN: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = HIDDEN / HEADS;
const FFN: usize = 128;
const LAYERS: usize = 2;
const EXPERTS: usize = 4;
const EXPERTS_USED: usize = 2;
const CONTEXT: u32 = 2048;
/// LFM2's convolution length.
const CONV_CACHE: usize = 3;
/// DeepSeek-V2's latent attention: the key/value rank, each head's non-rotary and rotary
/// key sizes and its value size (multiples of 32 where Q8_0 rows need them).
const MLA_RANK: usize = 32;
const MLA_NOPE: usize = 32;
const MLA_ROPE: usize = 16;
const MLA_V: usize = 32;
/// Granite-hybrid's Mamba-2 layer: convolution length, inner size (twice the hidden size),
/// state size and heads (one group).
const SSM_CONV: usize = 4;
const SSM_INNER: usize = 2 * HIDDEN;
const SSM_STATE: usize = 16;
const SSM_HEADS: usize = 4;
/// Qwen3-Next's gated delta net: key heads, value heads, and each head's size.
const GDN_K_HEADS: usize = 2;
const GDN_V_HEADS: usize = 4;
const GDN_DIM: usize = 16;
/// The logits' scale: the output layer's weights are uniform in ±this, on a unit-RMS
/// hidden state of size 64, so logits have a standard deviation near 3 nats.
const OUTPUT_SCALE: f32 = 0.65;

/// The control tokens at the head of every vocabulary, in id order.
const CONTROL: [&str; 5] = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"];
/// ChatML, with `<|im_end|>` (id 4) as the end of a turn.
const CHAT_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// A deterministic generator (splitmix64) for the weights.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in ±`scale`.
    fn uniform(&mut self, scale: f32) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
    }
}

/// The vocabulary: control tokens, the 256 byte tokens, single characters, then filler
/// words up to `size`, with SentencePiece scores and GGUF token types.
fn vocabulary(size: usize) -> (Vec<String>, Vec<f32>, Vec<i32>) {
    let mut tokens: Vec<String> = CONTROL.iter().map(|s| s.to_string()).collect();
    let mut types = vec![2, 3, 3, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    let chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'\"-:;()";
    tokens.push("▁".into());
    types.push(1);
    for c in chars.chars() {
        tokens.push(c.to_string());
        tokens.push(format!("▁{c}"));
        types.extend([1, 1]);
    }
    let words = [
        "the", "sea", "of", "and", "to", "in", "is", "fruit", "market", "city", "one", "three",
        "write", "name", "describe", "sentence", "about", "that", "does", "not", "exist", "apple",
        "banana", "blue", "water", "wave", "bird", "red", "green",
    ];
    for w in words {
        tokens.push(format!("▁{w}"));
        types.push(1);
    }
    let mut i = 0usize;
    while tokens.len() < size {
        tokens.push(format!("▁w{i}"));
        types.push(1);
        i += 1;
    }
    tokens.truncate(size);
    types.truncate(size);
    let scores = (0..tokens.len()).map(|i| -((i + 1) as f32).ln()).collect();
    (tokens, scores, types)
}

/// Writes `arch`'s tiny model with a `vocab`-token vocabulary into `dir` as
/// `tiny-<arch>-<vocab>.gguf` (creating `dir`) and returns the file's path.
pub fn write_gguf(dir: &Path, arch: Arch, vocab: usize) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("tiny-{}-{vocab}.gguf", arch.name()));
    let mut rng = Rng(0x5EED ^ (vocab as u64) << 8 ^ arch as u64);
    let tensors = tensors(arch, vocab, &mut rng)?;
    let metadata = metadata(arch, vocab);
    let md: Vec<(&str, &gguf_file::Value)> =
        metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
    gguf_file::write(&mut f, &md, &ts)?;
    Ok(path)
}

fn metadata(arch: Arch, vocab: usize) -> Vec<(String, gguf_file::Value)> {
    use gguf_file::Value as V;
    let a = arch.name();
    let key = |k: &str| format!("{a}.{k}");
    let (tokens, scores, types) = vocabulary(vocab);
    let mut m = vec![
        ("general.architecture".to_string(), V::String(a.into())),
        ("general.name".into(), V::String(general_name(arch))),
        (key("context_length"), V::U32(CONTEXT)),
        (key("embedding_length"), V::U32(HIDDEN as u32)),
        (key("block_count"), V::U32(LAYERS as u32)),
        (key("feed_forward_length"), V::U32(FFN as u32)),
        (key("attention.head_count"), V::U32(HEADS as u32)),
        (key("attention.head_count_kv"), kv_heads_metadata(arch)),
        (key("attention.layer_norm_rms_epsilon"), V::F32(1e-5)),
        (key("attention.layer_norm_epsilon"), V::F32(1e-5)),
        (key("rope.dimension_count"), V::U32(rope_dim(arch) as u32)),
        (key("rope.freq_base"), V::F32(10_000.0)),
        ("tokenizer.ggml.model".into(), V::String("llama".into())),
        (
            "tokenizer.ggml.tokens".into(),
            V::Array(tokens.into_iter().map(V::String).collect()),
        ),
        (
            "tokenizer.ggml.scores".into(),
            V::Array(scores.into_iter().map(V::F32).collect()),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            V::Array(types.into_iter().map(V::I32).collect()),
        ),
        ("tokenizer.ggml.unknown_token_id".into(), V::U32(0)),
        ("tokenizer.ggml.bos_token_id".into(), V::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), V::U32(4)),
        (
            "tokenizer.chat_template".into(),
            V::String(CHAT_TEMPLATE.into()),
        ),
    ];
    m.extend(arch_metadata(arch).into_iter().map(|(k, v)| (key(k), v)));
    m
}

/// `general.name`: 0.9.2 picks DeepSeek-V2's loader (of three for `deepseek2`) by it.
fn general_name(arch: Arch) -> String {
    match arch {
        Arch::DeepSeek2 => "tiny-DeepSeek-V2".into(),
        _ => format!("tiny-{}", arch.name()),
    }
}

/// The keys (under the architecture's prefix) that one architecture adds.
fn arch_metadata(arch: Arch) -> Vec<(&'static str, gguf_file::Value)> {
    use gguf_file::Value as V;
    let u = |n: usize| V::U32(n as u32);
    let mut m = vec![];
    let qwen_or_gemma = matches!(
        arch,
        Arch::Qwen2 | Arch::Qwen3 | Arch::Qwen3Moe | Arch::Gemma | Arch::Gemma2 | Arch::GptOss
    );
    if qwen_or_gemma || arch.delta_net() {
        m.push(("attention.key_length", u(HEAD_DIM)));
        m.push(("attention.value_length", u(HEAD_DIM)));
    }
    if let Some((experts, ffn)) = experts(arch) {
        m.push(("expert_count", u(experts)));
        m.push(("expert_used_count", u(EXPERTS_USED)));
        m.push(("expert_feed_forward_length", u(ffn)));
    }
    if matches!(arch, Arch::Granite | Arch::GraniteMoe | Arch::GraniteHybrid) {
        m.push(("attention.scale", V::F32(1.0 / HEAD_DIM as f32)));
        m.push(("embedding_scale", V::F32(4.0)));
        m.push(("residual_scale", V::F32(0.5)));
        m.push(("logit_scale", V::F32(2.0)));
    }
    m.extend(family_metadata(arch));
    m
}

/// The keys of [`arch_metadata`] that belong to one family alone.
fn family_metadata(arch: Arch) -> Vec<(&'static str, gguf_file::Value)> {
    use gguf_file::Value as V;
    let u = |n: usize| V::U32(n as u32);
    let mut m = vec![];
    match arch {
        Arch::Gemma2 => {
            m.push(("attention.sliding_window", u(1024)));
            m.push(("attn_logit_softcapping", V::F32(50.0)));
            m.push(("final_logit_softcapping", V::F32(30.0)));
        }
        Arch::Glm4Moe => {
            m.push(("expert_shared_count", u(1)));
            m.push(("leading_dense_block_count", u(1)));
            m.push(("expert_weights_norm", V::Bool(true)));
            m.push(("expert_weights_scale", V::F32(1.5)));
        }
        Arch::GptOss => m.push(("attention.sliding_window", u(128))),
        Arch::HunYuanMoe => m.push(("expert_shared_count", u(1))),
        Arch::GraniteHybrid => {
            m.push(("ssm.conv_kernel", u(SSM_CONV)));
            m.push(("ssm.inner_size", u(SSM_INNER)));
            m.push(("ssm.state_size", u(SSM_STATE)));
            m.push(("ssm.time_step_rank", u(SSM_HEADS)));
            m.push(("ssm.group_count", u(1)));
            m.push(("expert_shared_feed_forward_length", u(FFN)));
        }
        _ if arch.delta_net() => {
            if arch == Arch::Qwen35 {
                // Three M-RoPE sections spanning the rotary half of each head (2 · 4).
                let sections = [2, 1, 1, 0].map(|n: u32| V::U32(n)).to_vec();
                m.push(("rope.dimension_sections", V::Array(sections)));
            } else {
                m.push(("expert_shared_feed_forward_length", u(HIDDEN)));
            }
            m.push(("full_attention_interval", u(2)));
            m.push(("ssm.conv_kernel", u(SSM_CONV)));
            m.push(("ssm.inner_size", u(GDN_V_HEADS * GDN_DIM)));
            m.push(("ssm.state_size", u(GDN_DIM)));
            m.push(("ssm.group_count", u(GDN_K_HEADS)));
            m.push(("ssm.time_step_rank", u(GDN_V_HEADS)));
        }
        Arch::DeepSeek2 => {
            m.push(("attention.kv_lora_rank", u(MLA_RANK)));
            m.push(("attention.key_length_mla", u(MLA_NOPE + MLA_ROPE)));
            m.push(("attention.value_length_mla", u(MLA_V)));
            m.push(("expert_shared_count", u(1)));
            m.push(("leading_dense_block_count", u(1)));
            // Softmax.
            m.push(("expert_gating_func", u(1)));
        }
        Arch::Lfm2 => m.push(("shortconv.l_cache", u(CONV_CACHE))),
        Arch::Lfm2Moe => {
            m.push(("shortconv.l_cache", u(CONV_CACHE)));
            m.push(("leading_dense_block_count", u(1)));
            // Sigmoid.
            m.push(("expert_gating_func", u(2)));
        }
        _ => {}
    }
    m
}

/// The routed experts of a mixture-of-experts architecture: how many, and each one's
/// feed-forward size (HunYuan's must equal the dense size; Phi-MoE, Granite and GPT-OSS
/// read the dense size for them).
fn experts(arch: Arch) -> Option<(usize, usize)> {
    match arch {
        Arch::Qwen3Moe
        | Arch::Glm4Moe
        | Arch::Lfm2Moe
        | Arch::DeepSeek2
        | Arch::Qwen3Next
        | Arch::Qwen35Moe => Some((EXPERTS, HIDDEN)),
        Arch::PhiMoe | Arch::GraniteMoe | Arch::GraniteHybrid | Arch::GptOss | Arch::HunYuanMoe => {
            Some((EXPERTS, FFN))
        }
        _ => None,
    }
}

/// Key/value heads: LFM2's and Granite-hybrid's per layer, none in the first (their
/// convolution or Mamba layer).
fn kv_heads_metadata(arch: Arch) -> gguf_file::Value {
    use gguf_file::Value as V;
    if matches!(arch, Arch::Lfm2 | Arch::Lfm2Moe | Arch::GraniteHybrid) {
        V::Array(vec![V::U32(0), V::U32(KV_HEADS as u32)])
    } else {
        V::U32(kv_heads(arch) as u32)
    }
}

/// Phi-2 has no grouped-query attention.
fn kv_heads(arch: Arch) -> usize {
    if arch == Arch::Phi2 {
        HEADS
    } else {
        KV_HEADS
    }
}

/// Phi-2, GLM-4 and Qwen3-Next rotate half of each head (partial rotary), the others all of it.
fn rope_dim(arch: Arch) -> usize {
    if arch == Arch::DeepSeek2 {
        MLA_ROPE
    } else if arch.delta_net() || matches!(arch, Arch::Phi2 | Arch::Glm4 | Arch::Glm4Moe) {
        HEAD_DIM / 2
    } else {
        HEAD_DIM
    }
}

/// The tensors, by name, in the shapes the host's loaders read (candle's order: out, in).
struct Builder<'a> {
    rng: &'a mut Rng,
    out: Vec<(String, QTensor)>,
}

impl Builder<'_> {
    /// A matmul weight in Q8_0, uniform in ±√(3/fan_in)·gain (unit variance out for unit in).
    fn weight(&mut self, name: &str, shape: &[usize], gain: f32) -> anyhow::Result<()> {
        let fan_in = *shape.last().unwrap();
        let scale = (3.0 / fan_in as f32).sqrt() * gain;
        self.raw(name, shape, scale, GgmlDType::Q8_0)
    }

    /// A weight uniform in ±`scale`, in `dtype`.
    fn raw(
        &mut self,
        name: &str,
        shape: &[usize],
        scale: f32,
        dtype: GgmlDType,
    ) -> anyhow::Result<()> {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| self.rng.uniform(scale)).collect();
        let t = Tensor::from_vec(v, shape, &Device::Cpu)?;
        self.out
            .push((name.to_string(), QTensor::quantize(&t, dtype)?));
        Ok(())
    }

    /// A norm's scale (ones) or a bias (zeros), in F32.
    fn fill(&mut self, name: &str, len: usize, value: f32) -> anyhow::Result<()> {
        let t = Tensor::from_vec(vec![value; len], len, &Device::Cpu)?;
        self.out
            .push((name.to_string(), QTensor::quantize(&t, GgmlDType::F32)?));
        Ok(())
    }

    /// A vector of given values, in F32.
    fn values(&mut self, name: &str, v: Vec<f32>) -> anyhow::Result<()> {
        let n = v.len();
        let t = Tensor::from_vec(v, n, &Device::Cpu)?;
        self.out
            .push((name.to_string(), QTensor::quantize(&t, GgmlDType::F32)?));
        Ok(())
    }

    /// A small random bias, in F32.
    fn bias(&mut self, name: &str, len: usize) -> anyhow::Result<()> {
        self.raw(name, &[len], 0.1, GgmlDType::F32)
    }
}

fn tensors(arch: Arch, vocab: usize, rng: &mut Rng) -> anyhow::Result<Vec<(String, QTensor)>> {
    let mut b = Builder { rng, out: vec![] };
    let layer_norm = matches!(arch, Arch::Phi2 | Arch::Starcoder2 | Arch::PhiMoe);
    b.raw("token_embd.weight", &[vocab, HIDDEN], 1.0, GgmlDType::Q8_0)?;
    let lfm = matches!(arch, Arch::Lfm2 | Arch::Lfm2Moe);
    let final_norm = if lfm {
        "token_embd_norm"
    } else {
        "output_norm"
    };
    b.fill(&format!("{final_norm}.weight"), HIDDEN, 1.0)?;
    if layer_norm {
        b.fill("output_norm.bias", HIDDEN, 0.0)?;
    }
    b.raw(
        "output.weight",
        &[vocab, HIDDEN],
        OUTPUT_SCALE,
        GgmlDType::Q8_0,
    )?;
    if matches!(arch, Arch::Phi2 | Arch::PhiMoe) {
        b.bias("output.bias", vocab)?;
    }
    for l in 0..LAYERS {
        let p = format!("blk.{l}");
        if arch.only_on_0_9() {
            newer_layer(&mut b, arch, &p, l)?;
        } else {
            layer(&mut b, arch, &p)?;
        }
    }
    Ok(b.out)
}

fn layer(b: &mut Builder<'_>, arch: Arch, p: &str) -> anyhow::Result<()> {
    let (q, kv) = (HEADS * HEAD_DIM, kv_heads(arch) * HEAD_DIM);
    match arch {
        Arch::Phi2 => {
            b.fill(&format!("{p}.attn_norm.weight"), HIDDEN, 1.0)?;
            b.fill(&format!("{p}.attn_norm.bias"), HIDDEN, 0.0)?;
            linear_with_bias(b, &format!("{p}.attn_qkv"), q + 2 * kv, HIDDEN)?;
            linear_with_bias(b, &format!("{p}.attn_output"), HIDDEN, q)?;
            linear_with_bias(b, &format!("{p}.ffn_up"), FFN, HIDDEN)?;
            linear_with_bias(b, &format!("{p}.ffn_down"), HIDDEN, FFN)?;
        }
        Arch::Phi3 => {
            b.fill(&format!("{p}.attn_norm.weight"), HIDDEN, 1.0)?;
            b.fill(&format!("{p}.ffn_norm.weight"), HIDDEN, 1.0)?;
            b.weight(&format!("{p}.attn_qkv.weight"), &[q + 2 * kv, HIDDEN], 1.0)?;
            b.weight(&format!("{p}.attn_output.weight"), &[HIDDEN, q], 1.0)?;
            b.weight(&format!("{p}.ffn_up.weight"), &[2 * FFN, HIDDEN], 1.0)?;
            b.weight(&format!("{p}.ffn_down.weight"), &[HIDDEN, FFN], 1.0)?;
        }
        Arch::Starcoder2 => {
            for n in ["attn_norm", "ffn_norm"] {
                b.fill(&format!("{p}.{n}.weight"), HIDDEN, 1.0)?;
                b.fill(&format!("{p}.{n}.bias"), HIDDEN, 0.0)?;
            }
            linear_with_bias(b, &format!("{p}.attn_q"), q, HIDDEN)?;
            linear_with_bias(b, &format!("{p}.attn_k"), kv, HIDDEN)?;
            linear_with_bias(b, &format!("{p}.attn_v"), kv, HIDDEN)?;
            linear_with_bias(b, &format!("{p}.attn_output"), HIDDEN, q)?;
            linear_with_bias(b, &format!("{p}.ffn_up"), FFN, HIDDEN)?;
            linear_with_bias(b, &format!("{p}.ffn_down"), HIDDEN, FFN)?;
        }
        _ => llama_like(b, arch, p, q, kv)?,
    }
    Ok(())
}

/// Llama, Mistral3, Qwen2/3 and Qwen3-MoE: RMS norms, separate Q/K/V, gated MLP.
fn llama_like(b: &mut Builder<'_>, arch: Arch, p: &str, q: usize, kv: usize) -> anyhow::Result<()> {
    b.fill(&format!("{p}.attn_norm.weight"), HIDDEN, 1.0)?;
    b.fill(&format!("{p}.ffn_norm.weight"), HIDDEN, 1.0)?;
    b.weight(&format!("{p}.attn_q.weight"), &[q, HIDDEN], 1.0)?;
    b.weight(&format!("{p}.attn_k.weight"), &[kv, HIDDEN], 1.0)?;
    b.weight(&format!("{p}.attn_v.weight"), &[kv, HIDDEN], 1.0)?;
    b.weight(&format!("{p}.attn_output.weight"), &[HIDDEN, q], 1.0)?;
    if arch == Arch::Qwen2 {
        b.bias(&format!("{p}.attn_q.bias"), q)?;
        b.bias(&format!("{p}.attn_k.bias"), kv)?;
        b.bias(&format!("{p}.attn_v.bias"), kv)?;
    }
    if matches!(arch, Arch::Qwen3 | Arch::Qwen3Moe) {
        b.fill(&format!("{p}.attn_q_norm.weight"), HEAD_DIM, 1.0)?;
        b.fill(&format!("{p}.attn_k_norm.weight"), HEAD_DIM, 1.0)?;
    }
    if arch == Arch::Qwen3Moe {
        b.raw(
            &format!("{p}.ffn_gate_inp.weight"),
            &[EXPERTS, HIDDEN],
            0.5,
            GgmlDType::F32,
        )?;
        b.weight(
            &format!("{p}.ffn_gate_exps.weight"),
            &[EXPERTS, HIDDEN, HIDDEN],
            1.0,
        )?;
        b.weight(
            &format!("{p}.ffn_up_exps.weight"),
            &[EXPERTS, HIDDEN, HIDDEN],
            1.0,
        )?;
        b.weight(
            &format!("{p}.ffn_down_exps.weight"),
            &[EXPERTS, HIDDEN, HIDDEN],
            1.0,
        )?;
    } else {
        b.weight(&format!("{p}.ffn_gate.weight"), &[FFN, HIDDEN], 1.0)?;
        b.weight(&format!("{p}.ffn_up.weight"), &[FFN, HIDDEN], 1.0)?;
        b.weight(&format!("{p}.ffn_down.weight"), &[HIDDEN, FFN], 1.0)?;
    }
    Ok(())
}

/// A layer of an architecture only 0.9.2 loads (layer `l` of `p`), under llama.cpp's
/// tensor names.
fn newer_layer(b: &mut Builder<'_>, arch: Arch, p: &str, l: usize) -> anyhow::Result<()> {
    let layer_norm = arch == Arch::PhiMoe;
    let mut norms = vec!["attn_norm", "ffn_norm"];
    match arch {
        Arch::Gemma2 => norms.extend(["post_attention_norm", "post_ffw_norm"]),
        Arch::Glm4 => norms.extend(["post_attention_norm", "post_ffw_norm"]),
        // GPT-OSS and Qwen3-Next name their second norm after attention.
        _ if arch == Arch::GptOss || arch.delta_net() => {
            norms = vec!["attn_norm", "post_attention_norm"]
        }
        _ => {}
    }
    for n in norms {
        b.fill(&format!("{p}.{n}.weight"), HIDDEN, 1.0)?;
        if layer_norm {
            b.fill(&format!("{p}.{n}.bias"), HIDDEN, 0.0)?;
        }
    }
    match arch {
        Arch::Lfm2 | Arch::Lfm2Moe if l == 0 => short_conv(b, p)?,
        Arch::DeepSeek2 => latent_attention(b, p)?,
        Arch::GraniteHybrid if l == 0 => mamba2(b, p)?,
        _ if arch.delta_net() && l == 0 => delta_net(b, arch, p)?,
        _ => newer_attention(b, arch, p)?,
    }
    newer_feed_forward(b, arch, p, l)
}

/// LFM2's short convolution: in (B, C, x), the depthwise kernel, out.
fn short_conv(b: &mut Builder<'_>, p: &str) -> anyhow::Result<()> {
    b.weight(
        &format!("{p}.shortconv.in_proj.weight"),
        &[3 * HIDDEN, HIDDEN],
        1.0,
    )?;
    b.raw(
        &format!("{p}.shortconv.conv.weight"),
        &[HIDDEN, CONV_CACHE],
        0.5,
        GgmlDType::F32,
    )?;
    b.weight(
        &format!("{p}.shortconv.out_proj.weight"),
        &[HIDDEN, HIDDEN],
        1.0,
    )
}

/// Grouped-query attention with each family's biases, Q/K norms and sinks.
fn newer_attention(b: &mut Builder<'_>, arch: Arch, p: &str) -> anyhow::Result<()> {
    let (q, kv) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    // Qwen3-Next's query projection also gives the attention output's gate.
    let q_rows = if arch.delta_net() { 2 * q } else { q };
    let qkv_bias = matches!(
        arch,
        Arch::PhiMoe | Arch::Glm4 | Arch::Glm4Moe | Arch::GptOss
    );
    let o_bias = matches!(arch, Arch::PhiMoe | Arch::GptOss);
    for (n, rows) in [("attn_q", q_rows), ("attn_k", kv), ("attn_v", kv)] {
        b.weight(&format!("{p}.{n}.weight"), &[rows, HIDDEN], 1.0)?;
        if qkv_bias {
            b.bias(&format!("{p}.{n}.bias"), rows)?;
        }
    }
    b.weight(&format!("{p}.attn_output.weight"), &[HIDDEN, q], 1.0)?;
    if o_bias {
        b.bias(&format!("{p}.attn_output.bias"), HIDDEN)?;
    }
    let qk_norm = matches!(
        arch,
        Arch::Glm4Moe | Arch::HunYuanDense | Arch::HunYuanMoe | Arch::Lfm2 | Arch::Lfm2Moe
    );
    if qk_norm || arch.delta_net() {
        b.fill(&format!("{p}.attn_q_norm.weight"), HEAD_DIM, 1.0)?;
        b.fill(&format!("{p}.attn_k_norm.weight"), HEAD_DIM, 1.0)?;
    }
    if arch == Arch::GptOss {
        b.raw(
            &format!("{p}.attn_sinks.weight"),
            &[HEADS],
            1.0,
            GgmlDType::F32,
        )?;
    }
    Ok(())
}

/// DeepSeek-V2's latent attention (no query compression, as in V2-Lite), with the
/// key/value up-projection split per head as llama.cpp writes it.
fn latent_attention(b: &mut Builder<'_>, p: &str) -> anyhow::Result<()> {
    let q = HEADS * (MLA_NOPE + MLA_ROPE);
    b.weight(&format!("{p}.attn_q.weight"), &[q, HIDDEN], 1.0)?;
    b.weight(
        &format!("{p}.attn_kv_a_mqa.weight"),
        &[MLA_RANK + MLA_ROPE, HIDDEN],
        1.0,
    )?;
    b.fill(&format!("{p}.attn_kv_a_norm.weight"), MLA_RANK, 1.0)?;
    b.weight(
        &format!("{p}.attn_k_b.weight"),
        &[HEADS, MLA_RANK, MLA_NOPE],
        1.0,
    )?;
    b.weight(
        &format!("{p}.attn_v_b.weight"),
        &[HEADS, MLA_V, MLA_RANK],
        1.0,
    )?;
    b.weight(
        &format!("{p}.attn_output.weight"),
        &[HIDDEN, HEADS * MLA_V],
        1.0,
    )
}

/// A Mamba-2 mixer under llama.cpp's names: the input projection (z, x·B·C, dt), the
/// depthwise convolution, dt's bias, A (negative: 0.9.2 stores log(−A)), D, the gated
/// norm and the output projection.
fn mamba2(b: &mut Builder<'_>, p: &str) -> anyhow::Result<()> {
    let conv = SSM_INNER + 2 * SSM_STATE;
    b.weight(
        &format!("{p}.ssm_in.weight"),
        &[SSM_INNER + conv + SSM_HEADS, HIDDEN],
        1.0,
    )?;
    b.raw(
        &format!("{p}.ssm_conv1d.weight"),
        &[conv, SSM_CONV],
        0.5,
        GgmlDType::F32,
    )?;
    b.bias(&format!("{p}.ssm_conv1d.bias"), conv)?;
    b.bias(&format!("{p}.ssm_dt.bias"), SSM_HEADS)?;
    let a: Vec<f32> = (0..SSM_HEADS).map(|h| -1.0 - h as f32 * 0.5).collect();
    b.values(&format!("{p}.ssm_a"), a)?;
    b.fill(&format!("{p}.ssm_d"), SSM_HEADS, 1.0)?;
    b.fill(&format!("{p}.ssm_norm.weight"), SSM_INNER, 1.0)?;
    b.weight(&format!("{p}.ssm_out.weight"), &[HIDDEN, SSM_INNER], 1.0)
}

/// A gated delta net under llama.cpp's names: Q·K·V, the output gate (z), β and α
/// (one tensor on Qwen3-Next, two on Qwen3.5), the depthwise convolution, dt's bias, A
/// (negative), the gated norm and the output projection.
fn delta_net(b: &mut Builder<'_>, arch: Arch, p: &str) -> anyhow::Result<()> {
    let value = GDN_V_HEADS * GDN_DIM;
    let conv = 2 * GDN_K_HEADS * GDN_DIM + value;
    b.weight(&format!("{p}.attn_qkv.weight"), &[conv, HIDDEN], 1.0)?;
    b.weight(&format!("{p}.attn_gate.weight"), &[value, HIDDEN], 1.0)?;
    if arch == Arch::Qwen3Next {
        b.weight(
            &format!("{p}.ssm_ba.weight"),
            &[2 * GDN_V_HEADS, HIDDEN],
            1.0,
        )?;
    } else {
        b.weight(&format!("{p}.ssm_beta.weight"), &[GDN_V_HEADS, HIDDEN], 1.0)?;
        b.weight(
            &format!("{p}.ssm_alpha.weight"),
            &[GDN_V_HEADS, HIDDEN],
            1.0,
        )?;
    }
    b.raw(
        &format!("{p}.ssm_conv1d.weight"),
        &[conv, SSM_CONV],
        0.5,
        GgmlDType::F32,
    )?;
    b.bias(&format!("{p}.ssm_dt.bias"), GDN_V_HEADS)?;
    let a: Vec<f32> = (0..GDN_V_HEADS).map(|h| -1.0 - h as f32 * 0.5).collect();
    b.values(&format!("{p}.ssm_a"), a)?;
    b.fill(&format!("{p}.ssm_norm.weight"), GDN_DIM, 1.0)?;
    b.weight(&format!("{p}.ssm_out.weight"), &[HIDDEN, value], 1.0)
}

/// The feed-forward tensors of [`newer_layer`]: dense, or routed experts (with a shared
/// one for GLM-4-MoE and HunYuan-MoE).
fn newer_feed_forward(b: &mut Builder<'_>, arch: Arch, p: &str, l: usize) -> anyhow::Result<()> {
    // GLM-4-MoE's, LFM2-MoE's and DeepSeek-V2's first layer is dense.
    let leading_dense = matches!(arch, Arch::Glm4Moe | Arch::Lfm2Moe | Arch::DeepSeek2);
    let dense = experts(arch).is_none() || (leading_dense && l == 0);
    if dense {
        if arch == Arch::Glm4 {
            // GLM-4's gate and up are one tensor.
            b.weight(&format!("{p}.ffn_up.weight"), &[2 * FFN, HIDDEN], 1.0)?;
        } else {
            b.weight(&format!("{p}.ffn_gate.weight"), &[FFN, HIDDEN], 1.0)?;
            b.weight(&format!("{p}.ffn_up.weight"), &[FFN, HIDDEN], 1.0)?;
        }
        return b.weight(&format!("{p}.ffn_down.weight"), &[HIDDEN, FFN], 1.0);
    }
    routed_experts(b, arch, p)
}

/// Routed experts (router, stacked gate/up/down, GPT-OSS's biases, a score bias) and the
/// shared expert of the families that have one.
fn routed_experts(b: &mut Builder<'_>, arch: Arch, p: &str) -> anyhow::Result<()> {
    let (n, ffn) = experts(arch).expect("a mixture of experts");
    b.raw(
        &format!("{p}.ffn_gate_inp.weight"),
        &[n, HIDDEN],
        0.5,
        GgmlDType::F32,
    )?;
    let with_bias = arch == Arch::GptOss;
    if with_bias {
        b.bias(&format!("{p}.ffn_gate_inp.bias"), n)?;
    }
    for (name, shape) in [
        ("ffn_gate_exps", [n, ffn, HIDDEN]),
        ("ffn_up_exps", [n, ffn, HIDDEN]),
        ("ffn_down_exps", [n, HIDDEN, ffn]),
    ] {
        b.weight(&format!("{p}.{name}.weight"), &shape, 1.0)?;
        if with_bias {
            b.raw(
                &format!("{p}.{name}.bias"),
                &shape[..2],
                0.1,
                GgmlDType::F32,
            )?;
        }
    }
    if matches!(arch, Arch::Glm4Moe | Arch::Lfm2Moe) {
        b.raw(&format!("{p}.exp_probs_b.bias"), &[n], 0.1, GgmlDType::F32)?;
    }
    if matches!(
        arch,
        Arch::Glm4Moe
            | Arch::HunYuanMoe
            | Arch::DeepSeek2
            | Arch::GraniteHybrid
            | Arch::Qwen3Next
            | Arch::Qwen35Moe
    ) {
        b.weight(&format!("{p}.ffn_gate_shexp.weight"), &[ffn, HIDDEN], 1.0)?;
        b.weight(&format!("{p}.ffn_up_shexp.weight"), &[ffn, HIDDEN], 1.0)?;
        b.weight(&format!("{p}.ffn_down_shexp.weight"), &[HIDDEN, ffn], 1.0)?;
    }
    if matches!(arch, Arch::Qwen3Next | Arch::Qwen35Moe) {
        b.raw(
            &format!("{p}.ffn_gate_inp_shexp.weight"),
            &[HIDDEN],
            0.5,
            GgmlDType::F32,
        )?;
    }
    Ok(())
}

fn linear_with_bias(b: &mut Builder<'_>, name: &str, out: usize, inp: usize) -> anyhow::Result<()> {
    b.weight(&format!("{name}.weight"), &[out, inp], 1.0)?;
    b.bias(&format!("{name}.bias"), out)
}

/// Writes a tiny random-weight Llama model in Hugging Face's layout into `dir`:
/// `config.json`, `model.safetensors` (F32), `tokenizer.json` (a SentencePiece-shaped
/// vocabulary of `vocab` tokens) and `tokenizer_config.json` (ChatML). Returns `dir`.
pub fn write_plain_llama(dir: &Path, vocab: usize) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    candle_core::safetensors::save(&plain_tensors(vocab)?, dir.join("model.safetensors"))?;
    std::fs::write(dir.join("config.json"), plain_config(vocab).to_string())?;
    std::fs::write(
        dir.join("tokenizer.json"),
        byte_fallback_tokenizer(vocab).to_string(),
    )?;
    let tokenizer_config = serde_json::json!({
        "chat_template": CHAT_TEMPLATE,
        "bos_token": CONTROL[1],
        "eos_token": CONTROL[4],
        "unk_token": CONTROL[0],
        "add_bos_token": false,
        "add_eos_token": false,
    });
    std::fs::write(
        dir.join("tokenizer_config.json"),
        tokenizer_config.to_string(),
    )?;
    Ok(dir.to_path_buf())
}

/// The Llama weights under Hugging Face's names, F32.
fn plain_tensors(vocab: usize) -> anyhow::Result<std::collections::HashMap<String, Tensor>> {
    let mut w = PlainWeights {
        rng: Rng(0x1A3A ^ vocab as u64),
        out: std::collections::HashMap::new(),
    };
    w.put("model.embed_tokens.weight", &[vocab, HIDDEN], Some(1.0))?;
    w.put("model.norm.weight", &[HIDDEN], None)?;
    w.put("lm_head.weight", &[vocab, HIDDEN], Some(OUTPUT_SCALE))?;
    let unit = |fan_in: usize| Some((3.0 / fan_in as f32).sqrt());
    let (q, kv) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        w.put(&format!("{p}.input_layernorm.weight"), &[HIDDEN], None)?;
        w.put(
            &format!("{p}.post_attention_layernorm.weight"),
            &[HIDDEN],
            None,
        )?;
        w.put(
            &format!("{p}.self_attn.q_proj.weight"),
            &[q, HIDDEN],
            unit(HIDDEN),
        )?;
        w.put(
            &format!("{p}.self_attn.k_proj.weight"),
            &[kv, HIDDEN],
            unit(HIDDEN),
        )?;
        w.put(
            &format!("{p}.self_attn.v_proj.weight"),
            &[kv, HIDDEN],
            unit(HIDDEN),
        )?;
        w.put(
            &format!("{p}.self_attn.o_proj.weight"),
            &[HIDDEN, q],
            unit(q),
        )?;
        w.put(
            &format!("{p}.mlp.gate_proj.weight"),
            &[FFN, HIDDEN],
            unit(HIDDEN),
        )?;
        w.put(
            &format!("{p}.mlp.up_proj.weight"),
            &[FFN, HIDDEN],
            unit(HIDDEN),
        )?;
        w.put(
            &format!("{p}.mlp.down_proj.weight"),
            &[HIDDEN, FFN],
            unit(FFN),
        )?;
    }
    Ok(w.out)
}

/// The weights of a plain model as they are drawn.
struct PlainWeights {
    rng: Rng,
    out: std::collections::HashMap<String, Tensor>,
}

impl PlainWeights {
    /// A tensor uniform in ±`scale`, or ones (a norm's scale) for `None`.
    fn put(&mut self, name: &str, shape: &[usize], scale: Option<f32>) -> anyhow::Result<()> {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = match scale {
            Some(s) => (0..n).map(|_| self.rng.uniform(s)).collect(),
            None => vec![1.0; n],
        };
        self.out
            .insert(name.to_string(), Tensor::from_vec(v, shape, &Device::Cpu)?);
        Ok(())
    }
}

/// The Llama `config.json`.
fn plain_config(vocab: usize) -> serde_json::Value {
    serde_json::json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": FFN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "vocab_size": vocab,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": CONTEXT,
        "hidden_act": "silu",
        "tie_word_embeddings": false,
        "bos_token_id": 1,
        "eos_token_id": 4,
        "torch_dtype": "float32",
    })
}

/// A `tokenizer.json` in the shape Llama-family repositories ship (a BPE model with byte
/// fallback and the `▁` word mark; no merges, so text splits into the vocabulary's single
/// characters), over the vocabulary of [`vocabulary`]. mistral.rs 0.8.1 reads only a
/// `model.vocab` map (a unigram model's list panics its loader), and its llguidance needs
/// a byte-fallback or byte-level decoder.
fn byte_fallback_tokenizer(size: usize) -> serde_json::Value {
    let (tokens, _, _) = vocabulary(size);
    let vocab: serde_json::Map<String, serde_json::Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), serde_json::json!(i)))
        .collect();
    let added: Vec<serde_json::Value> = CONTROL
        .iter()
        .enumerate()
        .map(|(id, c)| {
            serde_json::json!({"id": id, "content": c, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
        ]},
        "pre_tokenizer": null,
        "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}
        ]},
        "model": {"type": "BPE", "dropout": null, "unk_token": CONTROL[0],
            "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": true,
            "byte_fallback": true, "vocab": vocab, "merges": []},
    })
}
