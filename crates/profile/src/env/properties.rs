//! Properties of [`parse`](super::parse) over generated environments.

use super::*;
use proptest::prelude::*;

/// Every name of a numeric setting.
fn numeric_names() -> Vec<&'static str> {
    [FAMILY_MAX, THREADGROUP_MEMORY, WORKING_SET]
        .iter()
        .flat_map(|var| var.names().map(|a| a.name).collect::<Vec<_>>())
        .collect()
}

/// A model of C's `strtoull(text, &end, 0)` as the published shims call it, accepting the
/// value only when `end` reaches the end, the text is not empty and `errno` stays 0.
fn strtoull_base0(text: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < text.len() && matches!(text[i], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        i += 1;
    }
    let negative = match text.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let (radix, start) = match (text.get(i), text.get(i + 1), text.get(i + 2)) {
        (Some(b'0'), Some(b'x' | b'X'), Some(c)) if c.is_ascii_hexdigit() => (16, i + 2),
        (Some(b'0'), _, _) => (8, i),
        _ => (10, i),
    };
    let digits = &text[start..];
    if digits.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for &b in digits {
        let d = (b as char).to_digit(radix)?;
        value = value
            .checked_mul(u64::from(radix))?
            .checked_add(u64::from(d))?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(vars in proptest::collection::vec(
        (prop_oneof![
            proptest::sample::select(numeric_names()).prop_map(|n| n.as_bytes().to_vec()),
            Just(b"CAPSHIM_SCOPE".to_vec()),
            Just(b"CAPSHIM_LOG".to_vec()),
            Just(b"CAPSHIM_STATUS_FILE".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..40),
        ], proptest::collection::vec(any::<u8>(), 0..40)),
        0..8,
    )) {
        let parsed = parse(vars);
        if let Ok(c) = parsed.config {
            prop_assert!((1001..=1999).contains(&c.profile.apple_family_max));
        }
    }

    #[test]
    fn any_valid_family_round_trips(family in 1001i64..=1999, tg in any::<u64>()) {
        let p = Profile::new(family, tg, None).unwrap();
        let c = parse(vars_for(&p)).config.unwrap();
        prop_assert_eq!(c.profile, p);
    }

    /// Set alone, any shim's family name behaves as that shim does: the family, its default
    /// threadgroup memory, the working set unchanged.
    #[test]
    fn a_family_alone_under_any_name_activates_with_its_shims_default(
        alias in proptest::sample::select(FAMILY_MAX.names().collect::<Vec<_>>()),
        family in 1001i64..=1999,
    ) {
        let c = parse([(alias.name, family.to_string())]).config.unwrap();
        prop_assert_eq!(
            c.profile,
            Profile::new(family, alias.shim.default_threadgroup_memory, None).unwrap()
        );
        prop_assert_eq!(c.sources.apple_family_max, alias.name);
    }

    /// Two names of one setting with different numbers never activate, and the refusal names
    /// both, whatever else is set.
    #[test]
    fn two_names_that_disagree_never_activate_and_are_both_named(
        var in proptest::sample::select(vec![FAMILY_MAX, THREADGROUP_MEMORY, WORKING_SET]),
        picks in proptest::sample::subsequence((0usize..4).collect::<Vec<_>>(), 2),
        a in 1001u64..=1999,
        b in 1001u64..=1999,
    ) {
        prop_assume!(a != b);
        let names: Vec<&str> = var.names().map(|n| n.name).collect();
        let (x, y) = (names[picks[0]], names[picks[1]]);
        let mut vars = vec![(x, a.to_string()), (y, b.to_string())];
        if var != FAMILY_MAX {
            vars.push(("CAPSHIM_APPLE_FAMILY_MAX", "1009".to_string()));
        }
        let err = parse(vars).config.unwrap_err();
        let text = err.to_string();
        prop_assert!(matches!(err, ConfigError::Conflict { .. }), "{}", text);
        prop_assert!(text.contains(x) && text.contains(y), "{}", text);
    }

    /// Under a published shim's name, whatever capshim accepts means the number that shim
    /// reads from it (so a drop-in never reads a setup differently), and a family it accepts is
    /// one the shim would accept too (or 0, which both leave stock).
    #[test]
    fn a_value_accepted_under_a_published_name_means_what_that_shim_reads(
        alias in proptest::sample::select(
            [FAMILY_MAX, THREADGROUP_MEMORY, WORKING_SET]
                .iter()
                .flat_map(|v| v.aliases.iter().copied())
                .collect::<Vec<_>>()
        ),
        text in prop_oneof![
            "[0-9]{1,5}",
            "0[0-9]{1,4}",
            "0[xX][0-9a-fA-F]{1,5}",
            "[ +-]?(0[xX]?)?[0-9a-fA-F]{0,6}",
            (1001u64..=1999).prop_map(|f| f.to_string()),
            (1001u64..=1999).prop_map(|f| format!("0{f:o}")),
        ],
    ) {
        let mut vars = vec![(alias.name.to_string(), text.clone())];
        if !alias.name.ends_with("APPLE_FAMILY_MAX") {
            vars.push(("CAPSHIM_APPLE_FAMILY_MAX".to_string(), "1009".to_string()));
        }
        let parsed = parse(vars).config;
        let value = match (&parsed, alias.name) {
            (Ok(c), n) if n.ends_with("APPLE_FAMILY_MAX") => Some(c.profile.apple_family_max as u64),
            (Ok(c), n) if n.ends_with("WORKING_SET_SIZE") || n.ends_with("WORKING_SET_MIN") =>
                c.profile.recommended_working_set_size,
            (Ok(c), _) => Some(c.profile.max_threadgroup_memory),
            (Err(ConfigError::Disabled { .. }), _) => Some(0),
            _ => None,
        };
        if let Some(value) = value.filter(|_| !text.is_empty()) {
            prop_assert_eq!(strtoull_base0(text.as_bytes()), Some(value), "{:?}", text);
        }
    }
}

#[test]
fn the_strtoull_model_reads_as_c_does() {
    assert_eq!(strtoull_base0(b"1009"), Some(1009));
    assert_eq!(strtoull_base0(b"0x3f1"), Some(1009));
    assert_eq!(strtoull_base0(b"01761"), Some(1009));
    assert_eq!(strtoull_base0(b" +1009"), Some(1009));
    assert_eq!(strtoull_base0(b"-1"), Some(u64::MAX));
    assert_eq!(strtoull_base0(b"0"), Some(0));
    assert_eq!(strtoull_base0(b"09"), None);
    assert_eq!(strtoull_base0(b"1009k"), None);
    assert_eq!(strtoull_base0(b"18446744073709551616"), None);
}
