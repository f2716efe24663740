//! Tests of the knob catalogue: the data file, the knobs kept per machine, the candidates and
//! their arms (through the arms parser and bench's and verify's argument checks), and
//! docs/tune.md's table.

use super::compose::Base;
use super::knobs::*;
use crate::analysis::Role;
use crate::arms::spec::{parse as parse_arm, valid_label};
use crate::arms::{Arm, ArmError};

const PINNED_BUILD: u64 = 11312;

fn found(platform: Platform, workload: Workload) -> Found {
    Found {
        platform,
        workload,
        llama_build: Some(PINNED_BUILD),
        cpu_work: platform == Platform::Linux,
        native_known: platform == Platform::Macos,
        cpus: 8,
    }
}

fn names(selection: &Selection) -> Vec<&str> {
    selection.knobs.iter().map(|k| k.name.as_str()).collect()
}

/// The arm `spec` as bench and verify would get it, checked by their argument rules.
fn checked(spec: &str) -> Result<(), ArmError> {
    let s = parse_arm(spec)?;
    let arm = Arm {
        name: s.label.clone(),
        profile_name: s.name.clone().unwrap_or_default(),
        profile: None,
        role: Role::Other,
        env: s.env.clone(),
        args: s.args.clone(),
        provenance: String::new(),
    };
    crate::bench::plan::check_arm_args(std::slice::from_ref(&arm), &[])?;
    crate::verify::plan::check_arm_args(std::slice::from_ref(&arm), &[])
}

#[test]
fn the_catalogue_parses_and_holds_the_required_knobs() {
    let c = catalogue();
    let all: Vec<&str> = c.knobs.iter().map(|k| k.name.as_str()).collect();
    for required in [
        "profile",
        "GGML_METAL_NO_RESIDENCY",
        "GGML_METAL_CONCURRENCY_DISABLE",
        "GGML_METAL_FUSION_DISABLE",
        "GGML_METAL_GRAPH_OPTIMIZE_DISABLE",
        "flash-attn",
        "ubatch",
        "batch",
        "threads",
        "MLX_MAX_OPS_PER_BUFFER",
        "MLX_MAX_MB_PER_BUFFER",
    ] {
        assert!(all.contains(&required), "{required} missing");
    }
    for k in &c.knobs {
        assert!(
            !k.workload.is_empty() && !k.platforms.is_empty(),
            "{}",
            k.name
        );
        assert!(!k.why.is_empty() && !k.default.is_empty(), "{}", k.name);
        // Every source names its repository, commit, file and line.
        for s in &k.sources {
            let words: Vec<&str> = s.split(' ').collect();
            assert!(words.len() >= 3, "{}: {s}", k.name);
            if words[0] != "capshim" {
                let (_, line) = words[2].rsplit_once(':').expect("path:line");
                assert!(line.parse::<u32>().is_ok(), "{}: {s}", k.name);
            }
        }
        // A knob read from llama.cpp's source says from which build.
        let from_llama = k.sources.iter().any(|s| s.starts_with("llama.cpp "));
        assert_eq!(from_llama, k.min_build.is_some(), "{}", k.name);
    }
    // A knob without values is refused.
    let bad = CATALOGUE.replacen(
        "values = [{ value = \"1\", items = [\"GGML_METAL_NO_RESIDENCY=1\"] }]",
        "values = []",
        1,
    );
    assert!(parse(&bad).unwrap_err().contains("GGML_METAL_NO_RESIDENCY"));
    assert!(parse("[pinned]\nllama_cpp = []\n[[knob]]\nname = 1").is_err());
}

