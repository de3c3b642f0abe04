/**
 * A scripted stand-in for the ORBIT runtime: the worker protocol endpoints of
 * chapter 68 over node:http on 127.0.0.1, with hooks to answer differently,
 * forget sessions (a restart) or stop accepting connections (an outage).
 */
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { TaskAssignment } from "../src/index.ts";

export interface Recorded {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: unknown;
}

export interface Reply {
  status: number;
  /** A JSON value, or a string sent as text/plain. */
  body?: unknown;
}

/** Answers a request instead of the fake's own logic when it returns a Reply. */
export type Interceptor = (request: Recorded) => Reply | undefined | Promise<Reply | undefined>;

export interface FakeOptions {
  heartbeatIntervalMs?: number;
  sessionTimeoutMs?: number;
  /** When set, every request must carry `authorization: Bearer <token>`. */
  token?: string;
  warnings?: string[];
  /** Serve HTTPS and demand a client certificate signed by `ca`. */
  tls?: { key: Buffer; cert: Buffer; ca: Buffer };
  /** Worker protocol extensions offered to a worker that asks (none: the book's protocol). */
  extensions?: string[];
}

interface Waiter {
  session: string;
  deliver: (task: TaskAssignment) => void;
}

export class FakeRuntime {
  readonly requests: Recorded[] = [];
  readonly sessions = new Set<string>();
  /** Which session each token was handed to. */
  readonly holders = new Map<string, string>();
  /** Tokens to list in the next heartbeat of the session holding them. */
  readonly cancels = new Set<string>();
  /** Long polls the client closed before an answer. */
  abortedPolls = 0;
  activePolls = 0;
  maxActivePolls = 0;
  readonly #server: Server;
  readonly #options: FakeOptions;
  readonly #queue: TaskAssignment[] = [];
  readonly #waiters: Waiter[] = [];
  readonly #interceptors: Interceptor[] = [];
  /** Raw connections, so an outage can drop them over TLS as well as plain HTTP. */
  readonly #sockets = new Set<Socket>();
  #port = 0;
  #nextId = 1;

