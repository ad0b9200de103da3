//! Gemma's SentencePiece vocabulary, read from the GGUF file's metadata.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value};

use crate::EvalError;

/// The SentencePiece token types of a GGUF vocabulary that decoding treats apart.
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const BYTE: i32 = 6;

/// A SentencePiece vocabulary read from a GGUF file (`tokenizer.ggml.model` "llama"): the
/// pieces, their merge scores and types. Encoding as llama.cpp's SPM tokenizer does: the
/// user-defined pieces (newline and space runs) matched first, longest at each place;
/// then, in the text between, spaces as `▁` (no space prefix: the file says so for
/// Gemma), characters as symbols, and the adjacent pair whose join is a piece with the
/// highest score merged until none is; a symbol that is no piece falls back to its UTF-8
/// bytes (`<0xXX>`).
pub struct Vocab {
    pieces: Vec<String>,
    scores: Vec<f32>,
    types: Vec<i32>,
    index: HashMap<String, u32>,
    /// The user-defined pieces, longest first.
    user: Vec<(String, u32)>,
    bytes: [Option<u32>; 256],
    /// Beginning- and end-of-sequence ids.
    pub bos: u32,
    /// See [`Vocab::bos`].
    pub eos: u32,
}

fn meta<'a>(ct: &'a Content, key: &str) -> Result<&'a Value, EvalError> {
    ct.metadata
        .get(key)
        .ok_or_else(|| EvalError::Invalid(format!("the GGUF file has no {key}")))
}

fn array<T>(
    ct: &Content,
    key: &str,
    f: impl Fn(&Value) -> candle_core::Result<T>,
) -> Result<Vec<T>, EvalError> {
    let v = meta(ct, key)?.to_vec().map_err(EvalError::engine)?;
    v.iter()
        .map(f)
        .collect::<candle_core::Result<_>>()
        .map_err(EvalError::engine)
}

impl Vocab {
    /// The vocabulary of a GGUF file's metadata.
    pub fn from_gguf(ct: &Content) -> Result<Vocab, EvalError> {
        let model = meta(ct, "tokenizer.ggml.model")?
            .to_string()
            .map_err(EvalError::engine)?;
        if model != "llama" {
            return Err(EvalError::Invalid(format!(
                "a SentencePiece (llama) vocabulary was expected, the file has {model:?}"
            )));
        }
        let pieces = array(ct, "tokenizer.ggml.tokens", |v| v.to_string().cloned())?;
        let scores = array(ct, "tokenizer.ggml.scores", Value::to_f32)?;
        let types = array(ct, "tokenizer.ggml.token_type", Value::to_i32)?;
        if scores.len() != pieces.len() || types.len() != pieces.len() {
            return Err(EvalError::Invalid(
                "the vocabulary's arrays differ in length".into(),
            ));
        }
        let id = |key: &str| -> Result<u32, EvalError> {
            meta(ct, key)?.to_u32().map_err(EvalError::engine)
        };
        let mut vocab = Vocab {
            index: HashMap::with_capacity(pieces.len()),
            user: vec![],
            bytes: [None; 256],
            bos: id("tokenizer.ggml.bos_token_id")?,
            eos: id("tokenizer.ggml.eos_token_id")?,
            pieces,
            scores,
            types,
        };
        vocab.index_pieces();
        Ok(vocab)
    }

    fn index_pieces(&mut self) {
        for (i, p) in self.pieces.iter().enumerate() {
            let i = i as u32;
            self.index.entry(p.clone()).or_insert(i);
            match self.types[i as usize] {
                USER_DEFINED => self.user.push((p.clone(), i)),
                BYTE => {
                    if let Some(b) = byte_of(p) {
                        self.bytes[usize::from(b)] = Some(i);
                    }
                }
                _ => {}
            }
        }
        self.user.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    }

    /// The number of pieces.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Whether the vocabulary is empty.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// `text`'s token ids (no beginning-of-sequence token).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = vec![];
        let mut rest = text;
        while !rest.is_empty() {
            // The next user-defined piece (the longest where several start at one place)
            // and the plain text before it.
            let next = (0..rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .find_map(|i| {
                    let tail = &rest[i..];
                    self.user
                        .iter()
                        .find(|(p, _)| tail.starts_with(p.as_str()))
                        .map(|u| (i, u))
                });
            match next {
                Some((at, (piece, id))) => {
                    self.encode_plain(&rest[..at], &mut out);
                    out.push(*id);
                    rest = &rest[at + piece.len()..];
                }
                None => {
                    self.encode_plain(rest, &mut out);
                    rest = "";
                }
            }
        }
        out
    }

