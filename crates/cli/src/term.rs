//! How capshim writes to a terminal: one style for its own messages and clap's, and colour
//! where it helps a reader (a changed answer, a warning, a failed check).
//!
//! Every message on stderr starts `capshim: `, then a level word (`error:`, `warning:`,
//! `note:`), as clap's own errors do after the same prefix, so a reader and a `grep` see one
//! style whatever found the mistake. Colour goes through `anstream`, which writes the styles
//! only to a terminal that takes them and drops them otherwise: `NO_COLOR` (any non-empty
//! value) turns them off, `CLICOLOR_FORCE` turns them on in a pipe, `CLICOLOR=0` off
//! (<https://no-color.org>, <https://bixense.com/clicolors/>). Renderers produce plain text;
//! the painters here add the styles only at the moment of printing, so nothing written to a
//! file (an evidence bundle, `--json`) ever holds one. A leaf: it imports nothing of the crate.

use std::fmt::Display;
use std::io::Write as _;

use anstyle::{AnsiColor, Style};

/// A message's level: the word after `capshim: `.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The command failed (or one part of it did).
    Error,
    /// Worth knowing, or worth changing; the command goes on.
    Warning,
    /// A choice capshim made for the user, said once.
    Note,
}

impl Level {
    fn word(self) -> &'static str {
        match self {
            Level::Error => "error:",
            Level::Warning => "warning:",
            Level::Note => "note:",
        }
    }

    fn style(self) -> Style {
        match self {
            Level::Error => ERROR,
            Level::Warning => WARNING,
            Level::Note => Style::new().bold(),
        }
    }
}

/// Red and bold, as clap writes `error:`: an error, a failed check.
pub const ERROR: Style = AnsiColor::Red.on_default().bold();
/// Yellow and bold, as clap writes a warning: a warning.
pub const WARNING: Style = AnsiColor::Yellow.on_default().bold();
/// Green: an answer capshim changed, a check that passed.
pub const GOOD: Style = AnsiColor::Green.on_default();
/// Dimmed: a check that could not run here.
pub const DIM: Style = Style::new().dimmed();

/// `text` between `style`'s start and reset codes. Print it through [`stdout`] or
/// [`message`], which drop the codes where colour is off.
pub fn paint(text: &str, style: Style) -> String {
    format!("{style}{text}{style:#}")
}

/// The message `capshim: LEVEL text` on stderr, the level word styled. Errors writing to
/// stderr are ignored: there is nowhere left to report them.
pub fn message(level: Level, text: impl Display) {
    let line = format!("capshim: {} {text}\n", paint(level.word(), level.style()));
    let mut stderr = anstream::stderr().lock();
    let _ = stderr.write_all(line.as_bytes());
    let _ = stderr.flush();
}

/// A plain line on stderr (progress: `capshim: bench: …`). As for [`message`], errors writing
/// it are ignored: a closed or full stderr must not stop the work it reports on.
pub fn line(text: impl Display) {
    let mut stderr = anstream::stderr().lock();
    let _ = writeln!(stderr, "{text}");
    let _ = stderr.flush();
}

/// `capshim: error: text` on stderr.
pub fn error(text: impl Display) {
    message(Level::Error, text);
}

/// `capshim: warning: text` on stderr.
pub fn warning(text: impl Display) {
    message(Level::Warning, text);
}

/// `capshim: note: text` on stderr.
pub fn note(text: impl Display) {
    message(Level::Note, text);
}

/// Prints `capshim run`'s closing line on stderr, `activated:` in green and `not activated:`
/// in yellow.
pub fn activation(line: &str) {
    let painted = [
        ("capshim: activated:", GOOD),
        ("capshim: not activated:", WARNING),
    ]
    .into_iter()
    .find_map(|(head, style)| {
        let rest = line.strip_prefix(head)?;
        let word = head.strip_prefix("capshim: ")?;
        Some(format!("capshim: {}{rest}", paint(word, style)))
    })
    .unwrap_or_else(|| line.to_string());
    let mut stderr = anstream::stderr().lock();
    let _ = writeln!(stderr, "{painted}");
    let _ = stderr.flush();
}

