//! Replays the fuzz corpus kept in `fuzz/corpus/<target>/` through the same checks the
//! cargo-fuzz targets run (`fuzz/checks.rs`), on the stable toolchain: every input that
//! once found a bug, or that the fuzzer kept for new coverage, still passes.

#[path = "../../fuzz/checks.rs"]
mod checks;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            panic!("{target}: {} fails", path.display());
        }
        n += 1;
    }
    assert!(n > 0, "{target}: no corpus in {}", dir.display());
}

#[test]
fn hlg_json_corpus() {
    replay("hlg_json", checks::hlg_json);
}

#[test]
fn hlg_toml_corpus() {
    replay("hlg_toml", checks::hlg_toml);
}

#[test]
fn hlg_flags_corpus() {
    replay("hlg_flags", checks::hlg_flags);
}

#[test]
fn kernel_corpus() {
    replay("kernel", checks::kernel);
}
