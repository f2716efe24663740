//! llama-perplexity's output: the perplexity of a run that saves its logits
//! (`--kl-divergence-base FILE`), and the statistics of a run compared with saved logits
//! (`--kl-divergence`), read from the lines tools/perplexity/perplexity.cpp prints (llama.cpp
//! 0c1e570): `Final estimate: PPL = %.4lf +/- %.5lf` on stderr, and on stdout
//! `Mean PPL(Q) : %10.6lf ± %10.6lf`, `Mean    KLD: %10.6lf ± %10.6lf`,
//! `99.0%   KLD: %10.6f`, `Same top p: %6.3lf ± %5.3lf %`...
//!
//! llama-perplexity exits 0 after most of its failures, having only logged them: a text too
//! short for the context, a logits file it cannot read, another vocabulary, too few tokens
//! for statistics. [`parse_base`] and [`parse_compared`] turn each into a [`PerplexityError`].

use serde::Serialize;

/// A figure llama-perplexity prints with its uncertainty (`value ± uncertainty`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Figure {
    /// The value.
    pub value: f64,
    /// llama-perplexity's standard error of it (Gaussian approximation), when printed.
    pub uncertainty: Option<f64>,
}

/// How much text a run scored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Scored {
    /// Chunks of the text (`computing over N chunks`).
    pub chunks: u64,
    /// Tokens per chunk (`n_ctx=N`).
    pub ctx: u64,
}

impl Scored {
    /// Tokens whose predictions were scored: the second half of each chunk but its last
    /// token, `ctx - 1 - ctx/2` per chunk (perplexity.cpp's `first = n_ctx/2`).
    pub fn tokens(&self) -> u64 {
        self.chunks * self.ctx.saturating_sub(1 + self.ctx / 2)
    }
}

/// A run that scored the text and saved its logits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BaseRun {
    /// The perplexity of the text (`Final estimate: PPL`).
    pub ppl: Figure,
    /// How much was scored.
    pub scored: Scored,
}

/// A run compared with saved logits: llama-perplexity's final statistics.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComparedRun {
    /// This run's perplexity (`Mean PPL(Q)`).
    pub ppl: Figure,
    /// The saved logits' perplexity over the same tokens (`Mean PPL(base)`).
    pub ppl_base: Figure,
    /// `Mean ln(PPL(Q)/PPL(base))`.
    pub ln_ppl_ratio: Figure,
    /// Mean KL divergence from the saved distribution to this run's, in nats per token
    /// (`Mean    KLD`).
    pub kld_mean: Figure,
    /// Its 99th percentile over tokens (`99.0%   KLD`).
    pub kld_p99: f64,
    /// Its 99.9th percentile (`99.9%   KLD`).
    pub kld_p999: Option<f64>,
    /// Its largest value (`Maximum KLD`).
    pub kld_max: Option<f64>,
    /// Its median (`Median  KLD`).
    pub kld_median: Option<f64>,
    /// Root mean square change of the probability of the text's next token, a fraction
    /// (`RMS Δp`, printed in percent).
    pub rms_dp: Option<Figure>,
    /// Fraction of tokens where both runs rank the same token first (`Same top p`, printed in
    /// percent), 0 to 1.
    pub top1_agreement: Figure,
    /// How much was scored.
    pub scored: Scored,
}

/// What keeps llama-perplexity's output from giving a result.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PerplexityError {
    /// The text has fewer tokens than two contexts (llama-perplexity logs it and exits 0).
    #[error(
        "the text is too short: llama-perplexity needs at least {need} tokens for a context of \
         {ctx}{}, and says so without failing; give a longer --text, or a smaller -c",
        have.map(|h| format!(" and the text has {h}")).unwrap_or_default()
    )]
    TooShort {
        /// Tokens needed: twice the context.
        need: u64,
        /// The context.
        ctx: u64,
        /// Tokens the text has, when logged.
        have: Option<u64>,
    },
    /// Too few tokens were scored for llama-perplexity to print its statistics (it needs 100).
    #[error(
        "llama-perplexity scored only {tokens} tokens and printed no statistics (it needs at least \
         100); use a longer text or more chunks"
    )]
    TooFewTokens {
        /// Tokens scored.
        tokens: u64,
    },
    /// llama-perplexity logged an error and produced no result.
    #[error("llama-perplexity reported: {0}")]
    Logged(String),
    /// An expected line is missing: the output is not llama-perplexity's, or it stopped early.
    #[error(
        "its output has no {0} line: it is not llama-perplexity's output (llama.cpp 0c1e570's format), \
         or the run stopped early"
    )]
    Missing(&'static str),
}

