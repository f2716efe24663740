//! The knob catalogue: settings `capshim tune` tries, from `crates/cli/data/knobs.toml`.
//!
//! INTERFACE (written by the lead; the tune-search branch implements it and the data file).

/// One value of one knob, as an arm carries it (the arms grammar: a profile, an environment
/// variable, a tool argument).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// The knob's name in the catalogue (`GGML_METAL_NO_RESIDENCY`, `flash-attn`, `ubatch`).
    pub knob: String,
    /// The value in words, for labels (`1`, `on`, `256`).
    pub value: String,
    /// The arm items that apply it, in the arms grammar (`GGML_METAL_NO_RESIDENCY=1`,
    /// `bench-args=-fa 1,common-args=-fa on`, or a profile name for the profile knob).
    pub arm_items: Vec<String>,
}

/// A candidate: a label and the settings it changes from the reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Its arm label (valid as an arm label: `fa-1`, `no-residency`, `combo-1`).
    pub label: String,
    /// What it changes from the reference; the reference's own profile first if it changes it.
    pub settings: Vec<Setting>,
}

impl Candidate {
    /// Its `--arm` text: `LABEL=PROFILE,ITEM,ITEM...` from the reference's profile `profile`
    /// (unless a setting replaces it).
    pub fn arm_spec(&self, profile: &str) -> String {
        let _ = profile;
        todo!("tune-search branch")
    }
}
