//! The CPU reference of each kernel in `kernels/*.metal`, and the comparison of a kernel's
//! output with it. The inputs are the kernels' own formulas of the thread position, repeated
//! here; a change to one side must be made on the other.

use super::kernels::{GROUPS, Kernel, THREADS_PER_GROUP};

/// Whether a kernel's output is what the CPU computes, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The output matches the reference.
    pub holds: bool,
    /// One line.
    pub summary: String,
    /// What was compared, and the first difference.
    pub detail: String,
}

impl Verdict {
    fn holds(summary: String, detail: String) -> Verdict {
        Verdict {
            holds: true,
            summary,
            detail,
        }
    }

    fn differs(summary: String, detail: String) -> Verdict {
        Verdict {
            holds: false,
            summary,
            detail,
        }
    }
}

/// Compares `output` of `kernel` (threadgroup memory test of `threadgroup_bytes`) with the
/// CPU reference.
pub fn compare(kernel: Kernel, threadgroup_bytes: u64, output: &[u8]) -> Verdict {
    let expected = kernel.geometry(threadgroup_bytes).2;
    if output.len() != expected {
        return Verdict::differs(
            format!("the output has {} bytes, not {expected}", output.len()),
            "the kernel process returned an output buffer of another size".to_string(),
        );
    }
    match kernel {
        Kernel::SimdReduction => simd_reduction(&floats(output)),
        Kernel::SimdgroupMatrix => simdgroup_matrix(&floats(output)),
        Kernel::Bfloat => bfloat(&floats(output)),
        Kernel::ThreadgroupMemory => threadgroup_memory(output),
    }
}

/// Little-endian f32 values of `bytes` (whole values only).
fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Thread `i`'s value in `simd_reduction.metal`.
fn simd_value(i: u32) -> f32 {
    ((i * 7 + 3) % 17) as f32 - 8.0
}

/// The SIMD-group sums and maxima of every thread, for SIMD-groups of `width` threads.
pub fn simd_reference(width: usize) -> Vec<(f32, f32)> {
    let n = GROUPS * THREADS_PER_GROUP;
    let values: Vec<f32> = (0..n as u32).map(simd_value).collect();
    (0..n)
        .map(|i| {
            let start = i / width * width;
            let group = &values[start..(start + width).min(n)];
            let sum = group.iter().sum();
            let max = group.iter().copied().fold(f32::MIN, f32::max);
            (sum, max)
        })
        .collect()
}

fn simd_reduction(out: &[f32]) -> Verdict {
    let width = out[2];
    let threads = GROUPS * THREADS_PER_GROUP;
    let valid = width >= 1.0
        && width.fract() == 0.0
        && (width as usize) <= THREADS_PER_GROUP
        && THREADS_PER_GROUP % (width as usize) == 0;
    if !valid || out.chunks_exact(3).any(|t| t[2] != width) {
        return Verdict::differs(
            format!(
                "the threads report SIMD-group widths other than one divisor of {THREADS_PER_GROUP} (thread 0: {width})"
            ),
            "threads_per_simdgroup must be the same for every thread of the dispatch".to_string(),
        );
    }
    let reference = simd_reference(width as usize);
    let wrong: Vec<usize> = (0..threads)
        .filter(|&i| (out[i * 3], out[i * 3 + 1]) != reference[i])
        .collect();
    let detail = format!(
        "{threads} threads in threadgroups of {THREADS_PER_GROUP}, SIMD-groups of {width}: each \
         thread's simd_sum and simd_max of small integers, exact in float, compared bit for bit"
    );
    match wrong.first() {
        None => Verdict::holds(
            format!("simd_sum and simd_max of {threads} threads match the CPU"),
            detail,
        ),
        Some(&i) => Verdict::differs(
            format!(
                "{} of {threads} threads differ from the CPU; thread {i}: sum {} max {} (CPU {} {})",
                wrong.len(),
                out[i * 3],
                out[i * 3 + 1],
                reference[i].0,
                reference[i].1
            ),
            detail,
        ),
    }
}

/// D = A * B + C of `simdgroup_matrix.metal`, row-major 8x8.
pub fn matrix_reference() -> Vec<f32> {
    let a = |r: u32, k: u32| ((((r * 16 + k) * 5 + 1) % 9) as f32) - 4.0;
    let b = |k: u32, c: u32| ((((k * 8 + c) * 3 + 2) % 7) as f32) - 3.0;
    let c = |r: u32, col: u32| (((r * 8 + col) % 5) as f32) - 2.0;
    (0..8)
        .flat_map(|r| {
            (0..8).map(move |col| (0..16).map(|k| a(r, k) * b(k, col)).sum::<f32>() + c(r, col))
        })
        .collect()
}