    /// Merges by score (see [`Vocab`]), then byte fallback.
    fn encode_plain(&self, text: &str, out: &mut Vec<u32>) {
        let normalized = text.replace(' ', "▁");
        let mut symbols: Vec<String> = normalized.chars().map(String::from).collect();
        loop {
            let best = symbols
                .windows(2)
                .enumerate()
                .filter_map(|(i, w)| {
                    let id = *self.index.get(&format!("{}{}", w[0], w[1]))?;
                    Some((i, self.scores[id as usize]))
                })
                // The highest score; the leftmost among equals.
                .fold(None, |best: Option<(usize, f32)>, (i, s)| match best {
                    Some((_, b)) if b >= s => best,
                    _ => Some((i, s)),
                });
            let Some((i, _)) = best else { break };
            let right = symbols.remove(i + 1);
            symbols[i].push_str(&right);
        }
        for s in symbols {
            match self.index.get(&s) {
                Some(&id) => out.push(id),
                None => out.extend(s.bytes().filter_map(|b| self.bytes[usize::from(b)])),
            }
        }
    }

    /// The text of `ids`: control tokens left out, `▁` as a space, byte tokens as bytes.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = vec![];
        for &id in ids {
            let Some(piece) = self.pieces.get(id as usize) else {
                continue;
            };
            match self.types[id as usize] {
                CONTROL => {}
                BYTE => bytes.extend(byte_of(piece)),
                _ => bytes.extend(piece.replace('▁', " ").bytes()),
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The byte a byte piece (`<0xXX>`) stands for.
fn byte_of(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vocabulary by hand: `pieces` as (piece, score, type), bos 1, eos 2.
    fn vocab(pieces: &[(&str, f32, i32)]) -> Vocab {
        let mut v = Vocab {
            pieces: pieces.iter().map(|p| p.0.to_string()).collect(),
            scores: pieces.iter().map(|p| p.1).collect(),
            types: pieces.iter().map(|p| p.2).collect(),
            index: HashMap::new(),
            user: vec![],
            bytes: [None; 256],
            bos: 1,
            eos: 2,
        };
        v.index_pieces();
        v
    }

    fn small() -> Vocab {
        let mut pieces = vec![
            ("<unk>", 0.0, 2),
            ("<bos>", 0.0, CONTROL),
            ("<eos>", 0.0, CONTROL),
            ("\n", 0.0, USER_DEFINED),
            ("\n\n", 0.0, USER_DEFINED),
            ("a", -1.0, 1),
            ("b", -1.0, 1),
            ("c", -1.0, 1),
            ("▁", -1.0, 1),
            ("ab", -3.0, 1),
            ("bc", -2.0, 1),
            ("abc", -4.0, 1),
            ("▁a", -5.0, 1),
        ];
        let hex: Vec<String> = (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect();
        pieces.extend(hex.iter().map(|h| (h.as_str(), 0.0, BYTE)));
        vocab(&pieces)
    }

    fn ids(v: &Vocab, pieces: &[&str]) -> Vec<u32> {
        pieces.iter().map(|p| v.index[*p]).collect()
    }

    #[test]
    fn merges_go_by_score_and_user_pieces_come_first() {
        let v = small();
        // "abc": bc (−2) before ab (−3); then a + bc = abc (−4).
        assert_eq!(v.encode("abc"), ids(&v, &["abc"]));
        // "ab": only ab.
        assert_eq!(v.encode("ab"), ids(&v, &["ab"]));
        // "cab": ab is the only pair merged (ca is no piece).
        assert_eq!(v.encode("cab"), ids(&v, &["c", "ab"]));
        // A space is ▁, no prefix added; ▁a merges.
        assert_eq!(v.encode("c a"), ids(&v, &["c", "▁a"]));
        // The longest newline run first, whole.
        assert_eq!(v.encode("a\n\n\nb"), ids(&v, &["a", "\n\n", "\n", "b"]));
        // No piece for é: its two UTF-8 bytes.
        assert_eq!(v.encode("é"), ids(&v, &["<0xC3>", "<0xA9>"]));
    }

    #[test]
    fn decoding_inverts_encoding() {
        let v = small();
        for text in ["abc cab", "a\n\n\nb c", "é a", "", " \n"] {
            assert_eq!(v.decode(&v.encode(text)), text, "{text:?}");
        }
        // Control tokens are left out.
        assert_eq!(v.decode(&[v.bos, v.index["a"], v.eos]), "a");
    }
}
