//! The evaluation's own forward pass on candle's tensor ops, for the architectures of
//! its models: Gemma 3 (the second model), Llama (the embedded SmolLM2, as a one-pass
//! judge beside the engine) and Qwen2 (Qwen2.5-Coder, a larger judge).
//!
//! Why not candle-transformers' quantized models: its `quantized_gemma3` applies SiLU in
//! the feed-forward gate where Gemma 3 applies GELU (tanh form) (candle issue #3745, open
//! in 0.10.2 and 0.11), and both it and `quantized_llama` return the last position's
//! logits only, one sequence at a time. Here every weight is dequantized to f32 once at
//! load (about 1.1 GB for Gemma 3 270M), so that many rows decode as one matrix product
//! per weight, and a teacher-forced judgement is one pass over the whole text.

use std::io::{Read, Seek};

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Result, Tensor};
use candle_nn::ops::{rms_norm, softmax_last_dim};
use candle_nn::rotary_emb::{rope, rope_i};

/// The feed-forward gate's activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// Gemma 3's (`gelu_pytorch_tanh`).
    GeluTanh,
    /// SiLU, as candle-transformers 0.10.2's `quantized_gemma3` applies it: kept so that a
    /// test can check this forward against that one.
    Silu,
}

/// The architectures this pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Gemma 3: embeddings scaled by √d, q/k norms, norms after attention and
    /// feed-forward too, GELU, sliding-window layers, rotary halves (NeoX order).
    Gemma3,
    /// Llama (SmolLM2): pre-norms only, SiLU, every layer global, rotary pairs
    /// interleaved (GGUF's converter permutes q and k for it).
    Llama,
    /// Qwen2 (Qwen2.5): Llama's layout with biases on q, k and v, and rotary halves
    /// (NeoX order: GGUF's converter does not permute q and k for it, and llama.cpp
    /// rotates it so).
    Qwen2,
}

/// The shape of the model, from the GGUF metadata.
#[derive(Clone, Copy, Debug)]
struct Shape {
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    eps: f32,
    /// Sliding-window layers see the keys of the last `window` positions.
    window: usize,
}

struct Layer {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    o: Tensor,
    gate: Tensor,
    up: Tensor,
    down: Tensor,
    attn_norm: Tensor,
    ffn_norm: Tensor,
    /// Gemma 3's q/k norms and its norms after attention and after the feed-forward.
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    post_attn_norm: Option<Tensor>,
    post_ffn_norm: Option<Tensor>,
    /// Qwen2's biases of the q, k and v projections.
    q_bias: Option<Tensor>,
    k_bias: Option<Tensor>,
    v_bias: Option<Tensor>,
    /// A sliding-window layer (local RoPE base); the others attend to every position.
    sliding: bool,
}

/// A model with f32 weights on the CPU.
pub struct Net {
    arch: Arch,
    /// The token embeddings, also the output projection (tied), [V, d].
    embed: Tensor,
    output: Option<Tensor>,
    layers: Vec<Layer>,
    norm: Tensor,
    shape: Shape,
    /// The RoPE frequencies of the sliding-window layers and of the global ones.
    inv_freq: [Vec<f32>; 2],
    activation: Activation,
    device: Device,
}

/// The keys and values of a batch of sequences of one length (each layer's
/// [rows, kv heads, length, head dim]). Sequences that started shorter are padded on the
/// left ([`Net::forward_padded`]): each row's pad positions, which its real positions do
/// not see.
#[derive(Clone, Default)]
pub struct Cache {
    kv: Vec<(Tensor, Tensor)>,
    len: usize,
    /// Per row, the pad positions at its start (empty: no row is padded).
    pads: Vec<usize>,
}

impl Cache {
    /// The positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// This one-row cache as `rows` identical rows (a prompt decoded once, then sampled
    /// many times).
    pub fn repeat(&self, rows: usize) -> Result<Cache> {
        let rep = |t: &Tensor| t.repeat((rows, 1, 1, 1));
        let kv = self
            .kv
            .iter()
            .map(|(k, v)| Ok((rep(k)?, rep(v)?)))
            .collect::<Result<_>>()?;
        let pads = match self.pads.first() {
            Some(&p) => vec![p; rows],
            None => vec![],
        };
        Ok(Cache {
            kv,
            len: self.len,
            pads,
        })
    }

