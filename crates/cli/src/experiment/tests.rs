//! The layer with an experiment of its own (hyperfine's mock executor): a shell command per
//! arm and round, one arm failing, run through [`super::run`] as bench and verify are, so that
//! the round order, the one rule for failed runs, the INCOMPLETE note and the driver are
//! tested without llama.cpp.

use std::path::{Path, PathBuf};

use super::rounds::run_rounds;
use super::tool::{Failure, ToolRun};
use super::{Context, Experiment, ExperimentError, Words};
use crate::launch::environment::EnvChange;

const WORDS: Words = Words {
    command: "mock",
    unit: "run",
    running: "the running mock",
    tool_option: "--mock",
    fix: "the mock command",
    prefix: "capshim-mock",
};

/// Arms `ok` and `bad` (whose command exits 3), three rounds.
struct Mock {
    output: PathBuf,
    keep_going: bool,
    ran: Vec<(String, u32)>,
    /// `--cooldown`.
    cooldown: std::time::Duration,
    /// When each run started.
    started: Vec<std::time::Instant>,
}

impl Experiment for Mock {
    type Sealed = Vec<super::Failed>;

    fn words(&self) -> Words {
        WORDS
    }

    fn derived(&self) -> &'static [&'static str] {
        &["report.md"]
    }

    fn output(&self) -> Option<&Path> {
        Some(&self.output)
    }

    fn keep_going(&self) -> bool {
        self.keep_going
    }

    fn cooldown(&self) -> std::time::Duration {
        self.cooldown
    }

    fn run_in(&mut self, dir: &Path, cx: &mut Context) -> Result<Self::Sealed, ExperimentError> {
        let arms = ["ok".to_string(), "bad".to_string()];
        let ran = &mut self.ran;
        let started = &mut self.started;
        run_rounds(cx, &arms, 3, |cx, slot| {
            let arm = &arms[slot.arm];
            let (out, err) = (
                dir.join(format!("raw/{arm}-r{}.out", slot.round)),
                dir.join(format!("raw/{arm}-r{}.err", slot.round)),
            );
            let script = if arm == "bad" {
                "echo broken >&2; exit 3"
            } else {
                "echo fine"
            };
            let args = ["-c".to_string(), script.to_string()];
            cx.progress.start(format!("arm {arm} round {}", slot.round));
            started.push(std::time::Instant::now());
            let finished = cx.run_tool(&ToolRun {
                tool: "sh",
                program: Path::new("/bin/sh"),
                args: &args,
                env: &EnvChange::default(),
                stdout: &out,
                stderr: &err,
            })?;
            ran.push((arm.clone(), slot.round));
            if finished.status.success() {
                cx.progress.finish();
                Ok(())
            } else {
                cx.failed(Failure {
                    tool: "sh",
                    arm: arm.clone(),
                    what: format!("arm {arm} round {}", slot.round),
                    reason: finished.status.to_string(),
                    stderr: err,
                    stdout: None,
                })
            }
        })?;
        Ok(cx.failed.clone())
    }
}

#[test]
fn without_keep_going_the_first_failed_run_stops_and_leaves_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let mut mock = Mock {
        output: tmp.path().join("b"),
        keep_going: false,
        ran: Vec::new(),
        cooldown: std::time::Duration::ZERO,
        started: Vec::new(),
    };
    let err = super::run(&mut mock).unwrap_err();
    let text = crate::format::chain(&err);
    assert!(text.contains("mock stopped"), "{text}");
    assert!(
        text.contains("sh failed in arm bad round 1 (exit status: 3)"),
        "{text}"
    );
    assert!(text.contains("ends with:\n  broken"), "{text}");
    // It stopped at bad's first run: round 1, with ok run at most once before it.
    assert_eq!(mock.ran.last().unwrap(), &("bad".to_string(), 1));
    assert!(mock.ran.len() <= 2, "{:?}", mock.ran);
    let note = std::fs::read_to_string(tmp.path().join("b/INCOMPLETE")).unwrap();
    assert!(note.contains("capshim mock"), "{note}");
}

