//! test-backend-ops' console output (`test-backend-ops test -b DEVICE`): every op run on the
//! device and on the CPU reference, compared. Read from the lines tests/test-backend-ops.cpp
//! prints (llama.cpp 0c1e570): `Backend 1/2: MTL0`, then per test `  OP(params): OK` or
//! `FAIL` (colored; a failed comparison prints `[OP] ERR = … > … ` first) or
//! `not supported [MTL0]`, then `  N/M tests passed`, `Failing tests:` with one name per
//! line, the Metal-only `  fa_vec (Q,NE) slice: N cases run, M failed`, and
//! `  Backend MTL0: OK`. A device other than the one asked for prints `  Skipping`; a build
//! without Metal has no `MTL0` at all, skips every device and exits 0.

use serde::{Deserialize, Serialize};

/// What test-backend-ops found on the device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelTests {
    /// The device tested, e.g. `MTL0`.
    pub device: String,
    /// Its description (`Device description:`), e.g. `Apple M1 Ultra`.
    pub description: Option<String>,
    /// Test cases whose result matched the CPU's.
    pub passed: u64,
    /// Test cases whose result did not (or that failed to run).
    pub failed: u64,
    /// Test cases the device does not support (not run).
    pub unsupported: u64,
    /// The failed cases' names, `OP(params)`, as listed under `Failing tests:`.
    pub failing: Vec<String>,
}

/// What one test-backend-ops run says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum BackendOps {
    /// The device was tested.
    Tested(KernelTests),
    /// No device of that name: every device was skipped.
    NoDevice {
        /// The device asked for.
        device: String,
        /// The devices the build has.
        devices: Vec<String>,
    },
}

/// Output that is not a finished test-backend-ops run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BackendOpsError {
    /// A line it always prints is missing.
    #[error(
        "its output has no {0} line: it is not test-backend-ops' console output (llama.cpp 0c1e570's \
         format), or the run stopped early"
    )]
    Missing(String),
}

/// `text` without ANSI color sequences (`ESC [ … m`).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `N/M` at the start of `text`.
fn fraction(text: &str) -> Option<(u64, u64)> {
    let (n, rest) = text.trim().split_once('/')?;
    let m = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    Some((n.parse().ok()?, m.parse().ok()?))
}