#[test]
fn every_candidate_is_a_valid_arm_that_bench_and_verify_accept() {
    let c = catalogue();
    let mut seen = std::collections::BTreeSet::new();
    for reference in ["native", "apple9-64k"] {
        let singles = singles(&c.knobs, reference);
        // Each value once, the reference's own profile excepted.
        let values: usize = c.knobs.iter().map(|k| k.values.len()).sum();
        assert_eq!(singles.len(), values - 1);
        for s in &singles {
            assert!(valid_label(&s.label), "{}", s.label);
            assert!(
                seen.insert((reference, s.label.clone())),
                "{} twice",
                s.label
            );
            let spec = s.arm_spec(&Base::new(reference, None).unwrap()).unwrap();
            checked(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            let parsed = parse_arm(&spec).unwrap();
            assert_eq!(parsed.label, s.label);
        }
        // All the singles of distinct knobs together are one valid arm too (the words of
        // every tool argument joined into one item per tool).
        let mut one_each: Vec<Candidate> = Vec::new();
        for s in &singles {
            if !one_each
                .iter()
                .any(|o| o.settings[0].knob == s.settings[0].knob)
            {
                one_each.push(s.clone());
            }
        }
        let all = Candidate {
            label: "all".into(),
            settings: one_each.iter().flat_map(|o| o.settings.clone()).collect(),
        };
        let spec = all.arm_spec(&Base::new(reference, None).unwrap()).unwrap();
        checked(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    }
    // The checks do refuse: an option that changes the tests, one a tool lacks the spelling of.
    assert!(checked("x=native,bench-args=-p 512").is_err());
    assert!(checked("x=native,common-args=-m other.gguf").is_err());
}

#[test]
fn arm_specs_merge_tool_arguments_and_replace_the_profile() {
    let c = catalogue();
    let singles = singles(&c.knobs, "native");
    let pick = |label: &str| singles.iter().find(|s| s.label == label).unwrap().clone();
    assert_eq!(
        pick("no-residency")
            .arm_spec(&Base::new("native", None).unwrap())
            .unwrap(),
        "no-residency=native,GGML_METAL_NO_RESIDENCY=1"
    );
    assert_eq!(
        pick("fa-on")
            .arm_spec(&Base::new("native", None).unwrap())
            .unwrap(),
        "fa-on=native,bench-args=-fa 1,common-args=-fa on"
    );
    let combos = combine(&[pick("fa-on"), pick("apple9-64k"), pick("ub-256")]);
    let labels: Vec<&str> = combos.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "fa-on_apple9-64k",
            "fa-on_ub-256",
            "apple9-64k_ub-256",
            "fa-on_apple9-64k_ub-256"
        ]
    );
    let three = &combos[3];
    assert_eq!(three.settings[0].knob, "profile");
    let spec = three.arm_spec(&Base::new("native", None).unwrap()).unwrap();
    assert_eq!(
        spec,
        "fa-on_apple9-64k_ub-256=apple9-64k,bench-args=-fa 1 -ub 256,common-args=-fa on -ub 256"
    );
    checked(&spec).unwrap();
}

#[test]
fn combinations_use_the_best_few_and_never_set_a_knob_twice() {
    let c = catalogue();
    let singles = singles(&c.knobs, "native");
    let pick = |label: &str| singles.iter().find(|s| s.label == label).unwrap().clone();
    // Two values of ubatch among the best three: only the pairs across knobs.
    let combos = combine(&[pick("ub-256"), pick("ub-1024"), pick("no-fusion")]);
    let labels: Vec<&str> = combos.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["ub-256_no-fusion", "ub-1024_no-fusion"]);
    // Only the first COMBINE_TOP count: a fourth best is not combined.
    let combos = combine(&[
        pick("fa-on"),
        pick("no-fusion"),
        pick("no-residency"),
        pick("ub-256"),
    ]);
    assert_eq!(combos.len(), 4);
    assert!(combos.iter().all(|c| !c.label.contains("ub-256")));
    // One or none: nothing to combine.
    assert!(combine(&[pick("fa-on")]).is_empty());
    assert!(combine(&[]).is_empty());
}

