//! The known-problems file and known.*, each status.

use super::*;
use crate::deploy::host::{DOMAIN, KEY};
use crate::doctor::known::{self, FILE};

#[test]
fn the_file_loads_and_every_entry_names_its_source() {
    let problems = known::parse(FILE).unwrap();
    let ids: Vec<&str> = problems.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "stale-mmap-buffers",
            "argument-encoders",
            "indirect-command-buffers",
            "mlx-metal3",
            "macos27-atomic-ordering",
            "host-preference",
        ]
    );
    for p in &problems {
        assert!(!p.sources.is_empty(), "{}", p.id);
        for s in &p.sources {
            assert!(
                s.url.starts_with("https://github.com/"),
                "{}: {}",
                p.id,
                s.url
            );
            assert!(!s.name.is_empty() && !s.says.is_empty(), "{}", p.id);
        }
        assert!(
            !p.fix.is_empty() && !p.affected.is_empty() && !p.title.is_empty(),
            "{}",
            p.id
        );
    }
}

#[test]
fn a_bad_file_says_what_is_wrong() {
    let no_source = r#"
[[problem]]
id = "x"
title = "t"
summary = "s"
detail = "d"
fix = "f"
affected = "a"
status = "warn"
sources = []
"#;
    assert_eq!(
        known::parse(no_source).unwrap_err(),
        "entry \"x\" names no source"
    );
    let unknown_key = no_source.replace(
        "status = \"warn\"",
        "status = \"warn\"\nwhen = { gust = true }",
    );
    assert!(known::parse(&unknown_key).unwrap_err().contains("gust"));
    let bad_status = no_source.replace("\"warn\"", "\"severe\"");
    assert!(known::parse(&bad_status).unwrap_err().contains("severe"));
}

fn check(fake: &Fake, id: &str) -> Check {
    find(&run(fake, &options()), id).clone()
}

#[test]
fn stale_mmap_buffers_on_macos_14_only() {
    let id = "known.stale-mmap-buffers";
    let sonoma = set(guest(), "kern.osproductversion", "14.6.1");
    let c = check(&sonoma, id);
    assert_eq!(c.status, Status::Warn);
    assert!(c.fix.as_deref().unwrap().contains("--no-mmap"));
    assert_eq!(c.sources[0].name, "unslothai/llama.cpp pull request 37");
    let c = check(&guest(), id);
    assert_eq!(c.status, Status::Ok);
    assert!(c.summary.starts_with("not affected: "), "{}", c.summary);
    // On the host it is not a guest's problem.
    assert_eq!(
        check(&set(host(), "kern.osproductversion", "14.6.1"), id).status,
        Status::Ok
    );
    let mut unknown = guest();
    unknown
        .sysctls
        .retain(|(n, _)| n != "kern.osproductversion");
    let c = check(&unknown, id);
    assert_eq!(c.status, Status::Skip);
    assert!(
        c.summary.contains("the macOS version is not known"),
        "{}",
        c.summary
    );
}

#[test]
fn paravirtual_device_problems_follow_the_device() {
    for id in ["known.argument-encoders", "known.indirect-command-buffers"] {
        assert_eq!(check(&guest(), id).status, Status::Warn, "{id}");
        assert_eq!(check(&host(), id).status, Status::Ok, "{id}");
        let mut none = guest();
        none.device = Err("no device".into());
        assert_eq!(check(&none, id).status, Status::Skip, "{id}");
    }
}

#[test]
fn mlx_with_metal3_answered_fails() {
    let id = "known.mlx-metal3";
    assert_eq!(check(&guest(), id).status, Status::Ok);
    let mut metal3 = paravirtual(None);
    metal3.families.insert(5001, true);
    let c = check(&guest().with_device(metal3), id);
    assert_eq!(c.status, Status::Fail);
    assert!(c.detail.contains("Unable to construct residency set"));
    // A bare-metal GPU with Metal3 is what MLX expects.
    let mut bare = paravirtual(None);
    bare.name = Some("Apple M1 Ultra".into());
    bare.families.insert(5001, true);
    assert_eq!(check(&guest().with_device(bare), id).status, Status::Ok);
}

#[test]
fn atomic_ordering_from_macos_27() {
    let id = "known.macos27-atomic-ordering";
    assert_eq!(check(&guest(), id).status, Status::Ok);
    let c = check(&set(guest(), "kern.osproductversion", "27.0"), id);
    assert_eq!(c.status, Status::Warn);
    assert!(
        c.detail.contains("Suspected, not confirmed"),
        "{}",
        c.detail
    );
    assert!(c.sources[0].url.ends_with("Metal.jl/pull/966"));
}

#[test]
fn the_host_preference_is_read_on_the_host_only() {
    let id = "known.host-preference";
    let in_guest = check(&guest(), id);
    assert_eq!(in_guest.status, Status::Skip);
    assert!(in_guest.summary.contains(
        "cannot read the host's ForceUnrestrictedDeviceFeatureLevel from inside a guest"
    ));
    assert!(
        in_guest
            .fix
            .as_deref()
            .unwrap()
            .contains("capshim host enable")
    );
    // What each source says is in the detail.
    for name in ["tart-metal-capabilities", "anka-metal-unlock", "kronk"] {
        assert!(
            in_guest.detail.contains(name),
            "{name}: {}",
            in_guest.detail
        );
    }
    assert_eq!(in_guest.sources.len(), 3);
    let unset = check(&host(), id);
    assert_eq!(unset.status, Status::Warn);
    assert!(
        unset.summary.contains("is not set on this host"),
        "{}",
        unset.summary
    );
    let set_true = check(&host().with_default(DOMAIN, KEY, "1"), id);
    assert_eq!(set_true.status, Status::Ok);
    let set_false = check(&host().with_default(DOMAIN, KEY, "0"), id);
    assert!(set_false.status == Status::Warn && set_false.summary.contains("is false"));
    let unsure = set(guest(), "kern.hv_vmm_present", "?");
    assert_eq!(check(&unsure, id).status, Status::Skip);
}
