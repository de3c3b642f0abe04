import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const manifest = JSON.parse(readFileSync(`${packageDir}/package.json`, "utf8")) as {
  version: string;
  type: string;
  dependencies?: Record<string, string>;
  engines: Record<string, string>;
  exports: Record<string, unknown>;
};

test("the built package exports the documented values, and only those", async () => {
  // Imported by name: this goes through package.json's exports to dist/, as for users.
  const sdk = await import("orbit-lang");
  assert.deepEqual(Object.keys(sdk).sort(), [
    "ApiError",
    "Client",
    "SDK_VERSION",
    "TaskError",
    "Worker",
  ]);
  assert.equal(sdk.SDK_VERSION, manifest.version);
});

test("the manifest: ESM, Node.js 18+, no runtime dependencies", () => {
  assert.equal(manifest.type, "module");
  assert.equal(manifest.engines.node, ">=18");
  assert.equal(manifest.dependencies, undefined);
  assert.deepEqual(manifest.exports["."], {
    types: "./dist/index.d.ts",
    import: "./dist/index.js",
  });
});

test("the tarball holds the built code, its declarations and the README", () => {
  const output = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: packageDir,
    encoding: "utf8",
  });
  const [pack] = JSON.parse(output) as [{ files: { path: string }[] }];
  const files = pack.files.map((f) => f.path);
  for (const expected of ["package.json", "README.md", "dist/index.js", "dist/index.d.ts"]) {
    assert.ok(files.includes(expected), `${expected} is missing from ${files.join(", ")}`);
  }
  assert.deepEqual(
    files.filter((f) => !f.startsWith("dist/") && f !== "package.json" && f !== "README.md"),
    [],
  );
});
