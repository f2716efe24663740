//! `capshim report --help`'s text after the options: the statistics (with the constants they
//! use), the bundles it checks and the layouts it derives again.

use crate::analysis::interval;
use crate::bundle::schema::{Kind, derivable};

/// The text after the options; the statistics' constants come from [`interval`].
pub fn after_help() -> String {
    format!(
        "\
Each --arm names a column and one or more llama-bench `-o json` or `-o jsonl` files; rows merge by
(n_prompt, n_gen, n_depth), `missing` where an arm lacks one. `stock` (or --stock) is the reference
for speedups, `host` (or --host, or --baseline's host files or bundle) for percent of host, 100 ×
arm median / host median (from several host processes a two-sample estimate with its interval:
docs/bench.md). Figures: medians of samples_ts, tokens/s (`bench --command`: wall seconds, or the
metric in its unit; lower-is-better ones as stock / arm).

Each file is one llama-bench process (a round): file i of an arm is paired with file i of the
stock arm, so give them in the order they ran. A speedup gets a {level}% interval and a verdict
(faster, slower, no measurable difference within ±{band}%, inconclusive) from at least {min} such
pairs, as `capshim bench --help` describes; with fewer it has none, and the report says why.
In a bench bundle the level is exact when the arm changes speed by a constant factor and nothing
carries over between processes, and approximate under carry-over, for arms of very different
durations under wall-clock disturbances, and for an effect that is not constant (the pseudo-median
of the rounds' ratios) (docs/bench.md, What is exact). For --arm files capshim cannot know the
order they ran in: their interval holds only if each round's ratio scatters symmetrically and
independently around the true one (docs/bench.md, The method).
{BUNDLES_HELP}{layouts}{AFTER_HELP}",
        layouts = layouts_help(),
        level = interval::percent_text(interval::CONFIDENCE_LEVEL),
        band = interval::percent_text(interval::NOISE),
        min = interval::MIN_ROUNDS,
    )
}

/// The paragraph on layouts, naming the ones this capshim derives.
fn layouts_help() -> String {
    let list = |kind| {
        let v: Vec<String> = derivable(&kind).iter().map(u32::to_string).collect();
        v.join(", ")
    };
    format!(
        "

A bundle whose layout this capshim does not derive again is refused (exit code 3), naming the
file and the field: a kind other than bench, verify, selftest or tune, or a schema_version
(environment.json, or summary.json in the oldest bundles) that is not one it derives (bench
{bench}; verify {verify}; selftest {selftest}; tune {tune}; the layouts earlier capshims wrote, and why they
are not derived, are in docs/bundles.md). With --as-written its checksums (and signature) are
still checked, and its own report.md (summary.json with --json, results.csv with --csv,
chart.svg with --svg) is printed as written after a first line on stdout starting
`UNVERIFIED:` (the same on stderr), exit code 4. It is shown on its own.",
        bench = list(Kind::Bench),
        verify = list(Kind::Verify),
        selftest = list(Kind::Selftest),
        tune = list(Kind::Tune),
    )
}

const BUNDLES_HELP: &str = "

BUNDLE_DIR arguments are evidence bundles written by `capshim bench`, `capshim verify`,
`capshim selftest` or `capshim tune`. Each is checked before anything is shown: every file
against its SHA256SUMS (no file changed, missing or added; no symbolic link or special file);
with --allowed-signers, SHA256SUMS.sig against SHA256SUMS; then every derived file (bench:
summary.json, report.md, results.csv, chart.svg, and rounds.svg from layout 6; verify:
summary.json, report.md; selftest: checks.json, report.md; tune: summary.json, report.md,
recommended.toml, and each verify bundle inside it as a verify bundle) is derived again from the
primary files (raw/ and environment.json) and must match byte for byte.
What each check proves, and what SHA256SUMS alone cannot (anyone who can edit the files can
write a new one; only a signature says who sealed it): docs/bundles.md.";

const AFTER_HELP: &str = "

Several bench bundles give one table, arms named <bundle>/<arm>, each compared only with its own
bundle's stock and host arms (no percent of host when its bundle has no host arm), unless --stock /
--host name an arm, which every arm then uses. An arm compared with a stock arm of another bundle
(or a bundle's arm with --arm files) did not run in one bench's random order with it: it gets a
ratio of medians and its spread, no interval and no verdict. --matrix puts bench and verify
bundles of many machines in one table (rows machine × model, columns arm × test, speedups only
within a bundle); --llama-json prints their llama-bench results for compare-llama-bench.py
(docs/report.md); neither takes a bench --command bundle, whose figures are not tokens/s. A
verify or tune bundle's report (summary.json with --json), or a selftest bundle's (checks.json
with --json), is printed on its own.

Exit codes:
  0  the report was printed
  1  error (unreadable input, with the OS error; non-llama-bench input; models disagree within an
     arm; a --baseline host bundle that fails its check, or a host of another model than the
     arms; ssh-keygen missing for --allowed-signers)
  2  bad command line (also: no inputs, an --arm without NAME=FILE, the same file or a copy of it
     twice in one --arm, one arm name given twice, the same bundle twice, --stock/--host naming
     no arm or both naming one, a --baseline given twice or as a copy, sharing no test with
     the arms, also an arm's file, or with --host)
  3  a bundle is not trustworthy: changed after it was written (SHA256SUMS mismatch, missing or
     added files, a symbolic link, SHA256SUMS naming a path outside it or not a file), or
     unfinished (no SHA256SUMS: the run that wrote it was interrupted or failed; its INCOMPLETE
     note says why), or a derived file is not what its raw files derive to (SHA256SUMS
     regenerated after an edit), or a --command bundle's two copies of its workload in
     environment.json disagree (`workload` and `bundle.workload`), or its kind or schema_version
     is not a layout this capshim derives again (without --as-written), or, with
     --allowed-signers, its signature is missing or bad
  4  shown, but not a complete verified bundle: --as-written printed a bundle whose derived
     files were not derived again, or --partial the completed rounds of an unfinished bench

Examples:
  capshim report --arm host=host.json --arm stock=stock.json --arm unlocked=unlocked.json
  capshim report --arm stock=s1.json,s2.json --arm apple9-64k=u1.json,u2.json --json
  capshim report capshim-bench-20261130-210000
  capshim report bundle-m1 bundle-m2 --csv
  capshim report --matrix bundle-m1 bundle-m4 verify-m1 --csv
  capshim report --llama-json bundle-m1 > arms.json
  capshim report --allowed-signers allowed_signers --identity me@example.com bundle-m1
";