/// Reads test-backend-ops' stdout for `device`.
///
/// # Errors
/// [`BackendOpsError`] when the device's section is cut short, or no device is listed.
pub fn parse(stdout: &str, device: &str) -> Result<BackendOps, BackendOpsError> {
    let text = plain(stdout);
    let mut devices = Vec::new();
    let mut section: Option<KernelTests> = None;
    let mut summary = None;
    let mut in_failing = false;
    let mut slice_failures = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(rest) = line.strip_prefix("Backend ")
            && let Some((_, name)) = rest.split_once(": ")
            && fraction(rest).is_some()
        {
            devices.push(name.trim().to_string());
            in_failing = false;
            section = (name.trim() == device).then(|| KernelTests {
                device: device.to_string(),
                ..KernelTests::default()
            });
            continue;
        }
        let Some(tests) = section.as_mut() else {
            continue;
        };
        if trimmed.starts_with("Skipping") {
            section = None;
        } else if let Some(d) = trimmed.strip_prefix("Device description:") {
            tests.description = Some(d.trim().to_string());
        } else if trimmed.ends_with("tests passed") {
            summary = fraction(trimmed);
        } else if trimmed == "Failing tests:" {
            in_failing = true;
        } else if let Some(case) = trimmed.strip_prefix("FAIL fa_vec slice: ") {
            slice_failures.push(format!("FLASH_ATTN_EXT fa_vec slice: {case}"));
        } else if let Some(rest) = trimmed.strip_prefix("fa_vec (Q,NE) slice: ") {
            // `N cases run, M failed`
            let numbers: Vec<u64> = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|n| n.parse().ok())
                .collect();
            if let [run, failed] = numbers[..] {
                tests.passed += run.saturating_sub(failed);
                tests.failed += failed;
            }
        } else if trimmed.contains("): not supported [") {
            tests.unsupported += 1;
        } else if trimmed.starts_with("Backend ") && trimmed.contains(": ") {
            // `  Backend MTL0: OK`: the section is over.
            let Some((passed, total)) = summary.take() else {
                return Err(BackendOpsError::Missing(format!(
                    "`N/M tests passed` for {device}"
                )));
            };
            let mut tests = section.take().expect("in a section");
            tests.passed += passed;
            tests.failed += total.saturating_sub(passed);
            tests.failing.append(&mut slice_failures);
            return Ok(BackendOps::Tested(tests));
        } else if in_failing && line.starts_with("  ") && !trimmed.is_empty() {
            tests.failing.push(trimmed.to_string());
        } else {
            in_failing = false;
        }
    }
    if section.is_some() {
        return Err(BackendOpsError::Missing(format!(
            "`Backend {device}: OK|FAIL`"
        )));
    }
    if devices.is_empty() {
        return Err(BackendOpsError::Missing(
            "`Backend N/M: DEVICE`".to_string(),
        ));
    }
    Ok(BackendOps::NoDevice {
        device: device.to_string(),
        devices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_METAL: &str = include_str!("../../tests/fixtures/llama/backend-ops-no-metal.stdout");
    const CPU_ADD: &str = include_str!("../../tests/fixtures/llama/backend-ops-cpu-add.stdout");

    #[test]
    fn a_build_without_metal_skips_every_device() {
        assert_eq!(
            parse(NO_METAL, "MTL0").unwrap(),
            BackendOps::NoDevice {
                device: "MTL0".into(),
                devices: vec!["CPU".into()]
            }
        );
    }

    #[test]
    fn a_real_test_run_counts_its_cases() {
        let BackendOps::Tested(t) = parse(CPU_ADD, "CPU").unwrap() else {
            panic!("CPU was tested");
        };
        assert_eq!((t.passed, t.failed, t.unsupported), (47, 0, 0));
        assert_eq!(t.description.as_deref(), Some("CPU"));
        assert!(t.failing.is_empty());
        // Cut short (a crash mid-run): no summary.
        let cut = &CPU_ADD[..CPU_ADD.find("tests passed").unwrap() - 10];
        assert!(parse(cut, "CPU").is_err());
        assert!(parse("Segmentation fault\n", "MTL0").is_err());
    }

    /// A Metal run in the formats test-backend-ops.cpp (0c1e570) prints: colored results, a
    /// failed comparison's `[OP] ERR = …` printed before the case's name, unsupported cases,
    /// the `Failing tests:` list and the Metal-only fa_vec slice.
    #[test]
    fn the_source_formats_as_a_metal_build_prints_them() {
        let (ok, fail) = ("\u{1b}[1;32mOK\u{1b}[0m", "\u{1b}[1;31mFAIL\u{1b}[0m");
        let mm = "MUL_MAT(type_a=f16,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)";
        let fa = "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=4,nr23=[1,1],kv=512,nb=1,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,prec=f32,type_KV=bf16,permute=[0,1,2,3])";
        let stdout = format!(
            "Testing 2 devices\n\nBackend 1/2: MTL0\n  Device description: Apple M1 Ultra\n  \
             Device memory: 98304 MB (98303 MB free)\n\n  ADD(type=f32,ne=[10,5,4,3],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0): {ok}\n\
             [MUL_MAT] ERR = 0.012345678 > 0.000500000   {mm}: {fail}\n  \
             {fa}: not supported [MTL0] \n  \
             SOFT_MAX(type=f32,ne=[16,16,1,1],mask=0,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,max_bias=0.000000,inplace=0): {ok}\n  \
             3/4 tests passed\n\nFailing tests:\n  {mm}\n\
             Running FA vec slice tests (env LLAMA_TEST_FA_VEC_DISABLE=1 to skip)\n  \
             FAIL fa_vec slice: dk=128 dv=128 Q=2 ne=1 type=f16 ne01=1 ne11=512 sinks=0\n  \
             fa_vec (Q,NE) slice: 48 cases run, 1 failed\n  Backend MTL0: {fail}\n\
             Backend 2/2: CPU\n  Skipping\n1/2 backends passed\n{fail}\n"
        );
        let BackendOps::Tested(t) = parse(&stdout, "MTL0").unwrap() else {
            panic!("MTL0 was tested");
        };
        assert_eq!(t.description.as_deref(), Some("Apple M1 Ultra"));
        assert_eq!((t.passed, t.failed, t.unsupported), (3 + 47, 1 + 1, 1));
        assert_eq!(
            t.failing,
            vec![
                mm.to_string(),
                "FLASH_ATTN_EXT fa_vec slice: dk=128 dv=128 Q=2 ne=1 type=f16 ne01=1 ne11=512 sinks=0"
                    .to_string()
            ]
        );
        // Asking for another device finds MTL0 and CPU, and tests neither.
        assert_eq!(
            parse(
                &stdout.replace(
                    "Backend 1/2: MTL0\n  Device",
                    "Backend 1/2: MTL0\n  Skipping\n  Device"
                ),
                "MTL1"
            )
            .unwrap(),
            BackendOps::NoDevice {
                device: "MTL1".into(),
                devices: vec!["MTL0".into(), "CPU".into()]
            }
        );
    }
}
