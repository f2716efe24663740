//! The fixed table of hooked device classes, and one set of replacement implementations per
//! table entry.
//!
//! Each entry holds a class and the implementations it had before it was hooked, published
//! before any replacement is installed. Entry `S` has its own replacement functions
//! (`supports_family::<S>` …), each of which calls entry `S`'s original. So a replacement
//! always knows which class it was installed on, whatever the receiver's class: a
//! `[super supportsFamily:]` from a hooked subclass reaches the superclass's replacement and
//! so the superclass's original.
//!
//! A message that arrives while an original of the same query runs on this thread (that
//! `[super …]`, or an original asking `[self supportsFamily:]` for another family) is answered
//! by the original alone: the device's own logic then sees its own stock answers, so a family
//! outside the Apple range comes out exactly as stock, and only the outermost answer is raised.
//! Nothing here locks or allocates on the answer path.

use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use capshim_profile::{Profile, policy};

use crate::query::Query;
use crate::report;
use crate::runtime::{Class, Imp, Sel};

/// How many distinct device classes can be hooked in one process.
pub const MAX_CLASSES: usize = 32;

/// Nothing installed yet.
pub const EMPTY: u8 = 0;
/// Replacements installed and checked.
pub const HOOKED: u8 = 1;
/// Given up: the class answers as before and is not retried.
pub const FAILED: u8 = 2;
/// Originals published, replacements being installed by the thread holding the install lock.
pub const INSTALLING: u8 = 3;

/// One device class and its original implementations. `class` is published last (Release),
/// so a reader that sees it (Acquire) also sees the rest.
pub struct Slot {
    class: AtomicUsize,
    state: AtomicU8,
    originals: [AtomicUsize; 3],
    /// `supportsFamily:` takes a 4-byte integer in this class (see
    /// [`crate::query::family_argument_is_32_bit`]).
    narrow_family: AtomicBool,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            class: AtomicUsize::new(0),
            state: AtomicU8::new(EMPTY),
            originals: [const { AtomicUsize::new(0) }; 3],
            narrow_family: AtomicBool::new(false),
        }
    }

    /// The entry's state (`EMPTY`, `HOOKED`, `FAILED`, `INSTALLING`).
    pub fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// Marks the entry `HOOKED` or `FAILED` once installation ended.
    pub fn finish(&self, state: u8) {
        self.state.store(state, Ordering::Release);
    }

    /// Records `class`'s originals for `queries` and publishes the entry as `INSTALLING`.
    /// Called with the install lock held, before any replacement is installed.
    pub fn publish(&self, class: Class, queries: &[Query], originals: &[Imp], narrow_family: bool) {
        for (&query, original) in queries.iter().zip(originals) {
            self.originals[query as usize].store(original.0, Ordering::Relaxed);
        }
        self.narrow_family.store(narrow_family, Ordering::Relaxed);
        self.state.store(INSTALLING, Ordering::Relaxed);
        self.class.store(class.addr(), Ordering::Release);
    }

    /// The original implementation of `query` recorded for this entry; 0 when none.
    pub fn original(&self, query: Query) -> usize {
        self.originals[query as usize].load(Ordering::Acquire)
    }
}

static SLOTS: [Slot; MAX_CLASSES] = [const { Slot::new() }; MAX_CLASSES];

/// The profile the replacements answer with, set once when the hook is armed.
pub static PROFILE: OnceLock<Profile> = OnceLock::new();

/// Set in a `fork()`ed child under `CAPSHIM_SCOPE=process`: every replacement then answers
/// with the original, unchanged (the child is another process).
pub static DISARMED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// For each query, how many originals are running on this thread.
    static IN_ORIGINAL: [Cell<u32>; 3] = const { [const { Cell::new(0) }; 3] };
}

/// Marks an original of `query` as running on this thread for as long as it lives.
struct Running(Query);

