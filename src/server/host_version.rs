//! What differs between the host versions this crate builds against, in one place:
//! mistral.rs 0.8.1 (the registry's, the default) and 0.9 (`--cfg mistralrs_host="0.9"`,
//! set by `scripts/test-upstream 0.9.2`). The rest of the server is the same code; struct
//! literals of upstream's types gate their 0.9-only fields in place.

use mistralrs_core::{ModelSelected, Request, Response};
use mistralrs_server_core::chat_completion;
use mistralrs_server_core::openai::ChatCompletionRequest;
use mistralrs_server_core::types::SharedMistralRsState;
use tokio::sync::mpsc::Sender;

/// The selection of a GGUF file, every other option as upstream's CLI defaults it.
pub(crate) fn gguf(quantized_model_id: String, quantized_filename: String) -> ModelSelected {
    use mistralrs_core::{AutoDeviceMapParams, ModelDType};
    ModelSelected::GGUF {
        tok_model_id: None,
        quantized_model_id,
        quantized_filename,
        dtype: ModelDType::Auto,
        topology: None,
        max_seq_len: AutoDeviceMapParams::DEFAULT_MAX_SEQ_LEN,
        max_batch_size: AutoDeviceMapParams::DEFAULT_MAX_BATCH_SIZE,
        #[cfg(mistralrs_host = "0.9")]
        tokenizer_json: None,
        #[cfg(mistralrs_host = "0.9")]
        mmproj_filename: None,
        #[cfg(mistralrs_host = "0.9")]
        lora_adapters: vec![],
        #[cfg(mistralrs_host = "0.9")]
        lora_runtime_config: None,
        #[cfg(mistralrs_host = "0.9")]
        organization: None,
        #[cfg(mistralrs_host = "0.9")]
        write_uqff: None,
        #[cfg(mistralrs_host = "0.9")]
        imatrix: None,
        #[cfg(mistralrs_host = "0.9")]
        calibration_file: None,
        #[cfg(mistralrs_host = "0.9")]
        max_edge: None,
        #[cfg(mistralrs_host = "0.9")]
        max_num_images: None,
        #[cfg(mistralrs_host = "0.9")]
        max_image_length: None,
        #[cfg(mistralrs_host = "0.9")]
        hf_cache_path: None,
        #[cfg(mistralrs_host = "0.9")]
        matformer_config_path: None,
        #[cfg(mistralrs_host = "0.9")]
        matformer_slice_name: None,
    }
}

/// The selection of a model in Hugging Face's layout (upstream's `run`: the architecture
/// detected from `config.json`), every other option as upstream's CLI defaults it.
pub(crate) fn plain(model_id: String) -> ModelSelected {
    use mistralrs_core::{AutoDeviceMapParams, ModelDType};
    ModelSelected::Run {
        model_id,
        tokenizer_json: None,
        dtype: ModelDType::Auto,
        topology: None,
        organization: None,
        write_uqff: None,
        from_uqff: None,
        imatrix: None,
        calibration_file: None,
        max_edge: None,
        max_seq_len: AutoDeviceMapParams::DEFAULT_MAX_SEQ_LEN,
        max_batch_size: AutoDeviceMapParams::DEFAULT_MAX_BATCH_SIZE,
        max_num_images: None,
        max_image_length: None,
        hf_cache_path: None,
        matformer_config_path: None,
        matformer_slice_name: None,
    }
}

/// Where a chat request came in: the chat route, or the Responses route run as a chat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Surface {
    Chat,
    Responses,
}

/// Upstream's parsing of a chat request into the engine's request (and whether it
/// streams), with `tx` as its response channel. On 0.9 without the agentic extras (no
/// tool dispatch, no approvals, no skills): the routes this crate owns serve sampling.
pub(crate) async fn parse_chat(
    req: ChatCompletionRequest,
    state: SharedMistralRsState,
    tx: Sender<Response>,
    surface: Surface,
) -> Result<(Request, bool), impl std::fmt::Display> {
    #[cfg(not(mistralrs_host = "0.9"))]
    {
        let _ = surface;
        chat_completion::parse_request(req, state, tx).await
    }
    #[cfg(mistralrs_host = "0.9")]
    {
        use mistralrs_server_core::openai::OpenAiToolSurface;
        let ctx = chat_completion::ChatCompletionParseContext {
            state,
            tx,
            tool_dispatch_url: None,
            agent_approval_handler: None,
            agent_approval_notifier: None,
            tool_surface: match surface {
                Surface::Chat => OpenAiToolSurface::ChatCompletions,
                Surface::Responses => OpenAiToolSurface::Responses,
            },
            skill_store: None,
        };
        chat_completion::parse_request(req, ctx).await
    }
}
