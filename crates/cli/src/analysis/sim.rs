//! A simulated machine and bench for the calibration tests: a reproducible generator, the
//! machine's noise (shared by [`super::calibration`] and the schema-6 calibration in
//! [`super::calibration6`]), and a bench of several arms and tests in bench's random order,
//! with carry-over from one process into the next and wall-clock disturbances that meet
//! processes of different durations differently.

/// SplitMix64: a small generator whose whole state is one `u64`, reproducible from its seed.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// How noisy the simulated machine is.
#[derive(Clone, Copy, Debug)]
pub struct Noise {
    /// Spread of a process's level (log units).
    pub between: f64,
    /// Spread of one sample within a process (log units).
    pub within: f64,
    /// Linear drift per process slot (log units).
    pub slope: f64,
    /// Random-walk step per process slot (log units).
    pub walk: f64,
    /// Probability that a process is slowed by 30% (a busy neighbour).
    pub hit: f64,
    /// Spread of a condition that lingers from one process into the next and no further
    /// (each process gets a fresh one and half of its predecessor's: correlation 0.5 between
    /// neighbours, 0 beyond; log units). On this machine the log medians of neighbouring
    /// processes correlated by 0.13–0.36, and by 0.04–0.16 two apart.
    pub linger: f64,
    /// Whether a periodic disturbance halves the speed of 2 process slots in every `period`,
    /// the period drawn per experiment from 7.6–8.4 slots and its phase at random.
    pub periodic: bool,
}

/// A quiet machine.
pub const QUIET: Noise = Noise {
    between: 0.005,
    within: 0.01,
    slope: 0.001,
    walk: 0.002,
    hit: 0.0,
    linger: 0.005,
    periodic: false,
};
/// A typical shared machine.
pub const TYPICAL: Noise = Noise {
    between: 0.04,
    within: 0.05,
    slope: 0.004,
    walk: 0.01,
    hit: 0.0,
    linger: 0.06,
    periodic: false,
};
/// A busy machine: one process in eight slowed by 30%.
pub const BUSY: Noise = Noise {
    between: 0.12,
    within: 0.15,
    slope: 0.01,
    walk: 0.04,
    hit: 0.125,
    linger: 0.2,
    periodic: false,
};
/// The typical machine with a periodic disturbance.
pub const PERIODIC: Noise = Noise {
    periodic: true,
    ..TYPICAL
};

/// Wall-clock disturbances: bursts that come and go in time, whatever process is running, so
/// that a short process is either caught whole or missed, and a long one is caught in part.
#[derive(Clone, Copy, Debug)]
pub struct Bursts {
    /// Mean gap between bursts (exponential), in stock's sample durations.
    pub gap: f64,
    /// Length of a burst, in stock's sample durations.
    pub length: f64,
    /// Speed during a burst, a factor (0.5 halves it).
    pub slow: f64,
}

/// A simulated bench: stock (arm 0) and other arms, several tests per process, every round in
/// a fresh random order of the arms, as `capshim bench` runs them.
#[derive(Clone, Debug)]
pub struct Bench {
    /// Rounds.
    pub rounds: usize,
    /// Samples per test and process (`-r`).
    pub reps: usize,
    /// The machine.
    pub noise: Noise,
    /// Per arm (arm 0 is stock, all zeros), per test: the arm's true log ratio to stock.
    pub effects: Vec<Vec<f64>>,
    /// Per arm: the log change its process leaves on the next process's speed (carry-over).
    pub carry: Vec<f64>,
    /// Wall-clock disturbances, if any.
    pub bursts: Option<Bursts>,
}

/// One simulated llama-bench process.
#[derive(Clone, Debug)]
pub struct SimProcess {
    /// Arm index (0 = stock).
    pub arm: usize,
    /// 1-based round.
    pub round: u32,
    /// Wall time, in stock's sample durations (a load of 0.2, then the samples).
    pub seconds: f64,
    /// Per test, the median of its samples (tokens/s).
    pub medians: Vec<f64>,
}

