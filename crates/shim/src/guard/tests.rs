//! The guard's decision on Mach-O fixtures and scripts, and its edit of the environment.

use std::ffi::{CStr, CString, c_char};

use capshim_macho::testdata::{macho, universal};
use object::macho as m;

use super::envp::{self, Entry, classify, injection_without_capshim};
use super::file::{judge, judge_searched};
use super::slice::{Verdict, verdict};
use super::{Program, with_guarded_env};

const ARM64E: u32 = m::CPU_SUBTYPE_ARM64E;
/// arm64e with the pointer-authentication ABI bits Apple's own programs carry
/// (`CPU_SUBTYPE_PTRAUTH_ABI` and a version in the capability byte).
const ARM64E_ABI: u32 = m::CPU_SUBTYPE_ARM64E | 0x8000_0000;

fn exe(cputype: u32, subtype: u32) -> Vec<u8> {
    macho(cputype, subtype, m::MH_EXECUTE, None)
}

#[test]
fn the_slice_that_runs_decides() {
    let arm64 = exe(m::CPU_TYPE_ARM64, m::CPU_SUBTYPE_ARM64_ALL);
    let arm64e = exe(m::CPU_TYPE_ARM64, ARM64E_ABI);
    let x86 = exe(m::CPU_TYPE_X86_64, m::CPU_SUBTYPE_X86_64_ALL);
    assert_eq!(verdict(&arm64), Verdict::Loads);
    assert_eq!(
        verdict(&exe(m::CPU_TYPE_ARM64, m::CPU_SUBTYPE_ARM64_V8)),
        Verdict::Loads
    );
    assert_eq!(verdict(&arm64e), Verdict::CannotLoad);
    assert_eq!(
        verdict(&exe(m::CPU_TYPE_ARM64, ARM64E)),
        Verdict::CannotLoad
    );
    // Apple's programs: universal x86_64 + arm64e.
    let apple = universal(&[
        (m::CPU_TYPE_X86_64, m::CPU_SUBTYPE_X86_64_ALL, x86.clone()),
        (m::CPU_TYPE_ARM64, ARM64E_ABI, arm64e.clone()),
    ]);
    assert_eq!(verdict(&apple), Verdict::CannotLoad);
    // A universal arm64 + x86_64 program runs its arm64 slice.
    let ours = universal(&[
        (m::CPU_TYPE_ARM64, 0, arm64.clone()),
        (m::CPU_TYPE_X86_64, m::CPU_SUBTYPE_X86_64_ALL, x86.clone()),
    ]);
    assert_eq!(verdict(&ours), Verdict::Loads);
    // x86_64 only runs translated, as an x86_64 process.
    assert_eq!(verdict(&x86), Verdict::CannotLoad);
    // Both arm64 and arm64e: which runs depends on the kernel and the signer; not judged.
    let both = universal(&[
        (m::CPU_TYPE_ARM64, 0, arm64.clone()),
        (m::CPU_TYPE_ARM64, ARM64E, arm64e.clone()),
    ]);
    assert_eq!(verdict(&both), Verdict::Unsure);
}

#[test]
fn odd_files_are_not_judged() {
    let arm64e = exe(m::CPU_TYPE_ARM64, ARM64E);
    for odd in [
        &b""[..],
        b"\x7fELF\x02\x01\x01",
        &arm64e[..6],
        b"\xca\xfe\xba\xbe\x00\x00\x00\x00",
        // A Java class file: 0xcafebabe and a version where the slice count would be.
        b"\xca\xfe\xba\xbe\x00\x00\x00\x34\x00\x00",
        b"#!",
        b"#!/bin/sh",
        b"#!   \n",
        b"#!sh\n",
    ] {
        assert_eq!(verdict(odd), Verdict::Unsure, "{odd:?}");
    }
    // A 32-bit Mach-O does not run on Apple Silicon at all.
    let mut thin32 = arm64e.clone();
    thin32[..4].copy_from_slice(&0xfeed_faceu32.to_le_bytes());
    assert_eq!(verdict(&thin32), Verdict::Unsure);
}

#[test]
fn scripts_name_their_interpreter() {
    let header = b"#! /usr/bin/env -S python3\nprint()\n";
    let Verdict::Script { start, end } = verdict(header) else {
        panic!("not a script");
    };
    assert_eq!(&header[start..end], b"/usr/bin/env");
    let Verdict::Script { start, end } = verdict(b"#!/bin/sh\n") else {
        panic!("not a script");
    };
    assert_eq!((start, end), (2, 9));
}

/// A temporary folder for files the guard reads.
struct Folder(std::path::PathBuf);