/// Error lines after which llama-perplexity prints no result (perplexity.cpp's LOG_ERR texts,
/// and common's model loading).
const FATAL: [&str; 12] = [
    "failed to open",
    "does not look like a file containing log-probabilities",
    "inconsistent vocabulary",
    "while the current context is",
    "failed reading",
    "failed to decode",
    "unable to load model",
    "failed to create context",
    "failed to load model",
    "Unexpected negative standard deviation",
    "you must provide a name of a file containing the log probabilities",
    "perplexity tool requires '--ctx-size' > 0",
];

/// Lines with runs of spaces collapsed, so that `Mean    KLD:` reads as `Mean KLD:`.
fn lines(text: &str) -> impl Iterator<Item = String> + '_ {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The first number in `text` (leading spaces skipped), up to a space or `%`.
fn number(text: &str) -> Option<f64> {
    let text = text.trim_start();
    let end = text.find([' ', '%']).unwrap_or(text.len());
    // `-0.000000` is printed for tiny negative values (a KL divergence computed from rounded
    // logits): read it as 0, not as negative zero.
    text[..end].parse::<f64>().ok().map(|v| v + 0.0)
}

/// `LABEL: value [± uncertainty]` anywhere in a line (after any log prefix).
fn stat(text: &str, label: &str) -> Option<Figure> {
    lines(text).find_map(|line| {
        let start = line.find(label)?;
        let rest = line[start + label.len()..].trim_start().strip_prefix(':')?;
        let value = number(rest)?;
        let uncertainty = rest.split_once('±').and_then(|(_, u)| number(u));
        Some(Figure { value, uncertainty })
    })
}

