import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test, type TestContext } from "node:test";
import { ApiError, Client } from "../src/index.ts";
import { error, FakeRuntime, type Recorded, type Reply } from "./fake-runtime.ts";

/** A fake runtime whose API answers come from `route`, and a client with the admin token. */
async function setup(
  t: TestContext,
  route: (request: Recorded) => Reply | undefined,
): Promise<{ fake: FakeRuntime; client: Client }> {
  const fake = await FakeRuntime.start({ token: "admin-secret" });
  fake.intercept(route);
  t.after(() => fake.close());
  return { fake, client: new Client({ server: fake.url, token: "admin-secret" }) };
}

test("start() posts the workflow, input, version and id, and resolves to the id", async (t) => {
  const { fake, client } = await setup(t, (r) =>
    r.path === "/v1/executions"
      ? { status: 201, body: { execution_id: "doc-42", created: true } }
      : undefined,
  );
  const id = await client.start(
    "DocumentInsights",
    { text: "Hello world" },
    { version: "1.0.0", executionId: "doc-42" },
  );
  assert.equal(id, "doc-42");
  const [call] = fake.calls("/v1/executions");
  assert.equal(call?.method, "POST");
  assert.equal(call.headers.authorization, "Bearer admin-secret");
  assert.equal(call.headers["content-type"], "application/json");
  assert.deepEqual(call.body, {
    workflow: "DocumentInsights",
    input: { text: "Hello world" },
    version: "1.0.0",
    execution_id: "doc-42",
  });
});

test("start() sends {} as input and omits what was not given", async (t) => {
  const { fake, client } = await setup(t, (r) =>
    r.path === "/v1/executions"
      ? { status: 201, body: { execution_id: "generated", created: true } }
      : undefined,
  );
  assert.equal(await client.start("Hello"), "generated");
  assert.deepEqual(fake.calls("/v1/executions")[0]?.body, { workflow: "Hello", input: {} });
});

test("wait() long-polls with timeout_ms and resolves to the execution state", async (t) => {
  const state = { id: "doc-42", status: "COMPLETED", output: { greeting: "Hello, Ada!!!" } };
  const { fake, client } = await setup(t, (r) =>
    r.path.startsWith("/v1/executions/doc-42/wait") ? { status: 200, body: state } : undefined,
  );
  assert.deepEqual(await client.wait("doc-42", 60_000), state);
  await client.wait("doc-42");
  assert.deepEqual(
    fake.requests.map((r) => [r.method, r.path, r.body]),
    [
      ["GET", "/v1/executions/doc-42/wait?timeout_ms=60000", undefined],
      ["GET", "/v1/executions/doc-42/wait?timeout_ms=30000", undefined],
    ],
  );
  assert.equal(fake.requests[0]?.headers["content-type"], undefined);
});

test("signal() posts the payload and resolves to the event's sequence number", async (t) => {
  const { fake, client } = await setup(t, (r) =>
    r.path === "/v1/executions/order-A-100/signals/review"
      ? {
          status: 200,
          body: { execution_id: "order-A-100", signal: "review", accepted: true, seq: 5 },
        }
      : undefined,
  );
  assert.equal(
    await client.signal("order-A-100", "review", { approved: true, reviewer: "dana" }),
    5,
  );
  assert.equal(await client.signal("order-A-100", "review"), 5);
  assert.deepEqual(
    fake.requests.map((r) => [r.method, r.body]),
    [
      ["POST", { approved: true, reviewer: "dana" }],
      ["POST", {}],
    ],
  );
});

test("query() resolves to the query's value", async (t) => {
  const value = { needs_approval: true, approved: null, reviewer: null, charged: false };
  const { client } = await setup(t, (r) =>
    r.path === "/v1/executions/order-A-100/queries/status"
      ? { status: 200, body: { execution_id: "order-A-100", query: "status", value } }
      : undefined,
  );
  const status = await client.query<typeof value>("order-A-100", "status");
  assert.equal(status.approved, null);
  assert.deepEqual(status, value);
});

test("ids and names are escaped in paths", async (t) => {
  const { fake, client } = await setup(t, () => ({ status: 200, body: { value: 1 } }));
  await client.query("a b/c", "n?x");
  assert.equal(fake.requests[0]?.path, "/v1/executions/a%20b%2Fc/queries/n%3Fx");
});

test("error answers become ApiError with the runtime's code", async (t) => {
  const { client } = await setup(t, (r) => {
    if (r.path.endsWith("/signals/review")) {
      return error(
        422,
        "SIGNAL_PAYLOAD_INVALID",
        "payload for signal `review` is invalid at $.approved: expected Bool, found a string",
      );
    }
    if (r.path.endsWith("/queries/stat")) {
      return error(
        404,
        "UNKNOWN_QUERY",
        "OrderApproval@1.0.0 has no query `stat`; declared: status",
      );
    }
    return { status: 422, body: "missing field `workflow`" };
  });
  await assert.rejects(
    client.signal("order-A-100", "review", { approved: "yes" }),
    (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.name, "ApiError");
      assert.equal(err.status, 422);
      assert.equal(err.code, "SIGNAL_PAYLOAD_INVALID");
      assert.match(err.message, /at \$\.approved/);
      assert.equal(err.isConnectionError, false);
      return true;
    },
  );
  await assert.rejects(client.query("order-A-100", "stat"), { status: 404, code: "UNKNOWN_QUERY" });
  // A plain-text error body (422 and 400 from the HTTP layer) has no code.
  await assert.rejects(client.request("POST", "/v1/executions", {}), {
    status: 422,
    code: "HTTP_ERROR",
    message: "missing field `workflow`",
  });
});

test("a missing token is refused by the runtime, not the client", async (t) => {
  const fake = await FakeRuntime.start({ token: "admin-secret" });
  t.after(() => fake.close());
  const client = new Client({ server: fake.url, token: "" });
  await assert.rejects(client.wait("x"), { status: 401, code: "UNAUTHENTICATED" });
  assert.equal(fake.requests[0]?.headers.authorization, undefined);
});

test("request() returns the status and a null body for an empty answer", async (t) => {
  const { client } = await setup(t, (r) =>
    r.path === "/empty" ? { status: 204 } : { status: 200, body: { a: 1 } },
  );
  assert.deepEqual(await client.request("POST", "/empty", { x: 1 }), { status: 204, body: null });
  assert.deepEqual(await client.request("GET", "/json"), { status: 200, body: { a: 1 } });
});

test("request() rejects with the signal's reason when aborted", async (t) => {
  const { client } = await setup(t, () => undefined);
  const controller = new AbortController();
  controller.abort(new Error("caller gave up"));
  await assert.rejects(
    client.request("GET", "/v1/health", undefined, controller.signal),
    /caller gave up/,
  );
});

test("an unreachable runtime is a connection ApiError", async () => {
  const port = await freePort();
  const client = new Client({ server: `http://127.0.0.1:${port}/` });
  assert.equal(client.server, `http://127.0.0.1:${port}`);
  await assert.rejects(client.start("Hello"), (err: unknown) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.status, 0);
    assert.equal(err.code, "CONNECTION");
    assert.equal(err.isConnectionError, true);
    assert.match(err.message, /ECONNREFUSED/);
    return true;
  });
});

/** A port nothing listens on: bound, read and released. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  assert.ok(address !== null && typeof address === "object");
  return address.port;
}
