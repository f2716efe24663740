//! Whether a llama.cpp tool ran to its end: the lines each prints last, and the tokens
//! llama-completion generated. A tool can exit 0 with its output cut short (seen under load:
//! llama-completion's text without its closing `common_perf_print` lines); such a run is a
//! failed run, with the reason these functions give, never a result. Exit status alone does
//! not say a run is complete.

/// llama-bench's `-o json` output (`json`, as written) is complete: a JSON array, closed.
///
/// # Errors
/// Why it is not: the reason, for a failed run.
pub fn bench_json(json: &str) -> Result<(), String> {
    let text = json.trim_end();
    if text.trim_start().starts_with('[') && text.ends_with(']') {
        Ok(())
    } else {
        Err(
            "its output lacks llama-bench's closing `]` (its JSON array is not closed): it was cut short"
                .to_string(),
        )
    }
}

/// llama-perplexity's run is complete: saving a base (`kl` false), its stderr holds the
/// `Final estimate: PPL =` line; comparing with one (`kl` true), its stdout holds the last
/// statistic it prints, `Same top p:`.
///
/// # Errors
/// Why it is not: the reason, for a failed run.
pub fn perplexity(kl: bool, stdout: &str, stderr: &str) -> Result<(), String> {
    let (ok, line, which) = if kl {
        (stdout.contains("Same top p:"), "Same top p:", "stdout")
    } else {
        (
            stderr.contains("Final estimate: PPL ="),
            "Final estimate: PPL =",
            "stderr",
        )
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "its output has no `{line}` line (llama-perplexity's closing line, on its {which}): \
             it was cut short, or it is not llama-perplexity"
        ))
    }
}

/// The count after the last `/` of a `common_perf_print` line starting `name`: `N tokens`.
fn perf_tokens(stderr: &str, name: &str) -> Option<u64> {
    stderr.lines().find_map(|line| {
        let rest = line.split("common_perf_print:").nth(1)?;
        if !rest.trim_start().starts_with(name) {
            return None;
        }
        let after = rest.rsplit('/').next()?;
        after.split_whitespace().next()?.parse().ok()
    })
}

/// llama-completion's run is complete: its stderr holds the closing `common_perf_print:`
/// lines (`total time`), and it generated the `n_predict` tokens asked (the sampler's tokens
/// less the prompt's), or stopped at the end of text (`[end of text]` on stdout).
///
/// # Errors
/// Why it is not: the reason, for a failed run.
pub fn completion(n_predict: u32, stdout: &str, stderr: &str) -> Result<(), String> {
    if perf_tokens(stderr, "total time").is_none() {
        return Err(
            "its output lacks llama.cpp's closing lines (`common_perf_print: ... total time`): \
             it was cut short"
                .to_string(),
        );
    }
    let (Some(sampled), Some(prompt)) = (
        perf_tokens(stderr, "samplers time"),
        perf_tokens(stderr, "prompt eval time"),
    ) else {
        return Ok(());
    };
    let generated = sampled.saturating_sub(prompt);
    if generated < u64::from(n_predict) && !stdout.trim_end().ends_with("[end of text]") {
        return Err(format!(
            "it generated {generated} of the {n_predict} tokens asked (-n {n_predict}) and did \
             not reach the end of text: it was cut short"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERF: &str = "0.01.762.748 I common_perf_print:    sampling time =      31.87 ms
0.01.762.761 I common_perf_print:    samplers time =      17.97 ms /   150 tokens
0.01.762.769 I common_perf_print:        load time =     136.35 ms
0.01.762.777 I common_perf_print: prompt eval time =      12.53 ms /    22 tokens (    0.57 ms per token,  1756.21 tokens per second)
0.01.762.785 I common_perf_print:        eval time =     465.89 ms /   127 runs   (    3.67 ms per token,   272.59 tokens per second)
0.01.762.792 I common_perf_print:       total time =    1258.94 ms /   149 tokens
";

    #[test]
    fn a_completion_is_complete_with_its_closing_lines_and_tokens() {
        // llama.cpp b-0.3.36's own lines, from a run of -n 128 on the tiny model.
        completion(128, "text", PERF).unwrap();
        let err = completion(128, "text", "generate: n_ctx = 2048\n").unwrap_err();
        assert!(err.contains("closing lines"), "{err}");
        let err = completion(129, "text", PERF).unwrap_err();
        assert!(err.contains("generated 128 of the 129 tokens"), "{err}");
        completion(129, "text [end of text]\n", PERF).unwrap();
    }

    #[test]
    fn perplexity_and_bench_need_their_last_lines() {
        perplexity(false, "", "x\nFinal estimate: PPL = 10.0 +/- 0.1\n").unwrap();
        assert!(perplexity(false, "", "calculating").is_err());
        perplexity(true, "Same top p: 100.000 ± 0.000 %\n", "").unwrap();
        assert!(perplexity(true, "Mean    KLD:   0.1", "").is_err());
        bench_json("[\n  {}\n]\n").unwrap();
        assert!(bench_json("[\n  {},").is_err());
        assert!(bench_json("").is_err());
    }
}
