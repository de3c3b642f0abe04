// The TypeScript SDK's Client from the command line, for the tests:
//   client.ts signal <execution> <name> <payload JSON>   prints the signal's seq
//   client.ts query <execution> <name>                  prints the query's value
// ORBIT_SERVER says where the runtime is.
import { Client } from "orbit-lang";

const [action, executionId, name, payload] = process.argv.slice(2);
const client = new Client();

if (action === "signal") {
  console.log(JSON.stringify(await client.signal(executionId, name, JSON.parse(payload))));
} else if (action === "query") {
  console.log(JSON.stringify(await client.query(executionId, name)));
} else {
  throw new Error(`unknown action ${action}; use signal or query`);
}