impl Running {
    /// Enters an original; also says whether one of the same query was already running here
    /// (so this call is nested inside it). When thread-local storage is gone (thread exit),
    /// counts as not nested.
    fn enter(query: Query) -> (Running, bool) {
        let nested = IN_ORIGINAL
            .try_with(|depth| {
                let cell = &depth[query as usize];
                cell.set(cell.get().saturating_add(1));
                cell.get() > 1
            })
            .unwrap_or(false);
        (Running(query), nested)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = IN_ORIGINAL.try_with(|depth| {
            let cell = &depth[self.0 as usize];
            cell.set(cell.get().saturating_sub(1));
        });
    }
}

/// Whether the answer of an original should be passed through unchanged: nested inside
/// another original, or disarmed in a forked child.
fn pass_through(nested: bool) -> bool {
    nested || DISARMED.load(Ordering::Relaxed)
}

/// The entry of `class`, if it has one.
pub fn slot_of(class: Class) -> Option<&'static Slot> {
    SLOTS
        .iter()
        .take_while(|slot| slot.class.load(Ordering::Acquire) != 0)
        .find(|slot| slot.class.load(Ordering::Acquire) == class.addr())
}

/// The first unused entry and its index; call with the install lock held.
pub fn free_slot() -> Option<(usize, &'static Slot)> {
    SLOTS
        .iter()
        .enumerate()
        .find(|(_, slot)| slot.class.load(Ordering::Acquire) == 0)
}

/// Entry `index`'s replacement for `query`.
pub fn replacement(index: usize, query: Query) -> Imp {
    Imp(match query {
        Query::SupportsFamily => FAMILY[index] as usize,
        Query::MaxThreadgroupMemory => THREADGROUP[index] as usize,
        Query::WorkingSet => WORKING_SET[index] as usize,
    })
}

/// When a class inherits a method already replaced in a hooked ancestor, the "original" it
/// resolves is that ancestor's replacement; its true original is the ancestor's original.
pub fn true_original(query: Query, resolved: Imp) -> Imp {
    (0..MAX_CLASSES)
        .find(|&index| replacement(index, query) == resolved)
        .map_or(resolved, |index| Imp(SLOTS[index].original(query)))
}

type SupportsFamilyFn = unsafe extern "C" fn(*mut c_void, Sel, isize) -> u8;
type LengthFn = unsafe extern "C" fn(*mut c_void, Sel) -> usize;
type SizeFn = unsafe extern "C" fn(*mut c_void, Sel) -> u64;

macro_rules! per_slot {
    ($($index:literal)*) => {
        static FAMILY: [SupportsFamilyFn; MAX_CLASSES] = [$(supports_family::<$index>),*];
        static THREADGROUP: [LengthFn; MAX_CLASSES] = [$(max_threadgroup_memory::<$index>),*];
        static WORKING_SET: [SizeFn; MAX_CLASSES] = [$(recommended_working_set_size::<$index>),*];
    };
}
per_slot!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);

/// Entry `S`'s original for `query`, or a one-time report and `None` when there is none
/// (cannot happen: originals are published before a replacement is installed).
fn original_of<const S: usize>(query: Query) -> Option<usize> {
    let imp = SLOTS[S].original(query);
    if imp == 0 {
        report::unanswerable(query);
        return None;
    }
    Some(imp)
}

/// The class entry `S` was installed on, for query logging.
fn class_of<const S: usize>() -> Option<Class> {
    Class::from_runtime(SLOTS[S].class.load(Ordering::Acquire) as *mut c_void)
}