impl Folder {
    fn new(name: &str) -> Folder {
        let dir = std::env::temp_dir().join(format!("capshim-guard-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Folder(dir)
    }

    fn file(&self, name: &str, bytes: &[u8]) -> CString {
        use std::os::unix::fs::PermissionsExt;
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        CString::new(path.into_os_string().into_encoded_bytes()).unwrap()
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn scripts_are_judged_by_their_interpreter() {
    let dir = Folder::new("scripts");
    let apple = universal(&[
        (m::CPU_TYPE_X86_64, 3, exe(m::CPU_TYPE_X86_64, 3)),
        (
            m::CPU_TYPE_ARM64,
            ARM64E_ABI,
            exe(m::CPU_TYPE_ARM64, ARM64E_ABI),
        ),
    ]);
    let sh = dir.file("sh", &apple);
    let python = dir.file("python", &exe(m::CPU_TYPE_ARM64, 0));
    let text = |interpreter: &CStr| {
        format!("#!{} -e\necho hi\n", interpreter.to_str().unwrap()).into_bytes()
    };
    assert_eq!(judge(&sh), Verdict::CannotLoad);
    assert_eq!(judge(&dir.file("a.sh", &text(&sh))), Verdict::CannotLoad);
    assert_eq!(judge(&dir.file("b.py", &text(&python))), Verdict::Loads);
    // An interpreter that is itself a script: macOS refuses it; not judged.
    let a_sh = dir.file("c.sh", &text(&sh));
    assert_eq!(judge(&dir.file("d.sh", &text(&a_sh))), Verdict::Unsure);
    // Missing interpreter, missing file, a folder, a FIFO-like special file.
    assert_eq!(
        judge(&dir.file("e.sh", b"#!/nonexistent/sh\n")),
        Verdict::Unsure
    );
    assert_eq!(judge(c"/nonexistent/program"), Verdict::Unsure);
    assert_eq!(judge(c"/"), Verdict::Unsure);
    assert_eq!(judge(c"/dev/null"), Verdict::Unsure);
}

#[test]
fn spawnp_searches_the_callers_path() {
    let dir = Folder::new("path");
    let arm64e = exe(m::CPU_TYPE_ARM64, ARM64E);
    dir.file("tool", &arm64e);
    let search = CString::new(format!("/nonexistent::{}", dir.0.display())).unwrap();
    assert_eq!(judge_searched(c"tool", Some(&search)), Verdict::CannotLoad);
    assert_eq!(judge_searched(c"missing", Some(&search)), Verdict::Unsure);
    let path = dir.file("direct", &arm64e);
    assert_eq!(judge_searched(&path, None), Verdict::CannotLoad);
    assert_eq!(judge_searched(c"", Some(&search)), Verdict::Unsure);
}

#[test]
fn the_injection_variable_loses_only_capshim() {
    let mut out = [0u8; 256];
    let mut edit = |value: &[u8], own: Option<&[u8]>| {
        injection_without_capshim(value, own, &mut out).map(|n| out[..n].to_vec())
    };
    let lib = envp::LIBRARY_NAMES[1];
    let guard = [b"/opt/capshim/".as_slice(), lib].concat();
    assert_eq!(edit(&guard, None).unwrap(), b"");
    let both = [b"/a/liba:".as_slice(), &guard, b"::/b/libb"].concat();
    assert_eq!(edit(&both, None).unwrap(), b"/a/liba:/b/libb");
    // Our own path, whatever it is called.
    assert_eq!(
        edit(b"/x/renamed.lib:/a/liba", Some(b"/x/renamed.lib")).unwrap(),
        b"/a/liba"
    );
    // The plain library, in any folder, is capshim's too.
    let plain = [b"/elsewhere/".as_slice(), envp::LIBRARY_NAMES[0]].concat();
    assert_eq!(edit(&plain, None).unwrap(), b"");
    // Similar names are not.
    assert_eq!(edit(b"/a/xlibcapshim", None).unwrap(), b"/a/xlibcapshim");
    // Too long for the buffer.
    let mut tiny = [0u8; 4];
    assert_eq!(injection_without_capshim(b"/a/liba", None, &mut tiny), None);
}

#[test]
fn entries_are_kept_dropped_or_edited() {
    let var = crate::scope::INJECTION_VAR;
    let lib = std::str::from_utf8(envp::LIBRARY_NAMES[1]).unwrap();
    let e = |s: String| classify(s.as_bytes(), None);
    assert_eq!(e("CAPSHIM_APPLE_FAMILY_MAX=1009".into()), Entry::Drop);
    assert_eq!(e("CAPSHIM_OWNER_PID=12".into()), Entry::Drop);
    for alias in ["LUME_METAL_", "TART_METAL_", "VEERTU_ANKA_GPU_"] {
        assert_eq!(e(format!("{alias}APPLE_FAMILY_MAX=1009")), Entry::Drop);
    }
    assert_eq!(e(format!("{var}=/x/{lib}")), Entry::Injection);
    assert_eq!(e(format!("{var}=/x/other.lib")), Entry::Keep);
    assert_eq!(e(var.to_owned()), Entry::Keep);
    assert_eq!(e("PATH=/usr/bin".into()), Entry::Keep);
    assert_eq!(e("XCAPSHIM_LOG=off".into()), Entry::Keep);
}

/// `strings` as a NULL-terminated `envp`, with the strings kept alive beside it.
fn envp_of(strings: &[String]) -> (Vec<CString>, Vec<*const c_char>) {
    let owned: Vec<CString> = strings
        .iter()
        .map(|s| CString::new(s.as_str()).unwrap())
        .collect();
    let mut ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    (owned, ptrs)
}

/// What `with_guarded_env` passes on for `program`, as strings, and whether each kept
/// entry is the caller's own pointer.
fn passed(program: &CStr, strings: &[String]) -> Vec<(String, bool)> {
    let (_owned, ptrs) = envp_of(strings);
    // SAFETY: `ptrs` is a NULL-terminated array of the strings in `_owned`, alive here.
    unsafe {
        with_guarded_env(Program::Path(program), ptrs.as_ptr(), None, |env| {
            let mut out = Vec::new();
            let mut i = 0;
            while !(*env.add(i)).is_null() {
                let p = *env.add(i);
                out.push((
                    CStr::from_ptr(p).to_string_lossy().into_owned(),
                    ptrs.contains(&p),
                ));
                i += 1;
            }
            out
        })
    }
}

#[test]
fn a_program_that_cannot_load_gets_the_environment_without_capshim() {
    let dir = Folder::new("env");
    let arm64e = dir.file("arm64e", &exe(m::CPU_TYPE_ARM64, ARM64E));
    let arm64 = dir.file("arm64", &exe(m::CPU_TYPE_ARM64, 0));
    let var = crate::scope::INJECTION_VAR;
    let lib = std::str::from_utf8(envp::LIBRARY_NAMES[1]).unwrap();
    let env = vec![
        "HOME=/h".to_owned(),
        format!("{var}=/opt/{lib}:/a/liba"),
        "CAPSHIM_APPLE_FAMILY_MAX=1009".to_owned(),
        "TART_METAL_APPLE_FAMILY_MAX=1009".to_owned(),
        "PATH=/usr/bin".to_owned(),
        "HOME=/again".to_owned(),
    ];
    let edited = passed(&arm64e, &env);
    assert_eq!(
        edited,
        [
            ("HOME=/h".to_owned(), true),
            (format!("{var}=/a/liba"), false),
            ("PATH=/usr/bin".to_owned(), true),
            ("HOME=/again".to_owned(), true),
        ]
    );
    // A program that loads it, and a file that cannot be judged: unchanged.
    let unchanged: Vec<(String, bool)> = env.iter().map(|s| (s.clone(), true)).collect();
    assert_eq!(passed(&arm64, &env), unchanged);
    assert_eq!(passed(c"/nonexistent", &env), unchanged);
    // capshim as the only injected library: the variable goes.
    let alone = vec![format!("{var}=/opt/{lib}"), "A=1".to_owned()];
    assert_eq!(passed(&arm64e, &alone), [("A=1".to_owned(), true)]);
    // Nothing of capshim's: the file is not even read, and nothing changes.
    let clean = vec!["A=1".to_owned(), format!("{var}=/a/liba")];
    let same: Vec<(String, bool)> = clean.iter().map(|s| (s.clone(), true)).collect();
    assert_eq!(passed(&arm64e, &clean), same);
}

#[test]
fn an_environment_too_large_passes_through_unchanged() {
    let dir = Folder::new("large");
    let arm64e = dir.file("arm64e", &exe(m::CPU_TYPE_ARM64, ARM64E));
    let mut env: Vec<String> = (0..envp::MAX_ENTRIES + 1)
        .map(|i| format!("V{i}=x"))
        .collect();
    env.push("CAPSHIM_LOG=off".to_owned());
    let out = passed(&arm64e, &env);
    assert_eq!(out.len(), env.len());
    assert!(out.iter().all(|(_, same)| *same));
    // A removed entry makes room: MAX_ENTRIES kept entries fit.
    env.drain(1..2);
    assert_eq!(passed(&arm64e, &env).len(), envp::MAX_ENTRIES);
    // An injection value longer than the edit buffer.
    let var = crate::scope::INJECTION_VAR;
    let lib = std::str::from_utf8(envp::LIBRARY_NAMES[1]).unwrap();
    let long = format!("{var}=/{}:/opt/{lib}", "a".repeat(envp::MAX_INJECTION));
    let env = vec![long.clone(), "CAPSHIM_LOG=off".to_owned()];
    assert_eq!(
        passed(&arm64e, &env),
        [(long, true), ("CAPSHIM_LOG=off".to_owned(), true)]
    );
}

#[cfg(not(target_vendor = "apple"))]
#[test]
fn the_test_marker_reads_as_cannot_load() {
    let marked = b"#!/bin/sh\n# capshim-guard-test: cannot load\nenv\n";
    assert_eq!(verdict(marked), Verdict::CannotLoad);
    assert!(matches!(
        verdict(b"#!/bin/sh\nenv\n"),
        Verdict::Script { .. }
    ));
}
