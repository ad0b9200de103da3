//! Files of JSON lines that let a long run stop anywhere and continue: a header line naming
//! what the run draws, then one line per finished record, appended (and synced) as each
//! is finished. `eval confirm` keeps a file per method ([`super::confirm::Store`]),
//! `eval guardrail` one per run ([`super::guardrail::Journal`]).

use std::io::Write;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::EvalError;

/// One JSON line (the records here always serialise: plain fields, no maps with other keys).
fn line<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("a record serialises") + "\n"
}

/// The records of a file's text up to the first line that does not read, or `None` when
/// its first line is not a header `header_ok` accepts. Text after the last newline is a
/// torn line whatever it reads as (a record is written with its newline at once, and a
/// torn one can still parse: `12` cut to `1`).
pub(crate) fn parse<R: DeserializeOwned>(
    text: &str,
    header_ok: impl FnOnce(&str) -> bool,
) -> Option<Vec<R>> {
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    let mut lines = whole.lines();
    header_ok(lines.next()?).then(|| {
        lines
            .map_while(|l| serde_json::from_str::<R>(l).ok())
            .collect()
    })
}

/// The records of the file at `path`, made ready for [`append`]: a file whose header
/// `header_ok` refuses (another run's) is moved aside (`.stale`) and a new one started
/// with `header` (one line, without its newline); a torn last line (a run stopped while writing) or an unreadable tail
/// is dropped, the file rewritten with what was read.
pub(crate) fn open<R: Serialize + DeserializeOwned>(
    path: &Path,
    header: &str,
    header_ok: impl FnOnce(&str) -> bool,
) -> Result<Vec<R>, EvalError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(EvalError::io("creating", dir))?;
    }
    let mut records = vec![];
    // Whether the file can be appended to as it is: its header is accepted and every line
    // after it was read.
    let mut intact = false;
    if let Ok(text) = std::fs::read_to_string(path) {
        if let Some(read) = parse(&text, header_ok) {
            intact = text.lines().count() == 1 + read.len() && text.ends_with('\n');
            records = read;
        } else {
            std::fs::rename(path, path.with_extension("jsonl.stale"))
                .map_err(EvalError::io("setting aside", path))?;
        }
    }
    if !intact {
        let mut text = format!("{header}\n");
        for r in &records {
            text += &line(r);
        }
        let tmp = path.with_extension("jsonl.tmp");
        std::fs::write(&tmp, text).map_err(EvalError::io("writing", &tmp))?;
        std::fs::rename(&tmp, path).map_err(EvalError::io("writing", path))?;
    }
    Ok(records)
}

/// Appends `record` to the file at `path` (opened with [`open`]) and syncs it; returns
/// the line written.
pub(crate) fn append<R: Serialize>(path: &Path, record: &R) -> Result<String, EvalError> {
    let io = || EvalError::io("appending to", path);
    let text = line(record);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(io())?;
    f.write_all(text.as_bytes()).map_err(io())?;
    f.sync_data().map_err(io())?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_keeps_appends_drops_a_torn_tail_and_sets_aside_another_header() {
        let dir = std::env::temp_dir().join(format!("hlg-journal-{}", std::process::id()));
        let path = dir.join("j.jsonl");
        let _ = std::fs::remove_dir_all(&dir);
        let ok = |l: &str| l == r#"{"run":1}"#;
        let none: Vec<u32> = open(&path, r#"{"run":1}"#, ok).unwrap();
        assert!(none.is_empty());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"run\":1}\n");
        assert_eq!(append(&path, &7u32).unwrap(), "7\n");
        append(&path, &8u32).unwrap();
        // Stopped in the middle of a line: the torn tail goes (though "9" reads as a
        // record), the rest is kept.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"9").unwrap();
        drop(f);
        let read: Vec<u32> = open(&path, r#"{"run":1}"#, ok).unwrap();
        assert_eq!(read, [7, 8]);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"run\":1}\n7\n8\n"
        );
        // Another run's file is set aside whole, the new one starts empty.
        let other: Vec<u32> = open(&path, r#"{"run":2}"#, |l| l == r#"{"run":2}"#).unwrap();
        assert!(other.is_empty());
        assert_eq!(
            std::fs::read_to_string(path.with_extension("jsonl.stale")).unwrap(),
            "{\"run\":1}\n7\n8\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"run\":2}\n");
        // A file without a whole header line reads as none.
        assert_eq!(parse::<u32>("", |_| true), None);
        assert_eq!(parse::<u32>("{}", |_| true), None);
        assert_eq!(parse::<u32>("{}\n1\n", |_| true), Some(vec![1]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
