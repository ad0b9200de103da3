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
/// (`pipeline/gguf.rs`). mistral.rs 0.9.2 loads these and 15 more text architectures
/// (`gguf/normal_registry.rs`: gemma, gemma2, phimoe, qwen3next, qwen35, qwen35moe,
/// deepseek2, glm4, glm4moe, smollm3, granite, granitemoe, granitehybrid, lfm2, lfm2moe,
/// and Gemma 3 natively), which are not written here yet (issue #52).
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
}

impl Arch {
    /// Every architecture, in the order the matrix reports them.
    pub const ALL: [Arch; 8] = [
        Arch::Llama,
        Arch::Mistral3,
        Arch::Phi2,
        Arch::Phi3,
        Arch::Qwen2,
        Arch::Qwen3,
        Arch::Qwen3Moe,
        Arch::Starcoder2,
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
        }
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
        ("general.name".into(), V::String(format!("tiny-{a}"))),
        (key("context_length"), V::U32(CONTEXT)),
        (key("embedding_length"), V::U32(HIDDEN as u32)),
        (key("block_count"), V::U32(LAYERS as u32)),
        (key("feed_forward_length"), V::U32(FFN as u32)),
        (key("attention.head_count"), V::U32(HEADS as u32)),
        (
            key("attention.head_count_kv"),
            V::U32(kv_heads(arch) as u32),
        ),
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
    if matches!(arch, Arch::Qwen2 | Arch::Qwen3 | Arch::Qwen3Moe) {
        m.push((key("attention.key_length"), V::U32(HEAD_DIM as u32)));
        m.push((key("attention.value_length"), V::U32(HEAD_DIM as u32)));
    }
    if arch == Arch::Qwen3Moe {
        m.push((key("expert_count"), V::U32(EXPERTS as u32)));
        m.push((key("expert_used_count"), V::U32(EXPERTS_USED as u32)));
        m.push((key("expert_feed_forward_length"), V::U32(HIDDEN as u32)));
    }
    m
}

/// Phi-2 has no grouped-query attention.
fn kv_heads(arch: Arch) -> usize {
    if arch == Arch::Phi2 {
        HEADS
    } else {
        KV_HEADS
    }
}

/// Phi-2 rotates half of each head (partial rotary), the others all of it.
fn rope_dim(arch: Arch) -> usize {
    if arch == Arch::Phi2 {
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

    /// A small random bias, in F32.
    fn bias(&mut self, name: &str, len: usize) -> anyhow::Result<()> {
        self.raw(name, &[len], 0.1, GgmlDType::F32)
    }
}

fn tensors(arch: Arch, vocab: usize, rng: &mut Rng) -> anyhow::Result<Vec<(String, QTensor)>> {
    let mut b = Builder { rng, out: vec![] };
    let layer_norm = matches!(arch, Arch::Phi2 | Arch::Starcoder2);
    b.raw("token_embd.weight", &[vocab, HIDDEN], 1.0, GgmlDType::Q8_0)?;
    b.fill("output_norm.weight", HIDDEN, 1.0)?;
    if layer_norm {
        b.fill("output_norm.bias", HIDDEN, 0.0)?;
    }
    b.raw(
        "output.weight",
        &[vocab, HIDDEN],
        OUTPUT_SCALE,
        GgmlDType::Q8_0,
    )?;
    if arch == Arch::Phi2 {
        b.bias("output.bias", vocab)?;
    }
    for l in 0..LAYERS {
        layer(&mut b, arch, &format!("blk.{l}"))?;
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