#[test]
fn with_keep_going_every_failed_run_is_recorded_and_the_rounds_go_on() {
    let tmp = tempfile::tempdir().unwrap();
    let mut mock = Mock {
        output: tmp.path().join("b"),
        keep_going: true,
        ran: Vec::new(),
        cooldown: std::time::Duration::ZERO,
        started: Vec::new(),
    };
    let failed = super::run(&mut mock).unwrap();
    assert_eq!(mock.ran.len(), 6);
    let mut rounds: Vec<u32> = mock.ran.iter().map(|(_, r)| *r).collect();
    rounds.dedup();
    assert_eq!(
        rounds,
        [1, 2, 3],
        "each round runs both arms before the next"
    );
    assert_eq!(failed.len(), 3);
    assert!(
        failed
            .iter()
            .all(|f| f.arm == "bad" && f.reason == "exit status: 3")
    );
    assert!(!tmp.path().join("b/INCOMPLETE").exists());
}

#[test]
fn a_cooldown_separates_every_process_from_the_next() {
    // Only a lower bound: a sleep lasts at least what it is asked, however busy the machine.
    let tmp = tempfile::tempdir().unwrap();
    let cooldown = std::time::Duration::from_millis(150);
    let mut mock = Mock {
        output: tmp.path().join("b"),
        keep_going: true,
        ran: Vec::new(),
        cooldown,
        started: Vec::new(),
    };
    super::run(&mut mock).unwrap();
    assert_eq!(mock.started.len(), 6);
    for pair in mock.started.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= cooldown, "{gap:?} between two processes");
    }
}

#[test]
fn a_failed_tool_whose_stderr_holds_nothing_is_said_to_have_printed_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let stderr = tmp.path().join("x.stderr");
    let failure = |text: &str| {
        std::fs::write(&stderr, text).unwrap();
        Failure {
            tool: "llama-bench",
            arm: "stock".to_string(),
            what: "arm stock round 1".to_string(),
            reason: "signal: 6 (SIGABRT)".to_string(),
            stderr: stderr.clone(),
            stdout: None,
        }
        .into_error("the fix")
        .to_string()
    };
    for blank in ["", "\n\n", "  \n\t\n"] {
        let text = failure(blank);
        assert!(
            text.contains("x.stderr) is empty: it printed nothing before it ended\nfix the cause of that exit (the fix)"),
            "{text}"
        );
        assert!(!text.contains("ends with"), "{text}");
    }
    let text = failure("GGML_ASSERT(n > 0) failed\n\n   \n");
    assert!(
        text.contains("ends with:\n  GGML_ASSERT(n > 0) failed\nfix the cause above"),
        "{text}"
    );
}

/// An experiment whose runs panic (a bug) after writing a raw file.
struct Panics {
    output: PathBuf,
}

impl Experiment for Panics {
    type Sealed = ();

    fn words(&self) -> Words {
        WORDS
    }

    fn derived(&self) -> &'static [&'static str] {
        &["report.md"]
    }

    fn output(&self) -> Option<&Path> {
        Some(&self.output)
    }

    fn run_in(&mut self, dir: &Path, _cx: &mut Context) -> Result<(), ExperimentError> {
        std::fs::write(dir.join("raw/a-r1.out"), "1\n").unwrap();
        panic!("a range with no width");
    }
}

#[test]
fn a_panic_in_the_runs_or_the_seal_still_leaves_the_note() {
    let tmp = tempfile::tempdir().unwrap();
    let err = super::run(&mut Panics {
        output: tmp.path().join("b"),
    })
    .unwrap_err();
    let text = crate::format::chain(&err);
    assert!(text.contains("mock stopped"), "{text}");
    assert!(
        text.contains("capshim panicked (a range with no width)"),
        "{text}"
    );
    let note = std::fs::read_to_string(tmp.path().join("b/INCOMPLETE")).unwrap();
    assert!(note.contains("panicked"), "{note}");
}