    /// Keeps the rows `rows` (in that order; a row named twice is copied), dropping the
    /// others.
    pub fn keep(&mut self, rows: &[usize]) -> Result<()> {
        if !self.pads.is_empty() {
            self.pads = rows.iter().map(|&r| self.pads[r]).collect();
        }
        let Some((k0, _)) = self.kv.first() else {
            return Ok(());
        };
        let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        let idx = Tensor::new(idx.as_slice(), k0.device())?;
        for (k, v) in &mut self.kv {
            *k = k.index_select(&idx, 0)?;
            *v = v.index_select(&idx, 0)?;
        }
        Ok(())
    }
}

/// The shape, the sliding-window pattern, the RoPE bases (local, global) and the block
/// count from a GGUF file's metadata.
fn read_shape(ct: &Content, arch: Arch) -> Result<(Shape, usize, [f32; 2], usize)> {
    let prefix = match arch {
        Arch::Gemma3 => "gemma3",
        Arch::Llama => "llama",
        Arch::Qwen2 => "qwen2",
    };
    let key = |k: &str| {
        let k = format!("{prefix}.{k}");
        (ct.metadata.get(&k))
            .ok_or_else(|| candle_core::Error::Msg(format!("the GGUF file has no {k}")))
    };
    let usize_of = |k: &str| -> Result<usize> { Ok(key(k)?.to_u32()? as usize) };
    let n_head = usize_of("attention.head_count")?;
    let d = usize_of("embedding_length")?;
    let shape = Shape {
        n_head,
        n_kv_head: usize_of("attention.head_count_kv")?,
        head_dim: usize_of("attention.key_length").unwrap_or(d / n_head),
        eps: key("attention.layer_norm_rms_epsilon")?.to_f32()?,
        window: usize_of("attention.sliding_window").unwrap_or(usize::MAX),
    };
    // Gemma 3 alternates five sliding-window layers with one global one; the RoPE base
    // is 10,000 on the first, the file's (1e6) on the second. Llama's and Qwen2's layers
    // are all global. No model here has RoPE scaling: a file that asks for one is refused
    // rather than run wrongly.
    let pattern = key("attention.sliding_window_type").map_or(Ok(6), |v| v.to_u32())? as usize;
    let global_base = key("rope.freq_base").map_or(Ok(10_000.0), |v| v.to_f32())?;
    let local_base = key("rope.local_freq_base").map_or(Ok(10_000.0), |v| v.to_f32())?;
    if key("rope.scaling.factor").is_ok_and(|v| v.to_f32().is_ok_and(|f| f != 1.0)) {
        candle_core::bail!("RoPE scaling is not supported");
    }
    let blocks = usize_of("block_count")?;
    Ok((shape, pattern, [local_base, global_base], blocks))
}

fn rope_frequencies(head_dim: usize, base: f32) -> Vec<f32> {
    (0..head_dim / 2)
        .map(|i| 1.0 / base.powf(2.0 * i as f32 / head_dim as f32))
        .collect()
}

impl Net {
    /// Loads a GGUF file of architecture `gemma3`, `llama` or `qwen2`, dequantizing every tensor;
    /// the feed-forward activation is the architecture's own unless `activation` says.
    pub fn load<R: Read + Seek>(
        ct: &Content,
        r: &mut R,
        activation: Option<Activation>,
    ) -> Result<Net> {
        let arch = match ct
            .metadata
            .get("general.architecture")
            .map(|v| v.to_string())
        {
            Some(Ok(a)) if a == "gemma3" => Arch::Gemma3,
            Some(Ok(a)) if a == "llama" => Arch::Llama,
            Some(Ok(a)) if a == "qwen2" => Arch::Qwen2,
            _ => candle_core::bail!("a gemma3, llama or qwen2 GGUF file was expected"),
        };
        let (shape, pattern, [local_base, global_base], blocks) = read_shape(ct, arch)?;
        let device = Device::Cpu;
        let mut get = |name: &str| ct.tensor(r, name, &device)?.dequantize(&device);
        let embed = get("token_embd.weight")?;
        let output = match ct.tensor_infos.contains_key("output.weight") {
            true => Some(get("output.weight")?),
            false => None,
        };
        let norm = get("output_norm.weight")?;
        let sliding = |i: usize| arch == Arch::Gemma3 && !(i + 1).is_multiple_of(pattern);
        let layers = (0..blocks)
            .map(|i| Layer::load(&mut get, i, arch, sliding(i)))
            .collect::<Result<_>>()?;
        let own = match arch {
            Arch::Gemma3 => Activation::GeluTanh,
            Arch::Llama | Arch::Qwen2 => Activation::Silu,
        };
        Ok(Net {
            arch,
            embed,
            output,
            layers,
            norm,
            shape,
            inv_freq: [
                rope_frequencies(shape.head_dim, local_base),
                rope_frequencies(shape.head_dim, global_base),
            ],
            activation: activation.unwrap_or(own),
            device,
        })
    }