fn simdgroup_matrix(out: &[f32]) -> Verdict {
    let reference = matrix_reference();
    let wrong: Vec<usize> = (0..64).filter(|&i| out[i] != reference[i]).collect();
    let detail = "one SIMD-group: D = A (8x16) * B (16x8) + C (8x8) in two \
                  simdgroup_multiply_accumulate steps, small integers exact in float, the 64 \
                  entries compared bit for bit"
        .to_string();
    match wrong.first() {
        None => Verdict::holds(
            "8x8 multiply-accumulate matches the CPU".to_string(),
            detail,
        ),
        Some(&i) => Verdict::differs(
            format!(
                "{} of 64 entries differ from the CPU; row {} column {}: {} (CPU {})",
                wrong.len(),
                i / 8,
                i % 8,
                out[i],
                reference[i]
            ),
            detail,
        ),
    }
}

/// `x` rounded to bfloat (8 significant bits) to nearest, ties to even, as f32.
pub fn to_bfloat(x: f32) -> f32 {
    let bits = x.to_bits();
    let bias = ((bits >> 16) & 1) + 0x7fff;
    f32::from_bits((bits.wrapping_add(bias) >> 16) << 16)
}

/// The spacing of bfloat values at `x` (one unit in the last place): 2^(e - 7) for x's
/// binary exponent e, built from the exponent bits (no libm call: the macOS SDK excerpts
/// `cargo xtask dist` checks imports against have no `log2f` or `exp2f`).
fn bfloat_ulp(x: f32) -> f32 {
    let biased = (x.to_bits() >> 23) & 0xff;
    f32::from_bits(biased.saturating_sub(7).max(1) << 23)
}

/// Thread `i`'s x and y in `bfloat.metal`.
fn bfloat_inputs(i: u32) -> (f32, f32) {
    let x = (4 * ((i * 37) % 1000) + 1) as f32 / 256.0;
    let y = ((i % 13) as f32 - 6.0) / 8.0;
    (x, y)
}

fn bfloat(out: &[f32]) -> Verdict {
    let threads = GROUPS * THREADS_PER_GROUP;
    let mut wrong = Vec::new();
    for i in 0..threads {
        let (x, y) = bfloat_inputs(i as u32);
        let a = to_bfloat(x);
        let b = to_bfloat(y);
        let exact = a * b + a;
        let (got_a, got_r) = (out[i * 2], out[i * 2 + 1]);
        let representable = got_r.to_bits() & 0xffff == 0 && got_a.to_bits() & 0xffff == 0;
        let close = (got_r - to_bfloat(exact)).abs() <= bfloat_ulp(exact);
        if got_a != a || !representable || !close {
            wrong.push((i, a, to_bfloat(exact)));
        }
    }
    let detail = format!(
        "{threads} threads: bfloat(x) for x never halfway between two bfloat values must equal \
         the CPU's round-to-nearest-even exactly; a * b + a in bfloat must be a bfloat value \
         within one bfloat unit in the last place of the CPU's (one rounding or two)"
    );
    match wrong.first() {
        None => Verdict::holds(
            format!("bfloat conversion and a * b + a of {threads} threads match the CPU"),
            detail,
        ),
        Some(&(i, a, r)) => Verdict::differs(
            format!(
                "{} of {threads} threads differ from the CPU; thread {i}: bfloat(x) {} a*b+a {} (CPU {a} {r})",
                wrong.len(),
                out[i * 2],
                out[i * 2 + 1]
            ),
            detail,
        ),
    }
}

/// Byte `i` of the pattern `threadgroup_memory.metal` writes.
pub fn pattern(i: u32) -> u8 {
    (i.wrapping_mul(31).wrapping_add(7) ^ (i >> 8)) as u8
}

fn threadgroup_memory(out: &[u8]) -> Verdict {
    let wrong: Vec<usize> = (0..out.len())
        .filter(|&i| out[i] != pattern(i as u32))
        .collect();
    let detail = format!(
        "one threadgroup of {THREADS_PER_GROUP} threads filled a threadgroup array of {} bytes \
         with a pattern and, after a barrier, copied every byte out through another thread than \
         the one that wrote it; every byte compared",
        out.len()
    );
    match wrong.first() {
        None => Verdict::holds(
            format!(
                "all {} bytes of threadgroup memory read back as written",
                out.len()
            ),
            detail,
        ),
        Some(&i) => Verdict::differs(
            format!(
                "{} of {} bytes read back differ; byte {i}: {:#04x} (written {:#04x})",
                wrong.len(),
                out.len(),
                out[i],
                pattern(i as u32)
            ),
            detail,
        ),
    }
}

