//! What a worker logs while the runtime is away: one line, then fewer and
//! fewer, then one line when it answers again.
//!
//! Every poll thread, the heartbeat thread, registration and each result
//! being delivered retry on their own while the runtime (or its database)
//! cannot answer. Logged one line per retry, a worker with four poll threads
//! wrote dozens of lines a minute through an outage, burying the rest of its
//! log. The polls, the heartbeat and registration share one `Contact`
//! instead, and each result being delivered has one of its own (a runtime
//! that answers polls may still fail to store one execution's result, and
//! that must not read as the runtime coming and going):
//!
//! - the first failure after the runtime last answered is logged as it is;
//! - the failures after it are not logged, except one reminder when the next
//!   one is due: `REMINDER_FIRST` after the loss, then at intervals doubling
//!   up to `REMINDER_MAX`, each saying how long the runtime has been away and
//!   how many lines were left out;
//! - the first answer after that is logged once ("runtime reachable again
//!   after 12.3s", or the owner's `back` line).
//!
//! The SDK writes its diagnostics to standard error without levels, so the
//! lines left out are only counted, as in the Go and TypeScript SDKs. Only
//! failures that mean "the runtime is away" (no answer, 5xx, 408, 429) come
//! here; a refusal is about the request and is logged where it happens.

use std::sync::Mutex;
use std::time::{Duration, Instant};

const REMINDER_FIRST: Duration = Duration::from_secs(10);
const REMINDER_MAX: Duration = Duration::from_secs(600);

type Clock = Box<dyn Fn() -> Instant + Send + Sync>;
type Sink = Box<dyn Fn(&str) + Send + Sync>;
type Back = Box<dyn Fn(Duration) -> String + Send + Sync>;

struct Outage {
    lost_at: Instant,
    gap: Duration,
    next_reminder: Instant,
    left_out: u64,
}

/// Whether the runtime answered the last call, for the threads that share it.
pub(crate) struct Contact {
    outage: Mutex<Option<Outage>>,
    clock: Clock,
    sink: Sink,
    back: Back,
}

impl Contact {
    /// A contact that writes to standard error, saying "runtime reachable
    /// again" when an outage ends.
    pub(crate) fn new() -> Self {
        Self::with_back(|away| format!("runtime reachable again after {:.1}s", away.as_secs_f64()))
    }

    /// A contact whose end-of-outage line is `back(how long it lasted)`.
    pub(crate) fn with_back(back: impl Fn(Duration) -> String + Send + Sync + 'static) -> Self {
        Contact {
            outage: Mutex::new(None),
            clock: Box::new(Instant::now),
            sink: Box::new(|line| eprintln!("[orbit] {line}")),
            back: Box::new(back),
        }
    }

    /// Logs `line`, about a call the runtime did not answer, if it is due.
    pub(crate) fn failed(&self, line: &str) {
        let mut outage = self.outage.lock().unwrap();
        let now = (self.clock)();
        let Some(o) = outage.as_mut() else {
            *outage = Some(Outage {
                lost_at: now,
                gap: REMINDER_FIRST,
                next_reminder: now + REMINDER_FIRST,
                left_out: 0,
            });
            (self.sink)(line);
            return;
        };
        if now < o.next_reminder {
            o.left_out += 1;
            return;
        }
        (self.sink)(&format!(
            "{line} (runtime unreachable for {:.0}s; {} similar lines not logged)",
            (now - o.lost_at).as_secs_f64(),
            o.left_out
        ));
        o.gap = (o.gap * 2).min(REMINDER_MAX);
        o.next_reminder = now + o.gap;
        o.left_out = 0;
    }

    /// Notes an answer from the runtime; logs the end of an outage once.
    pub(crate) fn answered(&self) {
        let mut outage = self.outage.lock().unwrap();
        if let Some(o) = outage.take() {
            (self.sink)(&(self.back)((self.clock)() - o.lost_at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    struct Fake {
        now: Arc<Mutex<Instant>>,
        lines: Arc<Mutex<Vec<String>>>,
    }

    impl Fake {
        fn tick(&self, d: Duration) {
            *self.now.lock().unwrap() += d;
        }

        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.lines.lock().unwrap())
        }
    }

    fn contact() -> (Contact, Fake) {
        let fake = Fake {
            now: Arc::new(Mutex::new(Instant::now())),
            lines: Arc::new(Mutex::new(Vec::new())),
        };
        let mut c = Contact::new();
        let now = fake.now.clone();
        c.clock = Box::new(move || *now.lock().unwrap());
        let lines = fake.lines.clone();
        c.sink = Box::new(move |line| lines.lock().unwrap().push(line.to_owned()));
        (c, fake)
    }

    #[test]
    fn one_line_on_loss_reminders_back_off_and_one_line_on_return() {
        let (c, fake) = contact();
        c.answered(); // nothing was lost: nothing to say
        for _ in 0..70 {
            // seventy seconds of retries, one a second
            c.failed("poll failed: down; retrying in 1s");
            fake.tick(Duration::from_secs(1));
        }
        c.answered();
        c.answered();
        assert_eq!(
            fake.take(),
            [
                "poll failed: down; retrying in 1s",
                "poll failed: down; retrying in 1s (runtime unreachable for 10s; 9 similar lines not logged)",
                "poll failed: down; retrying in 1s (runtime unreachable for 30s; 19 similar lines not logged)",
                "runtime reachable again after 70.0s",
            ]
        );
        c.failed("heartbeat failed: down again");
        assert_eq!(fake.take(), ["heartbeat failed: down again"]);
    }

    #[test]
    fn reminders_are_at_most_ten_minutes_apart() {
        let (c, fake) = contact();
        for _ in 0..3 * 3600 / 5 {
            // three hours, a retry every 5 s
            c.failed("poll failed");
            fake.tick(Duration::from_secs(5));
        }
        let away: Vec<u64> = fake.take()[1..]
            .iter()
            .map(|line| {
                let after = line.split("for ").nth(1).unwrap();
                after.split("s;").next().unwrap().parse().unwrap()
            })
            .collect();
        // 10 s after the loss, then twice as far apart each time, up to 600 s.
        assert_eq!(away[..8], [10, 30, 70, 150, 310, 630, 1230, 1830]);
        assert!(away.windows(2).skip(6).all(|w| w[1] - w[0] == 600));
    }

    #[test]
    fn a_result_has_its_own_back_line() {
        let (mut c, fake) = contact();
        c.back = Box::new(|away| {
            format!(
                "result for t delivered after {:.1}s of retries",
                away.as_secs_f64()
            )
        });
        c.failed("cannot deliver the result for t: STORAGE_ERROR (500); retrying in 1ms");
        fake.tick(Duration::from_millis(1500));
        c.failed("cannot deliver the result for t: STORAGE_ERROR (500); retrying in 1ms");
        c.answered();
        assert_eq!(
            fake.take(),
            [
                "cannot deliver the result for t: STORAGE_ERROR (500); retrying in 1ms",
                "result for t delivered after 1.5s of retries",
            ]
        );
    }
}
