//! Compiles the simulated guest with GCC (`gobjc`, `libobjc-12-dev`): the simulated Metal
//! library, the probe, the Apple-runtime model, a framework-Python launcher, the two fault
//! libraries that reproduce what the Apple model must refuse, and a library that holds the
//! shim's install lock for a test.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One gcc invocation: what it builds (for messages), its output, and its arguments.
struct Step {
    what: &'static str,
    output: PathBuf,
    args: Vec<String>,
}

fn main() {
    for dir in ["objc", "applemodel", "faults", "launcher", "helpers"] {
        println!("cargo:rerun-if-changed={dir}");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rustc-env=SIMGUEST_DIR={}", out.display());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        // The simulated guest exists for Linux hosts only; the crate still builds elsewhere
        // and reports the guest as unavailable.
        println!("cargo:rustc-env=SIMGUEST_UNAVAILABLE=the simulated guest is built on Linux only");
        return;
    }
    let python = out.join("Python.framework/Versions/3.12");
    for dir in [
        python.join("bin"),
        python.join("Resources/Python.app/Contents/MacOS"),
        out.join("nohook"),
    ] {
        std::fs::create_dir_all(&dir).expect("creating the simulated guest's folders");
    }
    for step in steps(&out, &python) {
        let status = Command::new("gcc").args(&step.args).status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!(
                "building the simulated guest's {} ({}) with gcc failed ({s}); \
                 install GCC's Objective-C support: apt-get install gobjc libobjc-12-dev",
                step.what,
                step.output.display()
            ),
            Err(e) => panic!(
                "cannot run gcc to build the simulated guest's {}: {e}; apt-get install gcc gobjc",
                step.what
            ),
        }
    }
}

fn steps(out: &Path, python: &Path) -> Vec<Step> {
    let objc = ["-x", "objective-c", "-std=gnu11"];
    let c = ["-x", "c", "-std=gnu11"];
    let metal = out.join("libMetalSim.so");
    let metal_path = format!("-DMETAL_PATH=\"{}\"", metal.display());
    let rpath = format!("-Wl,-rpath,{}", out.display());
    let link_metal = format!("-L{}", out.display());
    let probe_dlopen = |what, output: PathBuf| {
        step(
            what,
            output,
            &objc,
            &["-DPROBE_DLOPEN", &metal_path],
            &["objc/probe.m", "-lobjc", "-ldl", "-lpthread"],
        )
    };
    vec![
        step(
            "Metal without its hook point",
            // Named as the real one, so that LD_LIBRARY_PATH=nohook gives the linked probe it.
            out.join("nohook/libMetalSim.so"),
            &objc,
            &[
                "-DMETAL_SIM_WITHOUT_INIT_GPU_FAMILY_SUPPORT",
                "-shared",
                "-fPIC",
            ],
            &["objc/MetalSim.m", "-lobjc"],
        ),
        step(
            "Metal",
            metal.clone(),
            &objc,
            &["-shared", "-fPIC"],
            &["objc/MetalSim.m", "-lobjc"],
        ),
        step(
            "probe",
            out.join("probe"),
            &objc,
            &[],
            &[
                "objc/probe.m",
                &link_metal,
                "-lMetalSim",
                &rpath,
                "-lobjc",
                "-lpthread",
            ],
        ),
        probe_dlopen("dlopen probe", out.join("probe-dlopen")),
        probe_dlopen(
            "framework Python's interpreter",
            python.join("Resources/Python.app/Contents/MacOS/Python"),
        ),
        step(
            "framework Python's launcher",
            python.join("bin/python3.12"),
            &c,
            &[],
            &["launcher/pythonw.c"],
        ),
        step(
            "Apple-runtime model",
            out.join("libapplemodel.so"),
            &c,
            &["-shared", "-fPIC", "-pthread"],
            &[
                "applemodel/lock.c",
                "applemodel/runtime.c",
                "applemodel/images.c",
                "applemodel/initialize.c",
                "applemodel/io.c",
                "-lobjc",
                "-ldl",
            ],
        ),
        step(
            "load-image lookup fault",
            out.join("libfault_load_image_lookup.so"),
            &c,
            &["-shared", "-fPIC"],
            &["faults/load_image_lookup.c"],
        ),
        step(
            "install-holding library",
            out.join("libsimguest_hold.so"),
            &c,
            &["-shared", "-fPIC"],
            &["helpers/hold_install.c", "-lobjc", "-ldl"],
        ),
        step(
            "add-image lookup fault",
            out.join("libfault_add_image_lookup.so"),
            &c,
            &["-shared", "-fPIC"],
            &["faults/add_image_lookup.c"],
        ),
    ]
}

fn step(
    what: &'static str,
    output: PathBuf,
    language: &[&str],
    flags: &[&str],
    inputs: &[&str],
) -> Step {
    let common = ["-O1", "-Wall", "-Werror", "-fno-strict-aliasing"];
    let args = language
        .iter()
        .chain(&common)
        .chain(flags)
        .map(|s| s.to_string())
        .chain(["-o".to_string(), output.display().to_string()])
        .chain(inputs.iter().map(|s| s.to_string()))
        .collect();
    Step { what, output, args }
}