#[test]
fn knobs_that_do_not_exist_here_are_left_out_with_the_reason() {
    let c = catalogue();
    // Linux, llama-bench on the CPU: no Metal variables; threads up to the CPUs.
    let mut linux = found(Platform::Linux, Workload::Llama);
    linux.cpus = 2;
    let s = select(&c, &linux);
    assert_eq!(
        names(&s),
        ["profile", "flash-attn", "ubatch", "batch", "threads"]
    );
    let threads = s.knobs.iter().find(|k| k.name == "threads").unwrap();
    let values: Vec<&str> = threads.values.iter().map(|v| v.value.as_str()).collect();
    assert_eq!(values, ["1", "2"]);
    let profile = s.knobs.iter().find(|k| k.name == "profile").unwrap();
    assert_eq!(
        profile.values.len(),
        1,
        "native has no values without a chip"
    );
    let reasons: Vec<String> = s
        .left_out
        .iter()
        .map(|l| format!("{}: {}", l.knob, l.reason))
        .collect();
    assert!(
        reasons.contains(
            &"GGML_METAL_NO_RESIDENCY: it exists on macos only, not on linux".to_string()
        ),
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r.starts_with("threads: 4 threads")));
    assert!(reasons.iter().any(|r| r.starts_with("profile: native:")));
    // MLX's knobs belong to --command, not to llama-bench: neither kept nor left out.
    assert!(!reasons.iter().any(|r| r.starts_with("MLX")));
    assert!(s.notes.is_empty());

    // macOS with every layer on the GPU: the Metal variables, no threads.
    let mut mac = found(Platform::Macos, Workload::Llama);
    mac.cpu_work = false;
    let s = select(&c, &mac);
    assert_eq!(
        names(&s),
        [
            "profile",
            "GGML_METAL_NO_RESIDENCY",
            "GGML_METAL_CONCURRENCY_DISABLE",
            "GGML_METAL_FUSION_DISABLE",
            "GGML_METAL_GRAPH_OPTIMIZE_DISABLE",
            "flash-attn",
            "ubatch",
            "batch"
        ]
    );
    assert_eq!(s.left_out.len(), 1);
    assert!(s.left_out[0].reason.contains("GPU does all the work"));

    // --command on macOS: the profiles and MLX's variables.
    let s = select(&c, &found(Platform::Macos, Workload::Command));
    assert_eq!(
        names(&s),
        ["profile", "MLX_MAX_OPS_PER_BUFFER", "MLX_MAX_MB_PER_BUFFER"]
    );
}

#[test]
fn the_llama_cpp_build_decides_and_an_unknown_one_is_said() {
    let c = catalogue();
    // The vendored build reports build_number 1 and its commit.
    assert_eq!(llama_build(&c, 1, "0c1e570"), Some(PINNED_BUILD));
    assert_eq!(llama_build(&c, 1, "0C1E57098bba"), Some(PINNED_BUILD));
    assert_eq!(llama_build(&c, 6000, "abcdef0"), Some(6000));
    assert_eq!(llama_build(&c, 1, "abcdef0"), None);
    assert_eq!(
        llama_build(&c, 0, "0c1"),
        None,
        "too short to name a commit"
    );

    let mut old = found(Platform::Macos, Workload::Llama);
    old.llama_build = Some(6000);
    let s = select(&c, &old);
    assert_eq!(names(&s), ["profile"]);
    assert!(
        s.left_out
            .iter()
            .any(|l| l.knob == "flash-attn"
                && l.reason.contains("build 6000 is older than build 11312")),
        "{:?}",
        s.left_out
    );
    let mut unknown = old;
    unknown.llama_build = None;
    let s = select(&c, &unknown);
    assert!(names(&s).contains(&"flash-attn"));
    assert_eq!(s.notes.len(), 1);
    assert!(s.notes[0].contains("not known"));
}

#[test]
fn docs_tune_md_lists_the_catalogue() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/tune.md"))
        .expect("docs/tune.md");
    let table = markdown_table(&catalogue());
    assert!(
        page.contains(&table),
        "docs/tune.md's knob table differs from crates/cli/data/knobs.toml; put this table \
         there:\n{table}"
    );
}
