/**
 * How bytes reach the runtime. The global fetch cannot present a client
 * certificate, so mutual TLS goes through node:https; everything else uses
 * fetch. Neither path knows about ORBIT: they move one request and its answer.
 */
import { readFileSync } from "node:fs";
import { Agent, request as httpsRequest } from "node:https";
import type { Settings } from "./settings.ts";

export interface HttpRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
  signal: AbortSignal | undefined;
}

export interface HttpResponse {
  status: number;
  text: string;
}

export type Send = (request: HttpRequest) => Promise<HttpResponse>;

export function createSend(settings: Settings): Send {
  if (settings.clientCert !== undefined && settings.server.startsWith("https:")) {
    return httpsSend(
      settings.clientCert,
      settings.clientKey ?? settings.clientCert,
      settings.caCert,
    );
  }
  return fetchSend;
}

const fetchSend: Send = async ({ method, url, headers, body, signal }) => {
  const init: RequestInit = { method, headers };
  if (body !== undefined) init.body = body;
  if (signal !== undefined) init.signal = signal;
  const response = await fetch(url, init);
  return { status: response.status, text: await response.text() };
};

/**
 * Files are read once, here, so a wrong path fails when the client is built
 * rather than on the first call. The CA, when given, replaces Node.js's list.
 */
function httpsSend(certPath: string, keyPath: string, caPath: string | undefined): Send {
  const agent = new Agent({
    keepAlive: true,
    cert: readFileSync(certPath),
    key: readFileSync(keyPath),
    ...(caPath === undefined ? {} : { ca: readFileSync(caPath) }),
  });
  return ({ method, url, headers, body, signal }) =>
    new Promise((resolve, reject) => {
      const req = httpsRequest(
        url,
        { method, headers, agent, ...(signal === undefined ? {} : { signal }) },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("error", reject);
          res.on("end", () => {
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") });
          });
          res.on("close", () => {
            if (!res.complete) reject(new Error("connection closed before the response ended"));
          });
        },
      );
      req.on("error", reject);
      req.end(body);
    });
}