impl Bench {
    /// An A/A-style bench of `arms` arms besides stock and `tests` tests, each arm's true
    /// ratio `ratio` in every test; no carry-over, no bursts.
    pub fn uniform(rounds: usize, noise: Noise, arms: usize, tests: usize, ratio: f64) -> Bench {
        let mut effects = vec![vec![0.0; tests]];
        effects.extend((0..arms).map(|_| vec![ratio.ln(); tests]));
        Bench {
            rounds,
            reps: 3,
            noise,
            effects,
            carry: vec![0.0; arms + 1],
            bursts: None,
        }
    }

    /// Every process, in the order run.
    pub fn run(&self, rng: &mut SplitMix64) -> Vec<SimProcess> {
        let noise = self.noise;
        let arms = self.effects.len();
        let tests = self.effects[0].len();
        let mut level = 0.0;
        let mut lingering = noise.linger * rng.normal();
        let period = 7.6 + 0.8 * rng.uniform();
        let phase = period * rng.uniform();
        let mut clock = 0.0;
        let mut bursts = Vec::<(f64, f64)>::new();
        let mut next_burst = self.bursts.map_or(f64::INFINITY, |b| b.gap * exp(rng));
        let mut carried = 0.0;
        let mut out = Vec::new();
        for round in 1..=self.rounds as u32 {
            let mut order: Vec<usize> = (0..arms).collect();
            for i in (1..arms).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
            for arm in order {
                let slot = out.len();
                level += noise.walk * rng.normal();
                let fresh = noise.linger * rng.normal();
                let linger = (fresh + lingering) / 2f64.sqrt();
                lingering = fresh;
                let disturbed = noise.periodic && (slot as f64 + phase) % period < 2.0;
                let hit = if rng.uniform() < noise.hit {
                    0.7f64.ln()
                } else {
                    0.0
                };
                let common = noise.slope * slot as f64
                    + level
                    + linger
                    + hit
                    + carried
                    + if disturbed { 0.5f64.ln() } else { 0.0 }
                    + noise.between * 0.8 * rng.normal();
                let start = clock;
                // Loading the model: short beside the samples, as with a GPU that runs them.
                clock += 0.2;
                let mut medians = Vec::with_capacity(tests);
                for t in 0..tests {
                    let effect = self.effects[arm][t];
                    let base = 100f64.ln() + effect + common + noise.between * 0.6 * rng.normal();
                    let rho: f64 = 0.7;
                    let mut e = noise.within * rng.normal();
                    let mut samples = Vec::with_capacity(self.reps);
                    for j in 0..self.reps {
                        if j > 0 {
                            e = rho * e + (1.0 - rho * rho).sqrt() * noise.within * rng.normal();
                        }
                        let warm = -0.05 * 0.5f64.powi(j as i32);
                        let mut duration = (-effect).exp();
                        let mut burst = 0.0;
                        if let Some(b) = self.bursts {
                            while next_burst < clock + duration {
                                bursts.push((next_burst, next_burst + b.length));
                                next_burst += b.length + b.gap * exp(rng);
                            }
                            let overlap: f64 = bursts
                                .iter()
                                .map(|(s, e)| (e.min(clock + duration) - s.max(clock)).max(0.0))
                                .sum();
                            let f = overlap / duration;
                            let stretch = (1.0 - f) + f / b.slow;
                            burst = -stretch.ln();
                            duration *= stretch;
                        }
                        clock += duration;
                        samples.push((base + e + warm + burst).exp());
                    }
                    medians.push(super::stats::median(&samples).expect("reps ≥ 1"));
                }
                carried = self.carry[arm];
                out.push(SimProcess {
                    arm,
                    round,
                    seconds: clock - start,
                    medians,
                });
            }
        }
        out
    }
}

/// Exponential with mean 1.
fn exp(rng: &mut SplitMix64) -> f64 {
    -rng.uniform().ln()
}

/// Per round, `arm`'s median of `test` over stock's, in round order.
pub fn round_logs(processes: &[SimProcess], arm: usize, test: usize) -> Vec<f64> {
    let rounds = processes.iter().map(|p| p.round).max().unwrap_or(0);
    (1..=rounds)
        .filter_map(|r| {
            let find = |a: usize| {
                processes
                    .iter()
                    .find(|p| p.round == r && p.arm == a)
                    .map(|p| p.medians[test])
            };
            Some((find(arm)? / find(0)?).ln())
        })
        .collect()
}