  private constructor(options: FakeOptions) {
    this.#options = options;
    const handle = (req: IncomingMessage, res: ServerResponse): void => {
      void this.#handle(req, res);
    };
    this.#server = options.tls
      ? createTlsServer({ ...options.tls, requestCert: true, rejectUnauthorized: true }, handle)
      : createServer(handle);
    this.#server.on("connection", (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on("close", () => this.#sockets.delete(socket));
    });
  }

  static async start(options: FakeOptions = {}): Promise<FakeRuntime> {
    const fake = new FakeRuntime(options);
    fake.#server.listen(0, "127.0.0.1");
    await once(fake.#server, "listening");
    fake.#port = (fake.#server.address() as AddressInfo).port;
    return fake;
  }

  get url(): string {
    return `${this.#options.tls ? "https" : "http"}://127.0.0.1:${this.#port}`;
  }

  /** Requests to one path, in arrival order. */
  calls(path: string): Recorded[] {
    return this.requests.filter((r) => r.path === path);
  }

  /** Bodies of complete and fail calls. */
  get results(): { path: string; body: Record<string, unknown> }[] {
    return this.requests
      .filter((r) => r.path === "/v1/tasks/complete" || r.path === "/v1/tasks/fail")
      .map((r) => ({ path: r.path, body: r.body as Record<string, unknown> }));
  }

  intercept(interceptor: Interceptor): () => void {
    this.#interceptors.push(interceptor);
    return () => {
      this.#interceptors.splice(this.#interceptors.indexOf(interceptor), 1);
    };
  }

  /** Queues a task; fields not given get plausible values. Returns its token. */
  enqueue(
    task: Partial<Omit<TaskAssignment, "input">> & {
      task_name: string;
      input?: TaskAssignment["input"] | undefined;
    },
  ): string {
    const n = this.#nextId++;
    const full = {
      token: `token-${n}`,
      execution_id: `exec-${n}`,
      workflow: "Test",
      workflow_version: "1.0.0",
      step_id: "step",
      contract_version: "1.0.0",
      input: {},
      idempotency_key: `exec-${n}/step`,
      attempt: 1,
      redelivery: false,
      ...task,
    } as TaskAssignment;
    const waiter = this.#waiters.shift();
    if (waiter === undefined) this.#queue.push(full);
    else waiter.deliver(full);
    return full.token;
  }

  /** What a runtime restart does to workers: every session is forgotten. */
  forgetSessions(): void {
    this.sessions.clear();
  }

  /** Stops accepting connections and drops the open ones. */
  async goDown(): Promise<void> {
    const closed = once(this.#server, "close");
    this.#server.close();
    for (const socket of this.#sockets) socket.destroy();
    this.#waiters.length = 0;
    await closed;
  }

  /** Listens again on the same port. */
  async comeBack(): Promise<void> {
    this.#server.listen(this.#port, "127.0.0.1");
    await once(this.#server, "listening");
  }

  async close(): Promise<void> {
    if (!this.#server.listening) return;
    await this.goDown();
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const url = new URL(req.url ?? "/", this.url);
    const recorded: Recorded = {
      method: req.method ?? "",
      path: url.pathname + url.search,
      headers: req.headers,
      body: text === "" ? undefined : (JSON.parse(text) as unknown),
    };
    this.requests.push(recorded);
    if (text !== "" && req.headers["content-type"] !== "application/json") {
      reply(res, { status: 415, body: "expected content-type: application/json" });
      return;
    }
    const token = this.#options.token;
    if (token !== undefined && req.headers.authorization !== `Bearer ${token}`) {
      reply(res, error(401, "UNAUTHENTICATED", "missing or invalid credentials"));
      return;
    }
    for (const interceptor of this.#interceptors) {
      const answer = await interceptor(recorded);
      if (answer !== undefined) {
        reply(res, answer);
        return;
      }
    }
    reply(res, await this.#protocol(recorded, res));
  }

  async #protocol(request: Recorded, res: ServerResponse): Promise<Reply> {
    const body = (request.body ?? {}) as Record<string, unknown>;
    const session = body.worker_session_id as string;
    switch (request.path) {
      case "/v1/workers/register": {
        const id = `session-${this.#nextId++}`;
        this.sessions.add(id);
        const asked = body.extensions as string[] | undefined;
        const offered = (this.#options.extensions ?? []).filter((name) => asked?.includes(name));
        return {
          status: 200,
          body: {
            accepted: true,
            worker_session_id: id,
            heartbeat_interval_ms: this.#options.heartbeatIntervalMs ?? 50,
            session_timeout_ms: this.#options.sessionTimeoutMs ?? 300,
            warnings: this.#options.warnings ?? [],
            ...(asked === undefined ? {} : { extensions: offered }),
          },
        };
      }
      case "/v1/workers/poll":
        if (!this.sessions.has(session)) return unknownSession();
        return this.#poll(session, (body.wait_ms as number | undefined) ?? 20_000, res);
      case "/v1/workers/heartbeat": {
        if (!this.sessions.has(session)) return unknownSession();
        const cancel = [...this.cancels].filter((t) => this.holders.get(t) === session);
        for (const t of cancel) this.cancels.delete(t);
        return { status: 200, body: { accepted: true, cancel } };
      }
      case "/v1/workers/unregister":
        if (!this.sessions.delete(session)) {
          return error(404, "UNKNOWN_SESSION", "unknown worker session");
        }
        return { status: 200, body: { accepted: true } };
      case "/v1/tasks/complete":
      case "/v1/tasks/fail": {
        const poll = body.poll as { worker_session_id: string; wait_ms?: number } | undefined;
        if (poll === undefined || !(this.#options.extensions ?? []).includes("result-then-poll")) {
          return { status: 200, body: { accepted: true } };
        }
        if (!this.sessions.has(poll.worker_session_id)) {
          const lost = unknownSession().body as { error: unknown };
          return { status: 200, body: { accepted: true, poll_error: lost.error } };
        }
        const found = await this.#poll(poll.worker_session_id, poll.wait_ms ?? 20_000, res);
        return { status: 200, body: { accepted: true, task: found.body ?? null } };
      }
      default:
        return error(404, "NOT_FOUND", `no route for ${request.method} ${request.path}`);
    }
  }

  async #poll(session: string, waitMs: number, res: ServerResponse): Promise<Reply> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return this.#assign(queued, session);
    this.activePolls++;
    this.maxActivePolls = Math.max(this.maxActivePolls, this.activePolls);
    try {
      const task = await new Promise<TaskAssignment | undefined>((resolve) => {
        const waiter: Waiter = {
          session,
          deliver: (t) => {
            settle();
            resolve(t);
          },
        };
        const settle = (): void => {
          clearTimeout(timer);
          res.off("close", onClose);
          const i = this.#waiters.indexOf(waiter);
          if (i >= 0) this.#waiters.splice(i, 1);
        };
        const timer = setTimeout(() => {
          settle();
          resolve(undefined);
        }, waitMs);
        const onClose = (): void => {
          this.abortedPolls++;
          settle();
          resolve(undefined);
        };
        res.on("close", onClose);
        this.#waiters.push(waiter);
      });
      return task === undefined ? { status: 204 } : this.#assign(task, session);
    } finally {
      this.activePolls--;
    }
  }

  #assign(task: TaskAssignment, session: string): Reply {
    this.holders.set(task.token, session);
    return { status: 200, body: task };
  }
}

export function error(status: number, code: string, message: string): Reply {
  return { status, body: { error: { code, message } } };
}

function unknownSession(): Reply {
  return error(404, "UNKNOWN_SESSION", "unknown or expired worker session; register again");
}

function reply(res: ServerResponse, answer: Reply): void {
  if (res.destroyed) return;
  res.setHeader("x-orbit-api-version", "orbit-api/1");
  if (answer.body === undefined) {
    res.writeHead(answer.status).end();
  } else if (typeof answer.body === "string") {
    res.writeHead(answer.status, { "content-type": "text/plain" }).end(answer.body);
  } else {
    res
      .writeHead(answer.status, { "content-type": "application/json" })
      .end(JSON.stringify(answer.body));
  }
}

/** Polls `predicate` until it holds; fails the test with `what` after `timeoutMs`. */
export async function eventually(
  predicate: () => boolean,
  what: string,
  timeoutMs = 5000,
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A logger that keeps the SDK's messages for assertions. */
export function recordingLogger(): {
  lines: { level: string; text: string }[];
  info: (...args: unknown[]) => void;
  warn: (...args: unknown[]) => void;
  error: (...args: unknown[]) => void;
} {
  const lines: { level: string; text: string }[] = [];
  const at =
    (level: string) =>
    (...args: unknown[]): void => {
      lines.push({
        level,
        text: args.map((a) => (a instanceof Error ? a.message : String(a))).join(" "),
      });
    };
  return { lines, info: at("info"), warn: at("warn"), error: at("error") };
}
