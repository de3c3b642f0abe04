//! Cooperative cancellation and structured task errors: a handler that
//! renders a report section by section, checks between sections whether the
//! runtime cancelled the attempt, and bounds each section by the time the
//! attempt has left. It also shows a secured connection: set ORBIT_CA_CERT,
//! ORBIT_CLIENT_CERT and ORBIT_CLIENT_KEY, or pass the PEM files to the
//! builder as below. Run it with `cargo run --example reports`.

use std::time::Duration;

use orbit_worker::{TaskError, Worker};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Report {
    sections: Vec<String>,
}

/// Stands in for real work: a section takes 100 ms, or fails if the attempt
/// has less time than that left.
fn render(section: &str, remaining_ms: Option<u64>) -> Result<(), TaskError> {
    if remaining_ms.is_some_and(|ms| ms < 100) {
        return Err(TaskError::retryable(
            "NO_TIME",
            format!("no time left to render {section}"),
        ));
    }
    if section.is_empty() {
        return Err(
            TaskError::permanent("EMPTY_SECTION", "a section has no title")
                .with_details(json!({ "rule": "sections need titles" })),
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = Worker::builder("reports-1").concurrency(2);
    // An explicit TLS setup, as an alternative to the environment: reading
    // the files here surfaces a missing file as an error.
    if let Ok(dir) = std::env::var("REPORTS_TLS_DIR") {
        builder = builder
            .ca_pem(std::fs::read(format!("{dir}/ca.pem"))?)
            .client_identity(
                std::fs::read(format!("{dir}/reports-1.pem"))?,
                std::fs::read(format!("{dir}/reports-1.key"))?,
            );
    }
    let mut worker = builder.build();
    worker.task("reports.render", "1.0.0", |input: Report, ctx| {
        let mut pages = 0;
        for section in &input.sections {
            if ctx.is_cancelled() {
                return Err(TaskError::retryable("CANCELLED", "stopped by the runtime"));
            }
            render(section, ctx.remaining_ms())?;
            pages += 1;
        }
        Ok(json!({ "pages": pages }))
    });
    let stopper = worker.clone();
    ctrlc::set_handler(move || stopper.stop())?;
    worker.run()?;
    Ok(())
}
