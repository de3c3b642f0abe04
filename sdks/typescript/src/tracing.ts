/**
 * Continues the runtime's trace in the worker, when OpenTelemetry is there.
 *
 * A runtime exporting traces hands each task its attempt's span as a W3C
 * `traceparent`. When the application has `@opentelemetry/api` installed
 * (optional: the SDK depends on nothing), the handler runs inside a span
 * `task <name>` whose parent is that span, so what the handler traces joins
 * the execution's trace. Otherwise the handler runs as before.
 */
import type { Outcome } from "./outcome.ts";
import type { TaskAssignment } from "./protocol.ts";

interface SpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote: boolean;
}

interface Span {
  setStatus(status: { code: number; message?: string }): void;
  end(): void;
}

/** The part of `@opentelemetry/api` used here. */
interface OtelApi {
  context: { active(): unknown };
  trace: {
    setSpanContext(context: unknown, spanContext: SpanContext): unknown;
    getTracer(name: string): {
      startActiveSpan<T>(
        name: string,
        options: { attributes: Record<string, string | number> },
        context: unknown,
        fn: (span: Span) => T,
      ): T;
    };
  };
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ERROR = 2;
let api: Promise<OtelApi | null> | undefined;

function loadApi(): Promise<OtelApi | null> {
  // A specifier in a variable: the package is optional, so neither the
  // compiler nor a bundler may insist on it.
  const name = "@opentelemetry/api";
  api ??= import(name).then(
    (module: unknown) => module as OtelApi,
    () => null,
  );
  return api;
}

export async function inTaskSpan(
  task: TaskAssignment,
  run: () => Promise<Outcome>,
): Promise<Outcome> {
  const parsed = task.traceparent === undefined ? null : TRACEPARENT.exec(task.traceparent);
  if (parsed === null) return run();
  const otel = await loadApi();
  if (otel === null) return run();
  const parent = otel.trace.setSpanContext(otel.context.active(), {
    traceId: parsed[1] ?? "",
    spanId: parsed[2] ?? "",
    traceFlags: Number.parseInt(parsed[3] ?? "0", 16),
    isRemote: true,
  });
  const attributes = {
    "orbit.execution_id": task.execution_id,
    "orbit.unit": task.step_id,
    "orbit.attempt": task.attempt,
  };
  const tracer = otel.trace.getTracer("orbit-sdk");
  return tracer.startActiveSpan(`task ${task.task_name}`, { attributes }, parent, async (span) => {
    try {
      const outcome = await run();
      if (outcome.kind === "fail") {
        span.setStatus({ code: ERROR, message: `${outcome.error.code}: ${outcome.error.message}` });
      }
      return outcome;
    } finally {
      span.end();
    }
  });
}
