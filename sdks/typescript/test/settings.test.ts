import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, Worker } from "../src/index.ts";
import { DEFAULT_SERVER, resolveSettings } from "../src/settings.ts";

test("defaults apply when neither code nor environment says anything", () => {
  assert.deepEqual(resolveSettings({}, {}), {
    server: DEFAULT_SERVER,
    token: undefined,
    clientCert: undefined,
    clientKey: undefined,
    caCert: undefined,
  });
  assert.equal(DEFAULT_SERVER, "http://127.0.0.1:7233");
});

test("the environment fills what code leaves unset", () => {
  const env = {
    ORBIT_SERVER: "https://orbit.internal:7233/",
    ORBIT_TOKEN: "admin",
    ORBIT_CLIENT_CERT: "/etc/orbit/w.pem",
    ORBIT_CLIENT_KEY: "/etc/orbit/w.key",
    ORBIT_CA_CERT: "/etc/orbit/ca.pem",
  };
  assert.deepEqual(resolveSettings({}, env), {
    server: "https://orbit.internal:7233",
    token: "admin",
    clientCert: "/etc/orbit/w.pem",
    clientKey: "/etc/orbit/w.key",
    caCert: "/etc/orbit/ca.pem",
  });
});

test("ORBIT_WORKER_TOKEN wins over ORBIT_TOKEN, and code wins over both", () => {
  const env = { ORBIT_WORKER_TOKEN: "worker", ORBIT_TOKEN: "admin" };
  assert.equal(resolveSettings({}, env).token, "worker");
  assert.equal(resolveSettings({ token: "mine" }, env).token, "mine");
  assert.equal(
    resolveSettings({ token: "" }, env).token,
    undefined,
    "an empty option sends no token",
  );
});

test("empty variables count as unset", () => {
  const env = {
    ORBIT_SERVER: "",
    ORBIT_WORKER_TOKEN: "",
    ORBIT_TOKEN: "admin",
    ORBIT_CLIENT_CERT: "",
    ORBIT_CA_CERT: "",
  };
  const settings = resolveSettings({}, env);
  assert.equal(settings.server, DEFAULT_SERVER);
  assert.equal(settings.token, "admin");
  assert.equal(settings.clientCert, undefined);
  assert.equal(settings.caCert, undefined);
});

test("the key defaults to the certificate file", () => {
  assert.equal(resolveSettings({ clientCert: "/w.pem" }, {}).clientKey, "/w.pem");
  assert.equal(resolveSettings({}, { ORBIT_CLIENT_CERT: "/w.pem" }).clientKey, "/w.pem");
  assert.equal(
    resolveSettings({ clientCert: "/w.pem", clientKey: "/w.key" }, {}).clientKey,
    "/w.key",
  );
});

test("trailing slashes are removed from the server URL", () => {
  assert.equal(resolveSettings({ server: "http://h:1//" }, {}).server, "http://h:1");
});

test("Client and Worker read process.env when built", (t) => {
  const saved = { ...process.env };
  t.after(() => {
    process.env = saved;
  });
  process.env.ORBIT_SERVER = "http://10.0.0.5:7233/";
  assert.equal(new Client().server, "http://10.0.0.5:7233");
  assert.equal(new Worker().client.server, "http://10.0.0.5:7233");
  assert.equal(new Client({ server: "http://other:1" }).server, "http://other:1");
});
