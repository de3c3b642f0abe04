// The ORBIT extension: starts `orbit lsp` as the language server for .orbit
// files and adds commands that run the orbit binary in a terminal.

import * as vscode from "vscode";
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";

let client: LanguageClient | undefined;
let terminal: vscode.Terminal | undefined;

function settings(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration("orbit");
}

function serverPath(): string {
  return settings().get<string>("serverPath") || "orbit";
}

async function startServer(context: vscode.ExtensionContext): Promise<void> {
  const command = serverPath();
  const serverOptions: ServerOptions = {
    run: { command, args: ["lsp"], transport: TransportKind.stdio },
    debug: { command, args: ["lsp"], transport: TransportKind.stdio },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file", language: "orbit" }, { scheme: "untitled", language: "orbit" }],
    outputChannelName: "ORBIT Language Server",
    // The server reads `orbit.verify.*` from both: the options when it
    // starts, then each change of the `orbit` section as it is made.
    initializationOptions: { verify: settings().get("verify") ?? {} },
    synchronize: { configurationSection: "orbit" },
  };
  client = new LanguageClient("orbit", "ORBIT Language Server", serverOptions, clientOptions);
  try {
    await client.start();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    vscode.window.showErrorMessage(
      `ORBIT: could not start \`orbit lsp\` (${reason}). Install orbit or set "orbit.serverPath".`,
    );
    client = undefined;
  }
  context.subscriptions.push({ dispose: () => void client?.stop() });
}

async function restartServer(context: vscode.ExtensionContext): Promise<void> {
  if (client) {
    const running = client;
    client = undefined;
    await running.stop().catch(() => undefined);
  }
  await startServer(context);
}

/** Quotes one argument for a POSIX shell or PowerShell. */
function quote(argument: string): string {
  if (process.platform === "win32") {
    return `'${argument.replace(/'/g, "''")}'`;
  }
  return `'${argument.replace(/'/g, "'\\''")}'`;
}

function orbitTerminal(): vscode.Terminal {
  if (!terminal || terminal.exitStatus !== undefined) {
    const runtime = settings().get<string>("runtimeUrl") || "http://127.0.0.1:7233";
    terminal = vscode.window.createTerminal({ name: "ORBIT", env: { ORBIT_SERVER: runtime } });
  }
  return terminal;
}

async function activeOrbitFile(): Promise<vscode.Uri | undefined> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== "orbit") {
    vscode.window.showWarningMessage("ORBIT: open an .orbit file first.");
    return undefined;
  }
  if (editor.document.isDirty) {
    await editor.document.save();
  }
  return editor.document.uri;
}

async function runInTerminal(args: string[]): Promise<void> {
  const file = await activeOrbitFile();
  if (!file) {
    return;
  }
  const shown = orbitTerminal();
  shown.show();
  shown.sendText([quote(serverPath()), ...args.map((a) => (a === "<file>" ? quote(file.fsPath) : quote(a)))].join(" "));
}

async function run(): Promise<void> {
  const file = await activeOrbitFile();
  if (!file) {
    return;
  }
  const input = await vscode.window.showInputBox({
    prompt: "Workflow input (JSON)",
    value: "{}",
    validateInput: (value) => {
      try {
        JSON.parse(value);
        return undefined;
      } catch {
        return "Not valid JSON";
      }
    },
  });
  if (input === undefined) {
    return;
  }
  await runInTerminal(["run", "<file>", "--input", input]);
}

async function graph(): Promise<void> {
  const file = await activeOrbitFile();
  if (!file) {
    return;
  }
  const { execFile } = await import("node:child_process");
  execFile(serverPath(), ["graph", file.fsPath], { maxBuffer: 16 * 1024 * 1024 }, async (error, stdout, stderr) => {
    if (error) {
      vscode.window.showErrorMessage(`ORBIT: orbit graph failed: ${stderr || error.message}`);
      return;
    }
    const document = await vscode.workspace.openTextDocument({ language: "mermaid", content: stdout });
    await vscode.window.showTextDocument(document, vscode.ViewColumn.Beside);
  });
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  context.subscriptions.push(
    vscode.commands.registerCommand("orbit.run", run),
    vscode.commands.registerCommand("orbit.deploy", () => runInTerminal(["deploy", "<file>"])),
    vscode.commands.registerCommand("orbit.check", () => runInTerminal(["check", "<file>"])),
    vscode.commands.registerCommand("orbit.graph", graph),
    vscode.commands.registerCommand("orbit.restartServer", () => restartServer(context)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("orbit.serverPath")) {
        restartServer(context);
      }
    }),
  );
  await startServer(context);
}

export async function deactivate(): Promise<void> {
  if (client) {
    await client.stop();
  }
}