/// Writes `text` to stdout and flushes it, with its styles where colour is on and without
/// them elsewhere. A closed pipe is an error of kind [`std::io::ErrorKind::BrokenPipe`].
pub fn stdout(text: &str) -> std::io::Result<()> {
    let mut out = anstream::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Prints what clap stopped on and returns clap's exit code: a command-line error in
/// capshim's style (`capshim: error: …`, its usage and hint after) with 2; the text of
/// `--help` and `--version` on stdout, unprefixed, with 0.
pub fn clap_error(error: &clap::Error) -> u8 {
    let rendered = error.render().ansi().to_string();
    // Errors start `error:`; help shown for a missing subcommand does not, and stays as it is.
    let text = if anstream::adapter::strip_str(&rendered)
        .to_string()
        .starts_with("error:")
    {
        format!("capshim: {rendered}")
    } else {
        rendered
    };
    let _ = if !error.use_stderr() {
        stdout(&text)
    } else {
        let mut stderr = anstream::stderr().lock();
        stderr
            .write_all(text.as_bytes())
            .and_then(|()| stderr.flush())
    };
    u8::try_from(error.exit_code()).unwrap_or(2)
}

/// Colours `capshim doctor`'s text: the status word that starts each check's line (`ok`
/// green, `warn` yellow, `fail` red, `skip` dimmed). Other lines are left as they are.
pub fn paint_doctor(text: &str) -> String {
    map_lines(text, |line| {
        let style = match line.split(' ').next() {
            Some("ok") => GOOD,
            Some("warn") => WARNING,
            Some("fail") => ERROR,
            Some("skip") => DIM,
            _ => return line.to_string(),
        };
        let (word, rest) = line.split_at(4.min(line.len()));
        format!("{}{rest}", paint(word, style))
    })
}

/// Colours `capshim explain`'s text: what follows ` -> ` (the answer or decision after the
/// change) and a trailing `raised` in green, `warning:` lines in yellow.
pub fn paint_explain(text: &str) -> String {
    map_lines(text, |line| {
        if let Some(at) = line.find(" -> ") {
            let (before, after) = line.split_at(at + 4);
            format!("{before}{}", paint(after, GOOD))
        } else if let Some(head) = line.strip_suffix("raised") {
            format!("{head}{}", paint("raised", GOOD))
        } else if line.trim_start().starts_with("warning:") {
            paint(line, WARNING)
        } else {
            line.to_string()
        }
    })
}

/// `text` with each line replaced by `f(line)`, line ends kept.
fn map_lines(text: &str, f: impl Fn(&str) -> String) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.strip_suffix('\n') {
            Some(body) => f(body) + "\n",
            None => f(line),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> String {
        anstream::adapter::strip_str(text).to_string()
    }

    #[test]
    fn painters_change_only_styles() {
        let doctor = "capshim doctor 0.1.0\nok    machine.macos  macOS 26\nwarn  sip  on\nfail  library.found  none\nskip  device  x\n1 ok\n";
        let painted = paint_doctor(doctor);
        assert_ne!(painted, doctor);
        assert_eq!(plain(&painted), doctor);
        let explain = "  simdgroup reduction  false -> true\n  MTLGPUFamilyApple6 (1006)  no  yes  raised\n  warning: MLX\nno change";
        let painted = paint_explain(explain);
        assert_eq!(plain(&painted), explain);
        assert!(painted.contains(&paint("true", GOOD)));
        assert!(painted.contains(&paint("raised", GOOD)));
        assert!(painted.contains(&paint("  warning: MLX", WARNING)));
        assert!(painted.ends_with("no change"));
    }

    #[test]
    fn doctor_statuses_get_their_colours() {
        let painted = paint_doctor("fail  x  y\nok    a  b\nskipped words\n");
        assert!(painted.starts_with(&paint("fail", ERROR)));
        assert!(painted.contains(&paint("ok  ", GOOD)));
        assert!(painted.ends_with("skipped words\n"), "not a status word");
    }
}