/// `MARKER N` with N a whole number, e.g. `computing over 4 chunks` gives 4 for `over`.
fn count_after(line: &str, marker: &str) -> Option<u64> {
    let rest = &line[line.find(marker)? + marker.len()..];
    rest.trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn scored(text: &str) -> Option<Scored> {
    lines(text).find_map(|line| {
        if !(line.contains("computing over") || line.contains("calculating perplexity over")) {
            return None;
        }
        Some(Scored {
            chunks: count_after(&line, " over ")?,
            ctx: count_after(&line, "n_ctx=")?,
        })
    })
}

/// `line` without llama.cpp's log prefix (`0.00.250.566 E `, or only the level `E `).
fn without_prefix(line: &str) -> &str {
    let mut rest = line;
    if let Some((first, after)) = rest.split_once(' ')
        && first.contains('.')
        && first.chars().all(|c| c.is_ascii_digit() || c == '.')
    {
        rest = after;
    }
    match rest.split_once(' ') {
        Some((level, after)) if ["I", "W", "E", "D"].contains(&level) => after,
        _ => rest,
    }
}

/// The first fatal error llama-perplexity logged, or the too-short case.
fn logged_failure(text: &str) -> Option<PerplexityError> {
    for line in lines(text) {
        if let Some(need) = count_after(&line, "you need at least") {
            let have = lines(text).find_map(|l| count_after(&l, "tokenizes to only"));
            return Some(PerplexityError::TooShort {
                need,
                ctx: count_after(&line, "with a context of").unwrap_or(need / 2),
                have,
            });
        }
        if line.contains("there are only") && line.contains("this is not enough for a context") {
            return Some(PerplexityError::Logged(line.clone()));
        }
        if FATAL.iter().any(|f| line.contains(f)) {
            return Some(PerplexityError::Logged(without_prefix(&line).to_string()));
        }
    }
    None
}

/// Reads a run that saved its logits: its stdout and stderr.
///
/// # Errors
/// [`PerplexityError`] when it logged a failure (the text too short among them) or printed
/// no final estimate.
pub fn parse_base(stdout: &str, stderr: &str) -> Result<BaseRun, PerplexityError> {
    let text = format!("{stdout}\n{stderr}");
    if let Some(failure) = logged_failure(&text) {
        return Err(failure);
    }
    let ppl = lines(&text)
        .find_map(|line| {
            let rest = &line[line.find("Final estimate: PPL =")? + "Final estimate: PPL =".len()..];
            let value = number(rest)?;
            let uncertainty = rest.split_once("+/-").and_then(|(_, u)| number(u));
            Some(Figure { value, uncertainty })
        })
        .ok_or(PerplexityError::Missing("`Final estimate: PPL =`"))?;
    let scored = scored(&text).ok_or(PerplexityError::Missing(
        "`calculating perplexity over N chunks, n_ctx=N`",
    ))?;
    Ok(BaseRun { ppl, scored })
}

/// Reads a run compared with saved logits: its stdout and stderr.
///
/// # Errors
/// [`PerplexityError`] when it logged a failure, scored too few tokens for statistics, or a
/// statistic is missing.
pub fn parse_compared(stdout: &str, stderr: &str) -> Result<ComparedRun, PerplexityError> {
    let text = format!("{stdout}\n{stderr}");
    if let Some(failure) = logged_failure(&text) {
        return Err(failure);
    }
    let scored = scored(&text).ok_or(PerplexityError::Missing(
        "`kl_divergence: computing over N chunks, n_ctx=N`",
    ))?;
    if !text.contains("====== Perplexity statistics ======") && text.contains("KL Divergence") {
        return Err(PerplexityError::TooFewTokens {
            tokens: scored.tokens(),
        });
    }
    let need = |label: &'static str, shown: &'static str| {
        stat(&text, label).ok_or(PerplexityError::Missing(shown))
    };
    let percent = |f: Figure| Figure {
        value: f.value / 100.0,
        uncertainty: f.uncertainty.map(|u| u / 100.0),
    };
    Ok(ComparedRun {
        ppl: need("Mean PPL(Q)", "`Mean PPL(Q)`")?,
        ppl_base: need("Mean PPL(base)", "`Mean PPL(base)`")?,
        ln_ppl_ratio: need("Mean ln(PPL(Q)/PPL(base))", "`Mean ln(PPL(Q)/PPL(base))`")?,
        kld_mean: need("Mean KLD", "`Mean KLD`")?,
        kld_p99: need("99.0% KLD", "`99.0% KLD`")?.value,
        kld_p999: stat(&text, "99.9% KLD").map(|f| f.value),
        kld_max: stat(&text, "Maximum KLD").map(|f| f.value),
        kld_median: stat(&text, "Median KLD").map(|f| f.value),
        rms_dp: stat(&text, "RMS Δp").map(percent),
        top1_agreement: percent(need("Same top p", "`Same top p`")?),
        scored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real output of the CPU build here (tiny random-weight models, `-c 128`).
    macro_rules! real {
        ($name:literal) => {
            (
                include_str!(concat!("../../tests/fixtures/llama/", $name, ".stdout")),
                include_str!(concat!("../../tests/fixtures/llama/", $name, ".stderr")),
            )
        };
    }

    #[test]
    fn a_real_base_run_gives_its_perplexity_and_what_it_scored() {
        let (out, err) = real!("perplexity-base");
        let run = parse_base(out, err).unwrap();
        assert_eq!(run.ppl.value, 34219.1383);
        assert_eq!(run.ppl.uncertainty, Some(664.48903));
        assert_eq!(
            run.scored,
            Scored {
                chunks: 4,
                ctx: 128
            }
        );
        assert_eq!(run.scored.tokens(), 4 * 63);
    }

    #[test]
    fn a_real_comparison_gives_every_statistic() {
        let (out, err) = real!("perplexity-q4-vs-f16");
        let run = parse_compared(out, err).unwrap();
        assert_eq!(run.ppl.value, 33985.223616);
        assert_eq!(run.ppl_base.value, 34219.178341);
        assert_eq!(run.kld_mean.value, 0.001405);
        assert_eq!(run.kld_mean.uncertainty, Some(0.000010));
        assert_eq!(run.kld_p99, 0.001843);
        assert_eq!(run.kld_max, Some(0.001928));
        assert!((run.top1_agreement.value - 0.61508).abs() < 1e-9);
        assert!((run.top1_agreement.uncertainty.unwrap() - 0.03071).abs() < 1e-9);
        assert_eq!(run.scored.tokens(), 252);

        let (out, err) = real!("perplexity-aa");
        let aa = parse_compared(out, err).unwrap();
        assert_eq!(aa.top1_agreement.value, 1.0);
        assert!(aa.kld_mean.value.abs() < 1e-6, "{}", aa.kld_mean.value);
    }

    #[test]
    fn failures_it_only_logs_are_errors() {
        let (out, err) = real!("perplexity-too-short");
        assert_eq!(
            parse_base(out, err).unwrap_err(),
            PerplexityError::TooShort {
                need: 1024,
                ctx: 512,
                have: Some(348)
            }
        );
        let msg = parse_base(out, err).unwrap_err().to_string();
        assert!(msg.contains("the text has 348"), "{msg}");
        let (out, err) = real!("perplexity-too-few");
        assert_eq!(
            parse_compared(out, err).unwrap_err(),
            PerplexityError::TooFewTokens { tokens: 63 }
        );
        let (out, err) = real!("perplexity-bad-base");
        assert_eq!(
            parse_compared(out, err).unwrap_err(),
            PerplexityError::Logged(
                "kl_divergence: bad.kld does not look like a file containing log-probabilities"
                    .into()
            )
        );
        // A comparison's output is not a base run's, and nothing is not either.
        let (out, err) = real!("perplexity-aa");
        assert!(matches!(
            parse_base(out, err),
            Err(PerplexityError::Missing(_))
        ));
        assert!(matches!(
            parse_compared("garbage\n", ""),
            Err(PerplexityError::Missing(_))
        ));
    }

    /// The lines perplexity.cpp (0c1e570) prints, as a Metal build prints them: the same
    /// LOG calls, with ggml-metal's own lines on stderr, log prefixes off, and values of the
    /// size llama.cpp's README reports for BF16 against FP16.
    #[test]
    fn the_source_formats_as_a_metal_build_prints_them() {
        let stderr = "\
ggml_metal_device_init: GPU name:   MTL0 (Apple M1 Ultra)
ggml_metal_device_init: GPU family: MTLGPUFamilyApple7  (1007)
kl_divergence: computing over 8 chunks, n_ctx=512, batch_size=2048, n_seq=4
kl_divergence: 1.52 seconds per pass - ETA ";
        let mut stdout = String::from("0.20 minutes\n\nchunk             PPL  ...\n");
        for (format, values) in [
            (
                "Mean PPL(Q)                   : {} ± {}",
                ["6.227711", "0.037833"],
            ),
            (
                "Mean PPL(base)                : {} ± {}",
                ["6.225194", "0.037771"],
            ),
            (
                "Mean ln(PPL(Q)/PPL(base))     : {} ± {}",
                ["0.000404", "0.000086"],
            ),
            ("Mean    KLD: {} ± {}", ["  0.000025", "  0.000000"]),
            ("Maximum KLD: {}{}", ["  0.012206", ""]),
            ("99.9%   KLD: {}{}", ["  0.000799", ""]),
            ("99.0%   KLD: {}{}", ["  0.000222", ""]),
            ("Median  KLD: {}{}", ["  0.000013", ""]),
            ("RMS Δp    : {} ± {} %", [" 0.150", "0.001"]),
            ("Same top p: {} ± {} %", ["99.739", "0.013"]),
        ] {
            let line = format
                .replacen("{}", values[0], 1)
                .replacen("{}", values[1], 1);
            stdout.push_str(&line);
            stdout.push('\n');
        }
        stdout.insert_str(
            stdout.find("Mean PPL(Q)").unwrap(),
            "====== Perplexity statistics ======\n",
        );
        let run = parse_compared(&stdout, stderr).unwrap();
        assert_eq!(run.ppl.value, 6.227711);
        assert_eq!(run.kld_mean.value, 0.000025);
        assert_eq!(run.kld_p99, 0.000222);
        assert_eq!(run.kld_p999, Some(0.000799));
        assert_eq!(run.kld_median, Some(0.000013));
        assert!((run.rms_dp.unwrap().value - 0.0015).abs() < 1e-12);
        assert!((run.top1_agreement.value - 0.99739).abs() < 1e-12);
        assert_eq!(
            run.scored,
            Scored {
                chunks: 8,
                ctx: 512
            }
        );
        // `Mean PPL(Q)/PPL(base)` is not `Mean PPL(Q)`.
        let only_ratio = stdout.replace(
            "Mean PPL(Q)                   :",
            "Mean PPL(Q)/PPL(base)         :",
        );
        assert_eq!(
            parse_compared(&only_ratio, stderr).unwrap_err(),
            PerplexityError::Missing("`Mean PPL(Q)`")
        );
        // A kernel that produces NaN logits shows as NaN, not as a missing line.
        let nan = stdout.replace("  0.000025", "      -nan");
        assert!(
            parse_compared(&nan, stderr)
                .unwrap()
                .kld_mean
                .value
                .is_nan()
        );
    }
}
