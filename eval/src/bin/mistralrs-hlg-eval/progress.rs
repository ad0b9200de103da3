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
            "{msg} [{bar:30}] {pos}/{len} {elapsed_precise} (eta {mean_eta})",
        )
        .unwrap()
        .with_key(
            "mean_eta",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = match mean_eta(state.elapsed(), state.pos(), state.len()) {
                    Some(eta) => write!(w, "{}", indicatif::HumanDuration(eta)),
                    None => write!(w, "?"),
                };
            },
        )
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// The time left at the mean rate so far. indicatif's own `{eta}` weights recent steps,
/// and a batched run finishes its steps in bursts (16 samples at once every ~45 s), which
/// it read as days.
fn mean_eta(
    elapsed: std::time::Duration,
    pos: u64,
    len: Option<u64>,
) -> Option<std::time::Duration> {
    let len = len?;
    if pos == 0 {
        return None;
    }
    Some(elapsed.mul_f64(len.saturating_sub(pos) as f64 / pos as f64))
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

#[cfg(test)]
mod tests {
    use super::mean_eta;
    use std::time::Duration;

    #[test]
    fn the_eta_is_the_mean_rate_over_what_is_left() {
        // 16 of 2268 in 47 s: 2252 left at 47/16 s each.
        let eta = mean_eta(Duration::from_secs(47), 16, Some(2268)).unwrap();
        assert!((eta.as_secs_f64() - 47.0 * 2252.0 / 16.0).abs() < 1e-6);
        assert_eq!(
            mean_eta(Duration::from_secs(9), 3, Some(3)),
            Some(Duration::ZERO)
        );
        assert_eq!(mean_eta(Duration::from_secs(9), 0, Some(3)), None);
        assert_eq!(mean_eta(Duration::from_secs(9), 3, None), None);
        // A length set below the position (a bar resized) is done, not negative.
        assert_eq!(
            mean_eta(Duration::from_secs(9), 5, Some(3)),
            Some(Duration::ZERO)
        );
    }
}
