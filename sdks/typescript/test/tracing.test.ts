import assert from "node:assert/strict";
import { test } from "node:test";
import { trace, type Context, type Span, type Tracer } from "@opentelemetry/api";
import { TaskError } from "../src/index.ts";
import type { TaskAssignment } from "../src/protocol.ts";
import { inTaskSpan } from "../src/tracing.ts";

const TRACE = "6d61feb6ff6a03af93dec3e7836b3492";
const SPAN = "5e8f395157c28e15";

function task(traceparent?: string): TaskAssignment {
  return {
    token: "t",
    execution_id: "trace-1",
    workflow: "Plain",
    workflow_version: "1.0.0",
    step_id: "work",
    task_name: "greeting.compose",
    contract_version: "1.0.0",
    idempotency_key: "k",
    attempt: 2,
    redelivery: false,
    ...(traceparent === undefined ? {} : { traceparent }),
  };
}

interface Started {
  name: string;
  attributes: unknown;
  parent: { traceId: string; spanId: string } | undefined;
  status?: { code: number; message?: string };
  ended: boolean;
}

function recordingTracer(started: Started[]): Tracer {
  const tracer = {
    startActiveSpan(
      name: string,
      options: { attributes: unknown },
      ctx: Context,
      fn: (s: Span) => unknown,
    ) {
      const record: Started = {
        name,
        attributes: options.attributes,
        parent: trace.getSpanContext(ctx),
        ended: false,
      };
      started.push(record);
      const span = {
        setStatus(status: { code: number; message?: string }) {
          record.status = status;
        },
        end() {
          record.ended = true;
        },
      };
      return fn(span as unknown as Span);
    },
  };
  return tracer as unknown as Tracer;
}

test("a task with a traceparent runs in a span under it", async () => {
  const started: Started[] = [];
  trace.setGlobalTracerProvider({ getTracer: () => recordingTracer(started) });
  const failed = await inTaskSpan(task(`00-${TRACE}-${SPAN}-01`), () =>
    Promise.resolve({ kind: "fail", error: new TaskError("CARD_DECLINED", "card was declined") }),
  );
  assert.equal(failed.kind, "fail");
  assert.equal(started.length, 1);
  const span = started[0];
  assert.ok(span !== undefined);
  assert.equal(span.name, "task greeting.compose");
  assert.deepEqual(span.attributes, {
    "orbit.execution_id": "trace-1",
    "orbit.unit": "work",
    "orbit.attempt": 2,
  });
  assert.deepEqual(
    { traceId: span.parent?.traceId, spanId: span.parent?.spanId },
    { traceId: TRACE, spanId: SPAN },
  );
  assert.deepEqual(span.status, { code: 2, message: "CARD_DECLINED: card was declined" });
  assert.equal(span.ended, true);

  const done = await inTaskSpan(task(), () => Promise.resolve({ kind: "complete", output: {} }));
  assert.equal(done.kind, "complete");
  const malformed = await inTaskSpan(task("01-zz"), () =>
    Promise.resolve({ kind: "complete", output: {} }),
  );
  assert.equal(malformed.kind, "complete");
  assert.equal(started.length, 1); // no traceparent, or an unreadable one: no span
  trace.disable();
});
