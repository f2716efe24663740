//! Compiles the simulated Metal library and the probe with GCC (`gobjc`, `libobjc-12-dev`).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=objc");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let out = Path::new(&out);
    println!("cargo:rustc-env=SIMGUEST_DIR={}", out.display());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        // The simulated guest exists for Linux hosts only; the crate still builds elsewhere
        // and reports the guest as unavailable.
        println!("cargo:rustc-env=SIMGUEST_UNAVAILABLE=the simulated guest is built on Linux only");
        return;
    }
    let objc = Path::new("objc");
    let metal = out.join("libMetalSim.so");
    let metal_path = format!("-DMETAL_PATH=\"{}\"", metal.display());
    let rpath = format!("-Wl,-rpath,{}", out.display());
    let common = [
        "-x",
        "objective-c",
        "-std=gnu11",
        "-O1",
        "-Wall",
        "-Werror",
        "-fno-strict-aliasing",
    ];
    let without_hook_point = out.join("libMetalSimWithoutHookPoint.so");
    let steps: [(&str, Vec<String>); 4] = [
        (
            "libMetalSimWithoutHookPoint.so",
            args(
                &common,
                &[
                    "-DMETAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT",
                    "-shared",
                    "-fPIC",
                    "-o",
                ],
                &without_hook_point,
                &[
                    objc.join("MetalSim.m").display().to_string(),
                    "-lobjc".into(),
                ],
            ),
        ),
        (
            "libMetalSim.so",
            args(
                &common,
                &["-shared", "-fPIC", "-o"],
                &metal,
                &[
                    objc.join("MetalSim.m").display().to_string(),
                    "-lobjc".into(),
                ],
            ),
        ),
        (
            "probe",
            args(
                &common,
                &["-o"],
                &out.join("probe"),
                &[
                    objc.join("probe.m").display().to_string(),
                    format!("-L{}", out.display()),
                    "-lMetalSim".into(),
                    rpath,
                    "-lobjc".into(),
                    "-lpthread".into(),
                ],
            ),
        ),
        (
            "probe-dlopen",
            args(
                &common,
                &["-DPROBE_DLOPEN", &metal_path, "-o"],
                &out.join("probe-dlopen"),
                &[
                    objc.join("probe.m").display().to_string(),
                    "-lobjc".into(),
                    "-ldl".into(),
                    "-lpthread".into(),
                ],
            ),
        ),
    ];
    for (what, argv) in steps {
        let status = Command::new("gcc").args(&argv).status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!(
                "building the simulated guest's {what} with gcc failed ({s}); \
                 install GCC's Objective-C support: apt-get install gobjc libobjc-12-dev"
            ),
            Err(e) => panic!(
                "cannot run gcc to build the simulated guest's {what}: {e}; apt-get install gcc gobjc"
            ),
        }
    }
}

fn args(common: &[&str], flags: &[&str], output: &Path, rest: &[String]) -> Vec<String> {
    common
        .iter()
        .chain(flags)
        .map(|s| s.to_string())
        .chain([output.display().to_string()])
        .chain(rest.iter().cloned())
        .collect()
}
