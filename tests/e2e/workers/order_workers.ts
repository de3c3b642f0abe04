// Worker `orders-typescript` for chapter 59's OrderProcessing:
// orders.validate, inventory.reserve, inventory.release and
// notifications.send. Every call is recorded in the log, so the tests can see
// which reservations were released and which messages were sent.
import { Worker } from "orbit-lang";

type LineItem = { sku: string; quantity: number };

const worker = new Worker({
  workerId: "orders-typescript",
  pollWaitMs: Number(process.env.E2E_POLL_WAIT_MS ?? 3000),
});

worker.task<{ order_id: string; amount: number; items: LineItem[] }, { valid: boolean }>(
  "orders.validate",
  { version: "1.0.0" },
  async (input) => ({ valid: input.items.length > 0 && input.amount > 0 }),
);

worker.task<{ order_id: string; items: LineItem[] }, { reservation_id: string }>(
  "inventory.reserve",
  { version: "1.0.0" },
  async (input, ctx) => {
    const reservation_id = `res-${input.order_id}`;
    ctx.log("reserved", { reservation_id });
    return { reservation_id };
  },
);

worker.task<{ reservation_id: string }, { released: boolean }>(
  "inventory.release",
  { version: "1.0.0" },
  async (input, ctx) => {
    ctx.log("released", { reservation_id: input.reservation_id });
    return { released: true };
  },
);

worker.task<{ customer_id: string; message: string }, { delivered: boolean }>(
  "notifications.send",
  { version: "1.0.0" },
  async (input, ctx) => {
    ctx.log("notified", { customer_id: input.customer_id, text: input.message });
    return { delivered: true };
  },
);

await worker.run();
