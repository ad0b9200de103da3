//! Progress bars for the evaluation: drawn on a terminal, a line every 10 s in a log.

pub fn progress(total: usize, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let bar = indicatif::ProgressBar::new(total as u64);
    if !std::io::stderr().is_terminal() {
        // No terminal to draw on (a log file): a line every 10 seconds instead.
        bar.set_draw_target(indicatif::ProgressDrawTarget::term_like_with_hz(
            Box::new(LogLines),
            1,
        ));
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} {elapsed_precise} (eta {eta})",
        )
        .unwrap()
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// A progress bar's target that prints each update as a line to stderr, at most every
/// 10 seconds.
#[derive(Debug)]
struct LogLines;

static LAST_LINE: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

impl indicatif::TermLike for LogLines {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_str(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        let mut last = LAST_LINE.lock().unwrap();
        let due = last.is_none_or(|t| t.elapsed().as_secs() >= 10);
        if due && !s.trim().is_empty() {
            eprintln!("{}", s.trim_end());
            *last = Some(std::time::Instant::now());
        }
        Ok(())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}