/// What a correct device writes for `kernel` (tests, and a sanity check of the references).
#[cfg(test)]
pub fn correct_output(kernel: Kernel, threadgroup_bytes: u64) -> Vec<u8> {
    let le = |v: Vec<f32>| v.iter().flat_map(|f| f.to_le_bytes()).collect();
    match kernel {
        Kernel::SimdReduction => le(simd_reference(32)
            .into_iter()
            .flat_map(|(s, m)| [s, m, 32.0])
            .collect()),
        Kernel::SimdgroupMatrix => le(matrix_reference()),
        Kernel::Bfloat => le((0..(GROUPS * THREADS_PER_GROUP) as u32)
            .flat_map(|i| {
                let (x, y) = bfloat_inputs(i);
                let a = to_bfloat(x);
                [a, to_bfloat(a * to_bfloat(y) + a)]
            })
            .collect()),
        Kernel::ThreadgroupMemory => (0..threadgroup_bytes as u32).map(pattern).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correct_device_holds_every_claim() {
        for k in Kernel::ALL {
            let v = compare(k, 65536, &correct_output(k, 65536));
            assert!(v.holds, "{}: {}", k.name(), v.summary);
        }
    }

    #[test]
    fn one_wrong_value_is_found_and_named() {
        let mut out = correct_output(Kernel::SimdReduction, 0);
        out[12 * 5..12 * 5 + 4].copy_from_slice(&99f32.to_le_bytes());
        let v = compare(Kernel::SimdReduction, 0, &out);
        assert!(!v.holds);
        assert!(
            v.summary
                .starts_with("1 of 1024 threads differ from the CPU; thread 5: sum 99"),
            "{}",
            v.summary
        );

        let mut out = correct_output(Kernel::SimdgroupMatrix, 0);
        out[4 * 9] ^= 1;
        let v = compare(Kernel::SimdgroupMatrix, 0, &out);
        assert!(
            v.summary
                .starts_with("1 of 64 entries differ; row 1 column 1")
                || v.summary.contains("row 1 column 1"),
            "{}",
            v.summary
        );

        let mut out = correct_output(Kernel::ThreadgroupMemory, 32768);
        out[32767] ^= 0xff;
        let v = compare(Kernel::ThreadgroupMemory, 32768, &out);
        assert!(
            v.summary
                .starts_with("1 of 32768 bytes read back differ; byte 32767"),
            "{}",
            v.summary
        );
        let v = compare(Kernel::ThreadgroupMemory, 65536, &out);
        assert_eq!(v.summary, "the output has 32768 bytes, not 65536");
    }

    #[test]
    fn bfloat_results_must_be_bfloat_values_near_the_reference() {
        assert_eq!(to_bfloat(1.0 + 1.0 / 512.0), 1.0);
        assert_eq!(to_bfloat(1.0 + 3.0 / 256.0), 1.015625);
        assert_eq!(to_bfloat(1.0 + 1.0 / 256.0), 1.0, "a tie rounds to even");
        let good = correct_output(Kernel::Bfloat, 0);
        // float arithmetic that never rounded to bfloat is caught: x itself, not bfloat(x).
        let mut unrounded = good.clone();
        let (x, _) = bfloat_inputs(3);
        unrounded[24..28].copy_from_slice(&x.to_le_bytes());
        assert_ne!(x, to_bfloat(x));
        assert!(!compare(Kernel::Bfloat, 0, &unrounded).holds);
        // one bfloat unit off in the arithmetic (two roundings) still holds.
        let mut off = good;
        let r = f32::from_le_bytes(off[4..8].try_into().unwrap());
        let next = f32::from_bits(r.to_bits() + 0x1_0000);
        off[4..8].copy_from_slice(&next.to_le_bytes());
        assert!(compare(Kernel::Bfloat, 0, &off).holds);
    }

    #[test]
    fn the_bfloat_unit_is_2_to_the_exponent_less_7() {
        assert_eq!(bfloat_ulp(1.0), 1.0 / 128.0);
        assert_eq!(bfloat_ulp(1.99), 1.0 / 128.0);
        assert_eq!(bfloat_ulp(-3.0), 1.0 / 64.0);
        assert_eq!(bfloat_ulp(1.0 / 1024.0), 1.0 / 131072.0);
        assert_eq!(bfloat_ulp(0.0), f32::MIN_POSITIVE);
    }

    #[test]
    fn a_simd_width_that_changes_between_threads_fails() {
        let mut out = correct_output(Kernel::SimdReduction, 0);
        out[8..12].copy_from_slice(&16f32.to_le_bytes());
        assert!(!compare(Kernel::SimdReduction, 0, &out).holds);
    }
}
