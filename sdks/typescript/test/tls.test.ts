import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test, type TestContext } from "node:test";
import { ApiError, Client } from "../src/index.ts";
import { eventually, FakeRuntime } from "./fake-runtime.ts";
import { harness } from "./support.ts";

const openssl = (() => {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();
const skip = openssl ? false : "openssl is not installed";

let dir = "";
const file = (name: string): string => join(dir, name);

/** A private CA, a server certificate for 127.0.0.1 and a client certificate for `payments-1`. */
before(() => {
  if (!openssl) return;
  dir = mkdtempSync(join(tmpdir(), "orbit-sdk-tls-"));
  const run = (...args: string[]): void => {
    execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
  };
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  run(
    "req",
    "-x509",
    ...ec,
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-days",
    "1",
    "-subj",
    "/CN=ORBIT test CA",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  );
  const issue = (name: string, cn: string, extensions: string): void => {
    writeFileSync(file(`${name}.ext`), extensions);
    run("req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`);
    run(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
    );
  };
  issue("server", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  issue("client", "payments-1", "extendedKeyUsage=clientAuth\n");
  writeFileSync(
    file("client-and-key.pem"),
    readFileSync(file("client.pem")).toString() + readFileSync(file("client.key")).toString(),
  );
});

after(() => {
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

async function tlsRuntime(t: TestContext): Promise<FakeRuntime> {
  const fake = await FakeRuntime.start({
    tls: {
      key: readFileSync(file("server.key")),
      cert: readFileSync(file("server.pem")),
      ca: readFileSync(file("ca.pem")),
    },
  });
  t.after(() => fake.close());
  return fake;
}

function withCaCert(t: TestContext, path: string | undefined): void {
  const saved = process.env.ORBIT_CA_CERT;
  if (path === undefined) delete process.env.ORBIT_CA_CERT;
  else process.env.ORBIT_CA_CERT = path;
  t.after(() => {
    if (saved === undefined) delete process.env.ORBIT_CA_CERT;
    else process.env.ORBIT_CA_CERT = saved;
  });
}

test(
  "a client certificate is presented over https, trusting ORBIT_CA_CERT",
  { skip },
  async (t) => {
    const fake = await tlsRuntime(t);
    withCaCert(t, file("ca.pem"));
    fake.intercept(() => ({ status: 200, body: { status: "ok" } }));
    const separate = new Client({
      server: fake.url,
      clientCert: file("client.pem"),
      clientKey: file("client.key"),
    });
    assert.deepEqual(await separate.request("GET", "/v1/health"), {
      status: 200,
      body: { status: "ok" },
    });
    // The key may sit in the certificate file.
    const combined = new Client({ server: fake.url, clientCert: file("client-and-key.pem") });
    assert.deepEqual((await combined.request("POST", "/v1/health", { a: 1 })).body, {
      status: "ok",
    });
    assert.deepEqual(fake.requests[1]?.body, { a: 1 });
  },
);

test("without ORBIT_CA_CERT the private CA is not trusted", { skip }, async (t) => {
  const fake = await tlsRuntime(t);
  withCaCert(t, undefined);
  const client = new Client({ server: fake.url, clientCert: file("client-and-key.pem") });
  await assert.rejects(
    client.request("GET", "/v1/health"),
    (err: unknown) => err instanceof ApiError && err.isConnectionError,
  );
});

test("a worker serves tasks over mutual TLS", { skip }, async (t) => {
  const fake = await tlsRuntime(t);
  withCaCert(t, file("ca.pem"));
  const h = await harness(t, {
    server: fake.url,
    clientCert: file("client.pem"),
    clientKey: file("client.key"),
  });
  h.worker.task("payments.charge", {}, () => ({ transaction_id: "tx-1" }));
  void h.start();
  const token = fake.enqueue({ task_name: "payments.charge" });
  await eventually(() => fake.results.length === 1, "the result");
  assert.deepEqual(fake.results[0]?.body, { token, output: { transaction_id: "tx-1" } });
});

test("an unreadable certificate fails when the client is built", { skip }, () => {
  assert.throws(
    () => new Client({ server: "https://127.0.0.1:1", clientCert: file("missing.pem") }),
    /ENOENT/,
  );
  // Over plain http the certificate is not used, so it is not read.
  assert.doesNotThrow(
    () => new Client({ server: "http://127.0.0.1:1", clientCert: file("missing.pem") }),
  );
});
