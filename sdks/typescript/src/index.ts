export { Client } from "./client.ts";
export type { Context } from "./context.ts";
export { ApiError, TaskError } from "./errors.ts";
export type { Json } from "./json.ts";
export type { Logger } from "./logger.ts";
export type { TaskAssignment } from "./protocol.ts";
export type { ClientOptions } from "./settings.ts";
export { SDK_VERSION } from "./version.ts";
export { Worker, type Handler, type WorkerOptions } from "./worker.ts";