    /// The architecture.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.embed.dims()[0]
    }

    /// The final hidden states (after the output norm), [rows · s, d], of `ids`: `rows`
    /// sequences of `s = ids.len() / rows` tokens each, row-major, continuing the
    /// sequences in `cache` (empty: they start here), which takes their keys and values.
    pub fn forward(&self, ids: &[u32], rows: usize, cache: &mut Cache) -> Result<Tensor> {
        let s = ids.len() / rows.max(1);
        if rows == 0 || s * rows != ids.len() {
            candle_core::bail!("{} ids are not {rows} rows of one length", ids.len());
        }
        let d = self.embed.dims()[1];
        let ids = Tensor::new(ids, &self.device)?;
        let mut x = self.embed.index_select(&ids, 0)?;
        if self.arch == Arch::Gemma3 {
            x = (x * (d as f64).sqrt())?;
        }
        let start = cache.len;
        let ropes = [self.rope(0, start, s)?, self.rope(1, start, s)?];
        let n_rep = self.shape.n_head / self.shape.n_kv_head;
        let masks = match cache.pads.iter().any(|&p| p > 0) {
            false => [
                mask(start, s, Some(self.shape.window), n_rep, &self.device)?,
                mask(start, s, None, n_rep, &self.device)?,
            ],
            true => [
                padded_mask(
                    (start, s),
                    Some(self.shape.window),
                    n_rep,
                    &cache.pads,
                    &self.device,
                )?,
                padded_mask((start, s), None, n_rep, &cache.pads, &self.device)?,
            ],
        };
        for (i, l) in self.layers.iter().enumerate() {
            let g = usize::from(!l.sliding);
            let h = rms_norm(&x, &l.attn_norm, self.shape.eps)?;
            let kv = cache.kv.get(i);
            let past = Past {
                kv,
                rope: &ropes[g],
                mask: masks[g].as_ref(),
            };
            let (a, k, v) = self.attend(l, &h, (rows, s), past)?;
            match cache.kv.get_mut(i) {
                Some(slot) => *slot = (k, v),
                None => cache.kv.push((k, v)),
            }
            x = (x + self.norm_opt(a, l.post_attn_norm.as_ref())?)?;
            let h = rms_norm(&x, &l.ffn_norm, self.shape.eps)?;
            let gate = h.matmul(&l.gate.t()?)?;
            let gate = match self.activation {
                Activation::GeluTanh => gate.gelu()?,
                Activation::Silu => candle_nn::ops::silu(&gate)?,
            };
            let m = (gate * h.matmul(&l.up.t()?)?)?.matmul(&l.down.t()?)?;
            x = (x + self.norm_opt(m, l.post_ffn_norm.as_ref())?)?;
        }
        cache.len += s;
        rms_norm(&x, &self.norm, self.shape.eps)
    }

    /// The final hidden state after each of `prompts` (one row each, [rows, d]), read as
    /// one batch: the shorter ones padded on the left with token `pad`, which the real
    /// positions do not see (`cache` takes the pads). RoPE sees only relative positions,
    /// so each row reads as it would alone, up to the rounding of a bigger product.
    pub fn forward_padded(
        &self,
        prompts: &[&[u32]],
        pad: u32,
        cache: &mut Cache,
    ) -> Result<Tensor> {
        let len = prompts.iter().map(|p| p.len()).max().unwrap_or(0);
        if len == 0 || !cache.is_empty() {
            candle_core::bail!("padded rows start a fresh cache from non-empty prompts");
        }
        cache.pads = prompts.iter().map(|p| len - p.len()).collect();
        let ids: Vec<u32> = prompts
            .iter()
            .flat_map(|p| std::iter::repeat_n(pad, len - p.len()).chain(p.iter().copied()))
            .collect();
        let h = self.forward(&ids, prompts.len(), cache)?;
        let last: Vec<u32> = (0..prompts.len())
            .map(|r| (r * len + len - 1) as u32)
            .collect();
        h.index_select(&Tensor::new(last.as_slice(), &self.device)?, 0)
    }

    /// One pass over `context` and `cont`: `each(logits, token)` for every token of `cont`
    /// in order, with the logits before it (teacher-forced).
    pub fn forced(
        &self,
        context: &[u32],
        cont: &[u32],
        mut each: impl FnMut(&[f32], u32) -> Result<()>,
    ) -> Result<()> {
        self.forced_blocks(context, cont, |rows, tokens| {
            rows.iter()
                .zip(tokens)
                .try_for_each(|(row, &c)| each(row, c))
        })
    }

    /// [`Net::forced`] a block of up to 64 positions at a time: `each(logits, tokens)`.
    fn forced_blocks(
        &self,
        context: &[u32],
        cont: &[u32],
        mut each: impl FnMut(&[Vec<f32>], &[u32]) -> Result<()>,
    ) -> Result<()> {
        let Some((_, forced)) = cont.split_last() else {
            return Ok(());
        };
        if context.is_empty() {
            candle_core::bail!("a forced pass needs a context of at least one token");
        }
        // The hidden state before each continuation token: the context's last and the
        // continuation's but its last.
        let first = context.len() - 1;
        let ids = [context, forced].concat();
        let h = self.forward(&ids, 1, &mut Cache::default())?;
        let h = h.narrow(0, first, cont.len())?;
        // In blocks: a row of Gemma's logits is 1 MB.
        for (b, chunk) in cont.chunks(64).enumerate() {
            let rows: Vec<Vec<f32>> = self.logits(&h.narrow(0, b * 64, chunk.len())?)?.to_vec2()?;
            each(&rows, chunk)?;
        }
        Ok(())
    }

    /// The log-probability of each token of `cont` after `context`, teacher-forced in one
    /// pass ([`Net::forced`]): the judgement both one-pass judges give. Each position's
    /// normaliser (a sum of exponentials over the vocabulary, in `f64`: a third of a
    /// Gemma judgement when done on one core) is computed on every core, a position per
    /// task, so the values are the sequential ones bit for bit.
    pub fn forced_logprobs(&self, context: &[u32], cont: &[u32]) -> Result<Vec<f64>> {
        use rayon::prelude::*;
        let mut out = Vec::with_capacity(cont.len());
        self.forced_blocks(context, cont, |rows, tokens| {
            let lps: Vec<Option<f64>> = rows
                .par_iter()
                .zip(tokens)
                .map(|(row, &c)| {
                    let lse = crate::metrics::log_sum_exp(row, 1.0)?;
                    let v = row[c as usize];
                    Some(if v.is_finite() {
                        v as f64 - lse
                    } else {
                        f64::NEG_INFINITY
                    })
                })
                .collect();
            for lp in lps {
                out.push(lp.ok_or_else(|| {
                    candle_core::Error::Msg("the judge's logits have no finite value".into())
                })?);
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// `x` through the norm `w` where the architecture has one.
    fn norm_opt(&self, x: Tensor, w: Option<&Tensor>) -> Result<Tensor> {
        match w {
            Some(w) => rms_norm(&x.contiguous()?, w, self.shape.eps),
            None => Ok(x),
        }
    }

    /// The logits of hidden states `h` ([n, d] → [n, V]).
    pub fn logits(&self, h: &Tensor) -> Result<Tensor> {
        h.matmul(&self.output.as_ref().unwrap_or(&self.embed).t()?)
    }

    /// cos and sin of RoPE for positions `start..start + s` ([s, head dim / 2] each).
    fn rope(&self, which: usize, start: usize, s: usize) -> Result<(Tensor, Tensor)> {
        let f = &self.inv_freq[which];
        let angles: Vec<f32> = (start..start + s)
            .flat_map(|p| f.iter().map(move |w| p as f32 * w))
            .collect();
        let angles = Tensor::from_vec(angles, (s, f.len()), &self.device)?;
        Ok((angles.cos()?, angles.sin()?))
    }

    /// One layer's attention over `h` ([rows · s, d]) after what `past` holds: the output
    /// ([rows · s, d]) and the keys and values now held.
    fn attend(
        &self,
        l: &Layer,
        h: &Tensor,
        (rows, s): (usize, usize),
        Past {
            kv,
            rope: (cos, sin),
            mask,
        }: Past<'_>,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let Shape {
            n_head,
            n_kv_head,
            head_dim,
            eps,
            ..
        } = self.shape;
        // [rows, heads, s, head dim]
        let heads = |w: &Tensor, b: Option<&Tensor>, n: usize| -> Result<Tensor> {
            let x = h.matmul(&w.t()?)?;
            let x = match b {
                Some(b) => x.broadcast_add(b)?,
                None => x,
            };
            x.reshape((rows, s, n, head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let rotate = |x: Tensor, norm: Option<&Tensor>| -> Result<Tensor> {
            let x = match norm {
                Some(w) => rms_norm(&x, w, eps)?,
                None => x,
            };
            match self.arch {
                Arch::Gemma3 | Arch::Qwen2 => rope(&x, cos, sin),
                Arch::Llama => rope_i(&x, cos, sin),
            }
        };
        let q = rotate(heads(&l.q, l.q_bias.as_ref(), n_head)?, l.q_norm.as_ref())?;
        let k = rotate(
            heads(&l.k, l.k_bias.as_ref(), n_kv_head)?,
            l.k_norm.as_ref(),
        )?;
        let v = heads(&l.v, l.v_bias.as_ref(), n_kv_head)?;
        let (k, v) = match kv {
            Some((ck, cv)) => (Tensor::cat(&[ck, &k], 2)?, Tensor::cat(&[cv, &v], 2)?),
            None => (k, v),
        };
        // The query heads that share a key head, as one block of rows against its keys.
        let n_rep = n_head / n_kv_head;
        let q = q.reshape((rows, n_kv_head, n_rep * s, head_dim))?;
        let scores = (q.matmul(&k.t()?)? / (head_dim as f64).sqrt())?;
        let scores = match mask {
            Some(m) => scores.broadcast_add(m)?,
            None => scores,
        };
        let out = softmax_last_dim(&scores)?
            .matmul(&v)?
            .reshape((rows, n_head, s, head_dim))?
            .transpose(1, 2)?
            .reshape((rows * s, n_head * head_dim))?;
        Ok((out.matmul(&l.o.t()?)?, k, v))
    }
}

/// What a layer's attention reads besides the new rows: the cached keys and values, the
/// rotary tables of the new positions, and the mask (`None`: every key visible).
#[derive(Clone, Copy)]
struct Past<'a> {
    kv: Option<&'a (Tensor, Tensor)>,
    rope: &'a (Tensor, Tensor),
    mask: Option<&'a Tensor>,
}

impl Layer {
    fn load(
        get: &mut impl FnMut(&str) -> Result<Tensor>,
        i: usize,
        arch: Arch,
        sliding: bool,
    ) -> Result<Layer> {
        let mut bias = |n: &str| match arch {
            Arch::Qwen2 => get(&format!("blk.{i}.{n}.bias")).map(Some),
            Arch::Gemma3 | Arch::Llama => Ok(None),
        };
        let (q_bias, k_bias, v_bias) = (bias("attn_q")?, bias("attn_k")?, bias("attn_v")?);
        let mut w = |n: &str| get(&format!("blk.{i}.{n}.weight"));
        let mut gemma = |n: &str| match arch {
            Arch::Gemma3 => w(n).map(Some),
            Arch::Llama | Arch::Qwen2 => Ok(None),
        };
        Ok(Layer {
            q_bias,
            k_bias,
            v_bias,
            q_norm: gemma("attn_q_norm")?,
            k_norm: gemma("attn_k_norm")?,
            post_attn_norm: gemma("post_attention_norm")?,
            post_ffn_norm: gemma("post_ffw_norm")?,
            q: w("attn_q")?,
            k: w("attn_k")?,
            v: w("attn_v")?,
            o: w("attn_output")?,
            gate: w("ffn_gate")?,
            up: w("ffn_up")?,
            down: w("ffn_down")?,
            attn_norm: w("attn_norm")?,
            ffn_norm: w("ffn_norm")?,
            sliding,
        })
    }
}

/// Whether the query at position `p` sees the key at `j`: causal, and within the last
/// `window` positions on a sliding-window layer (as Hugging Face's Gemma 3 and llama.cpp
/// count it: `p - j < window`).
fn visible(p: usize, j: usize, window: Option<usize>) -> bool {
    j <= p && window.is_none_or(|w| p - j < w)
}

/// The additive mask ([n_rep · s, start + s]: 0 or −∞) of queries at positions
/// `start..start + s` against keys `0..start + s`, repeated for the `n_rep` query heads
/// of a key head; `None` when it masks nothing (one new position inside the window).
fn mask(
    start: usize,
    s: usize,
    window: Option<usize>,
    n_rep: usize,
    device: &Device,
) -> Result<Option<Tensor>> {
    let len = start + s;
    let row = |i: usize| (0..len).map(move |j| visible(start + i, j, window));
    if (0..s).all(|i| row(i).all(|v| v)) {
        return Ok(None);
    }
    let m: Vec<f32> = (0..n_rep)
        .flat_map(|_| (0..s).flat_map(row))
        .map(|v| if v { 0.0 } else { f32::NEG_INFINITY })
        .collect();
    Tensor::from_vec(m, (n_rep * s, len), device).map(Some)
}

/// [`mask`] for rows padded on the left ([rows, 1, n_rep · s, start + s]): row r's
/// real positions do not see its first `pads[r]` positions; a pad position sees itself
/// (a query with no key would turn its softmax into NaN, which would reach the real
/// positions through the values even at weight 0).
fn padded_mask(
    (start, s): (usize, usize),
    window: Option<usize>,
    n_rep: usize,
    pads: &[usize],
    device: &Device,
) -> Result<Option<Tensor>> {
    let len = start + s;
    let m: Vec<f32> = pads
        .iter()
        .flat_map(|&pad| {
            (0..n_rep).flat_map(move |_| {
                (0..s).flat_map(move |i| {
                    let p = start + i;
                    (0..len).map(move |j| {
                        let seen = visible(p, j, window) && (j >= pad || j == p);
                        if seen {
                            0.0
                        } else {
                            f32::NEG_INFINITY
                        }
                    })
                })
            })
        })
        .collect();
    Tensor::from_vec(m, (pads.len(), 1, n_rep * s, len), device).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_padded_mask_hides_each_rows_pads() {
        // Two rows of three positions, the second padded by one: its real positions (1,
        // 2) do not see position 0, which sees itself.
        let m = padded_mask((0, 3), None, 1, &[0, 1], &Device::Cpu)
            .unwrap()
            .unwrap();
        assert_eq!(m.dims(), &[2, 1, 3, 3]);
        let v: Vec<f32> = m.flatten_all().unwrap().to_vec1().unwrap();
        let inf = f32::NEG_INFINITY;
        #[rustfmt::skip]
        let want = [
            0.0, inf, inf,   0.0, 0.0, inf,   0.0, 0.0, 0.0,
            0.0, inf, inf,   inf, 0.0, inf,   inf, 0.0, 0.0,
        ];
        assert_eq!(v, want);
    }

    #[test]
    fn the_mask_is_causal_and_slides() {
        // Three new positions after two cached ones, no window: row i sees keys 0..=2+i.
        let m = mask(2, 3, None, 1, &Device::Cpu).unwrap().unwrap();
        let m: Vec<Vec<f32>> = m.to_vec2().unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(
            m,
            vec![
                vec![0.0, 0.0, 0.0, inf, inf],
                vec![0.0, 0.0, 0.0, 0.0, inf],
                vec![0.0, 0.0, 0.0, 0.0, 0.0],
            ]
        );
        // A window of 2: position 4 sees 3 and 4 only.
        let m: Vec<Vec<f32>> = mask(4, 1, Some(2), 2, &Device::Cpu)
            .unwrap()
            .unwrap()
            .to_vec2()
            .unwrap();
        assert_eq!(m, vec![vec![inf, inf, inf, 0.0, 0.0]; 2]);
        // One new position inside the window masks nothing.
        assert!(mask(4, 1, Some(8), 4, &Device::Cpu).unwrap().is_none());
        assert!(mask(0, 1, None, 4, &Device::Cpu).unwrap().is_none());
    }

    #[test]
    fn rope_frequencies_fall_geometrically() {
        let f = rope_frequencies(8, 10_000.0);
        assert_eq!(f.len(), 4);
        assert_eq!(f[0], 1.0);
        assert!((f[1] - 0.1).abs() < 1e-6 && (f[2] - 0.01).abs() < 1e-7);
    }
}
