/** Where the SDK's own messages go; `console` by default. */
export type Logger = Pick<Console, "info" | "warn" | "error">;
