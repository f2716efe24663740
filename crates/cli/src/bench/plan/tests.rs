use super::*;

#[test]
fn output_format_options_are_refused() {
    for bad in [
        "-o",
        "--output",
        "-oe",
        "--output=csv",
        "-m",
        "-r",
        "-p",
        "--n-gen",
        "-hf",
        "-ocsv",
        "-ojsonl",
        "-oemd",
        "-d",
        "--n-depth",
    ] {
        let err = check_extra_args(&["-t".into(), "2".into(), bad.into()]).unwrap_err();
        assert!(
            err.to_string().contains("after `--` is refused"),
            "{bad}: {err}"
        );
    }
    check_extra_args(&[
        "-t".into(),
        "2".into(),
        "-ngl".into(),
        "99".into(),
        "-fa".into(),
        "on".into(),
        "-ot".into(),
        "exps=CPU".into(),
    ])
    .unwrap();
}

#[test]
fn an_arms_bench_args_may_not_change_what_is_measured_or_repeat_the_shared_ones() {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let arm = |bench: &[&str]| {
        let mut a = ArmPlan::stock();
        a.name = "fa1".into();
        a.args.bench = v(bench);
        vec![ArmPlan::stock(), a]
    };
    check_arm_args(&arm(&["-fa", "1", "-ub", "256"]), &v(&["-t", "2"])).unwrap();
    for (bench, extra, says) in [
        (
            &["-p", "64"][..],
            &[][..],
            "\"-p\" is refused: use capshim's -p",
        ),
        (&["-n", "8"], &[], "\"-n\" is refused"),
        (&["-r", "1"], &[], "\"-r\" is refused"),
        (&["-m", "x.gguf"], &[], "\"-m\" is refused"),
        (&["-ojson"], &[], "\"-ojson\" is refused"),
        (
            &["-d", "512"],
            &[],
            "-d is refused: it changes the tests measured",
        ),
        (&["-pg", "8,4"], &[], "-pg is refused"),
        (&["-fa", "0,1"], &[], "sweeps a setting"),
        (
            &["-fa", "1", "--flash-attn", "0"],
            &[],
            "give --flash-attn twice (first as -fa",
        ),
        (
            &["-t", "4"],
            &["-t", "2"],
            "option -t repeats -t, given to every arm after `--`",
        ),
        (
            &["--threads", "4"],
            &["-t", "2"],
            "option --threads repeats -t",
        ),
    ] {
        let err = check_arm_args(&arm(bench), &v(extra))
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{bench:?}: {err}");
        assert!(err.starts_with("arm \"fa1\": "), "{err}");
    }
    let plan_args = |arm: &ArmPlan| {
        let mut plan = Plan {
            llama_bench: "llama-bench".into(),
            model: "m.gguf".into(),
            repetitions: 1,
            n_prompt: "8".into(),
            n_gen: "4".into(),
            n_depth: None,
            cooldown: std::time::Duration::ZERO,
            extra: v(&["-t", "2"]),
            arms: Vec::new(),
            rounds: 6,
            dylib: None,
            allow_inactive: false,
            keep_going: false,
            baseline: Vec::new(),
            baseline_sums: Vec::new(),
            output: None,
        };
        plan.arms.push(arm.clone());
        plan.llama_args_for(arm)
    };
    let arms = arm(&["-fa", "1"]);
    assert!(plan_args(&arms[1]).ends_with(&v(&["-t", "2", "-fa", "1"])));
    assert!(plan_args(&arms[0]).ends_with(&v(&["json", "-t", "2"])));
}

#[test]
fn planned_tests_follow_llama_bench_and_a_baseline_must_share_one() {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let names = |p: &Planned| p.tests.iter().map(TestKey::name).collect::<Vec<_>>();
    let p = planned_tests("512", "128", &[]).unwrap();
    assert_eq!(names(&p), ["pp512", "tg128"]);
    let p = planned_tests(
        "0,64",
        "16",
        &args(&["-t", "2", "-d", "0,512", "-pg", "8,4"]),
    )
    .unwrap();
    assert_eq!(
        names(&p),
        [
            "pp64",
            "tg16",
            "pp8+tg4",
            "pp64 @ d512",
            "tg16 @ d512",
            "pp8+tg4 @ d512"
        ]
    );
    assert_eq!(planned_tests("128-512+128", "128", &[]), None);
    assert_eq!(planned_tests("512", "128", &args(&["-d"])), None);

    let host = planned_tests("512", "128", &[]).unwrap().tests;
    let err = check_baseline("h.json", &host, &planned_tests("64", "16", &[]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "--baseline h.json has the tests pp512, tg128, but this bench runs pp64, tg16"
        ),
        "{err}"
    );
    assert!(err.contains("here -p 512 -n 128"), "{err}");
    let warnings =
        check_baseline("h.json", &host, &planned_tests("512", "16", &[]).unwrap()).unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("the baseline h.json has no tg16"),
        "{warnings:?}"
    );
    assert!(
        check_baseline("h.json", &host, &planned_tests("512", "128", &[]).unwrap())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn sweeps_after_the_double_dash_are_refused() {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for (bad, expected) in [
        (args(&["-t", "1,2"]), "-t 1,2"),
        (args(&["-ngl", "0,99"]), "-ngl 0,99"),
        (args(&["--threads=4,8"]), "--threads=4,8"),
        (args(&["-fa", "0,1"]), "-fa 0,1"),
        (args(&["-t", "1", "--threads", "2"]), "first as -t 1"),
        (args(&["-ctk", "f16", "-ctk", "q8_0"]), "given twice"),
        (
            args(&["-ngl", "0-99+99"]),
            "-ngl 0-99+99 after `--` sweeps a setting (\"0-99+99\" is a range",
        ),
        (args(&["--threads=1-4*2"]), "\"1-4*2\" is a range"),
        (args(&["-b", "512-1024"]), "\"512-1024\" is a range"),
    ] {
        let err = check_extra_args(&bad).unwrap_err().to_string();
        assert!(err.contains(expected), "{bad:?}: {err}");
        assert!(err.contains("one value per option after `--`"), "{err}");
    }
    for zero in [&["-t", "0"][..], &["--threads=0"], &["-t", "00"]] {
        let err = check_extra_args(&args(zero)).unwrap_err().to_string();
        assert!(
            err.contains("asks for zero threads") && err.contains("give at least 1"),
            "{err}"
        );
    }
    check_extra_args(&args(&[
        "-t", "8", "-ngl", "-1", "-pg", "512,128", "-dev", "Metal-0",
    ]))
    .unwrap();
}
