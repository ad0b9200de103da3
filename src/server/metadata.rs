//! What a model's files declare that the server needs before it loads them: the
//! end-of-sequence tokens and the architecture.

/// The end-of-sequence token ids a GGUF file declares (`tokenizer.ggml.eos_token_id`,
/// and the end-of-turn id where present); empty when the file has none.
///
/// ```
/// use mistralrs_hlg::server::metadata::gguf_eos;
/// assert!(gguf_eos(std::path::Path::new("/no/such/model.gguf")).is_empty());
/// ```
pub fn gguf_eos(path: &std::path::Path) -> Vec<u32> {
    use candle_core::quantized::gguf_file::Content;
    let Ok(mut f) = std::fs::File::open(path) else {
        return vec![];
    };
    let Ok(content) = Content::read(&mut f) else {
        return vec![];
    };
    ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"]
        .iter()
        .filter_map(|k| content.metadata.get(*k).and_then(|v| v.to_u32().ok()))
        .collect()
}

/// A GGUF file's `general.architecture`, `None` when the file cannot be read.
///
/// ```
/// use mistralrs_hlg::server::metadata::gguf_architecture;
/// assert_eq!(gguf_architecture(std::path::Path::new("/no/such/model.gguf")), None);
/// ```
pub fn gguf_architecture(path: &std::path::Path) -> Option<String> {
    use candle_core::quantized::gguf_file::Content;
    let mut f = std::fs::File::open(path).ok()?;
    let content = Content::read(&mut f).ok()?;
    let arch = content.metadata.get("general.architecture")?;
    arch.to_string().ok().cloned()
}

/// The end-of-sequence token ids a Hugging Face model directory declares
/// (`eos_token_id`, a number or a list, in `generation_config.json`, else `config.json`);
/// empty when neither has one.
///
/// ```
/// use mistralrs_hlg::server::metadata::plain_eos;
/// let dir = std::env::temp_dir().join(format!("hlg-doc-eos-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("config.json"), r#"{"eos_token_id": 2}"#).unwrap();
/// assert_eq!(plain_eos(&dir), vec![2]);
/// std::fs::write(dir.join("generation_config.json"), r#"{"eos_token_id": [2, 7]}"#).unwrap();
/// assert_eq!(plain_eos(&dir), vec![2, 7]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn plain_eos(dir: &std::path::Path) -> Vec<u32> {
    let ids = |file: &str| -> Option<Vec<u32>> {
        let text = std::fs::read_to_string(dir.join(file)).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        match &v["eos_token_id"] {
            serde_json::Value::Number(n) => n.as_u64().map(|n| vec![n as u32]),
            serde_json::Value::Array(a) => Some(
                a.iter()
                    .filter_map(|x| x.as_u64().map(|n| n as u32))
                    .collect(),
            ),
            _ => None,
        }
    };
    ids("generation_config.json")
        .or_else(|| ids("config.json"))
        .unwrap_or_default()
}
