import type { TaskAssignment } from "./protocol.ts";

/** What a handler knows about the attempt it runs. The SDK creates it. */
export interface Context {
  /** Identifies this delivery; the SDK sends it back with the result. */
  readonly token: string;
  readonly executionId: string;
  readonly workflow: string;
  readonly workflowVersion: string;
  /** `<step>`, `<step>[<i>]` in a fan-out, or `compensate:<step>`. */
  readonly stepId: string;
  readonly taskName: string;
  /** Starts at 1; a redelivery keeps the number. */
  readonly attempt: number;
  /** The same for every retry and redelivery of the step: key side effects on it. */
  readonly idempotencyKey: string;
  /** True when an earlier delivery of this attempt has an unknown outcome. */
  readonly redelivery: boolean;
  /** For a step with a timeout, the moment this attempt expires (ms since the epoch). */
  readonly deadlineMs: number | undefined;
  /** Aborted when the runtime cancels the attempt; the reason is a CANCELLED TaskError. */
  readonly signal: AbortSignal;
  readonly cancelled: boolean;
  /** Milliseconds until `deadlineMs`, never negative; undefined without a deadline. */
  remainingMs(): number | undefined;
  /** Prints one JSON line on standard output, tagged with the execution, step and attempt. */
  log(message: string, fields?: Record<string, unknown>): void;
}

export class TaskContext implements Context {
  readonly token: string;
  readonly executionId: string;
  readonly workflow: string;
  readonly workflowVersion: string;
  readonly stepId: string;
  readonly taskName: string;
  readonly attempt: number;
  readonly idempotencyKey: string;
  readonly redelivery: boolean;
  readonly deadlineMs: number | undefined;
  readonly signal: AbortSignal;

  constructor(task: TaskAssignment, signal: AbortSignal) {
    this.token = task.token;
    this.executionId = task.execution_id;
    this.workflow = task.workflow;
    this.workflowVersion = task.workflow_version;
    this.stepId = task.step_id;
    this.taskName = task.task_name;
    this.attempt = task.attempt;
    this.idempotencyKey = task.idempotency_key;
    this.redelivery = task.redelivery;
    this.deadlineMs = task.deadline_ms ?? undefined;
    this.signal = signal;
  }

  get cancelled(): boolean {
    return this.signal.aborted;
  }

  remainingMs(): number | undefined {
    return this.deadlineMs === undefined ? undefined : Math.max(0, this.deadlineMs - Date.now());
  }

  log(message: string, fields: Record<string, unknown> = {}): void {
    const tags = { execution_id: this.executionId, step: this.stepId, attempt: this.attempt };
    // The tags go last so that a field cannot disguise which attempt logged.
    const line = { message, ...fields, ...tags };
    let text: string;
    try {
      text = JSON.stringify(line);
    } catch (err) {
      text = JSON.stringify({ message, ...tags, log_error: String(err) });
    }
    console.log(text);
  }
}
