//! The OpenAI Python client's structured-output helper (`chat.completions.parse`, which
//! raises on `finish_reason` `length`) against `serve`, without and with `hlg`:
//! scripts/check-openai-parse, run with the interpreter scripts/test prepares (the client
//! pinned in scripts/openai-parse.txt) and names in `MISTRALRS_HLG_OPENAI_PYTHON`.

mod common;

use std::process::Command;

#[test]
fn the_openai_client_parses_structured_answers() {
    let Some(python) = std::env::var_os("MISTRALRS_HLG_OPENAI_PYTHON") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs this test: MISTRALRS_HLG_OPENAI_PYTHON must name the venv's python (scripts/test sets it)"
        );
        eprintln!("not run: MISTRALRS_HLG_OPENAI_PYTHON is unset (scripts/test sets it)");
        return;
    };
    let server = common::Server::start();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/check-openai-parse");
    let out = Command::new(python)
        .arg(script)
        .arg(format!("{}/v1", server.url()))
        .output()
        .expect("running scripts/check-openai-parse");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    // Both requests answered, each parsed after a `stop`.
    assert_eq!(stdout.matches("finish_reason=stop").count(), 2, "{stdout}");
}