/// `-supportsFamily:` on entry `S`'s class: the original answer OR the profile's Apple range.
unsafe extern "C" fn supports_family<const S: usize>(
    this: *mut c_void,
    cmd: Sel,
    family: isize,
) -> u8 {
    let Some(imp) = original_of::<S>(Query::SupportsFamily) else {
        return 0;
    };
    let (running, nested) = Running::enter(Query::SupportsFamily);
    // SAFETY: `imp` is the original `-supportsFamily:` of entry S's class, whose encoding was
    // checked to be a one-byte BOOL with one integer argument: `BOOL (id, SEL, NSInteger)`.
    let original =
        unsafe { std::mem::transmute::<usize, SupportsFamilyFn>(imp)(this, cmd, family) };
    drop(running);
    if pass_through(nested) {
        return original;
    }
    let family = if SLOTS[S].narrow_family.load(Ordering::Relaxed) {
        i64::from(family as i32)
    } else {
        family as i64
    };
    // The answer is the original's unless the policy raises it; a panic keeps the original.
    catch_unwind(AssertUnwindSafe(|| {
        let Some(profile) = PROFILE.get() else {
            return original;
        };
        let returned = policy::supports_family(profile, family, original != 0);
        if let Some(class) = class_of::<S>() {
            report::query(
                class,
                Query::SupportsFamily,
                family,
                u64::from(original != 0),
                u64::from(returned),
            );
        }
        u8::from(returned)
    }))
    .unwrap_or(original)
}

/// `-maxThreadgroupMemoryLength` on entry `S`'s class: max(original, configured), bytes.
unsafe extern "C" fn max_threadgroup_memory<const S: usize>(this: *mut c_void, cmd: Sel) -> usize {
    let Some(imp) = original_of::<S>(Query::MaxThreadgroupMemory) else {
        return 0;
    };
    let (running, nested) = Running::enter(Query::MaxThreadgroupMemory);
    // SAFETY: `imp` is the original `-maxThreadgroupMemoryLength` of entry S's class, checked
    // to return an 8-byte integer and take no argument: `NSUInteger (id, SEL)`.
    let original = unsafe { std::mem::transmute::<usize, LengthFn>(imp)(this, cmd) };
    drop(running);
    if pass_through(nested) {
        return original;
    }
    catch_unwind(AssertUnwindSafe(|| {
        let Some(profile) = PROFILE.get() else {
            return original;
        };
        let returned = policy::max_threadgroup_memory(profile, original as u64);
        if let Some(class) = class_of::<S>() {
            report::query(
                class,
                Query::MaxThreadgroupMemory,
                0,
                original as u64,
                returned,
            );
        }
        usize::try_from(returned).unwrap_or(original)
    }))
    .unwrap_or(original)
}

/// `-recommendedMaxWorkingSetSize` on entry `S`'s class: max(original, configured), bytes.
unsafe extern "C" fn recommended_working_set_size<const S: usize>(
    this: *mut c_void,
    cmd: Sel,
) -> u64 {
    let Some(imp) = original_of::<S>(Query::WorkingSet) else {
        return 0;
    };
    let (running, nested) = Running::enter(Query::WorkingSet);
    // SAFETY: `imp` is the original `-recommendedMaxWorkingSetSize` of entry S's class,
    // checked to return an 8-byte integer and take no argument: `uint64_t (id, SEL)`.
    let original = unsafe { std::mem::transmute::<usize, SizeFn>(imp)(this, cmd) };
    drop(running);
    if pass_through(nested) {
        return original;
    }
    catch_unwind(AssertUnwindSafe(|| {
        let Some(profile) = PROFILE.get() else {
            return original;
        };
        let returned = policy::recommended_working_set_size(profile, original);
        if let Some(class) = class_of::<S>() {
            report::query(class, Query::WorkingSet, 0, original, returned);
        }
        returned
    }))
    .unwrap_or(original)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_has_its_own_replacements() {
        for query in Query::ALL {
            let all: std::collections::HashSet<Imp> = (0..MAX_CLASSES)
                .map(|index| replacement(index, query))
                .collect();
            assert_eq!(all.len(), MAX_CLASSES, "{query:?}");
        }
    }

    #[test]
    fn an_unknown_implementation_is_its_own_original() {
        assert_eq!(true_original(Query::SupportsFamily, Imp(12345)), Imp(12345));
    }
}
