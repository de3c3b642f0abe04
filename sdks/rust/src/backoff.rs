//! Retry delays with full jitter: the ceiling starts at 200 ms and doubles up
//! to 5 s, and each delay is drawn uniformly below it, as in the other SDKs.
//! Without jitter, workers that lost the runtime together would come back
//! together, as one burst, again and again.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

const INITIAL: Duration = Duration::from_millis(200);
const MAX: Duration = Duration::from_secs(5);

pub(crate) struct Backoff {
    ceiling: Duration,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff { ceiling: INITIAL }
    }

    pub(crate) fn next(&mut self) -> Duration {
        let ceiling = self.ceiling;
        self.ceiling = (self.ceiling * 2).min(MAX);
        ceiling.mul_f64(unit_random())
    }

    pub(crate) fn reset(&mut self) {
        self.ceiling = INITIAL;
    }
}

/// A float in [0, 1). The standard library's randomly keyed hasher is
/// random enough for jitter and spares a dependency.
fn unit_random() -> f64 {
    let bits = RandomState::new().build_hasher().finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_below_a_doubling_capped_ceiling() {
        let mut b = Backoff::new();
        let ceilings = [200, 400, 800, 1600, 3200, 5000, 5000];
        for ms in ceilings {
            assert!(b.next() < Duration::from_millis(ms));
        }
        b.reset();
        assert!(b.next() < INITIAL);
    }

    #[test]
    fn delays_are_jittered() {
        let mut draws: Vec<u64> = (0..20).map(|_| (unit_random() * 1e9) as u64).collect();
        draws.dedup();
        assert!(draws.len() > 10);
    }
}
